#!/usr/bin/env bash
# Provisions the worker image (run by Packer as root on a GPU build instance of AWS's Deep
# Learning Base OSS NVIDIA Driver AMI, Ubuntu 24.04: the driver is there, nvidia-smi checks it).
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

# Ubuntu 24.04 ships Python 3.12; the agent is built and tested on 3.11 (deadsnakes).
apt-get update
apt-get install -y --no-install-recommends software-properties-common
add-apt-repository -y ppa:deadsnakes/ppa
apt-get update
apt-get install -y --no-install-recommends python3.11 python3.11-venv ffmpeg
python3.11 --version

id framefleet >/dev/null 2>&1 || useradd --system --home /var/lib/framefleet framefleet
install -d -o framefleet -g framefleet /var/cache/framefleet/models
install -d -m 0750 -o root -g framefleet /etc/framefleet

python3.11 -m venv /opt/framefleet/venv
/opt/framefleet/venv/bin/pip install --upgrade pip
# The agent with the worker extra; torch resolves to PyPI's CUDA build here (unlike CI).
/opt/framefleet/venv/bin/pip install "${FRAMEFLEET_WHEEL:?the agent wheel, by its own file name}[worker]"
/opt/framefleet/venv/bin/python -c "import torch; assert torch.cuda.is_available(), 'no CUDA'"

install -m 0644 /tmp/framefleet-units/framefleet-worker.service \
  /tmp/framefleet-units/framefleet-warm-cache.service /etc/systemd/system/
systemctl daemon-reload
systemctl enable framefleet-warm-cache.service framefleet-worker.service

# Optional warm cache in the image itself: fetched with the image builder's credentials.
for model in ${WARM_MODELS:-}; do
  sudo -u framefleet -E /opt/framefleet/venv/bin/framefleet-worker warm-cache --model "$model"
done
