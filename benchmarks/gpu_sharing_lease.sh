#!/usr/bin/env bash
# The GPU sharing benchmark in one call on a lent GPU machine (see gpu_lease.sh for the wheels
# in .whl/). Then: bash benchmarks/gpu_sharing_lease.sh OUT_DIR
set -euo pipefail
out="${1:?usage: gpu_sharing_lease.sh OUT_DIR}"
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
timeout 400 python3 -m benchmarks.gpu_sharing --out "$out/gpu-sharing.json" 2>&1 |
  grep -v "^Loading\|^Writing\|should be kept in float32" | tee "$out/gpu-sharing.log"
