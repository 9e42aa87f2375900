#!/usr/bin/env bash
# The GPU benchmark in one call on a lent GPU machine (Python 3.12 with a CUDA torch, no
# network): the Python packages it lacks travel as wheels in .whl/, fetched beforehand on a
# machine with pip (diffusers 0.42.1 and pydantic 2.14.4 are what the suite runs with):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_17_x86_64 -d .whl diffusers==0.42.1 pydantic==2.14.4 \
#     pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 importlib_metadata \
#     ftfy==6.3.1 wcwidth
# (ftfy: Wan's image-to-video pipeline cleans prompts with it.)
# Then: bash benchmarks/gpu_lease.sh OUT_DIR [step|sharing|all|families]   (the tables on
# stdout, the JSON in OUT_DIR): the step benchmark (gpu_step.py, the default), jobs sharing one
# GPU (gpu_sharing.py), both in one call, or the model families (gpu_families.py: Wan 2.1 and
# 2.2 image-to-video, Wan 2.2's two experts, LTX-Video), a call of its own.
set -euo pipefail
out="${1:?usage: gpu_lease.sh OUT_DIR [step|sharing|all|families]}"
which="${2:-step}"
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
bench() {  # NAME SECONDS ARGS...: one benchmark within its time, its log beside its JSON
  local name="$1" seconds="$2"
  shift 2
  timeout "$seconds" python3 -m "benchmarks.gpu_$name" "$@" 2>&1 |
    grep -v "^Loading\|^Writing\|should be kept in float32" | tee "$out/gpu-$name.log"
}
case "$which" in
  step) bench step 540 --budget 330 --out "$out/gpu-step.json" ;;
  sharing) bench sharing 540 --out "$out/gpu-sharing.json" ;;
  all)  # both in one 10-minute call
    bench sharing 200 --out "$out/gpu-sharing.json" || true
    bench step 380 --budget 280 --out "$out/gpu-step.json" ;;
  families) bench families 540 --out "$out/gpu-families.json" ;;
  *) echo "unknown benchmark: $which" >&2; exit 2 ;;
esac
