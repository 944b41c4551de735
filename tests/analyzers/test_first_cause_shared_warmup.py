"""Every rank warming up at one shared instant is no incident, and names no rank.

An intermediate ``stormotel demo`` started every rank's warm-up at the shared simulated t=0
(``STORMOTEL_SIM_EPOCH_NS``) although the ranks had started apart (its sampler's warm-up origin
was the shared epoch, not each process's start). The warm-up climbs in steps, one per training
step, at the same instants on every rank; one rank's step was set aside as its warm-up and
another's, at the same instant, was not, so the latter "led" the others' *next* step and was
named the first cause at **high** — before the planted fault on rank 2, which it hid. The
jobs below are that sampler's own numbers (``SimulatedSampler.reading_at``, warm-up origin at
the shared epoch), sampled every 100 ms by ranks started 0.37 s apart with the sampling phase
and jitter of separate processes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from stormotel.analyzers.analyze import analyze

from stormotel import exitcodes
from stormotel.samplers.simulated import SimulatedSampler
from tests.analyzers.otlp_fixtures import write_archive
from tests.analyzers.synth import T0, RankData, to_timeline
from tests.cli import run_stormotel

INTERVAL_S = 0.1


def shared_warmup_job(ranks: int, faults: str = "", *, seed: int = 0, period_s: float = 1.0,
                      lead_in_s: float = 3.0, duration_s: float = 30.0,
                      stagger_s: float = 0.37) -> list[RankData]:
    """Ranks started ``stagger_s`` apart from ``lead_in_s`` before the shared epoch, each
    warming up at the epoch itself (the intermediate demo's sampler)."""
    rng = np.random.default_rng(seed)
    out = []
    for r in range(ranks):
        sampler = SimulatedSampler(r, faults, epoch_ns=T0, step_period_s=period_s)
        sampler.warmup_origin_s = 0.0  # the defect's trigger: warm-up at the shared t=0
        start = -lead_in_s + r * stagger_s + rng.uniform(0, INTERVAL_S)
        ts = np.arange(start, duration_s, INTERVAL_S)
        ts = ts + rng.normal(0, 0.003, ts.shape)  # a sampler thread's wake-up jitter
        samples = [sampler.reading_at(float(t)) for t in ts]
        out.append(RankData(
            r, (T0 + ts * 1e9).astype(np.int64),
            np.array([s.allocated for s in samples], float),
            np.array([s.reserved for s in samples], float),
            np.array([s.device_used for s in samples], float),
            np.array([s.device_total for s in samples], float)))
    return out


def _fault(ranks: int) -> tuple[int, str]:
    owner = 2 if ranks > 2 else 1
    return owner, f"rank={owner}:first_spike@t=12s,delta=1GiB,lead=500ms"


def test_the_failing_shape_names_no_rank() -> None:
    """4 ranks, seed 2: rank 0's warm-up step at -0.77 s (the others' steps at the same instant
    set aside) was named the first cause at high, leading their next step by a second."""
    cr = analyze(to_timeline(shared_warmup_job(4, seed=2))).cross_rank
    assert cr.first_cause_suspects == [], cr.incidents
    assert cr.incidents == []


@pytest.mark.parametrize("period_s", [1.0, 0.25])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_a_shared_warm_up_is_no_incident(ranks: int, seed: int, period_s: float) -> None:
    report = analyze(to_timeline(shared_warmup_job(ranks, seed=seed, period_s=period_s)))
    cr = report.cross_rank
    assert cr.first_cause_suspects == [], cr.incidents
    assert not [i for i in cr.incidents if i["confidence"] in ("high", "medium")]


@pytest.mark.parametrize("period_s", [1.0, 0.25])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_the_planted_fault_after_a_shared_warm_up_is_found(ranks: int, seed: int,
                                                          period_s: float) -> None:
    owner, faults = _fault(ranks)
    cr = analyze(to_timeline(shared_warmup_job(ranks, faults, seed=seed,
                                               period_s=period_s))).cross_rank
    top = cr.first_cause_suspects[0]
    assert (top.rank, top.confidence) == (owner, "high"), cr.incidents
    # Never a wrong rank at medium or high, in any incident.
    for inc in cr.incidents:
        if inc["confidence"] in ("high", "medium"):
            assert inc["leader"] == owner, cr.incidents


def _analyze_cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    p = run_stormotel("analyze", str(folder), *args, timeout=120)
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout
    return p


def test_cli_on_a_shared_warm_up_archive(tmp_path: Path) -> None:
    """The same jobs as archives through ``stormotel analyze``: healthy exits 0 naming no
    suspect; with the fault, rank 2 is the top suspect at high."""
    healthy = write_archive(tmp_path / "healthy", shared_warmup_job(4, seed=2))
    p = _analyze_cli(healthy)
    assert p.returncode == exitcodes.OK, p.stdout
    assert "first-cause suspect" not in p.stdout.lower(), p.stdout
    faulty = write_archive(tmp_path / "faulty", shared_warmup_job(4, _fault(4)[1], seed=2))
    p = _analyze_cli(faulty)
    assert p.returncode == exitcodes.FINDINGS, p.stdout
    assert "Top first-cause suspect: rank 2 (high)" in p.stdout, p.stdout
