"""Which of the discovered jobs this pod analyses, when N pods share a scheduled run.

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
already (:mod:`stormotel.analyzers.scheduled.tsdb_state`). Whichever pod holds a job after N
changed continues from that job's own last window end: nothing is analysed twice, nothing is
missed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

#: Set by Kubernetes in every pod of an Indexed Job (completionMode: Indexed).
ENV_COMPLETION_INDEX = "JOB_COMPLETION_INDEX"
#: More shards than this is a typo, not a cluster.
MAX_SHARDS = 10_000


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0-based)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, job_id: str) -> bool:
        return shard_of(job_id, self.count) == self.index


@dataclass(frozen=True)
class ShardSpec:
    """``--shard`` as given: the index is None when it comes from ``JOB_COMPLETION_INDEX``."""

    index: int | None
    count: int


def shard_of(job_id: str, count: int) -> int:
    """The job's shard among ``count``: stable across runs, hosts and Python versions."""
    digest = hashlib.sha256(job_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % count


def parse_shard(text: str) -> ShardSpec:
    """``I/N`` or ``N``; ValueError (argparse's usage error) with the reason otherwise."""
    index_text, sep, count_text = text.strip().rpartition("/")
    if not sep:
        index_text, count_text = "", text.strip()
    try:
        count = int(count_text)
        index = int(index_text) if sep else None
    except ValueError:
        raise ValueError(f"--shard {text!r}: expected I/N (e.g. 0/4) or N") from None
    if not 1 <= count <= MAX_SHARDS:
        raise ValueError(f"--shard {text!r}: N must be 1..{MAX_SHARDS}")
    if index is not None and not 0 <= index < count:
        raise ValueError(f"--shard {text!r}: I must be 0..{count - 1}")
    return ShardSpec(index, count)


def resolve(spec: ShardSpec, env: Mapping[str, str] | None = None) -> Shard:
    """The shard this pod runs: ``I`` as given, else ``JOB_COMPLETION_INDEX``; ValueError
    with the reason when neither gives an index in 0..N-1."""
    if spec.index is not None:
        return Shard(spec.index, spec.count)
    raw = (os.environ if env is None else env).get(ENV_COMPLETION_INDEX, "")
    if not raw.strip().isdigit():
        raise ValueError(f"--shard {spec.count} takes its index from ${ENV_COMPLETION_INDEX} "
                         "(set in a Kubernetes Indexed Job), which is "
                         f"{'not set' if not raw else repr(raw[:20]) + ', not an index'}; "
                         f"give --shard I/{spec.count} elsewhere")
    index = int(raw)
    if index >= spec.count:
        raise ValueError(f"${ENV_COMPLETION_INDEX}={index} is not below --shard {spec.count} "
                         "(the chart's shards and the Job's completions must agree)")
    return Shard(index, spec.count)


def select(jobs: Iterable[str], shard: Shard | None) -> list[str]:
    """The jobs this shard owns, in the given order (all of them without sharding)."""
    return list(jobs) if shard is None else [j for j in jobs if shard.owns(j)]


def job_state_file(path: Path, job_id: str) -> Path:
    """The job's own state file beside ``path`` (``state.json`` → ``state.<hash>.json``): one
    file per job, so pods never contend for a lock and a job's state follows it to whichever
    shard holds it. The file itself names the job (its ``jobs`` key)."""
    tag = hashlib.sha256(job_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return path.with_name(f"{path.stem}.{tag}{path.suffix or '.json'}")
