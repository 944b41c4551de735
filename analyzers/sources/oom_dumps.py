"""The tracker's OOM dumps (``*.ring.jsonl``): the last samples a rank saw before it ran out.

``MemoryTracker.capture_oom`` writes the ring buffer (every sample at the tracker's own rate) with
a header naming the rank and the error, and its OOM span event points at the file. This module
finds those files (from the OOM markers of a Timeline, and under directories the user passed)
and reads each one's header and last sample; malformed files are counted skips with a note.
"""

from __future__ import annotations

import json
from pathlib import Path

from stormotel.analyzers.sources.loader import OOM_DUMP_SUFFIX
from stormotel.analyzers.timeline import META_OOM_DUMPS, OomDump, Timeline

from stormotel import schema

_LAST_FIELDS = ("allocated", "reserved", "inactive_split", "device_used", "device_total")

__all__ = ["OomDump", "attach_oom_dumps", "dump_paths", "read_dump"]


def read_dump(path: Path) -> OomDump:
    """Header + last sample of one dump; ValueError with a one-line reason when unusable."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: cannot read ({e})") from None
    try:
        head = json.loads(lines[0]) if lines else None
        rows = [json.loads(ln) for ln in lines[1:] if ln.strip()]
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON lines ({e.msg})") from None
    if not isinstance(head, dict) or head.get("schema") != schema.RING_DUMP_SCHEMA:
        raise ValueError(f"{path}: not a stormotel ring dump")
    if head.get("reason") != "oom":
        raise ValueError(f"{path}: a {head.get('reason')!r} dump, not an OOM")
    try:
        rank = int(head[schema.ATTR_RANK])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{path}: header has no rank") from None
    last = rows[-1] if rows and isinstance(rows[-1], dict) else {}
    t = last.get("timestamp_ns") or head.get("written_ns")
    if not isinstance(t, int) or isinstance(t, bool):
        raise ValueError(f"{path}: no sample time and no written_ns")
    if not 0 < t < 2**63:  # every timestamp the analyzer keeps is int64 ns
        raise ValueError(f"{path}: sample time {t} is not a time in int64 ns")
    interval = head.get("sampling_interval_s")
    return OomDump(str(path), rank, t, _plausible(interval, 86_400.0),
                   {k: _plausible(last.get(k), 2.0**63) for k in _LAST_FIELDS},
                   str(head.get("error", ""))[:300], str(head.get("context", "")))


def _plausible(value: object, high: float) -> float | None:
    """A number read from a dump, used only when finite and in ``[0, high]`` (bytes below
    2**63, an interval up to a day); anything else is read as absent (None)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and \
            0 <= float(value) <= high:
        return float(value)
    return None


def dump_paths(timeline: Timeline, extra: list[str] | None = None) -> list[Path]:
    """Dumps the OOM markers point at (when the file is here) and ``*.ring.jsonl`` under
    ``extra`` paths (files or directories), each once."""
    found: list[Path] = []
    for series in timeline.ranks.values():
        m = series.markers
        for i, kind in enumerate(m.kind.tolist()):
            if kind == "oom" and i < len(m.attrs):
                p = m.attrs[i].get(schema.EVENT_ATTR_DUMP_PATH)
                if isinstance(p, str) and p and Path(p).is_file():
                    found.append(Path(p))
    for raw in extra or []:
        p = Path(raw)
        found += sorted(p.rglob(f"*{OOM_DUMP_SUFFIX}")) if p.is_dir() else [p]
    return list(dict.fromkeys(q.resolve() for q in found))


def attach_oom_dumps(timeline: Timeline, extra: list[str] | None = None) -> Timeline:
    """Read the dumps into ``timeline.meta["oom_dumps"]`` (bad ones: a counted skip and a note)."""
    dumps: list[OomDump] = []
    for path in dump_paths(timeline, extra):
        try:
            dumps.append(read_dump(path))
        except ValueError as e:
            timeline.skipped["bad_oom_dump"] += 1
            timeline.notes.append(f"OOM dump skipped: {e}")
    if dumps:
        timeline.meta[META_OOM_DUMPS] = dumps
    return timeline
