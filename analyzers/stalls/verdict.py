"""One verdict from every source of the same job: logs, Flight Recorder dumps, telemetry.

Each source is analysed on its own; this joins their findings into one list where the story
leads. A rank's own failure — read from its log, or from its memory telemetry (an OOM event, or
memory at the device limit when its samples stopped while the others went on) — that precedes
the timeouts explains what the Flight Recorder and the watchdog see as that rank being behind,
silent or missing: those findings become its consequences. Roots come first;
``consequence_of`` indices are re-based.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from stormotel.analyzers.algorithms.dead_rank import silence_ns
from stormotel.analyzers.algorithms.tracker_edges import clean_stop
from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.timeline import KIND_OOM, Timeline

#: memory used / device total at a rank's last sample that counts as "at the limit"
AT_LIMIT = 0.95


def join_sources(findings: list[StallFinding], sources: tuple[str, ...] = ("logs",)
                 ) -> list[StallFinding]:
    """Link findings to a preceding ``rank_failure`` (from ``sources``) they are explained by.
    Findings of different runs (``evidence["run_id"]``: logs of different jobs) never link."""
    failures = [i for i, f in enumerate(findings) if f.kind == "rank_failure"
                and f.source in sources
                and f.consequence_of is None and f.evidence.get("precedes_timeouts")]
    if not failures:
        return findings
    parent: dict[int, int] = {}
    failing_of: dict[int, set[int]] = {}
    for i, f in enumerate(findings):
        if f.consequence_of is not None or i in failures:
            continue
        run = f.evidence.get("run_id")
        mine = [j for j in failures if findings[j].evidence.get("run_id") == run]
        failing = {r for j in mine for r in findings[j].ranks}
        if f.kind == "rank_failure" and not set(f.ranks) - failing:
            continue  # the same failure seen by another source: corroboration, both stay
        blamed = set(f.evidence.get("behind_ranks") or f.ranks or f.evidence.get("suspects")
                     or ())
        if blamed and failing and blamed <= failing:
            parent[i] = next(j for j in mine if blamed & set(findings[j].ranks))
            failing_of[i] = failing
    if not parent:
        return findings
    order = [i for i, f in enumerate(findings) if f.consequence_of is None and i not in parent]
    order += [i for i in range(len(findings)) if i not in order]
    new_index = {old: new for new, old in enumerate(order)}
    out = []
    for old in order:
        f = findings[old]
        link = parent.get(old, f.consequence_of)
        f = dataclasses.replace(f, consequence_of=None if link is None else new_index[link])
        if old in parent:
            f.evidence = {**f.evidence, "explained_by": "a rank_failure in the logs "
                          f"(rank(s) {sorted(failing_of[old])})"}
        out.append(f)
    return out


def telemetry_failures(timeline: Timeline, stalls: list[StallFinding]) -> list[StallFinding]:
    """``rank_failure`` findings (source ``telemetry``) for ranks whose memory ran out.

    Only ranks some stall finding blames are looked at (telemetry alone is the memory
    findings' job). Evidence: an OOM event of the tracker, or device memory at ≥ 95 % of the
    device at the rank's last sample while its samples stopped before every other rank's —
    unless its tracker stopped cleanly there (:func:`.tracker_edges.clean_stop`, the edge the
    dead-rank rule reads, in the same window): then the rank ended by ``stop_tracking``,
    SIGTERM or its interpreter's exit, not by running out (an uncaught CUDA OOM is an OOM
    event of its own, written before the stop), and high memory at that moment says nothing
    of why it went silent. The stall findings that blame it stay; only the memory
    explanation is not given.
    """
    blamed = {r for f in stalls if f.consequence_of is None
              for r in (f.ranks or f.evidence.get("suspects") or ())}
    first_timeout = min((int(f.evidence["first_timeout_ns"]) for f in stalls
                         if f.evidence.get("first_timeout_ns")), default=None)
    last_seen = {r: int(s.t_ns[-1]) for r, s in timeline.ranks.items() if len(s)}
    out = []
    for rank in sorted(blamed & set(timeline.ranks)):
        series = timeline.ranks[rank]
        m = series.markers
        ooms = [int(t) for t, k in zip(m.start_ns, m.kind, strict=True) if k == KIND_OOM]
        ev: dict[str, object] = {"category": "oom"}
        when: int | None = None
        if ooms:
            when = min(ooms)
            ev["reason"] = f"rank {rank}: the tracker recorded an out-of-memory event"
        elif (len(series) and series.has("device_used")
              and series.has("device_total") and len(last_seen) > 1
              and last_seen[rank] < min(v for r, v in last_seen.items() if r != rank)):
            used = float(series.field("device_used")[-1])
            total = float(series.field("device_total")[-1])
            if not (np.isfinite(used) and np.isfinite(total) and total > 0
                    and used / total >= AT_LIMIT):
                continue
            interval = series.median_interval_ns() or 0
            if clean_stop(series, last_seen[rank], interval, silence_ns(interval)) is not None:
                continue
            when = last_seen[rank]
            ev["reason"] = (f"rank {rank}: device memory at {used / total:.0%} of the device "
                            "at its last sample, and its samples stopped before every other "
                            "rank's")
            ev["used_fraction"] = round(used / total, 4)
        else:
            continue
        precedes = first_timeout is None or when < first_timeout
        ev.update({"first_error_ns": when, "first_timeout_ns": first_timeout,
                   "precedes_timeouts": precedes,
                   "order": "before the first watchdog timeout" if first_timeout and precedes
                   else "after the first watchdog timeout" if first_timeout
                   else "no watchdog timeout time to compare with"})
        out.append(StallFinding(kind="rank_failure", ranks=[rank], process_group=None,
                                seq_id=None, op=None, source="telemetry",
                                confidence="medium" if precedes else "low", evidence=ev,
                                remediation=["The rank's memory ran out just before it went "
                                             "silent: fix the memory growth (see the memory "
                                             "findings for this rank) — the stall is its "
                                             "consequence."]))
    return out


def with_telemetry(timeline: Timeline, findings: list[StallFinding]) -> list[StallFinding]:
    """Prepend telemetry failures and join everything into one verdict."""
    extra = telemetry_failures(timeline, findings)
    if not extra:
        return findings
    n = len(extra)
    shifted = [f if f.consequence_of is None else
               dataclasses.replace(f, consequence_of=f.consequence_of + n) for f in findings]
    return join_sources([*extra, *shifted], sources=("logs", "telemetry"))
