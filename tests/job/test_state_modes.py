"""One state for every mode of the scheduled job: sharded and unsharded runs read and lock the
same per-job state (analyzers/scheduled/state.py).

Round three of the red team: an unsharded run after sharded ones re-analysed every job (it read
another state file), and a sharded and an unsharded run at the same time analysed every window
twice, both exiting 0. Here real ``stormotel analyze`` processes run against a real Prometheus:
three at once (unsharded, shard 0/2, shard 1/2) — each job's window is analysed by exactly one of
them, the others say another run holds it; then the modes switch and every job's next window
starts where its previous one ended.

Each run is told its "now" (``--now``, a past cron tick) instead of waiting out
``MIN_NEW_WINDOW_S`` of real time between the runs: the planted samples and every run's clock
lie in the recent past, ``MIN_NEW_WINDOW_S`` plus a second apart.
"""

from __future__ import annotations

import itertools
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from stormotel.analyzers.scheduled import job
from stormotel.analyzers.scheduled.window import MIN_NEW_WINDOW_S
from stormotel.analyzers.sinks import remote_write

from stormotel import exitcodes, schema

REPO = Path(__file__).resolve().parents[2]
JOBS = 24


def _plant(url: str, end_ms: int, n: int = 60) -> list[str]:
    """``n`` samples at 15 s of two ranks of every job, the last at ``end_ms``."""
    t = end_ms - 15_000 * np.arange(n)[::-1]
    ids = [f"mode-{i:02d}" for i in range(JOBS)]
    with httpx.Client(timeout=30) as client:
        for job_id, rank in ((j, r) for j in ids for r in (0, 1)):
            body = remote_write.encode_arrays(
                schema.DEVICE_USED.prom, {schema.ATTR_JOB_ID: job_id, schema.ATTR_RANK: str(rank)},
                t, np.full(t.size, 10 * 2**30 + rank * 2**20, np.float64))
            client.post(url + "/api/v1/write", content=body,
                        headers=remote_write.HEADERS).raise_for_status()
    return ids


def _start(url: str, state: Path, *extra: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "stormotel", "analyze", "--prometheus", url, "--scheduled",
            "--since", "30m", "--max-window", "30m", "--settle", "0s", "--state-file",
            str(state), "--http-retries", "0", "-q", *extra]
    return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO)})


def _finish(procs: list[subprocess.Popen[str]]) -> list[tuple[int, list[dict[str, str]]]]:
    out = []
    for p in procs:
        _, err = p.communicate(timeout=300)
        lines = [dict(part.split("=", 1) for part in shlex.split(ln)[1:])
                 for ln in err.splitlines() if ln.startswith(job.SUMMARY_PREFIX)]
        assert "Traceback" not in err, err[-3000:]
        out.append((p.returncode, lines))
    return out


@pytest.mark.servers
@pytest.mark.slow
def test_sharded_and_unsharded_runs_share_one_state(tmp_path: Path) -> None:
    from tests import servers

    with servers.prometheus(tmp_path / "prom") as prom:
        # The first runs' now lies far enough back that the later ticks stay in the past.
        tick = time.time_ns() // 1_000_000 - 3 * round(MIN_NEW_WINDOW_S * 1000) - 30_000
        planted_ms = tick - 1_000
        ids = _plant(prom.url, planted_ms)
        state = tmp_path / "state" / "state.json"
        now = ("--now", f"{tick / 1000:.3f}")
        # Three runs at once: unsharded, and the two shards of N=2.
        runs = _finish([_start(prom.url, state, *now),
                        _start(prom.url, state, "--shard", "0/2", *now),
                        _start(prom.url, state, "--shard", "1/2", *now)])
        analysed: dict[str, list[str]] = {}
        for code, lines in runs:
            assert code == exitcodes.OK, lines
            for ln in lines:
                if int(ln.get("samples", 0)) > 0:  # a window analysed (state advanced)
                    analysed.setdefault(ln["job_id"], []).append(ln["window"])
                else:  # another run holds the job now, or has already covered this run's now
                    assert ln.get("note") in (
                        "analysed by another run holding its state",
                        "no new time since the last run",
                        "job ended; its final window was analysed before") or \
                        ln.get("note", "").startswith("nothing new yet"), ln
        assert sorted(analysed) == ids
        overlapping = {}
        for job_id, windows in analysed.items():
            spans = sorted(tuple(w.split("/")) for w in windows)
            if any(b[0] < a[1] for a, b in itertools.pairwise(spans)):
                overlapping[job_id] = spans
        assert not overlapping, f"time analysed twice: {overlapping}"

        # Switch modes: the shards' jobs with an unsharded run, and back. Every next window
        # starts where the job's previous one ended (the same per-job state), none from --since.
        previous = {j: max(w) for j, w in analysed.items()}
        for extra in ((), ("--shard", "0/1")):
            # The next tick: more new time than a window's shortest (MIN_NEW_WINDOW_S).
            tick += round(MIN_NEW_WINDOW_S * 1000) + 1_000
            planted_ms += 30_000
            _plant(prom.url, planted_ms, n=2)  # the jobs go on: new samples in the window
            [(code, lines)] = _finish([_start(prom.url, state, *extra, "--now",
                                              f"{tick / 1000:.3f}")])
            assert code == exitcodes.OK, lines
            seen = {ln["job_id"]: ln for ln in lines}
            assert sorted(seen) == ids
            for job_id, ln in seen.items():
                start = ln["window"].split("/")[0]
                assert start == previous[job_id].split("/")[1], (job_id, ln, previous[job_id])
                if int(ln.get("samples", 0)) > 0:
                    previous[job_id] = ln["window"]


def test_a_legacy_combined_state_file_is_carried_over_and_its_lock_honoured(
        tmp_path: Path) -> None:
    """An unsharded run of an earlier release kept every job in ``state.json``: this release
    continues each job from there (its counters too), and never runs beside an older run that
    holds that file's lock."""
    import json

    from stormotel.analyzers.scheduled.job import job_state
    from stormotel.analyzers.scheduled.shard import job_state_file
    from stormotel.analyzers.scheduled.state import STATE_SCHEMA, StateFile, StateLocked

    legacy = tmp_path / "state.json"
    legacy.write_text(json.dumps({"schema": STATE_SCHEMA, "jobs": {
        "a": {"last_end_ns": 1_800_000_000 * 10**9, "runs": {"ok": 7}}}}))
    state = job_state(legacy, "a")
    with state.locked():
        assert state.last_end_ns("a") == 1_800_000_000 * 10**9
        assert state.count_run("a", "ok") == {"ok": 8}
        state.advance("a", 1_800_000_600 * 10**9, "now")
        state.save()
    own = json.loads(job_state_file(legacy, "a").read_text())
    assert own["jobs"]["a"]["last_end_ns"] == 1_800_000_600 * 10**9
    assert job_state(legacy, "a").read().last_end_ns("a") == 1_800_000_600 * 10**9
    assert json.loads(legacy.read_text())["jobs"]["a"]["last_end_ns"] == 1_800_000_000 * 10**9
    with StateFile(legacy).locked(), pytest.raises(StateLocked, match="locked by another run"), \
            job_state(legacy, "a").locked():
        pass
    with job_state(legacy, "a").locked(), job_state(legacy, "b").locked():
        pass  # two jobs (two shards, or two runs) at once: their own locks only
