"""Planted-fault tests of the three algorithms on synthetic Timelines (no files involved)."""

from __future__ import annotations

import numpy as np
import pytest
from stormotel.analyzers.algorithms.first_cause import first_rise
from stormotel.analyzers.algorithms.settings import SettingsError, settings_for
from stormotel.analyzers.analyze import analyze

from tests.analyzers.synth import (
    GIB,
    INTERVAL,
    MIB,
    healthy,
    plant_fragmentation,
    plant_gap_drift,
    plant_gap_spike,
    plant_rise,
    seed_example,
    to_timeline,
)


def _kinds(report, rank):
    return {f.classification for f in report.gap_findings if f.rank == rank}


# --- first cause ------------------------------------------------------------------------------
def test_seed_worked_example_rank2_high_confidence():
    report = analyze(to_timeline(seed_example()))
    cr = report.cross_rank
    top = cr.first_cause_suspects[0]
    assert top.rank == 2 and top.confidence == "high"
    assert top.lead_ns == 100_000_000  # one sampling interval
    assert cr.cluster_onset_ns == top.first_spike_ns + 100_000_000
    assert top.delta_bytes == pytest.approx(384 * MIB, rel=0.02)
    assert len(cr.first_cause_suspects) == 1
    assert report.participating_ranks == [0, 1, 2, 3] and report.missing_ranks == []
    assert cr.alignment == "wall" and cr.resolution_ns == INTERVAL


def test_lead_below_the_resolution_is_a_tie_not_a_leader():
    """Rank 2 samples 60 ms later: it is seen high 40 ms before the others, but the others were
    last seen low 60 ms *before* that, so any of them may have risen first."""
    data = seed_example()
    data[2].t_ns = data[2].t_ns + 60_000_000
    cr = analyze(to_timeline(data)).cross_rank
    assert {s.rank for s in cr.first_cause_suspects} == {0, 1, 2, 3}
    assert all(s.confidence == "low" for s in cr.first_cause_suspects)
    assert any("resolution of the evidence" in n for n in cr.notes)
    assert cr.incidents[0]["kind"] == "tie" and cr.incidents[0]["leader"] is None


def test_tie_gives_low_confidence_and_a_note():
    data = healthy(4, 60, reserved_bytes=2 * GIB, gap_bytes=256 * MIB)
    for d in data:
        plant_rise(d, 20 if d.rank in (1, 3) else 25, 512 * MIB)
    cr = analyze(to_timeline(data)).cross_rank
    assert {s.rank for s in cr.first_cause_suspects} == {1, 3}
    assert all(s.confidence == "low" and s.lead_ns == 0 for s in cr.first_cause_suspects)
    assert any("same aligned time" in n for n in cr.notes)


def test_missing_rank_lowers_confidence():
    data = [d for d in seed_example() if d.rank != 3]
    report = analyze(to_timeline(data, world_size=4))
    assert report.missing_ranks == [3]
    top = report.cross_rank.first_cause_suspects[0]
    assert (top.rank, top.confidence) == (2, "medium")


def test_single_rank_has_no_cross_rank_suspect():
    report = analyze(to_timeline(seed_example()[:1], world_size=1))
    assert report.cross_rank.first_cause_suspects == []
    assert any("at least two ranks" in n for n in report.cross_rank.notes)


def test_only_one_rank_rises():
    data = healthy(4, 60, reserved_bytes=2 * GIB, gap_bytes=256 * MIB)
    plant_rise(data[1], 30, 512 * MIB)
    cr = analyze(to_timeline(data)).cross_rank
    (s,) = cr.first_cause_suspects
    assert s.rank == 1 and s.confidence == "high" and s.evidence["only_rank_to_rise"]
    assert s.lead_ns == 29 * INTERVAL  # to the end of the others' data


def test_noisy_rise_with_a_negative_delta_is_not_reset():
    """Rank 1 rises 96 MiB per sample with a dip in the middle; the seed would restart."""
    data = healthy(4, 80, reserved_bytes=2 * GIB, gap_bytes=256 * MIB)
    steps = np.array([96, 96, -20, 96, 96, 96], dtype=float) * MIB
    d = data[1]
    for i, s in enumerate(steps):
        plant_rise(d, 30 + i, s)
    for other in (0, 2, 3):
        plant_rise(data[other], 45, 512 * MIB)
    fr = first_rise(to_timeline(data).ranks[1], settings_for())
    assert fr is not None
    # 96+96-20+96 = 268 MiB < threshold (~282 MiB), +96 → crosses at index 34, not later.
    assert fr.t_ns == int(d.t_ns[34])
    top = analyze(to_timeline(data)).cross_rank.first_cause_suspects[0]
    assert top.rank == 1 and top.confidence == "high"


def test_skewed_clock_misleads_wall_and_alignment_fixes_it():
    data = seed_example()
    for d in data:  # collective markers every second, at the same true instants on all ranks
        d.markers = [(int(d.t_ns[0]) + k * 10 * INTERVAL, int(d.t_ns[0]) + k * 10 * INTERVAL
                      + 5_000_000, "nccl:all_reduce", "collective") for k in range(6)]
    skew = -500_000_000  # rank 0's clock runs 500 ms behind
    data[0].t_ns = data[0].t_ns + skew
    data[0].markers = [(s + skew, e + skew, n, k) for s, e, n, k in data[0].markers]
    wall = analyze(to_timeline(data))
    assert wall.cross_rank.first_cause_suspects[0].rank == 0  # wrong, because of the skew
    assert any("skewed" in n for n in wall.notes)
    for how in ("markers", "first-sample"):
        fixed = analyze(to_timeline(data), align=how)
        top = fixed.cross_rank.first_cause_suspects[0]
        assert (top.rank, top.confidence) == (2, "high"), how
        assert fixed.cross_rank.alignment == how
        offs = fixed.extra["offsets_ns"]  # relative to the reference (lowest) rank
        assert offs.get(1, 0) - offs.get(0, 0) == skew


def test_markers_alignment_without_shared_markers_falls_back_and_says_so():
    report = analyze(to_timeline(seed_example()), align="markers")
    assert report.cross_rank.alignment == "wall"
    assert any("no step/collective marker" in n for n in report.notes)


def test_rank_filter_selects_and_reports_missing():
    report = analyze(to_timeline(seed_example()), ranks=[0, 1, 5])
    assert report.participating_ranks == [0, 1] and report.missing_ranks == [5]


# --- gap analysis -----------------------------------------------------------------------------
def test_healthy_controls_produce_no_findings():
    for sensitivity in ("low", "medium", "high"):
        report = analyze(to_timeline(healthy(8, 2000, seed=3)), sensitivity=sensitivity)
        assert not report.has_findings(), (sensitivity, report.to_dict())


def test_drift_only_on_the_drifting_rank():
    data = healthy(4, 1200, seed=4)
    plant_gap_drift(data[3], 4 * GIB)
    report = analyze(to_timeline(data))
    assert [f.rank for f in report.gap_findings] == [3]
    (f,) = report.gap_findings
    assert f.classification == "persistent_drift"
    assert f.evidence["r2"] > 0.95
    slope = 4 * GIB / (1199 * 0.1)
    assert f.evidence["slope_bytes_per_s"] == pytest.approx(slope, rel=0.05)
    expected_ttf = (80 * GIB - float(data[3].device_used[-1])) / slope
    assert f.evidence["time_to_full_s"] == pytest.approx(expected_ttf, rel=0.05)
    assert f.severity == "critical"  # ~35 min to full
    assert f.remediation


def test_step_is_not_drift():
    data = healthy(2, 1000, seed=5)
    data[0].device_used[500:] += 2 * GIB
    assert "persistent_drift" not in _kinds(analyze(to_timeline(data)), 0)


def test_transient_spikes_per_rank():
    data = healthy(4, 1000, seed=6)
    plant_gap_spike(data[1], 300, 3, 1 * GIB)
    plant_gap_spike(data[1], 700, 2, 600 * MIB)
    report = analyze(to_timeline(data))
    assert [(f.rank, f.classification) for f in report.gap_findings] == [(1, "transient_spike")]
    ev = report.gap_findings[0].evidence
    assert ev["episodes"] == 2
    assert ev["max_excess_bytes"] == pytest.approx(1 * GIB, rel=0.02)
    assert report.collective_attributions == []  # one rank, no marker: not a collective


def test_spikes_are_judged_per_rank_not_pooled():
    """Rank 0 lives at a 4 GiB gap; rank 1's +300 MiB spike must still count on its own."""
    data = healthy(2, 1000, seed=7)
    data[0].device_used += 4 * GIB
    plant_gap_spike(data[1], 400, 3, 300 * MIB)
    report = analyze(to_timeline(data))
    assert [(f.rank, f.classification) for f in report.gap_findings] == [(1, "transient_spike")]


def test_fragmentation():
    data = healthy(4, 500, seed=8)
    plant_fragmentation(data[0], 0.7)
    report = analyze(to_timeline(data))
    assert [(f.rank, f.classification) for f in report.gap_findings] == [(0, "fragmentation")]
    assert report.gap_findings[0].evidence["median_ratio"] == pytest.approx(0.7, abs=0.01)


def test_no_sustain_threshold_still_needs_a_fragmented_sample():
    """``--set frag_sustain=0`` on a pool without idle bytes used to crash the analysis."""
    data = healthy(2, 100, seed=8)
    plant_fragmentation(data[1], 0.7)
    report = analyze(to_timeline(data), overrides={"frag_sustain": 0})
    assert [(f.rank, f.classification) for f in report.gap_findings] == [(1, "fragmentation")]


# --- collective attribution ---------------------------------------------------------------------
def _sync_spikes(markers: bool, ranks: int = 8):
    data = healthy(ranks, 1000, seed=9)
    for d in data:
        jitter = d.rank % 2  # within one sample
        plant_gap_spike(d, 400 + jitter, 3, 768 * MIB)
        if markers:
            t = int(d.t_ns[399])
            d.markers = [(t, t + 5 * INTERVAL, "nccl:all_gather", "collective")]
    return data


def test_synchronised_spikes_with_markers_are_confident():
    report = analyze(to_timeline(_sync_spikes(True)))
    attr = report.collective_attributions
    assert {a.rank for a in attr} == set(range(8))
    assert all(a.classification == "collective_confident" for a in attr)
    assert all("synchronized_across_ranks" in a.reason_codes
               and "collective_marker_overlap" in a.reason_codes for a in attr)
    assert all(a.evidence["synchronized_ranks"] == 8 for a in attr)


def test_synchronised_spikes_without_markers_are_likely():
    attr = analyze(to_timeline(_sync_spikes(False))).collective_attributions
    assert {a.rank for a in attr} == set(range(8))
    assert {a.classification for a in attr} == {"collective_likely"}
    assert all("no_collective_marker" in a.reason_codes for a in attr)


def test_unsynchronised_spikes_are_not_collective():
    data = healthy(8, 1000, seed=10)
    for d in data:
        plant_gap_spike(d, 100 + 100 * d.rank, 2, 768 * MIB)  # 10 s apart
    report = analyze(to_timeline(data))
    assert report.collective_attributions == []
    assert len([f for f in report.gap_findings if f.classification == "transient_spike"]) == 8


def test_sensitivity_changes_what_counts():
    data = healthy(4, 1000, seed=11)
    for d in data:
        plant_gap_spike(d, 400, 3, 100 * MIB)  # below medium's 128 MiB, above high's 32 MiB
    assert analyze(to_timeline(data), sensitivity="medium").collective_attributions == []
    assert analyze(to_timeline(data), sensitivity="high").collective_attributions
    assert analyze(to_timeline(data), sensitivity="medium",
                   overrides={"spike_min_bytes": 64 * MIB}).collective_attributions


def test_unknown_threshold_is_a_clear_error():
    with pytest.raises(SettingsError, match="unknown threshold 'spike'"):
        settings_for("medium", spike=3)
    with pytest.raises(SettingsError, match="unknown sensitivity"):
        settings_for("extreme")


def test_report_json_contract():
    d = analyze(to_timeline(_sync_spikes(True, ranks=4))).to_dict()
    assert d["schema"] == "stormotel.report/v1"
    for key in ("job_id", "world_size", "participating_ranks", "missing_ranks", "cross_rank",
                "gap_findings", "collective_attributions", "stall_findings"):
        assert key in d
    a = d["collective_attributions"][0]
    for key in ("rank", "classification", "confidence", "interval_start_ns", "interval_end_ns",
                "reason_codes", "evidence"):
        assert key in a


def test_warm_up_ramp_is_set_aside_for_the_real_incident():
    """Every rank ramps up together at start (warm-up); later rank 3 rises first by one interval."""
    data = healthy(4, 120, reserved_bytes=2 * GIB, gap_bytes=256 * MIB)
    for d in data:
        for i in (2, 3, 4):
            plant_rise(d, i, 1 * GIB)  # a three-sample ramp, same time on every rank
        plant_rise(d, 60 if d.rank == 3 else 61, 1 * GIB)
    report = analyze(to_timeline(data))
    top = report.cross_rank.first_cause_suspects[0]
    assert (top.rank, top.confidence, top.lead_ns) == (3, "high", INTERVAL)
    assert any("warm-up of ranks [0, 1, 2, 3]" in n for n in report.cross_rank.notes)
    assert report.extra["first_cause_rounds"]["warmup_ranks"] == [0, 1, 2, 3]
    assert [i["leader"] for i in report.cross_rank.incidents] == [3]


def test_sampling_hole_before_a_followers_rise_lowers_confidence():
    data = seed_example()
    d = data[1]  # rank 1 sampled nothing for 0.5 s before its rise
    keep = np.ones(d.t_ns.shape[0], bool)
    keep[15:20] = False
    for name in ("t_ns", "allocated", "reserved", "device_used", "device_total"):
        setattr(d, name, getattr(d, name)[keep])
    cr = analyze(to_timeline(data)).cross_rank
    assert {s.rank for s in cr.first_cause_suspects} == {1, 2}
    assert all(s.confidence == "low" for s in cr.first_cause_suspects)
    assert any("sampling hole" in n and "[1]" in n for n in cr.notes)


def test_drift_that_starts_part_way_is_still_drift():
    """The demo's leak: flat for the first third, then 24 MiB/s to the end."""
    data = healthy(2, 600, seed=13)
    ramp = np.clip((np.arange(600) - 200) * 0.1 * 24 * MIB, 0, None)
    data[1].device_used += ramp
    (f,) = analyze(to_timeline(data)).gap_findings
    assert (f.rank, f.classification) == (1, "persistent_drift")


def test_ramp_that_stopped_is_not_persistent():
    data = healthy(2, 600, seed=14)
    # grows 600 MiB over the first 25 s, then flat for the remaining 35 s
    data[1].device_used += np.clip(np.arange(600) * 0.1 * 24 * MIB, 0, 600 * MIB)
    report = analyze(to_timeline(data))
    assert "persistent_drift" not in _kinds(report, 1)


def test_coarse_samples_are_refined_by_the_trackers_first_rise_events():
    """Samples every second (an archive exported at 1 Hz) hide a 100 ms lead; the tracker's
    in-process first-rise span events carry the exact times."""
    exact = {d.rank: int(d.t_ns[19 if d.rank == 2 else 20]) for d in seed_example()}

    def coarse(with_events: bool):
        data = seed_example()
        for d in data:
            keep = np.arange(0, 60, 10)  # 1 s apart: both rises land in the sample at 2.0 s
            for name in ("t_ns", "allocated", "reserved", "device_used", "device_total"):
                setattr(d, name, getattr(d, name)[keep])
            if with_events:
                d.markers = [(exact[d.rank], exact[d.rank], "stormotel.first_rise",
                              "first_rise", {"resolution_ns": INTERVAL})]
        return analyze(to_timeline(data)).cross_rank.first_cause_suspects

    assert len(coarse(False)) == 4  # a four-way tie at 2.0 s: no leader
    (top,) = coarse(True)
    assert (top.rank, top.lead_ns) == (2, 100_000_000)
    assert top.first_spike_ns == exact[2] and top.evidence["timed_by_edge_event"] is True


def test_fragmentation_prefers_the_inactive_split_counter():
    """A caching allocator holding 70 % idle is not fragmented when those blocks are reusable
    (inactive split ~0); it is when they are split blocks."""
    from stormotel.analyzers.timeline import RankIdentity, TimelineBuilder

    def timeline(split_fraction: float):
        b = TimelineBuilder()
        for d in healthy(2, 300, seed=15):
            plant_fragmentation(d, 0.7)
            b.set_identity(RankIdentity(rank=d.rank, world_size=2))
            b.add_samples(d.rank, d.t_ns, allocated=d.allocated, reserved=d.reserved,
                          device_used=d.device_used, device_total=d.device_total,
                          inactive_split=d.reserved * (split_fraction if d.rank == 1 else 0.01))
        return b.build()

    assert analyze(timeline(0.01)).gap_findings == []
    (f,) = analyze(timeline(0.6)).gap_findings
    assert (f.rank, f.classification, f.evidence["measure"]) == (1, "fragmentation",
                                                                 "inactive_split")


def test_leak_still_growing_at_the_end_of_a_long_window_is_a_drift():
    """7 h of a quiet gap, then a leak over the last 2 h that is still growing at the end:
    fitted over the whole window the line is poor (R² low) and the tail looks like a spike;
    it is a persistent drift."""
    n = 7 * 360  # one sample every 10 s for 7 h
    data = healthy(2, n, seed=21, interval=10 * 10**9, reserved_bytes=8 * GIB,
                   gap_bytes=256 * MIB)
    start = n - 2 * 360
    data[1].device_used[start:] += np.linspace(0, 3 * GIB, n - start)
    report = analyze(to_timeline(data))
    found = {(g.rank, g.classification) for g in report.gap_findings}
    assert (1, "persistent_drift") in found, found
    assert (1, "transient_spike") not in found and not any(r == 0 for r, _ in found)
    drift = next(g for g in report.gap_findings if g.classification == "persistent_drift")
    assert drift.evidence["window_share"] in (0.5, 0.25)


def test_edges_are_never_clock_anchors_and_the_hint_never_erases_the_finding():
    """Each rank's own edge (as an archive of the old layout would give it: a 'mark' named like
    the edge span) is not an anchor; with a real skew the note names what aligning would change
    instead of recommending it blindly."""
    data = seed_example()
    for d in data:
        t = int(d.t_ns[19 if d.rank == 2 else 20])
        d.markers = [(t, t, "stormotel.edge", "mark"), (t, t, "stormotel.first_rise",
                                                        "first_rise")]
    report = analyze(to_timeline(data))
    assert not any("skewed" in n for n in report.notes)
    assert (report.cross_rank.first_cause_suspects[0].rank, report.extra["offsets_ns"]) == (2, {})
    marked = analyze(to_timeline(data), align="markers")
    assert marked.cross_rank.alignment == "wall"  # no shared step/collective: nothing to align on
    assert marked.cross_rank.first_cause_suspects[0].rank == 2

    skewed = seed_example()
    for d in skewed:
        d.markers = [(int(d.t_ns[0]) + k * 10 * INTERVAL, int(d.t_ns[0]) + k * 10 * INTERVAL
                      + 5_000_000, "nccl:all_reduce", "collective") for k in range(6)]
    skewed[0].t_ns = skewed[0].t_ns - 500_000_000
    skewed[0].markers = [(s - 500_000_000, e - 500_000_000, n, k)
                         for s, e, n, k in skewed[0].markers]
    notes = analyze(to_timeline(skewed)).notes
    hint = next(n for n in notes if "skewed" in n)
    assert "NOT suggesting --align markers" in hint and "rank 0 (high) to rank 2 (high)" in hint


def test_every_threshold_at_its_edges_is_refused_or_analysed() -> None:
    """``--set NAME=0`` or the largest value each threshold accepts either is refused with a
    SettingsError (the CLI's usage error) or analyses a job with a rise, a drift, spikes and
    fragmentation without an exception (``spike_z=0`` and ``drift_min_growth_bytes=0`` once
    divided by zero; ``sync_window_s=1e18`` overflowed int64 nanoseconds)."""
    from dataclasses import fields

    from stormotel.analyzers.algorithms.settings import Settings

    data = healthy(8, 600, seed=3)
    plant_gap_drift(data[1], 4 * GIB)
    for d in data:
        plant_gap_spike(d, 300, 3, 2 * GIB)
        plant_rise(d, 400 if d.rank != 5 else 390, 2 * GIB)
    plant_fragmentation(data[4])
    refused = []
    for f in fields(Settings):
        if f.name == "sensitivity":
            continue
        for value in ("0", "1e-300", "1", "99999999", "1e8", "1e18"):
            try:
                settings = settings_for("medium", **{f.name: value})
            except SettingsError:
                refused.append((f.name, value))
                continue
            report = analyze(to_timeline(data), settings=settings)
            assert report.to_json()
    assert ("spike_z", "0") in refused and ("drift_min_growth_bytes", "0") in refused
    assert ("sync_window_s", "1e18") in refused and ("rise_fraction", "99999999") in refused
