#!/usr/bin/env bash
# Provisions the worker image (run by Packer as root on a GPU build instance).
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3.11 python3.11-venv ffmpeg \
  ubuntu-drivers-common
ubuntu-drivers install --gpgpu
apt-get install -y --no-install-recommends nvidia-utils-550-server || true

id framefleet >/dev/null 2>&1 || useradd --system --home /var/lib/framefleet framefleet
install -d -o framefleet -g framefleet /var/cache/framefleet/models /etc/framefleet

python3.11 -m venv /opt/framefleet/venv
/opt/framefleet/venv/bin/pip install --upgrade pip
# The CUDA build of torch comes from PyPI's default index on the image, unlike CI.
/opt/framefleet/venv/bin/pip install "/tmp/framefleet.whl[worker]"

install -m 0644 /tmp/framefleet-worker.service /etc/systemd/system/framefleet-worker.service
systemctl daemon-reload
systemctl enable framefleet-worker.service

# Optional warm cache: fetched with the image builder's credentials.
for model in ${WARM_MODELS:-}; do
  sudo -u framefleet -E /opt/framefleet/venv/bin/framefleet-worker warm-cache --model "$model"
done
