"""Cron safety: consecutive runs cover time without gaps or overlaps; bad state is explained.

The run's clock is injected (``now_ns``) so a whole day of cron runs takes a second; the data
still comes over the HTTP API of a REAL Prometheus.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import shlex
from pathlib import Path

import pytest
from stormotel.analyzers.cli.args import options_from_args
from stormotel.analyzers.cli.flags import build_parser
from stormotel.analyzers.cli.job_flags import parse_duration, parse_time
from stormotel.analyzers.options import AnalyzeOptions
from stormotel.analyzers.scheduled import job, shard
from stormotel.analyzers.scheduled.state import STATE_SCHEMA, StateFile

from stormotel import exitcodes
from tests.job import planted

pytestmark = pytest.mark.servers
JOB = "cron-1"
S = 1_000_000_000


def _args(*argv: str) -> AnalyzeOptions:
    """The options ``stormotel analyze ARGV`` runs with."""
    return options_from_args(build_parser().parse_args(list(argv)))


def _run(args: AnalyzeOptions, now_ns: int) -> tuple[int, dict[str, str], list]:
    err = io.StringIO()
    run = job.run_job(args, err=err, now_ns=now_ns)
    code, reports = run.code, [run.report] if run.report is not None else []
    line = [ln for ln in err.getvalue().splitlines() if ln.startswith(job.SUMMARY_PREFIX)]
    assert len(line) == 1, err.getvalue()
    fields = dict(part.split("=", 1) for part in shlex.split(line[0])[1:])
    return code, fields, reports


def test_consecutive_runs_tile_time(prometheus_server, tmp_path: Path) -> None:
    p, data = planted.make(job_id=JOB)
    planted.write(prometheus_server.url + "/api/v1/write", JOB, data)
    state = tmp_path / "state.json"
    argv = ["--prometheus", prometheus_server.url, "--job-id", JOB, "--since", "2m",
            "--settle", "30s", "--max-window", "4m", "--state-file", str(state)]
    t0 = p.start_ns + 2 * 60 * S  # first cron tick: two minutes into the job
    windows = []
    now = t0
    codes = []
    while now <= p.end_ns + 10 * 60 * S:
        code, _, reports = _run(_args(*argv), now)
        codes.append(code)
        if reports:
            w = reports[0].extra["window"]
            windows.append((w["start_ns"], w["end_ns"]))
        now += 3 * 60 * S  # every 3 minutes
    # Windows tile time: each starts where the previous ended, none longer than --max-window.
    assert windows[0] == (t0 - 30 * S - 120 * S, t0 - 30 * S)
    for (_, end), (start, _) in itertools.pairwise(windows):
        assert start == end
    assert all(e - s <= 4 * 60 * S for s, e in windows)
    # The fault (60% into the data) is found by exactly one window; after the data ends, runs
    # find no telemetry (exit 3) and the state stays at the last analysed end.
    assert codes.count(exitcodes.FINDINGS) == 1
    assert codes[-1] == exitcodes.SOURCE_FAILURE
    assert windows[-1][1] >= p.end_ns - 4 * 60 * S
    doc = json.loads(shard.job_state_file(state, JOB).read_text())  # the job's own state
    assert doc["jobs"][JOB]["last_end_ns"] == windows[-1][1]
    assert sum(doc["jobs"][JOB]["runs"].values()) == len(codes)


def test_nothing_new_is_a_quiet_success(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    now = 1_800_000_000 * S
    state.write_text(json.dumps({"schema": STATE_SCHEMA,
                                 "jobs": {JOB: {"last_end_ns": now - 10 * S, "runs": {}}}}))
    args = _args("--prometheus", "http://127.0.0.1:1", "--job-id", JOB, "--state-file",
                 str(state), "--settle", "1m")
    code, fields, _ = _run(args, now)
    assert code == exitcodes.OK and fields["outcome"] == "ok"


@pytest.mark.parametrize("content, message", [
    ("{not json", "line 1: not valid JSON"),
    ('{"schema": "other"}', f"is not a {STATE_SCHEMA} file"),
])
def test_bad_state_file_is_explained(tmp_path: Path, content: str, message: str) -> None:
    state = tmp_path / "state.json"
    state.write_text(content)
    args = _args("--prometheus", "http://127.0.0.1:1", "--job-id", JOB, "--state-file",
                 str(state))
    err = io.StringIO()
    assert job.run_job(args, err=err).code == exitcodes.USAGE
    assert f"state file {state}" in err.getvalue() and message in err.getvalue()


def test_overlapping_runs_are_refused(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    holder = StateFile(state)
    with holder.locked():
        args = _args("--prometheus", "http://127.0.0.1:1", "--job-id", JOB, "--state-file",
                     str(state))
        err = io.StringIO()
        assert job.run_job(args, err=err).code == exitcodes.USAGE
    assert "is locked by another run" in err.getvalue()


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("15m", 900), ("1h30m", 5400),
                                           ("2d", 172800), ("250ms", 0.25), ("0", 0)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "1x", "m5", "5 m", "-1h"])
def test_bad_durations(bad: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration(bad)


def test_times() -> None:
    assert parse_time("2026-11-21T05:00:00Z") == parse_time("1795237200")
    with pytest.raises(argparse.ArgumentTypeError, match="not a time"):
        parse_time("yesterday")
