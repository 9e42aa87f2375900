#!/usr/bin/env bash
# The GPU benchmark in one call on a lent GPU machine (Python 3.12 with a CUDA torch, no
# network): the Python packages it lacks travel as wheels in .whl/, fetched beforehand on a
# machine with pip (diffusers 0.42.1 and pydantic 2.14.4 are what the suite runs with):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_17_x86_64 -d .whl diffusers==0.42.1 pydantic==2.14.4 \
#     pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 importlib_metadata
# Then: bash benchmarks/gpu_lease.sh OUT_DIR [step|sharing]   (the table on stdout, the JSON in
# OUT_DIR): the step benchmark (gpu_step.py, the default) or jobs sharing one GPU
# (gpu_sharing.py).
set -euo pipefail
out="${1:?usage: gpu_lease.sh OUT_DIR [step|sharing]}"
which="${2:-step}"
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
case "$which" in
  step) run=(python3 -m benchmarks.gpu_step --budget 330 --out "$out/gpu-step.json") ;;
  sharing) run=(python3 -m benchmarks.gpu_sharing --out "$out/gpu-sharing.json") ;;
  *) echo "unknown benchmark: $which" >&2; exit 2 ;;
esac
timeout 540 "${run[@]}" 2>&1 |
  grep -v "^Loading\|^Writing\|should be kept in float32" | tee "$out/gpu-$which.log"
