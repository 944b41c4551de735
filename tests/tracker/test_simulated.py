"""The simulated device: fault-spec parsing and the shapes each fault produces."""

from __future__ import annotations

import numpy as np
import pytest

from stormotel import environment
from stormotel.samplers import SamplerUnavailable, make_sampler
from stormotel.samplers.faults import FaultSpecError, parse_faults
from stormotel.samplers.simulated import SimulatedOutOfMemoryError, SimulatedSampler

MiB = 2**20
GiB = 2**30


def curve(sampler: SimulatedSampler, t0: float, t1: float, dt: float = 0.05) -> dict:
    ts = np.arange(t0, t1, dt)
    rows = [sampler.reading_at(float(t)) for t in ts]
    return {"t": ts, **{f: np.array([getattr(r, f) for r in rows], dtype=np.float64)
                        for f in ("allocated", "reserved", "device_used", "num_ooms",
                                  "alloc_retries")},
            "gap": np.array([r.gap for r in rows], dtype=np.float64)}


def test_parse_full_syntax() -> None:
    faults = parse_faults(["rank=2:first_spike@t=3s,delta=512MiB,lead=250ms",
                           "rank=1-3:leak@t=1.5,rate=32MiB/s;rank=*:spike@t=4s,duration=300ms",
                           "fragmentation,factor=4"])
    kinds = [(f.kind, f.start_s, f.ranks) for f in faults]
    assert kinds == [("first_spike", 3.0, frozenset({2})), ("leak", 1.5, frozenset({1, 2, 3})),
                     ("spike", 4.0, None), ("fragmentation", 0.0, None)]
    assert faults[0].param("delta") == 512 * MiB and faults[0].param("lead") == 0.25
    assert faults[1].param("rate") == 32 * MiB
    assert faults[2].param("delta") == GiB  # default
    assert faults[3].param("factor") == 4.0


@pytest.mark.parametrize(("spec", "message"), [
    ("rank=2:bogus@t=1s", "unknown kind 'bogus'"),
    ("rank=x:leak", "rank='x' must be N, A-B or *"),
    ("rank=2:leak,rate=5", "'5' is not a rate"),
    ("rank=2:spike,delta=lots", "'lots' is not a size"),
    ("rank=2:spike@t=soon", "'soon' is not a duration"),
    ("rank=2:leak,colour=red", "leak has no parameter 'colour' (allowed: t, rate)"),
    ("rank=2:spike,delta=0", "delta must be > 0"),
    ("rank=2 leak", "expected 'rank=N:KIND...'"),
    ("rank=2:leak,rate", "'rate' is not key=value"),
])
def test_bad_specs_name_the_clause(spec: str, message: str) -> None:
    with pytest.raises(FaultSpecError) as err:
        parse_faults(spec)
    assert message in str(err.value)
    assert spec.split(";")[0] in str(err.value)


def test_baseline_is_deterministic_and_training_like() -> None:
    a, b = SimulatedSampler(rank=1, faults="", epoch_ns=0), SimulatedSampler(rank=1, faults="",
                                                                              epoch_ns=0)
    assert a.reading_at(2.345) == b.reading_at(2.345)
    c = curve(a, 1.0, 5.0)
    assert np.ptp(c["allocated"]) > 2 * GiB  # activations rise and fall every step
    assert np.ptp(c["reserved"]) == 0  # the caching allocator keeps its peak
    assert np.all(c["reserved"] >= c["allocated"])
    assert np.ptp(c["gap"]) == 0 and c["gap"][0] == 512 * MiB


def test_leak_is_steady_gap_drift_on_the_owner_only() -> None:
    spec = "rank=2:leak@t=1s,rate=32MiB/s"
    owner, other = SimulatedSampler(2, spec, epoch_ns=0), SimulatedSampler(0, spec, epoch_ns=0)
    c = curve(owner, 1.0, 5.0)
    slope = np.polyfit(c["t"], c["gap"], 1)[0]
    assert slope == pytest.approx(32 * MiB, rel=0.01)
    assert np.ptp(curve(other, 0.0, 5.0)["gap"]) == 0


def test_spike_is_transient() -> None:
    s = SimulatedSampler(0, "rank=0:spike@t=2s,delta=1GiB,duration=500ms", epoch_ns=0)
    c = curve(s, 0.0, 4.0)
    inside = (c["t"] >= 2.0) & (c["t"] < 2.5)
    assert np.all(c["gap"][inside] == 512 * MiB + GiB)
    assert np.all(c["gap"][~inside] == 512 * MiB)


def test_fragmentation_inflates_reserved() -> None:
    s = SimulatedSampler(0, "rank=0:fragmentation@t=1s,factor=3", epoch_ns=0)
    before, after = s.reading_at(0.9), s.reading_at(3.3)
    assert before.reserved / before.allocated < 2.5
    assert after.reserved >= 3 * after.allocated - 1
    assert after.inactive_split > 0.5 * (after.reserved - after.allocated)
    assert after.alloc_retries == 2


def test_first_spike_owner_leads_followers_by_lead() -> None:
    spec = "rank=2:first_spike@t=3s,delta=512MiB,lead=200ms"
    rises = {}
    for rank in range(4):
        c = curve(SimulatedSampler(rank, spec, epoch_ns=0), 2.0, 5.0, dt=0.01)
        jump = np.flatnonzero(np.diff(c["device_used"]) >= 400 * MiB)
        rises[rank] = c["t"][jump[0] + 1]
    assert rises[2] == pytest.approx(3.0, abs=0.011)
    for rank in (0, 1, 3):
        assert rises[rank] - rises[2] == pytest.approx(0.2, abs=0.011)


def test_oom_pins_usage_counts_and_raises_once() -> None:
    clock = [0]
    s = SimulatedSampler(0, "rank=0:oom@t=1s", epoch_ns=0, clock_ns=lambda: clock[0])
    assert s.sample().num_ooms == 0
    s.raise_if_oom()  # not yet
    clock[0] = int(1.2e9)
    reading = s.sample()
    assert reading.num_ooms == 1 and reading.device_used == reading.device_total
    with pytest.raises(SimulatedOutOfMemoryError, match="out of memory"):
        s.raise_if_oom()
    s.raise_if_oom()  # raised once per fault


def test_faults_and_epoch_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(environment.SIM_FAULTS, "rank=1:spike@t=1s")
    monkeypatch.setenv(environment.SIM_EPOCH_NS, "12345")
    s = make_sampler("simulated", None, rank=1)
    assert isinstance(s, SimulatedSampler)
    assert s.epoch_ns == 12345 and [f.kind for f in s.faults] == ["spike"]


def test_unknown_sampler_is_a_clear_error() -> None:
    with pytest.raises(SamplerUnavailable, match="unknown sampler 'tpu'"):
        make_sampler("tpu")
