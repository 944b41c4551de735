#!/usr/bin/env bash
# The device checks in one go, for a machine with an NVIDIA GPU whose python3 holds CUDA torch
# (no registry reachable there): install the wheels carried in .whl/ and this checkout, then run
# the GPU tests and the tracker benchmark with the CUDA and NVML samplers. Results go to $OUT.
#   OUT=/tmp/gpu-out bash benchmarks/gpu_check.sh
# Wheels (here, once): see docs/benchmarks.md ("Tracker on a real GPU") for the download line.
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$OUT/gpu.txt"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' | tee -a "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || exit 1
timeout 300 python3 -m pytest -q -p no:cacheprovider -o addopts="" -rs \
  tests/tracker/test_gpu_samplers.py 2>&1 | tee "$OUT/gpu-tests.txt"
[ "${FULL_BENCH:-1}" = 1 ] && timeout 240 python3 benchmarks/bench_tracker.py --samples 2000 --steps 300 \
  --json "$OUT/bench_tracker.json" 2>&1 | tee "$OUT/bench_tracker.txt"
for s in cuda nvml simulated; do
  timeout 120 python3 benchmarks/bench_tracker.py --all-destinations --samples 2000 --sampler "$s" \
    2>&1 | tee -a "$OUT/bench_all_destinations.txt"
done
