"""How many cores this process may really use: affinity and a cgroup CPU quota, not the node's.

``os.cpu_count()`` counts the node's cores. An analyzer in a Kubernetes pod limited to 2 CPUs on
a 64-core node would start eight decode processes that the kernel then throttles in turn (CFS
quota), each holding its share of memory while it waits. The usable count is the smallest of
the affinity mask (``taskset``, cpusets) and the cgroup v2 ``cpu.max`` quota (cgroup v1's
``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` where v2 is absent), rounded up.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def usable_cpus(cgroup_root: Path = CGROUP_ROOT) -> int:
    """The cores this process can run on at once (at least 1)."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    quota = cgroup_quota(cgroup_root)
    if quota is not None:
        count = min(count, max(1, math.ceil(quota)))
    return max(1, count)


def cgroup_quota(root: Path = CGROUP_ROOT) -> float | None:
    """The CPU quota in cores, or None when there is none (or it cannot be read)."""
    v2 = _read(root / "cpu.max")
    if v2 is not None:
        parts = v2.split()
        if len(parts) == 2 and parts[0] != "max":
            return _ratio(parts[0], parts[1])
        return None
    quota = _v1(root, "cpu.cfs_quota_us")
    period = _v1(root, "cpu.cfs_period_us")
    if quota is None or period is None or quota.strip() == "-1":
        return None
    return _ratio(quota, period)


def _v1(root: Path, name: str) -> str | None:
    return _read(root / "cpu" / name) or _read(root / "cpu,cpuacct" / name)


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
