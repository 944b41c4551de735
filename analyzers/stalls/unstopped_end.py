"""Ranks whose tracker started and never stopped, their telemetry long ended: never healthy.

Why (round four of "hangs as users make them", helper nh4, ``init_port2``): rank 1 was given
another ``MASTER_PORT``; both ranks waited in ``init_process_group`` until the user killed them.
The tracker started before the process group, so no step ever began: no stall rhythm, no stack
snapshot, no exception, no rank silent while another went on — and the archive read "healthy"
(exit 0). Every stop of the tracker (``stop_tracking``, SIGTERM's handler, the interpreter's
exit, after an exception too) writes its stop edge (``KIND_TRACKER_STOP``,
:mod:`~stormotel.analyzers.algorithms.tracker_edges`); a process killed (SIGKILL, the OOM
killer, a launcher's kill after its grace), aborted, or gone by ``os._exit`` writes none, and
its telemetry simply ends.

The evidence, per rank: a start edge (the tracker writes edges, so a missing stop means
something), no stop edge at or after its last start, and a last sample older than
:data:`~stormotel.analyzers.sources.loader.LIVE_WRITER_S` before the analysis (a running
tracker writes every second: an older end is a process gone). It proves the job did not end
well on those ranks; not which rank caused it — ``undecided``, ``low``, those ranks the
suspects, the logs and the launcher's exit codes asked for. Only a verdict that would otherwise
be healthy gains it (no stall finding at all), and only for files read whole (a TSDB window may
end before the job did).
"""

from __future__ import annotations

import time
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.sources.loader import LIVE_WRITER_S
from stormotel.analyzers.timeline import (
    KIND_STEP,
    KIND_TRACKER_START,
    KIND_TRACKER_STOP,
    Timeline,
)

PATTERN = "stormotel.telemetry.ended_unstopped"


def unstopped_ends(timeline: Timeline, earlier: list[StallFinding], notes: list[str],
                   now_ns: int | None = None) -> list[StallFinding]:
    """One undecided finding naming as suspects the ranks whose tracker never stopped (module
    docstring), or none; nothing when any stall finding already stands."""
    if earlier:
        return []
    now = time.time_ns() if now_ns is None else now_ns
    gone: list[int] = []
    stepped: list[int] = []
    for rank, series in sorted(timeline.ranks.items()):
        m = series.markers
        if not len(series.t_ns) or KIND_TRACKER_START not in m.kind:
            continue
        starts = m.start_ns[m.kind == KIND_TRACKER_START]
        if (m.start_ns[m.kind == KIND_TRACKER_STOP] >= starts.max()).any():
            continue  # stopped after its last start
        if now - int(series.t_ns[-1]) < LIVE_WRITER_S * 1e9:
            continue  # still writing, or ended moments ago
        gone.append(rank)
        if KIND_STEP in m.kind:
            stepped.append(rank)
    if not gone:
        return []
    never = [r for r in gone if r not in stepped]
    who = gone[:64]
    ev: dict[str, Any] = {
        "pattern": PATTERN, "category": "ended_without_stop", "suspects": who,
        "reason": f"rank(s) {who[:16]}: the tracker started and never stopped; the telemetry "
                  "ends over " f"{LIVE_WRITER_S:.0f} s before this analysis" + (
                      f"; rank(s) {never[:16]} never began a step (stuck or killed before "
                      "training: rendezvous, init_process_group, data loading)"
                      if never else ""),
        "proof": "every stop of the tracker (stop_tracking, SIGTERM, the exit handler after an "
                 "uncaught exception) writes its stop edge; a process killed (SIGKILL, the OOM "
                 "killer, a launcher after its grace), aborted or gone by os._exit writes none"}
    notes.append(f"rank(s) {who[:16]} ended without their tracker's stop (killed, aborted or "
                 "os._exit): not a healthy end; read their logs and the launcher's exit codes")
    return [StallFinding(
        kind="undecided", ranks=[], process_group=None, seq_id=None, op=None,
        source="telemetry", confidence="low", evidence=ev,
        remediation=[f"Rank(s) {who[:8]} ended without the tracker's stop" + (
            " before any step (a rendezvous that never completed: check MASTER_ADDR/"
            "MASTER_PORT/WORLD_SIZE on every rank)" if never == gone else "")
            + ": read their logs and the launcher's exit codes (`stormotel analyze ARCHIVE "
            "--logs LOG_DIR`)."])]
