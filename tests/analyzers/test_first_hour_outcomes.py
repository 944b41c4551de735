"""Outcomes a new user meets in the first hour, at the command's boundary: an input with
nothing to judge by is "no evidence" (exit 3), not healthy; a rank far over its estimate is a
finding (exit 1) said in the text summary, not only in the JSON.

The first run of each of those outcomes (exit 1, the healthy control's 0, exit 3) and the
control's tracker start a fresh interpreter, as a user's do; the other runs are forked from one
that imported the command once (:func:`tests.cli.run_stormotel_forked`: a process of its own,
its exit status and stdout/stderr; ~0.5 s of CPU less each). tests/analyzers/test_cli.py keeps a
fresh run for the usage error (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stormotel import exitcodes
from tests.cli import REPO, run_stormotel, run_stormotel_forked


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two simulated ranks, 1.5 s each, with a 1 MiB estimate (the tracker's --estimate)."""
    root = tmp_path_factory.mktemp("first-hour")
    for rank in (0, 1):
        out = run_stormotel_forked("track", "--sampler", "simulated", "--duration", "1.5",
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
    report = json.loads(run_stormotel_forked("analyze", str(archive), "--format", "json").stdout)
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
    out = run_stormotel_forked("analyze", "--logs", str(REPO / "README.md"))
    assert out.returncode == exitcodes.SOURCE_FAILURE, out.stdout
    assert out.stderr.strip().splitlines()[-1].startswith("stormotel analyze: no evidence:")
    assert "Traceback" not in out.stderr


def _state(path: Path, last_end_ns: int) -> None:
    from stormotel.analyzers.scheduled.state import STATE_SCHEMA

    path.write_text(json.dumps({"schema": STATE_SCHEMA, "jobs": {
        "run-7": {"last_end_ns": last_end_ns, "runs": {}}}}))


def test_a_run_seconds_after_the_previous_is_nothing_new_yet(tmp_path: Path) -> None:
    """A second cron run 2 s after the first (15 s scrapes): exit 0 with a note, the state
    untouched so the next run covers those seconds — not a source failure (exit 3). Nothing
    listens at the URL: the run must not even ask."""
    import time

    state = tmp_path / "state.json"
    last = time.time_ns() - 2_000_000_000
    _state(state, last)
    before = state.read_text()
    out = run_stormotel_forked("analyze", "--prometheus", "http://127.0.0.1:1", "--job-id", "run-7",
                        "--state-file", str(state), "--settle", "0s")
    assert out.returncode == exitcodes.OK, out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert "outcome=ok" in line and "nothing new yet" in line, line
    assert state.read_text() == before
    # The control: a window long enough is read, and an endpoint that is down still fails
    # (at once: the retries' backoff, ~7 s of sleep, is not what is checked here).
    _state(state, time.time_ns() - 120_000_000_000)
    out = run_stormotel_forked("analyze", "--prometheus", "http://127.0.0.1:1", "--job-id", "run-7",
                        "--state-file", str(state), "--settle", "0s", "--http-retries", "0")
    assert out.returncode == exitcodes.SOURCE_FAILURE, out.stderr


@pytest.mark.parametrize("flag, value", [("--prometheus", "prometheus:9090"),
                                         ("--prometheus", "localhost"),
                                         ("--remote-write", "prometheus:9090/api/v1/write"),
                                         ("--grafana-url", "ftp://grafana")])
def test_a_url_without_scheme_is_a_usage_error(flag: str, value: str) -> None:
    """Used to be retried four times and reported as a source failure (exit 3), after a
    misleading "0 raw-sample queries ... over 0 endpoint(s)"."""
    args = ["--prometheus", "http://127.0.0.1:1", "--job-id", "j"]
    args = [flag, value, "--job-id", "j"] if flag == "--prometheus" else [*args, flag, value]
    out = run_stormotel_forked("analyze", *args)
    assert out.returncode == exitcodes.USAGE, out.stderr
    assert out.stderr.strip().splitlines() == [
        f"stormotel analyze: error: {flag} {value!r} is not an http(s) URL"
        + (f"; did you mean http://{value}?" if "://" not in value else "")]


def test_a_failed_prometheus_run_names_no_phantom_queries() -> None:
    """Without retries: their backoff (~7 s of sleep) changes no word of the failure."""
    out = run_stormotel_forked("analyze", "--prometheus", "http://127.0.0.1:1", "--job-id", "j",
                        "--since", "5m", "--http-retries", "0")
    assert out.returncode == exitcodes.SOURCE_FAILURE
    assert "0 raw-sample queries" not in out.stderr and "0 endpoint(s)" not in out.stderr
    assert "no Prometheus endpoint answered" in out.stderr
