"""The report's first line answers the page: an OOM leads with the first rank, its kind and the
one setting the evidence supports; a leak with the rank, its rate and the time to full."""

from __future__ import annotations

from stormotel.analyzers.headline import OOM_SETTING, headline
from stormotel.analyzers.report import (
    GapFinding,
    OomForensics,
    OomRank,
    OomThresholds,
    Report,
    StallFinding,
    Suspect,
)

GIB = float(1 << 30)


def _report(**kw: object) -> Report:
    r = Report(job_id="j", world_size=4, participating_ranks=[0, 1, 2, 3], missing_ranks=[])
    r.extra["samples"] = 100
    for k, v in kw.items():
        setattr(r, k, v)
    return r


def _oom(rank: int, cause: str, first: int | None) -> OomForensics:
    ranks = [OomRank(rank, 10, cause, 1 * GIB, 7 * GIB, 8 * GIB, 8 * GIB, 1 * GIB),
             OomRank(3, 20, "genuine_peak", 7 * GIB, 7 * GIB, 8 * GIB, 8 * GIB, 1 * GIB)]
    return OomForensics(first, first is None, 1000, "x", ranks, OomThresholds())


def test_oom_leads_with_the_first_rank_its_kind_and_one_setting() -> None:
    for cause, needle in (("fragmentation", "expandable_segments:True"),
                          ("outside_allocator", "NCCL_BUFFSIZE"),
                          ("genuine_peak", "smaller micro-batch")):
        report = _report(oom_forensics=_oom(2, cause, 2),
                         gap_findings=[GapFinding(1, "persistent_drift", "critical", 0.9)])
        lead = headline(report)
        assert lead.kind == "oom" and lead.rank == 2
        assert lead.text.startswith("OOM: rank 2 ran out of memory first")
        assert needle in lead.text and OOM_SETTING[cause] in lead.text
    tie = headline(_report(oom_forensics=_oom(2, "genuine_peak", None)))
    assert tie.rank is None and "within one sampling interval" in tie.text


def test_leak_leads_with_rank_rate_and_time_to_full() -> None:
    slow = GapFinding(0, "persistent_drift", "warning", 0.9,
                      {"slope_bytes_per_s": 1 << 20, "time_to_full_s": 20_000.0})
    fast = GapFinding(3, "persistent_drift", "critical", 0.9,
                      {"slope_bytes_per_s": 32 << 20, "time_to_full_s": 600.0})
    lead = headline(_report(gap_findings=[slow, fast]))
    assert lead.kind == "leak" and lead.rank == 3
    assert "1.9 GiB/min" in lead.text and "device full in 10 min" in lead.text


def test_dead_rank_before_leak_and_first_cause_last() -> None:
    stop = StallFinding("rank_failure", [2], None, None, None, "telemetry", "medium",
                        {"category": "stopped_reporting", "reason": "rank 2 stopped reporting "
                                                                    "at T"})
    leak = GapFinding(1, "persistent_drift", "critical", 0.9, {"slope_bytes_per_s": 1.0})
    assert headline(_report(stall_findings=[stop], gap_findings=[leak])).rank == 2
    sus = Suspect(1, "high", 5, 10**9, 2 * GIB)
    cross = _report().cross_rank.__class__
    lead = headline(_report(cross_rank=cross(first_cause_suspects=[sus])))
    assert lead.kind == "first_cause" and lead.rank == 1 and "2.0 GiB" in lead.text
    assert "while no other rank rose" in lead.text
    lead = headline(_report(cross_rank=cross(cluster_onset_ns=10**9, first_cause_suspects=[sus])))
    assert "1 s before the others" in lead.text
    assert headline(_report()).kind == "healthy"


def test_ranks_without_data_are_never_called_healthy() -> None:
    # a rank SIGKILLed before its first export leaves no sample: the page's headline (the
    # receiver publishes it) must not read healthy while that rank is unjudged
    lead = headline(_report(participating_ranks=[0, 1, 2], missing_ranks=[3]))
    assert lead.kind == "partial" and "healthy:" not in lead.text
    assert "no data from rank(s) 3" in lead.text
    assert headline(_report()).kind == "healthy"
