"""The durable per-job work queue: a 2xx to Alertmanager means the work is on disk.

One file per job under ``OUT/queue`` holds what the job's next run must cover: whether any of
its alerts still fires, the alerts and ranks that paged, the delivery keys it has absorbed, and
a generation that grows with every notification. Notifications for a job that is already
queued or being analysed **coalesce** into that file (a storm of 1,000 alerts from 200 jobs is
200 files, never 1,000 runs). A file is written beside its final name, flushed and renamed
(:func:`~stormotel.analyzers.serve.store.write_atomic`) before the webhook answers, and removed
only after the run it asked for finished, so SIGKILL at any moment loses nothing: a restart
reads the folder back and runs what is there.

Idempotence: a delivery whose key the job's pending work (or its last run, within
``min_interval``) already holds changes nothing — a retry or an early ``repeat_interval`` never
starts a second run or writes a second annotation. A changed group, or one still firing after
``min_interval``, is news: it queues a re-analysis no sooner than ``min_interval`` after the
previous run started. A resolved group queues the final analysis at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from stormotel.analyzers.serve.store import fsync_dir, write_atomic
from stormotel.analyzers.serve.webhook import JobNotice
from stormotel.analyzers.sinks.outputs import safe_job_id

#: Delivery keys remembered per job (a group rarely changes more often than this per run).
MAX_KEYS = 64

Accepted = Literal["queued", "coalesced", "duplicate", "full"]


@dataclass
class Pending:
    """One job's queued work, as its file holds it."""

    job_id: str
    generation: int = 0
    firing: bool = True
    alertnames: list[str] = field(default_factory=list)
    ranks: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    first_queued_ns: int = 0
    #: Not to be run before this (ns since the epoch): ``min_interval`` after the last run.
    not_before_ns: int = 0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Pending:
        return cls(job_id=str(d["job_id"]), generation=int(d.get("generation", 0)),
                   firing=bool(d.get("firing", True)),
                   alertnames=[str(x) for x in d.get("alertnames", [])][:MAX_KEYS],
                   ranks=[str(x) for x in d.get("ranks", [])][:MAX_KEYS],
                   keys=[str(x) for x in d.get("keys", [])][-MAX_KEYS:],
                   first_queued_ns=int(d.get("first_queued_ns", 0)),
                   not_before_ns=int(d.get("not_before_ns", 0)))


@dataclass
class LastRun:
    """What the job's last run absorbed (kept in memory; rebuilt from ``meta.json``)."""

    started_ns: int
    keys: frozenset[str]


class WorkQueue:
    """The queue folder and its in-memory mirror; every method is thread-safe."""

    def __init__(self, out: Path, *, max_jobs: int, min_interval_s: float) -> None:
        self.dir = out / "queue"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.max_jobs = max_jobs
        self.min_interval_ns = int(min_interval_s * 1e9)
        self._cond = threading.Condition()
        self._pending: dict[str, Pending] = {}
        self._inflight: dict[str, int] = {}  # job → the generation its run took
        self._last: dict[str, LastRun] = {}
        self.closed = False
        #: Files that could not be read back at start-up (counted, left for a person).
        self.unreadable = 0
        self._load()

    # --- start-up ---------------------------------------------------------------------------
    def _load(self) -> None:
        for path in sorted(self.dir.glob("*.json")):
            try:
                p = Pending.from_dict(json.loads(path.read_bytes()))
            except (OSError, ValueError, KeyError, TypeError):
                self.unreadable += 1
                with contextlib.suppress(OSError):
                    path.rename(path.with_suffix(".unreadable"))
                continue
            self._pending[p.job_id] = p
        for tmp in self.dir.glob(".*.tmp"):  # a write cut by SIGKILL: never renamed, never 2xx
            with contextlib.suppress(OSError):
                tmp.unlink()

    def remember_run(self, job_id: str, started_ns: int, keys: list[str]) -> None:
        """What an earlier run (read from its ``meta.json``) absorbed, for idempotence."""
        with self._cond:
            self._last[job_id] = LastRun(started_ns, frozenset(keys))

    # --- the webhook side -------------------------------------------------------------------
    def offer(self, notice: JobNotice, now_ns: int | None = None) -> Accepted:
        """Queue (or coalesce) ``notice``; returns what happened. The file is on disk when this
        returns ``queued`` or ``coalesced``; ``full`` means nothing was written (answer 503)."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        with self._cond:
            if self.closed:
                return "full"
            key = notice.delivery_key
            pending = self._pending.get(notice.job_id)
            last = self._last.get(notice.job_id)
            if pending is not None and key in pending.keys:
                return "duplicate"
            recent = last is not None and now_ns - last.started_ns < self.min_interval_ns
            if pending is None and last is not None and key in last.keys and (
                    recent or notice.job_id in self._inflight):
                return "duplicate"
            if pending is None and len(self._pending) >= self.max_jobs:
                return "full"
            state: Accepted = "coalesced" if pending is not None else "queued"
            p = pending or Pending(notice.job_id, first_queued_ns=now_ns)
            p = Pending(**asdict(p))  # changed only once it is on disk
            p.generation += 1
            p.firing = notice.firing  # the latest delivery is the group's current state
            p.alertnames = _merged(p.alertnames, notice.alertnames)
            p.ranks = _merged(p.ranks, notice.ranks)
            p.keys = [*p.keys, key][-MAX_KEYS:]
            if not notice.firing:
                p.not_before_ns = now_ns  # the final analysis: at once
            elif last is not None:
                p.not_before_ns = max(p.not_before_ns, last.started_ns + self.min_interval_ns)
            self._write(p)
            self._pending[p.job_id] = p
            self._cond.notify_all()
            return state

    def _write(self, p: Pending) -> None:
        write_atomic(self._path(p.job_id), json.dumps(asdict(p), sort_keys=True).encode())

    def _path(self, job_id: str) -> Path:
        return self.dir / f"{safe_job_id(job_id)}.json"

    # --- the worker side --------------------------------------------------------------------
    def take(self, timeout: float) -> Pending | None:
        """The oldest ready job not being analysed, marked in flight; None after ``timeout``
        seconds without one, or once closed."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self.closed:
                now_ns = time.time_ns()
                ready = [p for j, p in self._pending.items()
                         if j not in self._inflight and p.not_before_ns <= now_ns]
                if ready:
                    p = min(ready, key=lambda q: (q.not_before_ns, q.first_queued_ns))
                    self._inflight[p.job_id] = p.generation
                    return Pending(**asdict(p))
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                waits = [p.not_before_ns for j, p in self._pending.items()
                         if j not in self._inflight]
                wake = min(waits, default=now_ns + int(left * 1e9))
                self._cond.wait(min(left, max(0.01, (wake - now_ns) / 1e9)))
            return None

    def done(self, taken: Pending, started_ns: int) -> None:
        """The run of ``taken`` finished: its file goes unless a notification arrived during the
        run (then the job runs again, ``min_interval`` after this run started; at once when the
        group has resolved since)."""
        with self._cond:
            self._inflight.pop(taken.job_id, None)
            keys = frozenset(taken.keys)
            self._last[taken.job_id] = LastRun(started_ns, keys)
            current = self._pending.get(taken.job_id)
            if current is None:
                return
            if current.generation == taken.generation:
                del self._pending[taken.job_id]
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._path(taken.job_id))
                fsync_dir(self.dir)
            else:
                current.not_before_ns = (time.time_ns() if not current.firing
                                         else started_ns + self.min_interval_ns)
                self._write(current)
            self._cond.notify_all()

    def release(self, taken: Pending) -> None:
        """The run of ``taken`` did not happen (shutdown): it stays queued for the next start."""
        with self._cond:
            self._inflight.pop(taken.job_id, None)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    # --- figures ----------------------------------------------------------------------------
    def depth(self) -> int:
        with self._cond:
            return len(self._pending)

    def inflight(self) -> int:
        with self._cond:
            return len(self._inflight)


def _merged(old: list[str], new: list[str]) -> list[str]:
    return list(dict.fromkeys([*old, *new]))[:MAX_KEYS]
