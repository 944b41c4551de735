"""Every finding in one common shape: the order and fields the summary and every sink rely on."""

from __future__ import annotations

from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.findings import by_importance, ranks_named
from stormotel.analyzers.report import (
    CollectiveAttribution,
    CrossRank,
    GapFinding,
    OomForensics,
    OomRank,
    OomThresholds,
    Report,
    StallFinding,
    Suspect,
)
from stormotel.analyzers.sinks import findings_series, grafana

from stormotel import schema
from tests.analyzers.synth import (
    GIB,
    INTERVAL,
    MIB,
    healthy,
    plant_gap_drift,
    plant_gap_spike,
    plant_rise,
    to_timeline,
)

T0 = 1_795_000_000_000_000_000
S = 1_000_000_000


def _report() -> Report:
    """One finding of each family, listed in the report out of importance order."""
    return Report(
        job_id="j", world_size=8, participating_ranks=list(range(8)), missing_ranks=[],
        cross_rank=CrossRank(cluster_onset_ns=T0 + 2 * S, first_cause_suspects=[
            Suspect(3, "high", T0, 2 * S, 2**30), Suspect(4, "medium", T0 + S, S, 2**29)]),
        gap_findings=[GapFinding(1, "transient_spike", "info", 0.5),
                      GapFinding(6, "persistent_drift", "critical", 0.9, start_ns=T0,
                                 end_ns=T0 + 5 * S)],
        collective_attributions=[
            CollectiveAttribution(2, "collective_likely", 0.6, T0, T0 + S // 10, ["sync"])],
        stall_findings=[
            StallFinding("not_joined", [5], "0", 42, "allreduce", "flight_recorder", "medium",
                         evidence={"time_ns": T0 + 9 * S}),
            StallFinding("straggler", [7], "0", 42, "allreduce", "logs", "low",
                         consequence_of=0)],
        oom_forensics=OomForensics(0, False, 0, "", [OomRank(0, T0 + 3 * S, "fragmentation",
                                                             None, None, None, None, None)],
                                   OomThresholds()),
        extra={"rank_attribution": {"3": {schema.ATTR_HOST: "node-a"}}},
        window_start_ns=T0 - 60 * S, window_end_ns=T0 + 60 * S)


def test_canonical_order_and_common_fields() -> None:
    found = list(_report().findings())
    assert [(f.family, f.kind, f.ranks) for f in found] == [
        ("first_cause", "first_cause", (3,)), ("first_cause", "first_cause", (4,)),
        ("oom", "fragmentation", (0,)),
        ("gap", "transient_spike", (1,)), ("gap", "persistent_drift", (6,)),
        ("collective", "collective_likely", (2,)),
        ("stall", "not_joined", (5,)), ("stall", "straggler", (7,))]
    # one severity scale across families: high → critical, medium → warning, low → info
    assert [f.severity for f in found] == ["critical", "warning", "critical", "info",
                                           "critical", "info", "warning", "info"]
    lead, follower = found[0], found[1]
    assert (lead.index, follower.index) == (0, 1)
    assert lead.where == (f"rank 3: {schema.ATTR_HOST}=node-a",) and follower.where == ()
    assert (lead.start_ns, lead.end_ns) == (T0, T0 + 2 * S)  # from the rise to the lead's end
    assert found[6].start_ns == T0 + 9 * S and found[6].root and not found[7].root
    assert found[4].title == "persistent_drift (critical)"
    assert found[5].confidence == "0.60"


def test_importance_order_names_oom_and_stalls_before_gaps() -> None:
    assert ranks_named(by_importance(_report().findings())) == [3, 4, 0, 5, 7, 1, 6, 2]


def test_every_annotation_and_series_comes_from_a_finding() -> None:
    """Grafana and the findings series read the same shape: one annotation per finding with a
    time (OOM has none), one finding counted per kind and severity."""
    report = _report()
    found = [f for f in report.findings() if f.family != "oom"]
    anns = grafana.annotations_for(report)
    assert [(a.kind, a.ranks) for a in anns] == [(f.kind, f.ranks) for f in found]
    counted = {(p.labels[schema.ANALYZER_LABEL_KIND], p.labels[schema.ANALYZER_LABEL_SEVERITY]):
               p.value for p in findings_series.findings_samples(report)
               if p.name == schema.AN_FINDINGS}
    assert sum(counted.values()) == len(found)
    assert counted[("first_cause", "warning")] == 1 and counted[("straggler", "info")] == 1


def test_findings_of_an_analysed_job_come_in_canonical_order() -> None:
    data = healthy(4, 1200, seed=12, reserved_bytes=2 * GIB, gap_bytes=256 * MIB)
    plant_rise(data[1], 100, 1 * GIB)
    plant_gap_drift(data[3], 4 * GIB)
    for d in data:
        plant_gap_spike(d, 800, 2, 700 * MIB)
        t = int(d.t_ns[799])
        d.markers = [(t, t + 4 * INTERVAL, "nccl:reduce_scatter", "collective")]
    report = analyze(to_timeline(data))
    families = [f.family for f in report.findings()]
    assert families[0] == "first_cause" and "gap" in families and "collective" in families
    assert families == sorted(families, key=["first_cause", "oom", "gap", "collective",
                                             "stall"].index)
    assert report.has_findings() == bool(families)
