"""Which of the discovered jobs this pod analyses, when N pods share a scheduled run (the
``--shard`` value itself, :class:`~stormotel.analyzers.options.Shard`, is parsed with the options).

``--shard I/N`` (or ``--shard N`` inside a Kubernetes Indexed Job, whose controller sets
``JOB_COMPLETION_INDEX`` in every pod) makes a pod take exactly the jobs whose stable hash
(the first 8 bytes of sha256 of the job id, modulo N) is I. The hash depends on nothing but
the job id, so for one N every job belongs to exactly one pod, whatever each pod discovered in
which order.

**Changing N between runs.** Any shard-keyed state (a watermark per shard, a state file per
shard) would make a job that moves to another shard either start over or be skipped. So state
is kept per *job*: one file per job beside the given path (:func:`job_state_file`) — in every
mode, sharded or not (:mod:`stormotel.analyzers.scheduled.state`), so switching between them
or running both at once reads and locks the same state — and the TSDB read-back was per job
already (:mod:`stormotel.analyzers.sources.written_window`). Whichever pod holds a job after N
changed continues from that job's own last window end: nothing is analysed twice, nothing is
missed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from stormotel.analyzers.options import Shard


def select(jobs: Iterable[str], shard: Shard | None) -> list[str]:
    """The jobs this shard owns, in the given order (all of them without sharding)."""
    return list(jobs) if shard is None else [j for j in jobs if shard.owns(j)]


def job_state_file(path: Path, job_id: str) -> Path:
    """The job's own state file beside ``path`` (``state.json`` → ``state.<hash>.json``): one
    file per job, so pods never contend for a lock and a job's state follows it to whichever
    shard holds it. The file itself names the job (its ``jobs`` key)."""
    tag = hashlib.sha256(job_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return path.with_name(f"{path.stem}.{tag}{path.suffix or '.json'}")
