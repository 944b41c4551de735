#!/bin/bash
# Unpack one torch release for scripts/stall_inventory.py: pip downloads the wheel (the CUDA
# build, so libtorch_cuda.so holds ProcessGroupNCCL's strings), keeps torch/distributed/*.py and
# the printable strings of the c10d libraries, and deletes the wheel.
# usage: stall_inventory_torch.sh ROOT VERSION
set -eu
mkdir -p "$1"; ROOT=$(cd "$1" && pwd) v=$2  # absolute: the script cds into the unpack dir
# cp310 wheels begin at 1.11; 1.8-1.10 are read from their cp39 wheels (same sources)
py=3.11; case $v in 1.8.*|1.9.*|1.10.*) py=3.9;; 1.*) py=3.10;; esac
d="$ROOT/torch-$v"; [ -f "$d/done" ] && exit 0
mkdir -p "$ROOT/wheels" "$d"
"${PYTHON:-python3}" -m pip download -q --no-deps --only-binary=:all: --python-version $py -d "$ROOT/wheels" "torch==$v"
w=$(ls "$ROOT"/wheels/torch-"$v"[-+]*.whl | head -1)
cd "$d"
# 1.8 and 1.9 linked c10d (1.8: torch/lib/c10d) statically into libtorch_python.so; from 1.10
# it is torch/csrc/distributed/c10d inside libtorch_cpu/libtorch_cuda
libs="'torch/lib/libtorch_cpu.so' 'torch/lib/libtorch_cuda*.so'"
case $v in 1.8.*|1.9.*) libs="$libs 'torch/lib/libtorch_python.so'";; esac
eval unzip -q -o '"$w"' "'torch/distributed/*'" $libs || true
for so in torch/lib/*.so; do
  strings -n 12 "$so" | grep -i -E 'rank|peer|world|barrier|store|nccl|gloo|watchdog|heartbeat|flight' > "$(basename "$so").strings" || true
done
rm -rf torch/lib; touch done; rm -f "$w"
