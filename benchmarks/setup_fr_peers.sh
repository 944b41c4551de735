#!/usr/bin/env bash
# The peers of benchmarks/compare_fr_peers.py in their own venv, outside the repository:
# torch's fr_trace (torch 2.13.0, CPU build) and NVIDIA Resiliency Extension's Flight Recorder
# attribution (nvidia-resiliency-ext 0.7.0).
#
#   bash benchmarks/setup_fr_peers.sh [VENV]        # default /work/peers-venv
#
# Why the steps are as they are:
# - torch first, pinned, so nothing later pulls a CUDA build of several GB;
# - nvidia-resiliency-ext >= 0.5 (the first with attribution/trace_analyzer) ships only
#   manylinux_2_39 wheels, and 0.7.0 only for CPython 3.12/3.14: on an older glibc (Debian 12
#   has 2.36) pip offers nothing newer than 0.4.1, which has no attribution module. Its Flight
#   Recorder attribution is pure Python and needs none of its dependencies, so the wheel is
#   unpacked with --no-deps into a folder of the venv, put on its path by a .pth file. Its
#   compiled parts (CUPTI straggler detection, needs a GPU) are not imported by the analysis.
set -euo pipefail
VENV=${1:-/work/peers-venv}
NVRX_VERSION=0.7.0

python3.11 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q torch==2.13.0
"$VENV/bin/python" -m pip install -q --no-deps --only-binary=:all: \
    --platform manylinux_2_39_x86_64 --python-version 3.12 --implementation cp \
    --target "$VENV/nvrx" "nvidia-resiliency-ext==$NVRX_VERSION"
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$VENV/nvrx" > "$site/nvrx-target.pth"
"$VENV/bin/python" - <<'EOF'
import torch
from importlib.metadata import version
from nvidia_resiliency_ext.attribution.trace_analyzer.fr_attribution import CollectiveAnalyzer
from torch.distributed.flight_recorder.fr_trace import main
print(f"peers ready: torch {torch.__version__}, nvidia-resiliency-ext {version('nvidia-resiliency-ext')}")
EOF
