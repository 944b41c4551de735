#!/bin/bash
# Unpack one torch release for scripts/stall_inventory.py: pip downloads the wheel (the CUDA
# build, so libtorch_cuda.so holds ProcessGroupNCCL's strings), keeps torch/distributed/*.py and
# the printable strings of the c10d libraries, and deletes the wheel.
# usage: stall_inventory_torch.sh ROOT VERSION
set -eu
ROOT=$1 v=$2
py=3.11; case $v in 1.*) py=3.10;; esac
d="$ROOT/torch-$v"; [ -f "$d/done" ] && exit 0
mkdir -p "$ROOT/wheels" "$d"
"${PYTHON:-python3}" -m pip download -q --no-deps --only-binary=:all: --python-version $py -d "$ROOT/wheels" "torch==$v"
w=$(ls "$ROOT"/wheels/torch-"$v"[-+]*.whl | head -1)
cd "$d"
unzip -q -o "$w" 'torch/distributed/*' 'torch/lib/libtorch_cpu.so' 'torch/lib/libtorch_cuda*.so' || true
for so in torch/lib/*.so; do
  strings -n 12 "$so" | grep -i -E 'rank|peer|world|barrier|store|nccl|gloo|watchdog|heartbeat|flight' > "$(basename "$so").strings" || true
done
rm -rf torch/lib; touch done; rm -f "$w"
