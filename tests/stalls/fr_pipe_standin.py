"""A STAND-IN for ProcessGroupNCCL's dump pipe (no NCCL on these CPU machines), run as one rank
of a real gloo job: ``python fr_pipe_standin.py RANK WORLD INIT_FILE PIPE_PREFIX``.

It does what torch's ``DumpPipe`` + heartbeat monitor do (ProcessGroupNCCL.cpp): ``mkfifo
<TORCH_NCCL_DEBUG_INFO_PIPE_FILE><rank>.pipe``, open it ``O_RDONLY | O_NONBLOCK``, poll it, and
when anything was written dump the Flight Recorder to ``<TORCH_FR_DUMP_TEMP_FILE><rank>``
(``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` when only the old name is set). The dump is a real one:
``torch._C._distributed_c10d._dump_fr_trace`` of this gloo process group.

The job hangs as users make it: two all_reduces together, then rank 0 enters a third that rank
``WORLD-1`` never calls (it sits in its own code).
"""

from __future__ import annotations

import os
import sys
import threading
import time

import torch
import torch.distributed as dist


def main() -> None:
    rank, world, init, pipe_prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    dump_prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or \
        os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=world)
    for _ in range(2):
        dist.all_reduce(torch.ones(4))
    pipe = f"{pipe_prefix}{rank}.pipe"
    os.mkfifo(pipe)
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    if rank != world - 1:  # the others wait in a collective the last rank skips
        threading.Thread(target=lambda: dist.all_reduce(torch.ones(4)), daemon=True).start()
    print("ready", flush=True)
    c10d = torch._C._distributed_c10d
    while True:
        try:
            data = os.read(fd, 64)
        except BlockingIOError:
            data = b""
        if data:
            payload = c10d._dump_fr_trace(True, False, False)
            with open(f"{dump_prefix}{rank}", "wb") as f:
                f.write(payload)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
