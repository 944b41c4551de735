"""Outcomes a new user meets in the first hour, at the command's boundary: an input with
nothing to judge by is "no evidence" (exit 3), not healthy; a rank far over its estimate is a
finding (exit 1) said in the text summary, not only in the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stormotel import exitcodes
from tests.cli import REPO, run_stormotel


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two simulated ranks, 1.5 s each, with a 1 MiB estimate (the tracker's --estimate)."""
    root = tmp_path_factory.mktemp("first-hour")
    for rank in (0, 1):
        out = run_stormotel("track", "--sampler", "simulated", "--duration", "1.5",
                            "--interval", "0.05", "--archive", str(root), "--job-id", "fh",
                            "--rank", str(rank), "--world-size", "2", "--estimate", "1MiB",
                            "-q", cwd=None)
        assert out.returncode == 0, out.stderr
    return root / "fh"


def test_far_over_the_estimate_is_a_finding_in_the_text(archive: Path) -> None:
    out = run_stormotel("analyze", str(archive))
    assert out.returncode == exitcodes.FINDINGS, out.stderr
    assert "Verdict: healthy" not in out.stdout
    verdict = out.stdout.strip().splitlines()[-1]
    assert verdict.startswith("Verdict: FINDINGS") and "its estimate (critical)" in verdict
    assert "Estimate vs actual (2 rank(s) over the estimate):" in out.stdout
    assert "wrong unit" in out.stdout  # thousands of times over: the estimate is not this job's
    report = json.loads(run_stormotel("analyze", str(archive), "--format", "json").stdout)
    ranks = report["extra"]["estimate_vs_actual"]["ranks"]
    assert all(r["over_estimate"] and r["ratio"] > 1000 for r in ranks)


def test_within_the_estimate_stays_healthy(archive: Path, tmp_path: Path) -> None:
    """The control: the same job with an estimate above its peak is healthy (exit 0)."""
    out = run_stormotel("track", "--sampler", "simulated", "--duration", "1", "--archive",
                        str(tmp_path), "--job-id", "ok", "--estimate", "80GiB", "-q", cwd=None)
    assert out.returncode == 0, out.stderr
    out = run_stormotel("analyze", str(tmp_path / "ok"))
    assert out.returncode == exitcodes.OK, out.stdout + out.stderr
    assert "Estimate vs actual" not in out.stdout


def test_ranks_that_select_nothing_are_no_evidence(archive: Path) -> None:
    out = run_stormotel("analyze", str(archive), "--ranks", "9")
    assert out.returncode == exitcodes.SOURCE_FAILURE, out.stdout
    assert "--ranks 9 selects none of the ranks in the input (0-1)" in out.stderr
    assert "Verdict: no evidence" in out.stdout and "healthy" not in out.stdout.splitlines()[-1]


def test_a_file_that_is_not_a_worker_log_is_no_evidence() -> None:
    out = run_stormotel("analyze", "--logs", str(REPO / "README.md"))
    assert out.returncode == exitcodes.SOURCE_FAILURE, out.stdout
    assert out.stderr.strip().splitlines()[-1].startswith("stormotel analyze: no evidence:")
    assert "Traceback" not in out.stderr
