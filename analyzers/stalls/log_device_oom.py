"""A CUDA out-of-memory line that names a device but no rank: nobody named, what to collect.

Why: torch's allocator names the device it failed on — "CUDA out of memory. Tried to allocate
20.00 MiB. GPU 3 has a total capacity of 79.15 GiB of which …" (2.1+) / "… (GPU 3; 79.15 GiB
total capacity; …" (before 2.1), ``malloc`` in ``c10/cuda/CUDACachingAllocator.cpp``, grammar
``torch.cuda.oom_device`` — and a pasted line without its launcher prefix is easily read as
"rank 3 ran out of memory". It is not: the number is the PROCESS's CUDA ordinal, after
``CUDA_VISIBLE_DEVICES``. Under torchrun with ``torch.cuda.set_device(LOCAL_RANK)`` it is the
local rank on its node (global rank = node_rank × nproc_per_node + device); with one visible GPU
per process (srun ``--gpus-per-task``, Kubernetes, Ray) every process says GPU 0.

So a line with a rank (a ``[rankN]:`` prefix, a rank file) stays what :mod:`.log_failures`
reads — that rank's own OOM. A line without one is read here: ``undecided`` at ``low``, the
device named, and how to map it to a rank. A FALLBACK row (as :mod:`.log_gpu_lost`): it answers
only when every other line is one the rankless fallback counts as quiet.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import log_rankless
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner, log_finding

KIND = "device_oom"
PATTERN = "torch.cuda.oom_device"

REMEDIATION = [
    "Map the device to a rank: the same process's lines with their launcher prefix (torchrun "
    "--tee 3 / --log-dir keeps [rankN]:), or its LOCAL_RANK and its node's rank (global = "
    "node_rank × nproc_per_node + LOCAL_RANK when each process sets its device to LOCAL_RANK); "
    "with one visible GPU per process every process says GPU 0, so only the prefix tells.",
    "Then fix the OOM on that rank (smaller micro-batch, activation checkpointing, "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True); its peers' timeouts are its echo.",
]


class Scanner(LineScanner):
    """One event per OOM line that names a device and carries no rank of its own."""

    kind, patterns = KIND, (PATTERN,)

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        if rank is not None or log_rankless.lf_has_rank(m.string):
            return None  # a rank's own OOM: log_failures reads it
        return None, {"device": int(m.group("dev") or m.group("dev2"))}


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """``undecided`` (low) naming the device(s), when nothing but quiet lines is beside them."""
    mine = [e for e in events if e.kind == KIND and e.detail]
    # the parser's own "oom" hint of the same line (no rank) is no other evidence
    if not mine or any(e.kind not in (KIND, "oom") and e.kind not in log_rankless.QUIET
                       for e in events):
        return []
    devices = sorted({int(e.detail["device"]) for e in mine})
    return [log_finding(
        "undecided", [], "oom", "low", PATTERN,
        f"a process ran out of GPU memory on its local CUDA device(s) {devices} ({len(mine)} "
        "line(s)) — a device ordinal of that process (after CUDA_VISIBLE_DEVICES), not a rank: "
        "the line has no rank prefix, so nobody is named",
        REMEDIATION, mine, suspects=[], cuda_devices=devices)]
