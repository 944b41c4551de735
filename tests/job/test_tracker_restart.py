"""A rank whose tracker started again inside the query window, read from a REAL Prometheus
(``stormotel analyze --prometheus``): the start gauge (``stormotel_tracker_start_timestamp_
seconds``, set once per process) holds a later value after the restart, and the new process's
warm-up is judged as a warm-up, not as a rank leading the others.

* **One pod restarted.** Three ranks ran 10 minutes before the window, flat at 30 GiB; rank 1's
  process dies 64 s in, a new one starts at 72 s and loads its model (2 GiB, then 30 GiB 6 s
  later). Only the first start was read before, so rank 1 was a running rank, and its warm-up
  a one-rank incident named at **high**. With the later start read, it is the restarted
  process warming up: set aside, nobody named.
* **The worker group restarted** (torchrun's elastic restart: every worker stopped and started
  again, 70.0-70.8 s): each rank's warm-up after it, finishing a few seconds apart, made the
  first to finish "the leader" at **high**; now every one is set aside.
* **No restart** (the control): the same samples with the gauge unchanged — one process that
  freed and took back its memory — still name rank 1 at high, as before: the restart is
  decided by the gauge's values, not by the samples' shape.
* **Two restarts in the window** (the same pattern again 60 s later: a new start at 132 s):
  ``min_over_time``/``max_over_time`` of the gauge see the first process's start and the last
  one's, not the middle one at 72 s, whose warm-up was then a one-rank incident (one pod
  restarted twice: rank 1 at high) or a leader (the worker group restarted twice). Each
  process's gauge in the series of the rank (a torchrun restart on the same node), and each in
  a series of its own (a pod restarted twice: its ``pod`` label differs per process, so each
  series holds one value and ``changes`` is 0 in all of them). The control again: the same
  samples with the gauge unchanged still name rank 1 at high.

Samples are stamped at each scrape's start (5 s scrapes, phase 1 + rank s) and hold what the
tracker held then; the start gauge holds the start of the process alive at that scrape.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stormotel.analyzers.sinks import remote_write

from stormotel import schema
from tests import servers
from tests.cli import run_stormotel_here
from tests.job import planted
from tests.named import named_above_low

pytestmark = pytest.mark.servers

GIB = float(1 << 30)
DURATION_S = 240.0
#: When the processes die (no scrape after it until the new one answers), and the first scrape
#: that reaches a restarted process; a rank's second restart is the first one AGAIN_S later.
DIES_S, BACK_S = 64.0, 75.0
AGAIN_S = 60.0


def _write(url: str, labels: dict[str, str], stamps: np.ndarray, used_gib: np.ndarray,
           start_s: np.ndarray) -> int:
    """One rank's scraped series (stamps in s since the Unix epoch) and its start gauge's value
    at each scrape, remote-written. Returns the number of series."""
    t_ms = np.rint(stamps * 1000).astype(np.int64)
    bodies = [remote_write.encode_arrays(name, labels, t_ms, v) for name, v in (
        (schema.DEVICE_USED.prom, used_gib * GIB),
        (schema.FIELD_METRICS["device_total"].prom, np.full(t_ms.shape, 80 * GIB)),
        (schema.TRACKER_START.prom, np.round(start_s, 3)))]
    client = servers.loopback_client()
    for body in bodies:
        resp = client.post(url + "/api/v1/write", content=body, headers=remote_write.HEADERS,
                           timeout=30)
        assert resp.status_code in (200, 204), (resp.status_code, resp.text)
    return len(bodies)


def _job(url: str, job: str, epoch: float, restarts: dict[int, list[tuple[float, float]]],
         gauge_moves: bool, series_per_process: bool = False) -> int:
    """Ranks 0-2 started 600 s before the window, flat at 30 GiB. Each rank of ``restarts``
    (rank -> its restarts, each (its new start, its warm-up's length)) is not scraped from
    ``DIES_S`` until ``BACK_S`` (the k-th restart k × ``AGAIN_S`` later), then holds 2 GiB until
    the new start + warm-up, 30 GiB after; its gauge holds the new start after the restart
    when ``gauge_moves``. With ``series_per_process`` each process's samples carry a ``pod``
    label of their own (a pod restarted: new series)."""
    n = 0
    for rank in range(3):
        s = 1.0 + rank + 5.0 * np.arange(0, int(DURATION_S / 5) + 1)
        s = s[s <= DURATION_S]
        used = np.full(s.shape, 30.0)
        start = np.full(s.shape, epoch - 600.0)
        process = np.zeros(s.shape, np.int64)
        keep = np.ones(s.shape, bool)
        for k, (began, warm) in enumerate(restarts.get(rank, [])):
            keep &= (s < DIES_S + k * AGAIN_S) | (s >= BACK_S + k * AGAIN_S)
            after = s >= BACK_S + k * AGAIN_S
            used = np.where(after & (s < began + warm), 2.0, np.where(after, 30.0, used))
            start = np.where(after & gauge_moves, epoch + began, start)
            process = np.where(after, k + 1, process)
        labels = {**planted.labels_for(job, rank), schema.ATTR_WORLD_SIZE: "3"}
        for p in np.unique(process[keep]).tolist() if series_per_process else [None]:
            sel = keep & (process == p) if p is not None else keep
            n += _write(url, {**labels, schema.ATTR_POD: f"train-{rank}-{p}"}
                        if p is not None else labels, epoch + s[sel], used[sel], start[sel])
    return n


#: job -> (its restarts, whether the start gauge moves with them, a series per process).
JOBS: dict[str, tuple[dict[int, list[tuple[float, float]]], bool, bool]] = {
    "pod-restart": ({1: [(72.0, 6.0)]}, True, False),
    "no-restart": ({1: [(72.0, 6.0)]}, False, False),
    "group-restart": ({0: [(70.0, 8.0)], 1: [(70.4, 14.6)], 2: [(70.8, 14.2)]}, True, False),
    "pod-restart-twice": ({1: [(72.0, 6.0), (132.0, 6.0)]}, True, False),
    "pod-restart-twice-new-series": ({1: [(72.0, 6.0), (132.0, 6.0)]}, True, True),
    "no-restart-twice": ({1: [(72.0, 6.0), (132.0, 6.0)]}, False, False),
    "group-restart-twice": ({0: [(70.0, 8.0), (130.0, 8.0)], 1: [(70.4, 14.6), (130.4, 14.6)],
                             2: [(70.8, 14.2), (130.8, 14.2)]}, True, False)}


def _cross_rank(url: str, job: str, epoch: float, report: Path) -> dict[str, Any]:
    """``stormotel analyze --prometheus`` over the whole window, its report's ``cross_rank``."""
    window = ("--start", f"{epoch - 5:.3f}", "--end", f"{epoch + DURATION_S + 5:.3f}")
    run = run_stormotel_here("analyze", "--prometheus", url, "--job-id", job, *window,
                             "--format", "json", "-o", str(report))
    assert report.exists(), (job, run.returncode, run.stderr[-2000:])
    cross: dict[str, Any] = json.loads(report.read_text())["cross_rank"]
    return cross


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    work = tmp_path_factory.mktemp("tracker-restart")
    with servers.prometheus(work / "prom") as prom:
        epoch = float(int(time.time()) - DURATION_S - 30)
        for job, (restarts, moves, per_process) in JOBS.items():
            planted.wait_visible(prom.url, job,
                                 _job(prom.url, job, epoch, restarts, moves, per_process))
        return {job: _cross_rank(prom.url, job, epoch, work / f"{job}.json") for job in JOBS}


@pytest.mark.parametrize("job", ["pod-restart", "pod-restart-twice",
                                 "pod-restart-twice-new-series"])
def test_a_restarted_pods_warm_up_is_not_an_incident(reports: dict[str, dict[str, Any]],
                                                      job: str) -> None:
    # Twice: only the first start and the last were read once, and the middle restart's
    # warm-up was a rise like any other, a one-rank incident at high.
    cross = reports[job]
    assert not named_above_low(cross), cross
    assert any("warm-up of ranks" in n for n in cross["notes"]), cross["notes"]


@pytest.mark.parametrize("job", ["group-restart", "group-restart-twice"])
def test_after_a_worker_group_restart_no_warm_up_leads(
        reports: dict[str, dict[str, Any]], job: str) -> None:
    cross = reports[job]
    assert not named_above_low(cross), cross
    assert not cross["incidents"], cross["incidents"]


@pytest.mark.parametrize("job", ["no-restart", "no-restart-twice"])
def test_the_same_samples_without_a_new_start_still_name_the_rank(
        reports: dict[str, dict[str, Any]], job: str) -> None:
    # One process, its memory freed and taken back: nothing says it restarted (today's answer).
    assert named_above_low(reports[job]) == {(1, "high")}, reports[job]
