"""The analysis' shortcuts give exactly what the long way gives.

Each shortcut (a bound that skips a fit, np.median's arithmetic without np.median, a record
without dataclasses.asdict, a kind looked up once per marker set) is checked against the
computation it replaces, on random and adversarial inputs: a shortcut that changed one float
of a report would be a silent change of the answer.
"""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np
import pytest
from stormotel.analyzers.algorithms.estimate_ratio import EstimateRatio, EstimateVsActual
from stormotel.analyzers.algorithms.first_cause import step_at
from stormotel.analyzers.algorithms.gap import _none_fragmented, _spread
from stormotel.analyzers.algorithms.robust import linear_slope, median_in_place, robust_center
from stormotel.analyzers.algorithms.scratch import Scratch
from stormotel.analyzers.timeline import KIND_STEP, Markers, RankIdentity, RankSeries

from stormotel import schema

MIB = 2.0**20


def _tails(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Times from 0 to T (regular, jittered, or bunched in the middle: the case where the
    slope bound is tightest) and gap values around a large level."""
    shape = rng.integers(3)
    if shape == 0:
        ts = np.arange(n, dtype=float) * 15.0
    elif shape == 1:
        ts = np.sort(rng.uniform(0, 3600, n))
    else:
        ts = np.concatenate(([0.0], np.full(n - 2, 1800.0) + rng.normal(0, 1e-3, n - 2),
                             [3600.0]))
        ts.sort()
    ts -= ts[0]
    level = float(rng.choice([0.0, 1e9, 3.4e10, -5e8]))
    spread = float(rng.choice([0.0, 1.0, MIB, 8 * MIB]))
    g = level + rng.uniform(-spread, spread, n)
    if rng.integers(2):  # the extremes at the ends, aligned with time: the steepest line
        g[0], g[-1] = level - spread, level + spread
    return ts, g


@pytest.mark.parametrize("seed", range(4))
def test_spread_bounds_every_fitted_growth(seed):
    """drift_finding skips a tail when spread·sqrt(2n)·1.01 is below the floor: the fitted
    growth it would have computed must be below that bound too, whatever the times."""
    rng = np.random.default_rng(seed)
    work = Scratch()
    for _ in range(2000):
        n = int(rng.integers(20, 400))
        ts, g = _tails(rng, n)
        growth = abs(linear_slope(ts, g, work) * float(ts[-1]))
        assert growth <= _spread(g) * math.sqrt(2 * n) * 1.01, (n, growth, _spread(g))


@pytest.mark.parametrize("seed", range(4))
def test_no_spike_when_the_range_is_below_the_floor(seed):
    """_spikes returns no episode when max − min of the residual is below spike_min_bytes:
    the excess over the robust median it would have computed never reaches it."""
    rng = np.random.default_rng(seed)
    work = Scratch()
    for _ in range(2000):
        n = int(rng.integers(10, 20000))
        resid = float(rng.choice([0.0, 1e9, -3e9])) + rng.normal(0, rng.choice([1.0, MIB]), n)
        floor = float(resid.max()) - float(resid.min())
        floor = np.nextafter(floor, np.inf)  # the gate's tightest case: range just below
        med, _ = robust_center(resid, work)
        assert not (resid - med >= floor).any()


def test_median_in_place_is_np_median():
    rng = np.random.default_rng(0)
    cases = [np.array([-0.0, -0.0]), np.array([0.0, -0.0]), np.array([-0.0, 0.0, 1.0, -0.0]),
             np.array([1e308, 1e308])]
    cases += [rng.normal(0, 10.0 ** rng.integers(0, 12), int(rng.integers(1, 60)))
              for _ in range(3000)]
    for a in cases:
        with np.errstate(over="ignore"):
            want = float(np.median(a))
            got = median_in_place(a.copy())
        assert got == want and math.copysign(1, got) == math.copysign(1, want), a


def test_median_interval_is_np_median():
    rng = np.random.default_rng(1)
    for trial in range(3000):
        n = int(rng.integers(2, 50))
        t = np.cumsum(rng.integers(1, [1, 10**3, 15 * 10**9][trial % 3] + 2, n, dtype=np.int64))
        s = RankSeries(RankIdentity(0), t, {})
        assert s.median_interval_ns() == int(np.median(np.diff(t))), t


def test_markers_kinds_and_step_lookup_match_a_comparison():
    kinds = np.array([KIND_STEP, "collective", KIND_STEP, "first_rise"], object)
    start = np.array([0, 5, 10, 12], np.int64)
    end = np.array([9, 20, 19, 12], np.int64)
    attrs = tuple({schema.SPAN_ATTR_STEP: i} for i in range(4))
    mixed = Markers(start, end, kinds, np.array(kinds), attrs)
    steps = Markers(start, end, np.array([f"step {i}" for i in range(4)], object),
                    np.array([KIND_STEP] * 4, object), attrs)
    assert mixed.kinds == {KIND_STEP, "collective", "first_rise"}
    assert steps.kinds == {KIND_STEP} and Markers.empty().kinds == frozenset()
    t = np.arange(0, 30, dtype=np.int64)
    for m in (mixed, steps):
        series = RankSeries(RankIdentity(0), t, {}, m)
        for at in range(-1, 25):
            idx = np.flatnonzero((m.kind == KIND_STEP) & (m.start_ns <= at) & (m.end_ns >= at))
            want = int(m.attrs[int(idx[-1])][schema.SPAN_ATTR_STEP]) if idx.size else None
            assert step_at(series, at) == want


def test_estimate_ratio_to_dict_is_asdict():
    for r in (EstimateRatio(3, 1e9, 1.2e9, 1.2, "allocated", 17, True),
              EstimateRatio(0, None, None, None, None, None, False)):
        assert r.to_dict() == asdict(r) and list(r.to_dict()) == list(asdict(r))


def _asdict_report(report):
    """Report.to_dict as it was written first: dataclasses.asdict, then the JSON cleanup."""
    from stormotel.analyzers.report import REPORT_SCHEMA, _with_sections

    from stormotel.textsafe import redact

    def jsonable(obj):
        if isinstance(obj, str):
            return redact(obj)
        if isinstance(obj, dict):
            return {redact(str(k)): jsonable(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [jsonable(v) for v in obj]
        if hasattr(obj, "item") and callable(obj.item):
            obj = obj.item()
        if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
            return None
        return obj

    d = asdict(report)
    oom, _ = d.pop("oom_forensics"), d.pop("sections")
    entries = [e for s in report.sections for e in s.extra_entries().items()]
    if oom is not None:
        entries.append(("oom_forensics", oom))
    if entries:
        d["extra"] = _with_sections(d["extra"], entries)
    return jsonable({"schema": REPORT_SCHEMA, **d})


def test_report_to_dict_is_asdict_then_jsonable():
    """Every kind of value a report holds (nested findings, numpy scalars, NaN and infinities,
    tuples, credentials in strings and keys, an OOM section placed before the attribution)."""
    import json

    from stormotel.analyzers.algorithms.oom_forensics import oom_forensics
    from stormotel.analyzers.report import (
        CollectiveAttribution,
        CrossRank,
        GapFinding,
        Report,
        StallFinding,
        Suspect,
    )
    from stormotel.analyzers.timeline import OomDump, Timeline

    forensics = oom_forensics(Timeline(ranks={}), [
        OomDump("/d/rank1.json", 1, 10**18, 0.1, {"allocated": 1e9, "reserved": 4e9,
                                                   "device_used": 8e9, "device_total": 8e9}),
        OomDump("", 0, 10**18 + 10**10, None, {"allocated": None, "reserved": None,
                                               "device_used": np.float64(7e9),
                                               "device_total": 8e9})])
    assert forensics is not None
    evidence = {"z": np.float64(5.5), "n": np.int64(3), "nan": float("nan"),
                "inf": np.float64("inf"), "pair": (1, np.float32(2.5)), "none": None,
                "flag": np.bool_(True), "url": "http://user:secret@tsdb:9090/?token=abc",
                "http://u:p@h/": "key with a credential", 7: "an int key",
                "nested": [{"a": (float("-inf"), -0.0)}], "finding": Suspect(9, "low", 1, 2, 3.0)}
    report = Report(
        job_id="job", world_size=4, participating_ranks=[0, 1, 2], missing_ranks=[3],
        cross_rank=CrossRank(cluster_onset_ns=5, first_cause_suspects=[
            Suspect(1, "high", 10, 20, np.float64(1.5), dict(evidence))],
            incidents=[{"kind": "tie", "ranks": [1, 2]}], notes=["n"]),
        gap_findings=[GapFinding(rank=2, classification="fragmentation", severity="warning",
                                 confidence=0.5, evidence=dict(evidence), remediation=["r"],
                                 start_ns=1, end_ns=np.int64(2))],
        collective_attributions=[CollectiveAttribution(
            rank=0, classification="collective_likely", confidence=0.7, interval_start_ns=1,
            interval_end_ns=2, reason_codes=["gap_spike"], evidence={"peak_ns": np.int64(1)})],
        stall_findings=[StallFinding("straggler", [1], "pg", 3, "allreduce", "logs", "medium",
                                     dict(evidence))],
        notes=["token=abc"], skipped={"nan_bytes": 2}, sources=["http://a:b@c/"],
        window_start_ns=1, window_end_ns=2, settings={"spike_z": 4.0, "ranks": "all"},
        extra={"first_rise_by_rank": {0: 1.2}, "rank_attribution": {"1": {"host": "h"}},
               "analysis_seconds": 0.1},
        oom_forensics=forensics,
        sections=[EstimateVsActual([EstimateRatio(0, 1e9, 1.2e9, 1.2, "allocated", 17, True)],
                                   ["rank 1: no estimate"])])
    for r in (report, Report(job_id=None, world_size=None, participating_ranks=[],
                             missing_ranks=[])):
        want = _asdict_report(r)
        got = r.to_dict()
        assert json.dumps(got, indent=2) == json.dumps(want, indent=2)
        assert list(got["extra"]) == list(want["extra"])
    # Nothing returned is the report's own container: a sink may change what it was given.
    got = report.to_dict()
    got["cross_rank"]["first_cause_suspects"][0]["evidence"]["z"] = 0
    got["extra"]["first_rise_by_rank"][0] = 0
    got["extra"]["estimate_vs_actual"]["notes"].append("x")
    assert report.cross_rank.first_cause_suspects[0].evidence["z"] == 5.5
    assert report.extra["first_rise_by_rank"] == {0: 1.2}
    assert report.sections[0].extra_entries()["estimate_vs_actual"]["notes"] == \
        ["rank 1: no estimate"]
    # The contract's key order: the sections' keys, then the OOM section, before attribution.
    assert list(got["extra"]) == ["first_rise_by_rank", "estimate_vs_actual", "estimate_ratio",
                                  "oom_forensics", "rank_attribution", "analysis_seconds"]


def test_median_of_small_slices_is_the_partition_median():
    """The sorted small-slice path gives what median_of always gave (the partition of a copy,
    whose sign of a zero median is its own)."""
    from stormotel.analyzers.algorithms.robust import median_of

    rng = np.random.default_rng(3)
    cases = [np.array([0.0, -0.0, 1.0]), np.array([-0.0, 2.0]), np.array([5, 3, 9], np.int64),
             np.array([np.nan, 1.0]), np.array([np.inf, 1.0, 2.0]), np.array([2.0**53 + 1] * 3)]
    cases += [rng.choice([-1, 1]) * rng.normal(3e10, 10.0 ** rng.integers(0, 10),
                                               int(rng.integers(1, 20))).round(rng.integers(2))
              for _ in range(5000)]
    for a in cases:
        want = median_in_place(np.array(a, dtype=np.float64))
        got = median_of(a)
        assert (got == want and math.copysign(1, got) == math.copysign(1, want)) \
            or (got != got and want != want), a


@pytest.mark.parametrize("seed", range(3))
def test_fragmentation_gate_skips_only_ranks_with_nothing_fragmented(seed):
    """fragmentation_finding returns at once when the largest idle is below frag_min_bytes
    or below frag_ratio × the smallest reservation: the per-sample test it skips must find
    no fragmented sample then."""
    from stormotel.analyzers.algorithms.settings import settings_for

    rng = np.random.default_rng(seed)
    settings = settings_for("medium")
    fired = 0
    for _ in range(3000):
        n = int(rng.integers(10, 300))
        level = float(rng.choice([0.5, 4.0, 32.0])) * 2.0**30
        res = level * rng.uniform(1, 1 + rng.choice([0.0, 1e-6, 0.01, 0.5]), n)
        top = rng.choice([0.3, 0.6, np.nextafter(settings.frag_ratio, 0)])
        alloc = res * (1 - rng.uniform(0, top, n))
        if rng.integers(2):  # ratios just below the threshold: the gate's margin matters
            alloc = res * (1 - top)
        idle = res - alloc
        if _none_fragmented(res, idle, settings):
            fired += 1
            frag = (idle / res >= settings.frag_ratio) & (idle >= settings.frag_min_bytes)
            assert not frag.any()
    assert fired > 100  # the property was exercised


def _long_way(timeline, settings):
    """gap_analysis as it was: every rank fitted and judged through the public functions."""
    from stormotel.analyzers.algorithms.gap import (
        drift_finding,
        fragmentation_finding,
        prepare_gap,
        spike_finding,
    )

    findings, episodes = [], {}
    for rank in timeline.rank_ids:
        s = timeline.ranks[rank]
        rg = prepare_gap(s, settings)
        if rg is not None:
            episodes[rank] = rg.episodes
            drift, spike = drift_finding(s, settings, rg), spike_finding(s, settings, rg)
            if drift is not None and spike is not None and spike.start_ns >= drift.start_ns:
                spike = None
            findings.extend(f for f in (drift, spike) if f is not None)
        frag = fragmentation_finding(s, settings)
        if frag is not None:
            findings.append(frag)
    return findings, episodes


@pytest.mark.parametrize("overrides", [{}, {"drift_min_r2": 0.0}, {"spike_min_bytes": 1.0},
                                       {"spike_min_bytes": 0.0, "spike_z": 1e-9},
                                       {"drift_floor_bytes": 0.0, "drift_min_growth_bytes": 1.0}])
def test_flat_gaps_shortcut_gives_the_long_ways_answer(overrides):
    """Ranks whose gap never moves skip the fit and the spike pass (gap._flat): findings and
    spike episodes must be those of the long way, for flat gaps at awkward levels (zero, a
    negative gap, sums that round), beside moving ones, whatever the thresholds."""
    from stormotel.analyzers.algorithms.gap import gap_analysis
    from stormotel.analyzers.algorithms.settings import settings_for
    from stormotel.analyzers.timeline import Timeline

    rng = np.random.default_rng(7)
    ranks = {}
    levels = [0.0, 2.0**30, 1024.0 * MIB + 0.1, -3 * MIB, 0.1, 123456789.123]
    for r in range(36):
        n = int(rng.integers(12, 400))
        t = 10**18 + np.cumsum(rng.integers(1, 3, n)) * 15 * 10**9
        reserved = np.full(n, 30.0 * 2**30) + rng.normal(0, 64 * MIB, n).round()
        gap = np.full(n, levels[r % len(levels)])
        if r % 6 == 5:  # moving gaps: a drift and a spike, for the long way to find
            gap = gap + np.linspace(0, 2 * 2**30, n)
            gap[n // 2] += 2 * 2**30
        alloc = reserved * rng.choice([0.4, 0.9])
        ranks[r] = RankSeries(RankIdentity(r), t, {
            "device_used": reserved + gap, "reserved": reserved, "allocated": alloc,
            "device_total": np.full(n, 80.0 * 2**30)})
    timeline = Timeline(ranks=ranks)
    settings = settings_for("medium", **overrides)
    done = gap_analysis(timeline, settings)
    findings, episodes = _long_way(timeline, settings)
    assert [asdict(f) for f in done.findings] == [asdict(f) for f in findings]
    assert done.episodes.keys() == episodes.keys()
    for r, eps in episodes.items():
        for name in ("start_ns", "end_ns", "peak_ns", "peak_excess_bytes", "peak_z"):
            np.testing.assert_array_equal(getattr(done.episodes[r], name), getattr(eps, name))
    assert any(f.classification == "persistent_drift" for f in findings)
