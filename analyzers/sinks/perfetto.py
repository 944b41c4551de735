"""The merged multi-rank timeline as a Chrome trace (JSON ``traceEvents``) for ui.perfetto.dev.

One process per rank (``rank N``) holding counter tracks for each memory field (MiB), slices
for steps, phases and collectives, and a ``findings`` thread with the analyzer's findings as
region slices or instants; the cluster onset is a global instant. Counter tracks are thinned by
max-pooling to a bounded number of points so multi-hour jobs still open in a browser without
losing the peaks that matter.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from stormotel.analyzers.report import Report
from stormotel.analyzers.sinks.grafana import annotations_for
from stormotel.analyzers.timeline import Timeline

from stormotel.atomic import atomic_open
from stormotel.textsafe import redact_tree

#: Points per counter track after thinning (peaks are kept by max-pooling).
MAX_COUNTER_POINTS = 20_000
MIB = float(1 << 20)
TID_MEMORY = 0
TID_BY_KIND = {"step": 1, "mark": 2, "collective": 3}
TID_OTHER_MARKERS = 4
TID_FINDINGS = 9
THREAD_NAMES = {TID_MEMORY: "memory", 1: "steps", 2: "phases", 3: "collectives",
                TID_OTHER_MARKERS: "events", TID_FINDINGS: "findings"}


def thin_max(t_ns: np.ndarray, v: np.ndarray, limit: int = MAX_COUNTER_POINTS
             ) -> tuple[np.ndarray, np.ndarray]:
    """At most ``limit`` points: each bucket keeps its first time and its maximum value."""
    ok = np.isfinite(v)
    t_ns, v = t_ns[ok], v[ok]
    n = v.shape[0]
    if n <= limit:
        return t_ns, v
    size = -(-n // limit)
    pad = size * (-(-n // size)) - n
    vv = np.concatenate([v, np.full(pad, -np.inf)]).reshape(-1, size)
    return t_ns[::size], vv.max(axis=1)


def _meta(pid: int, name: str, tid: int | None = None, sort: int | None = None
          ) -> list[dict[str, Any]]:
    if tid is None:
        ev = [{"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}}]
        if sort is not None:
            ev.append({"ph": "M", "pid": pid, "name": "process_sort_index",
                       "args": {"sort_index": sort}})
        return ev
    return [{"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}]


def trace_events(timeline: Timeline, report: Report | None = None) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for rank in timeline.rank_ids:
        s = timeline.ranks[rank]
        pid = rank
        events += _meta(pid, f"rank {rank}", sort=rank)
        for tid, tname in THREAD_NAMES.items():
            events += _meta(pid, tname, tid=tid)
        for fname, arr in s.values.items():
            t, v = thin_max(s.t_ns, arr)
            if not t.size:
                continue
            us = (t // 1000).tolist()
            mib = np.round(v / MIB, 3).tolist()
            events += [{"ph": "C", "pid": pid, "tid": TID_MEMORY, "name": f"{fname} MiB",
                        "ts": ts, "args": {"MiB": m}} for ts, m in zip(us, mib, strict=True)]
        m = s.markers
        for i in range(len(m)):
            tid = TID_BY_KIND.get(str(m.kind[i]), TID_OTHER_MARKERS)
            start_us = int(m.start_ns[i]) // 1000
            dur_us = max(0, (int(m.end_ns[i]) - int(m.start_ns[i])) // 1000)
            ev: dict[str, Any] = {"pid": pid, "tid": tid, "name": str(m.name[i]),
                                  "cat": str(m.kind[i]), "ts": start_us}
            if dur_us:
                ev.update(ph="X", dur=dur_us)
            else:
                ev.update(ph="i", s="t")
            if m.attrs and i < len(m.attrs) and m.attrs[i]:
                ev["args"] = {str(k): _plain(v) for k, v in m.attrs[i].items()}
            events.append(ev)
    if report is not None:
        events += _finding_events(report, set(timeline.rank_ids))
    return events


def _plain(v: object) -> object:
    return v if isinstance(v, str | int | float | bool) or v is None else str(v)


def _finding_events(report: Report, ranks: set[int]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    fallback = (min(ranks),) if ranks else (0,)
    for a in annotations_for(report):
        for rank in a.ranks or fallback:
            ev: dict[str, Any] = {"pid": rank, "tid": TID_FINDINGS, "name": a.kind,
                                  "cat": "finding", "ts": a.start_ms * 1000,
                                  "args": {"text": a.text}}
            if a.end_ms > a.start_ms:
                ev.update(ph="X", dur=(a.end_ms - a.start_ms) * 1000)
            else:
                ev.update(ph="i", s="t")
            events.append(ev)
    onset = report.cross_rank.cluster_onset_ns
    if onset is not None:
        events.append({"ph": "i", "s": "g", "pid": 0, "tid": TID_FINDINGS,
                       "name": "cluster onset", "ts": int(onset) // 1000, "cat": "finding"})
    return events


def write_trace(path: Path, timeline: Timeline, report: Report | None = None) -> int:
    """Write the trace file; returns the number of events."""
    events = trace_events(timeline, report)
    doc = {"traceEvents": events, "displayTimeUnit": "ms",
           "metadata": {"job_id": timeline.job_id, "source": "stormotel analyze"}}
    # job ids, marker names and findings are input: redacted. json.dumps, not json.dump: only
    # the one-shot encoder is the C one (json.dump streams through the pure-Python encoder,
    # 4x the CPU on a trace of a few hundred samples per rank)
    text = json.dumps(redact_tree(doc), separators=(",", ":"))
    with atomic_open(path) as fh:
        fh.write(text)
    return len(events)
