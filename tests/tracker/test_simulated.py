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


def test_epoch_file_holds_the_faults_until_it_is_written(tmp_path) -> None:
    """``STORMOTEL_SIM_EPOCH_FILE``: t=0 is set after every rank has started (stormotel
    rehearse writes it then), so no fault starts before the file exists; then the faults run
    on its clock, and the rank still warms up from its own start. The fault's t=1s has long
    passed on the rank's own clock (5 s) when the file comes: before it, no leak."""
    clock = [int(100e9)]
    path = tmp_path / "sim_epoch_ns"
    s = SimulatedSampler(0, "rank=0:leak@t=1s,rate=1GiB/s", epoch_file=path,
                         clock_ns=lambda: clock[0])
    base = s.sample().gap  # outside the allocator: where the leak goes
    assert s.epoch_pending
    clock[0] = int(105e9)
    assert s.sample().gap == base and s.epoch_pending
    path.write_text(f"{int(106e9)}\n")
    assert s.sample().gap == base  # read now; t=-1 s on the file's clock
    assert not s.epoch_pending and s.epoch_ns == int(106e9)
    assert s.warmup_origin_s == pytest.approx(-6.0)  # born 6 s before t=0
    clock[0] = int(108e9)  # t=2 s: one second of a 1 GiB/s leak
    assert s.sample().gap - base == pytest.approx(GiB, rel=0.01)


def test_an_epoch_file_that_never_comes_is_waited_for_within_a_bound(tmp_path, caplog) -> None:
    from stormotel.samplers.simulated import EPOCH_FILE_WAIT_S

    clock = [0]
    path = tmp_path / "never"
    s = SimulatedSampler(0, "rank=0:crash@t=1s", epoch_file=path, clock_ns=lambda: clock[0])
    clock[0] = int((EPOCH_FILE_WAIT_S - 1) * 1e9)
    assert not s.started("crash") and s.epoch_pending
    assert s.exit_after_oom_s() is None
    clock[0] = int(EPOCH_FILE_WAIT_S * 1e9)
    with caplog.at_level("WARNING", logger="stormotel"):
        assert not s.started("crash")  # t=0 is now: the crash comes 1 s later
    assert not s.epoch_pending and "STORMOTEL_SIM_EPOCH_FILE" in caplog.text
    assert f"not there after {EPOCH_FILE_WAIT_S:g}s" in caplog.text
    clock[0] += int(1e9)
    assert s.started("crash")


def test_an_epoch_file_that_is_not_a_number_is_said_and_t0_is_then(tmp_path, caplog) -> None:
    path = tmp_path / "sim_epoch_ns"
    path.write_text("soon\n")
    clock = [int(50e9)]
    with caplog.at_level("WARNING", logger="stormotel"):
        s = SimulatedSampler(0, "rank=0:leak@t=0s", epoch_file=path, clock_ns=lambda: clock[0])
        s.sample()
    assert s.epoch_ns == int(50e9) and not s.epoch_pending
    assert "'soon'" in caplog.text and "STORMOTEL_SIM_EPOCH_FILE" in caplog.text


def test_epoch_file_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv(environment.SIM_EPOCH_FILE, str(tmp_path / "t0"))
    s = make_sampler("simulated", None, rank=0)
    assert isinstance(s, SimulatedSampler) and s.epoch_pending
    (tmp_path / "t0").write_text("12345")
    assert s.epoch_known() and s.epoch_ns == 12345
