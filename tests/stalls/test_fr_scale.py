"""REAL gloo Flight Recorder dumps of the shapes large jobs leave behind, against torch's fr_trace.

Generated once per module by :mod:`tests.stalls.fr_scale_jobs` (one subprocess, every scenario
forked from one torch import; ~10 s on the shared 2-core machine).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from stormotel.analyzers.stalls import analyze_dumps, load_dump_dir

from tests.cpu_lock import cpu_heavy
from tests.stalls.helpers import repair_pg_config, run_job_group, run_json, torch_fr_trace


@pytest.fixture(scope="module")
def scale(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("fr_scale")
    started = time.monotonic()
    with cpu_heavy(tmp_path_factory):
        proc = run_job_group("tests.stalls.fr_scale_jobs", root, timeout=400)
    assert proc.returncode == 0, proc.stderr[-2000:]
    print(f"generated scale dumps in {time.monotonic() - started:.1f} s")
    return root


def roots(folder: Path):  # type: ignore[no-untyped-def]
    findings = analyze_dumps(load_dump_dir(folder)).findings
    return [f for f in findings if f.consequence_of is None], findings


def test_tp_inside_dp_one_stalled_rank_is_the_one_root(scale: Path, tmp_path: Path) -> None:
    [root], findings = roots(scale / "tp_dp_stall" / "dumps")
    assert (root.kind, root.ranks, root.process_group) == ("straggler", [5], "3:tp")
    echoes = [f for f in findings if f.consequence_of is not None]
    assert sorted(f.process_group for f in echoes) == ["5:dp", "6:dp"]
    assert all(findings[f.consequence_of] is root for f in echoes)
    # torch's analyzer (on a pg_config-repaired copy) lists three unrelated symptoms
    repair_pg_config(scale / "tp_dp_stall" / "dumps", tmp_path / "repaired")
    ok, output = torch_fr_trace([tmp_path / "repaired"])[tmp_path / "repaired"]
    assert ok, output[-1000:]
    assert output.count("Not all ranks joining collective") == 3
    assert "missing ranks: {4}" in output and "missing ranks: {5}" in output


def test_rank_that_died_without_a_dump(scale: Path) -> None:
    [root], _ = roots(scale / "dies_no_dump" / "dumps")
    assert (root.kind, root.ranks, root.confidence) == ("straggler", [1], "low")
    assert root.evidence["category"] == "no_dump"


def test_rank_that_died_with_an_empty_dump(scale: Path, tmp_path: Path) -> None:
    folder = scale / "dies_empty_dump" / "dumps"
    assert (folder / "nccl_trace_rank_1").stat().st_size == 0
    [root], _ = roots(folder)
    assert (root.kind, root.ranks, root.confidence) == ("straggler", [1], "medium")
    assert root.evidence["category"] == "empty_dump"
    # torch refuses the folder outright: "Missing dump files from ranks {1}"
    present = tmp_path / "present"
    present.mkdir()
    for f in folder.iterdir():
        if f.stat().st_size:
            shutil.copy(f, present / f.name)
    repair_pg_config(present, tmp_path / "repaired")
    ok, output = torch_fr_trace([tmp_path / "repaired"])[tmp_path / "repaired"]
    assert not ok and "Missing dump files from ranks {1}" in output


def test_oom_rank_one_verdict_from_logs_and_dumps(scale: Path) -> None:
    [root], _ = roots(scale / "oom" / "dumps")
    assert (root.kind, root.ranks) == ("straggler", [2])  # the dumps alone: behind, not why
    code, report = run_json("--flight-recorder", str(scale / "oom" / "dumps"),
                            "--logs", str(scale / "oom" / "logs"))
    assert code == 1
    findings = report["stall_findings"]
    lead = findings[0]
    assert (lead["kind"], lead["ranks"], lead["evidence"]["category"]) == (
        "rank_failure", [2], "oom")
    assert lead["consequence_of"] is None and lead["evidence"]["precedes_timeouts"] is True
    assert lead["evidence"]["requested_bytes"] == 1 << 58
    fr = [f for f in findings if f["source"] == "flight_recorder"]
    assert fr and all(f["consequence_of"] == 0 for f in fr)


def test_memory_at_the_limit_before_the_rank_went_silent_leads(scale: Path) -> None:
    """Telemetry of the same job: rank 2's device memory was at 99 % when its samples stopped."""
    import numpy as np
    from stormotel.analyzers.stalls.verdict import with_telemetry
    from stormotel.analyzers.timeline import TimelineBuilder

    findings = analyze_dumps(load_dump_dir(scale / "oom" / "dumps")).findings
    b = TimelineBuilder()
    total = 80 * 2**30
    for rank in range(4):
        n = 20 if rank == 2 else 40  # rank 2 goes silent half-way
        used = np.linspace(0.5, 0.99 if rank == 2 else 0.6, n) * total
        b.add_samples(rank, np.arange(n, dtype=np.int64) * 1_000_000_000,
                      device_used=used, device_total=np.full(n, float(total)),
                      reserved=used * 0.9, allocated=used * 0.8)
    joined = with_telemetry(b.build(world_size=4), findings)
    lead = joined[0]
    assert (lead.kind, lead.ranks, lead.source) == ("rank_failure", [2], "telemetry")
    assert lead.evidence["used_fraction"] == 0.99
    assert all(f.consequence_of == 0 for f in joined[1:]) and joined[1:]
    # a rank that went quiet with memory to spare is not blamed on memory
    b2 = TimelineBuilder()
    for rank in range(4):
        n = 20 if rank == 2 else 40
        used = np.full(n, 0.5 * total)
        b2.add_samples(rank, np.arange(n, dtype=np.int64) * 1_000_000_000,
                       device_used=used, device_total=np.full(n, float(total)),
                       reserved=used * 0.9, allocated=used * 0.8)
    assert with_telemetry(b2.build(world_size=4), findings) == findings
