"""The stall verdict's telemetry check reads the tracker's clean-stop edge the dead-rank rule
reads (``algorithms.tracker_edges.clean_stop``): a blamed rank whose memory stood at 99 % of
its device when it went silent is blamed on memory only when its tracker did not stop cleanly
there. A clean stop is ``stop_tracking``, SIGTERM or the interpreter's exit — high memory at
that moment says nothing of why it went silent; an OOM (an event of its own, written first)
still is the explanation, and a stop from an earlier run explains nothing."""

from __future__ import annotations

import numpy as np
import pytest
from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls.verdict import with_telemetry
from stormotel.analyzers.timeline import KIND_OOM, KIND_TRACKER_STOP, Markers, TimelineBuilder

S = 1_000_000_000
TOTAL = 80 * 2**30
LAST = 19 * S  # rank 2's last sample


def _stall() -> list[StallFinding]:
    """A Flight Recorder finding blaming rank 2 (behind in the collective), the first
    watchdog timeout 60 s into the job."""
    return [StallFinding(kind="straggler", ranks=[2], process_group="0", seq_id=7,
                         op="allreduce", source="flight_recorder", confidence="medium",
                         evidence={"first_timeout_ns": 60 * S, "behind_ranks": [2]})]


def _job(markers: list[tuple[int, str]]) -> TimelineBuilder:
    """Four ranks sampled every second; rank 2 climbs to 99 % of its device and goes silent
    after 20 s, the others go on to 40 s; ``markers`` (time, kind) on rank 2."""
    b = TimelineBuilder()
    for rank in range(4):
        n = 20 if rank == 2 else 40
        used = np.linspace(0.5, 0.99 if rank == 2 else 0.6, n) * TOTAL
        b.add_samples(rank, np.arange(n, dtype=np.int64) * S, device_used=used,
                      device_total=np.full(n, float(TOTAL)), reserved=used * 0.9,
                      allocated=used * 0.8)
    if markers:
        t = np.array([m[0] for m in markers], np.int64)
        kinds = np.array([m[1] for m in markers], object)
        b.add_markers(2, Markers(t, t, kinds, kinds))
    return b


def test_memory_at_the_limit_is_the_explanation_without_a_clean_stop() -> None:
    joined = with_telemetry(_job([]).build(world_size=4), _stall())
    lead = joined[0]
    assert (lead.kind, lead.ranks, lead.source) == ("rank_failure", [2], "telemetry")
    assert lead.evidence["used_fraction"] == 0.99 and joined[1].consequence_of == 0


@pytest.mark.parametrize("at", [LAST, LAST - S, LAST + 2 * S])
def test_a_clean_stop_where_it_went_silent_is_not_blamed_on_memory(at: int) -> None:
    """The stop stamped at, just before (a last sample taken after the stop began) or just
    after (a lingering endpoint's last scrape) the last sample: the Flight Recorder's finding
    stays, alone."""
    findings = _stall()
    assert with_telemetry(_job([(at, KIND_TRACKER_STOP)]).build(world_size=4),
                          findings) == findings


def test_an_oom_or_an_older_stop_keeps_the_memory_explanation() -> None:
    oom = with_telemetry(_job([(LAST - S, KIND_OOM), (LAST, KIND_TRACKER_STOP)]
                              ).build(world_size=4), _stall())
    assert (oom[0].source, oom[0].evidence["category"]) == ("telemetry", "oom")
    assert "out-of-memory event" in str(oom[0].evidence["reason"])
    older = with_telemetry(_job([(5 * S, KIND_TRACKER_STOP)]).build(world_size=4), _stall())
    assert (older[0].source, older[0].evidence["used_fraction"]) == ("telemetry", 0.99)
