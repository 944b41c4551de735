"""The webhook parser and the durable queue, in process (no server): what a delivery names,
which deliveries are news, how notifications coalesce per job, and that only a finished run
removes the work from disk."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from stormotel.analyzers.serve.queue import WorkQueue
from stormotel.analyzers.serve.webhook import PayloadError, parse

from tests.serve import receiver as rx


def test_parse_groups_alerts_by_job_and_keys_are_stable() -> None:
    body = rx.payload([rx.alert("a", 0), rx.alert("a", 1, name="StormotelGapDrift"),
                       rx.alert("b", 3), {"status": "firing", "labels": {"alertname": "X"},
                                          "fingerprint": "f"}])
    d = parse(body)
    assert sorted(d.jobs) == ["a", "b"] and d.without_job == 1
    assert d.jobs["a"].ranks == ["0", "1"] and d.jobs["a"].firing
    assert d.jobs["a"].alertnames == ["StormotelRankStoppedReporting", "StormotelGapDrift"]
    assert parse(body).jobs["a"].delivery_key == d.jobs["a"].delivery_key
    changed = parse(rx.payload([rx.alert("a", 0), rx.alert("a", 2)]))
    assert changed.jobs["a"].delivery_key != d.jobs["a"].delivery_key
    resolved = parse(rx.payload([rx.alert("a", 0, status="resolved")], status="resolved"))
    assert not resolved.jobs["a"].firing
    for bad in (b"", b"[]", b'{"version": "3", "alerts": []}', b'{"alerts": "x"}'):
        with pytest.raises(PayloadError):
            parse(bad)


def _notice(job: str, *ranks: int, status: str = "firing"):  # type: ignore[no-untyped-def]
    return parse(rx.payload([rx.alert(job, r, status=status) for r in ranks],
                            status=status)).jobs[job]


def test_queue_coalesces_dedups_and_survives_a_restart(tmp_path: Path) -> None:
    q = WorkQueue(tmp_path, max_jobs=2, min_interval_s=60)
    assert q.offer(_notice("a", 0)) == "queued"
    assert q.offer(_notice("a", 0)) == "duplicate"
    assert q.offer(_notice("a", 0, 1)) == "coalesced"
    assert q.offer(_notice("b", 0)) == "queued"
    assert q.offer(_notice("c", 0)) == "full"  # bounded: the third job waits for a retry
    on_disk = json.loads((tmp_path / "queue" / "a.json").read_text())
    assert on_disk["generation"] == 2 and on_disk["ranks"] == ["0", "1"]
    again = WorkQueue(tmp_path, max_jobs=2, min_interval_s=60)  # a restart reads it back
    assert again.depth() == 2
    taken = again.take(timeout=1)
    assert taken is not None and taken.job_id == "a"
    other = again.take(timeout=1)
    assert other is not None and other.job_id == "b"
    assert again.take(timeout=0.2) is None  # never two runs of one job
    assert again.offer(_notice("a", 0, 1, 2)) == "coalesced"  # arrives during the run
    started = time.time_ns()
    again.done(taken, started)
    assert (tmp_path / "queue" / "a.json").exists()  # news during the run: runs again …
    assert again.take(timeout=0.2) is None  # … but not before --min-interval
    again.done(other, started)
    assert not (tmp_path / "queue" / "b.json").exists()
    assert again.offer(_notice("b", 0)) == "duplicate"  # a retry after its run
    assert again.offer(_notice("a", 0, status="resolved")) == "coalesced"
    final = again.take(timeout=1)  # resolved: the final analysis at once
    assert final is not None and final.job_id == "a" and not final.firing


def test_take_wakes_on_offer(tmp_path: Path) -> None:
    q = WorkQueue(tmp_path, max_jobs=10, min_interval_s=1)
    got: list[str] = []
    t = threading.Thread(target=lambda: got.append(getattr(q.take(timeout=10), "job_id", "")))
    t.start()
    time.sleep(0.2)
    q.offer(_notice("x", 0))
    t.join(5)
    assert got == ["x"]
    q.close()
    assert q.take(timeout=1) is None and q.offer(_notice("y", 0)) == "full"
