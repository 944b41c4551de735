"""``stormotel serve --workers 2``: two analyses at once in one process each log only their own
lines, through the entry the receiver's worker threads use.

Each worker runs :func:`~stormotel.analyzers.scheduled.job.run_job` with the options
:func:`~stormotel.analyzers.serve.worker.run_options` builds and a log of its own
(``err=runlog``), as :meth:`Analyst.analyse` does. Two jobs with different culprits are planted
in a REAL Prometheus; each run reads it through a proxy that holds its first request until the
other run's has come too, so both runs are in flight together however the threads are
scheduled. Each run's log must hold its own job's summary line and nothing of the other job, its
report its own culprit, and the process's streams must be as they were (in-process runs print
to the streams they are handed, never to a swapped ``sys.stderr``: tests/analyzers/
test_in_process_streams.py is the same property through the command's entry point).
"""

from __future__ import annotations

import io
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import servers
from tests.job import planted
from tests.job.stubs import FaultProxy

pytestmark = pytest.mark.servers

#: job id -> its planted first-cause rank: the two reports are told apart by both
JOBS = {"streams-alpha": 1, "streams-bravo": 3}


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[servers.Server, int]]:
    """Prometheus holding both planted jobs; also the earliest sample's time (ns)."""
    with servers.prometheus(tmp_path_factory.mktemp("prom")) as server:
        starts = []
        for job, rank in JOBS.items():
            p, data = planted.make(job_id=job, minutes=3, fault_rank=rank)
            planted.write(server.url + "/api/v1/write", job, data)
            planted.wait_visible(server.url, job, len(data))
            starts.append(p.start_ns)
        yield server, min(starts)


def test_two_worker_runs_at_once_log_only_their_own_lines(
        prom: tuple[servers.Server, int], tmp_path: Path) -> None:
    from stormotel.analyzers.options import AnalyzeOptions
    from stormotel.analyzers.scheduled.job import run_job
    from stormotel.analyzers.serve.options import build_parser, options_from_args
    from stormotel.analyzers.serve.store import REPORT_JSON
    from stormotel.analyzers.serve.worker import run_options

    server, first_ns = prom
    meet = threading.Barrier(len(JOBS))
    before = sys.stdout, sys.stderr
    logs: dict[str, io.StringIO] = {}
    codes: dict[str, int] = {}
    threads = []
    proxies = [FaultProxy(server.url, meet=meet) for _ in JOBS]
    for (job, _), proxy in zip(JOBS.items(), proxies, strict=True):
        base = options_from_args(build_parser().parse_args(
            ["--out", str(tmp_path / "served"), "--prometheus", proxy.url])).base
        staging = tmp_path / job
        staging.mkdir()
        now_ns = time.time_ns()
        opts = run_options(base, job, str(staging), now_ns, first_ns - int(60e9))
        logs[job] = io.StringIO()

        def run(job: str = job, opts: AnalyzeOptions = opts, now_ns: int = now_ns) -> None:
            codes[job] = run_job(opts, err=logs[job], out=io.StringIO(), now_ns=now_ns).code

        threads.append(threading.Thread(target=run, daemon=True))
    for proxy in proxies:
        proxy.__enter__()
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
    finally:
        meet.abort()  # a run that never came frees the other's held request
        for proxy in proxies:
            proxy.__exit__()
    assert all(p.requests for p in proxies), "a run never read its TSDB"
    assert (sys.stdout, sys.stderr) == before
    assert set(codes) == set(JOBS), codes
    for job, rank in JOBS.items():
        other = next(j for j in JOBS if j != job)
        text = logs[job].getvalue()
        assert other not in text, (job, text)
        summaries = [ln for ln in text.splitlines() if ln.startswith("stormotel-analyze ")]
        assert len(summaries) == 1 and f"job_id={job} " in summaries[0], (job, text)
        report = json.loads((tmp_path / job / REPORT_JSON).read_text())
        assert report["job_id"] == job
        top = report["cross_rank"]["first_cause_suspects"][0]
        assert top["rank"] == rank, (job, report["cross_rank"])
