"""A leader whose "rise" is its own drift crossing a threshold is not a confident first cause.

First cause orders the ranks of an incident by their first rise. A rank that is already
drifting (a leak the gap analysis calls ``persistent_drift``) crosses the rise threshold at
whatever moment the drift carries it there, which says nothing about the incident its peers
rose in: when that crossing is read from samples only while its followers' rises were stepped
and stamped by their trackers' own first-rise edges, the "lead" is the drift's, not the
incident's (seen on production-shaped jobs under load, where the leaking rank's crossing came
seconds before the planted leader's step). Such a lead is kept, but at ``low``, with a note:
the gap finding already names the drift, and a wrong rank at high is the worst answer.
"""

from __future__ import annotations

from stormotel.analyzers.report import CrossRank, GapFinding

NOTE = ("rank {rank}'s rise at the incident is its own drift (persistent_drift since "
        "{since:+.1f} s before) crossing a threshold, not a step stamped by its tracker like "
        "its followers' rises: its lead is the drift's, so it is not called above low")


SUMMARY_NOTE = ("rank {rank}'s rise at the incident is its own drift (its persistent_drift gap "
                "finding) crossing a threshold, not a step stamped by its tracker like its "
                "followers' rises: its lead is the drift's, so it is not called above low")


def cap_drift_leads(cross: CrossRank, gaps: list[GapFinding]) -> None:
    """Lower to ``low`` each leader (incident and suspect) whose rise is its own drift."""
    drift_since = {g.rank: g.start_ns for g in gaps
                   if g.classification == "persistent_drift" and g.start_ns is not None}
    capped: set[int] = set()
    for inc in cross.incidents:
        leader = inc.get("leader")
        rises = inc.get("rises") or {}
        lead = rises.get(str(leader))
        if inc.get("kind") != "leader" or lead is None or leader not in drift_since \
                or inc.get("confidence") == "low" or lead.get("timed_by_edge_event"):
            continue
        if drift_since[leader] > lead["t_ns"] or not any(
                r.get("timed_by_edge_event") for k, r in rises.items() if k != str(leader)):
            continue
        inc["confidence"] = "low"
        inc.setdefault("notes", []).append(NOTE.format(
            rank=leader, since=(lead["t_ns"] - drift_since[leader]) / 1e9))
        capped.add(leader)
    for s in cross.first_cause_suspects:
        if s.rank in capped and s.confidence != "low":
            s.evidence["confidence_capped"] = {"asked": s.confidence, "ceiling": "low",
                                               "why": "drift_lead"}
            s.confidence = "low"
    cross.notes.extend(SUMMARY_NOTE.format(rank=r) for r in sorted(capped))
