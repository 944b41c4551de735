"""Generators of hostile telemetry: valid Stormlog exports to start from, and the mutations
the red-team corpus found (written at test time; no large file is committed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

T0 = 1_700_000_000_000_000_000
STEP = 100_000_000
GIB = 1024**3


def events(rank: int, n: int = 200, *, job_id: str = "job-a", world_size: int = 4,
           t0: int = T0, grow_at: int | None = None) -> list[dict[str, Any]]:
    """A Stormlog v4 export of one rank: flat memory, or a 6 GiB rise from ``grow_at`` on."""
    out = []
    for i in range(n):
        alloc = 4 * GIB + (i % 7) * 1024**2
        if grow_at is not None and i >= grow_at:
            alloc += 6 * GIB
        out.append({"schema_version": 4, "session_id": f"s{rank}", "timestamp_ns": t0 + i * STEP,
                    "event_type": "sample", "job_id": job_id, "rank": rank, "local_rank": rank,
                    "world_size": world_size, "device_id": rank,
                    "allocator_allocated_bytes": alloc, "allocator_reserved_bytes": alloc + GIB,
                    "allocator_active_bytes": alloc, "allocator_inactive_bytes": 0,
                    "device_used_bytes": alloc + GIB + 512 * 1024**2,
                    "device_free_bytes": 80 * GIB - alloc - GIB,
                    "device_total_bytes": 80 * GIB, "context": None})
    return out


def write(path: Path, obj: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


def healthy_folder(folder: Path, ranks: int = 4, **kw: Any) -> Path:
    for r in range(ranks):
        write(folder / f"rank{r}.json", events(r, **kw))
    return folder
