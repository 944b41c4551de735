"""A leaking rank's threshold crossing does not lead an incident at high confidence.

The shape is the one a production-shaped job produced under load: rank 0 leaking since well
before the incident crosses the rise threshold (read from samples) 4 s before rank 2's
planted step, which ranks 1-3 follow with edge-stamped rises.
"""

from __future__ import annotations

from typing import Any

import pytest
from stormotel.analyzers.algorithms.drift_lead import cap_drift_leads
from stormotel.analyzers.report import CrossRank, GapFinding, Suspect

S = 1_000_000_000


def rise(t_s: float, edge: bool) -> dict[str, Any]:
    return {"t_ns": int(t_s * S), "earliest_ns": int((t_s - 0.1) * S), "delta_bytes": 2.0**30,
            "timed_by_edge_event": edge, "step": 1}


def cross(leader_edge: bool = False, followers_edge: bool = True) -> CrossRank:
    rises = {"0": rise(100.0, leader_edge), "1": rise(105.0, followers_edge),
             "2": rise(104.0, followers_edge), "3": rise(105.0, followers_edge)}
    inc = {"start_ns": 100 * S, "onset_ns": 104 * S, "kind": "leader", "leader": 0,
           "confidence": "high", "lead_lower_bound_ns": 4 * S, "ranks": [0, 1, 2, 3],
           "tied_ranks": [], "rises": rises, "notes": []}
    return CrossRank(cluster_onset_ns=104 * S, incidents=[inc], first_cause_suspects=[
        Suspect(rank=0, confidence="high", first_spike_ns=100 * S, lead_ns=4 * S,
                delta_bytes=2.0**30)])


def drift(rank: int = 0, start_s: float = 80.0) -> GapFinding:
    return GapFinding(rank=rank, classification="persistent_drift", severity="critical",
                      confidence=0.9, start_ns=int(start_s * S), end_ns=200 * S)


def test_a_drift_crossing_ahead_of_stepped_followers_is_low() -> None:
    c = cross()
    cap_drift_leads(c, [drift()])
    assert c.incidents[0]["confidence"] == "low"
    assert c.first_cause_suspects[0].confidence == "low"
    assert c.first_cause_suspects[0].evidence["confidence_capped"]["asked"] == "high"
    assert any("persistent_drift" in n for n in c.notes)


@pytest.mark.parametrize(("c", "gaps"), [
    (cross(leader_edge=True), [drift()]),          # the leader's own tracker stamped a step
    (cross(), [drift(start_s=101.0)]),              # the drift began after the rise
    (cross(), [drift(rank=2)]),                     # another rank drifts
    (cross(followers_edge=False), [drift()]),       # nobody's rise was stamped: same footing
    (cross(), []),                                  # no drift at all
])
def test_other_leads_keep_their_confidence(c: CrossRank, gaps: list[GapFinding]) -> None:
    cap_drift_leads(c, gaps)
    assert c.incidents[0]["confidence"] == "high"
    assert c.first_cause_suspects[0].confidence == "high" and not c.notes
