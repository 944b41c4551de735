"""An NCCL WARN that is the process's own CUDA failure, attributed to a rank from NCCL's own lines.

NCCL prefixes every line with ``host:pid:tid [cudaDev]`` (``src/debug.cc``), not a rank, so a
"NCCL WARN Cuda failure 2 'out of memory'" (``CUCHECK``/``CUDACHECK``, ``cudawrap.h`` /
``checks.h``) names a process and a device. The rank of that process is read, strongest first:

1. the launcher's prefix on the WARN line itself (torchrun ``[rank1]:``);
2. an NCCL init line of the same ``host:pid`` ("comm %p rank %d nranks %d cudaDev %d … Init
   COMPLETE") on the communicator of the whole world (its rank is then the global rank);
3. NCCL's intra-node channel lines (``p2p.cc``/``shm.cc``: "Channel %02d : %d[%d] -> %d[%d]
   via SHM|P2P/…", the printing rank and the peer with their NVML devices, both on the
   printer's host): the rank on the failing process's device of that host — only when every
   channel line agrees on one rank per (host, device), the ranks of a host follow its devices
   in order (rank = first rank of the node + device, as launchers place the world), the
   printing processes' own CUDA device equals their NVML device (no remapping by
   CUDA_VISIBLE_DEVICES seen), and those ranks fit the known world. This is an inference about
   a communicator's ranks, so it is ``weak``: the finding is ``low``.

Only CUDA failures are a process's own; WARNs about peers (a closed connection, a remote
error, a timeout) are not read here.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

_OWN = re.compile(r"NCCL WARN (?:\S+:\d+ )?(?P<error>Cuda failure (?:\d+ )?'[^']{1,120}'|"
                  r"Failed to CUDA calloc[^\n]{0,80}|CUDA error[^\n]{0,120})")
_PROC = re.compile(r"(?P<host>[\w.-]{1,100}):(?P<pid>\d{1,10}):\d{1,10} \[(?P<dev>\d{1,4})\] "
                   r"(?:\S{1,200}:\d{1,7} )?NCCL")
CHANNEL = "nccl_channel"


def channel_detail(seg: str, m: re.Match[str]) -> dict[str, Any] | None:
    """The detail of one intra-node channel line (``nccl.channel`` in the catalogue)."""
    proc = _PROC.search(seg)
    if not proc:
        return None
    a, da, b, db = (int(m.group(k)) for k in ("a", "da", "b", "db"))
    return {"host": proc.group("host"), "pid": int(proc.group("pid")),
            "cuda_dev": int(proc.group("dev")), "self": (a, da), "peer": (b, db)}


def own_failures(events: list[Any], world_size: int | None, rank_error: str) -> list[Any]:
    """RANK_ERROR events (kind ``rank_error``) for NCCL WARN CUDA failures whose rank is known."""
    warns = [(e, m, p) for e in events if e.kind == "nccl_warn"
             and (m := _OWN.search(e.text)) and (p := _PROC.search(e.text))]
    if not warns:
        return []
    by_pid: dict[tuple[str, int], int] = {}
    world_comm = max((int(e.detail["nranks"]) for e in events if e.kind == "nccl_init"
                      and e.detail and e.detail.get("nranks")), default=None)
    for e in events:
        if e.kind == "nccl_init" and e.detail and e.detail.get("comm_rank") is not None:
            proc = _PROC.search(e.text)
            if proc and world_comm and int(e.detail["nranks"]) == world_comm and (
                    world_size is None or world_comm == world_size):
                by_pid[(proc.group("host"), int(proc.group("pid")))] = int(e.detail["comm_rank"])
    on_dev: dict[tuple[str, int], set[int]] = {}
    remapped = False
    for e in events:
        d = e.detail if e.kind == CHANNEL else None
        if not d:
            continue
        (a, da), (b, db) = d["self"], d["peer"]
        on_dev.setdefault((d["host"], da), set()).add(a)
        on_dev.setdefault((d["host"], db), set()).add(b)
        remapped |= d["cuda_dev"] != da
    out = []
    for e, m, p in warns:
        host, pid, dev = p.group("host"), int(p.group("pid")), int(p.group("dev"))
        weak = False
        if e.rank is not None:
            rank, how = e.rank, "the launcher's prefix on the NCCL WARN line"
        elif (host, pid) in by_pid:
            rank, how = by_pid[(host, pid)], "the NCCL init line of the same process"
        else:
            ranks = on_dev.get((host, dev), set())
            offsets = {next(iter(v)) - d for (h, d), v in on_dev.items() if h == host and v}
            if remapped or len(ranks) != 1 or any(len(v) > 1 for v in on_dev.values()) or \
                    len(offsets) != 1 or min(offsets) < 0:
                continue  # devices not in rank order on this host: a sub-communicator's ranks
            rank = next(iter(ranks))
            if world_size is not None and rank >= world_size:
                continue
            weak, how = True, (f"NCCL's channel lines: rank {rank} drives device {dev} of "
                               f"host {host}")
        detail = {"category": "cuda_error", "error": m.group("error")[:160], "weak_rank": weak,
                  "rank_from": how, "process": f"{host}:{pid} [cudaDev {dev}]"}
        out.append(replace(e, kind=rank_error, rank=rank, detail=detail,
                           pattern="nccl.warn.cuda_failure"))
    return out
