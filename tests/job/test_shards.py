"""Sharded scheduled analysis: N pods of an Indexed Job split the discovered jobs between them.

A REAL Prometheus holds 200 small jobs. Four shards (``--shard I/4``) each run once: every job
is analysed by exactly one of them, with its own Perfetto trace and its own state file. Then the
operator changes the chart to three shards (``--shard 3`` with ``JOB_COMPLETION_INDEX``, as in
a pod): every job is analysed exactly once more, each window starting where that job's previous
one ended, whichever shard held it before.
"""

from __future__ import annotations

import collections
import io
import shlex
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from stormotel.analyzers import options as shard_options
from stormotel.analyzers.cli.args import options_from_args
from stormotel.analyzers.cli.flags import build_parser
from stormotel.analyzers.options import AnalyzeOptions
from stormotel.analyzers.scheduled import job, shard
from stormotel.analyzers.scheduled.run import run_scheduled
from stormotel.analyzers.scheduled.state import StateFile
from stormotel.analyzers.sinks import remote_write

from stormotel import exitcodes, schema
from stormotel.errors import UsageError

JOBS = 200
S = 1_000_000_000
MIN = 60 * S


def _args(*argv: str) -> AnalyzeOptions:
    """The options ``stormotel analyze ARGV`` runs with."""
    return options_from_args(build_parser().parse_args(list(argv)))


def _summaries(err: str) -> list[dict[str, str]]:
    return [dict(p.split("=", 1) for p in shlex.split(ln)[1:]) for ln in err.splitlines()
            if ln.startswith(job.SUMMARY_PREFIX)]


def _plant(url: str, end_ms: int) -> list[str]:
    """200 jobs of 2 ranks, 20 minutes of device memory at 15 s ending at ``end_ms``."""
    t = end_ms - 15_000 * np.arange(80)[::-1]
    ids = [f"train-{i:03d}" for i in range(JOBS)]
    with httpx.Client(timeout=30) as client:
        for job_id, rank in ((j, r) for j in ids for r in (0, 1)):
            body = remote_write.encode_arrays(
                schema.DEVICE_USED.prom, {schema.ATTR_JOB_ID: job_id, schema.ATTR_RANK: str(rank)},
                t, np.full(t.size, 10 * 2**30 + rank * 2**20, np.float64))
            client.post(url + "/api/v1/write", content=body,
                        headers=remote_write.HEADERS).raise_for_status()
    return ids


def test_shard_of_is_stable_and_spreads() -> None:
    """The hash is the job id's alone (a fixed value here: a change would move every job), and
    200 ids spread over 4 shards without an empty or doubled one."""
    assert shard_options.shard_of("train-000", 4) == shard_options.shard_of("train-000", 4)
    assert [shard_options.shard_of(f"train-{i:03d}", 7) for i in range(5)] == [
        shard_options.shard_of(f"train-{i:03d}", 7) for i in range(5)]
    counts = collections.Counter(shard_options.shard_of(f"train-{i:03d}", 4) for i in range(200))
    assert sorted(counts) == [0, 1, 2, 3] and min(counts.values()) >= 30
    jobs = [f"j{i}" for i in range(50)]
    parts = [shard.select(jobs, shard_options.Shard(i, 3)) for i in range(3)]
    assert sorted(j for p in parts for j in p) == sorted(jobs)


@pytest.mark.parametrize(("text", "env", "want"), [
    ("1/4", {}, shard_options.Shard(1, 4)),
    ("4", {"JOB_COMPLETION_INDEX": "3"}, shard_options.Shard(3, 4)),
])
def test_shard_flag(text: str, env: dict[str, str], want: shard_options.Shard) -> None:
    assert shard_options.resolve_shard(shard_options.parse_shard(text), env) == want


@pytest.mark.parametrize(("text", "env", "error"), [
    ("4/4", {}, "I must be 0..3"), ("0/0", {}, "N must be"), ("x/4", {}, "expected I/N"),
    ("4", {}, "JOB_COMPLETION_INDEX"), ("4", {"JOB_COMPLETION_INDEX": "4"}, "not below"),
])
def test_bad_shard_is_a_usage_error(text: str, env: dict[str, str], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        shard_options.resolve_shard(shard_options.parse_shard(text), env)


def test_shard_needs_scheduled_and_no_job_id() -> None:
    with pytest.raises(UsageError, match="--shard needs --scheduled"):
        _args("--prometheus", "http://127.0.0.1:9", "--job-id", "a", "--shard", "0/2")
    with pytest.raises(SystemExit):  # argparse: a malformed value is exit 2
        _args("--prometheus", "http://127.0.0.1:9", "--scheduled", "--shard", "2/2")


@pytest.mark.servers
def test_200_jobs_over_4_then_3_shards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import servers

    now = time.time_ns() - 2 * MIN
    with servers.prometheus(tmp_path / "prom") as prom:
        ids = _plant(prom.url, now // 1_000_000)
        state = tmp_path / "state" / "state.json"
        base = ["--prometheus", prom.url, "--scheduled", "--since", "30m", "--max-window", "30m",
                "--settle", "0s", "--state-file", str(state), "--perfetto",
                str(tmp_path / "out" / "trace.json"), "--http-retries", "0"]
        tick1 = now - 10 * MIN
        first: dict[str, dict[str, str]] = {}
        for i in range(4):
            err = io.StringIO()
            code = run_scheduled(_args(*base, "--shard", f"{i}/4"), err=err, now_ns=tick1)
            assert code == exitcodes.OK, err.getvalue()[-2000:]
            lines = _summaries(err.getvalue())
            assert lines, err.getvalue()[-2000:]
            for ln in lines:
                assert ln["job_id"] not in first, f"{ln['job_id']} analysed twice"
                assert shard_options.shard_of(ln["job_id"], 4) == i
                first[ln["job_id"]] = ln
        assert sorted(first) == ids  # every job exactly once
        # Per-job outputs kept: a trace per job, a state file per job naming it.
        traces = sorted(p.parent.name for p in (tmp_path / "out").glob("*/trace.json"))
        assert traces == ids
        for job_id in ids[:10]:
            assert StateFile(shard.job_state_file(state, job_id)).read().last_end_ns(job_id)
        assert len(list(state.parent.glob("state.*.json"))) == JOBS

        # The chart now says shards: 3; each pod's index comes from the Indexed Job.
        tick2 = tick1 + 10 * MIN
        second: dict[str, dict[str, str]] = {}
        for i in range(3):
            monkeypatch.setenv("JOB_COMPLETION_INDEX", str(i))
            err = io.StringIO()
            code = run_scheduled(_args(*base, "--shard", "3"), err=err, now_ns=tick2)
            assert code == exitcodes.OK, err.getvalue()[-2000:]
            for ln in _summaries(err.getvalue()):
                assert ln["job_id"] not in second, f"{ln['job_id']} analysed twice"
                second[ln["job_id"]] = ln
        assert sorted(second) == ids  # none missed after N changed
        for job_id in ids:  # each window continues the job's own previous one: no overlap
            assert second[job_id]["window"].split("/")[0] == first[job_id]["window"].split("/")[1]
