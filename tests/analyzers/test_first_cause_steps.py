"""Step numbers decide between "the workload" and "one rank": ranks that rise in the same
training step at different wall times (steps are staggered across ranks) are the workload, and a
rank that rises steps ahead of the others is named. Timelines carry step spans the way the
archive and OTLP sources build them (kind ``step``, the step number as a span attribute)."""

from __future__ import annotations

from typing import Any

import numpy as np
from stormotel.analyzers.analyze import analyze

from stormotel import schema
from tests.analyzers.synth import GIB, MIB, RankData, healthy, plant_rise, to_timeline

STEP_NS = 1_000_000_000  # one training step per second
STAGGER_NS = 300_000_000  # rank r runs its steps r × 300 ms later than rank 0
SAMPLES = 600  # 60 s at 100 ms


def _step_spans(d: RankData) -> list[tuple[Any, ...]]:
    start = int(d.t_ns[0]) + d.rank * STAGGER_NS
    return [(start + k * STEP_NS, start + (k + 1) * STEP_NS - 1, "train_step", "step",
             {schema.SPAN_ATTR_STEP: k}) for k in range(SAMPLES // 10)]


def _job(rise_step: dict[int, int]) -> list[RankData]:
    """Four ranks with staggered steps; rank r gains 1 GiB 0.5 s into step ``rise_step[r]``."""
    data = healthy(4, SAMPLES, seed=7, reserved_bytes=4 * GIB, gap_bytes=256 * MIB)
    for d in data:
        d.markers = _step_spans(d)
        at = int(d.t_ns[0]) + d.rank * STAGGER_NS + rise_step[d.rank] * STEP_NS + STEP_NS // 2
        plant_rise(d, int(np.searchsorted(d.t_ns, at)), 1 * GIB)
    return data


def test_a_rise_in_the_same_step_on_every_rank_is_the_workload_not_a_leader():
    data = _job({r: 30 for r in range(4)})
    # The wall times alone are 300 ms apart (three sampling intervals): a leader without steps.
    plain = _job({r: 30 for r in range(4)})
    for d in plain:
        d.markers = []
    wall = analyze(to_timeline(plain)).cross_rank.first_cause_suspects
    assert (wall[0].rank, wall[0].confidence) == (0, "high")

    report = analyze(to_timeline(data))
    cr = report.cross_rank
    assert all(s.confidence == "low" for s in cr.first_cause_suspects)
    incident = cr.incidents[0]
    assert incident["kind"] == "workload" and incident["leader"] is None
    assert any("same training step 30" in n for n in incident["notes"])


def test_a_rank_that_rises_steps_ahead_of_the_others_is_named():
    report = analyze(to_timeline(_job({0: 30, 1: 30, 2: 27, 3: 30})))
    top = report.cross_rank.first_cause_suspects[0]
    assert (top.rank, top.confidence) == (2, "high")
    assert top.evidence["step"] == 27
