"""The state file: the last analysed window end and run counters per job, locked for the whole
run so overlapping cron runs cannot analyse a window twice, written atomically.

**One state per job, for every mode.** Whatever the mode — one ``--job-id``, the scheduled run
over every discovered job, or one shard of it — a job's state is its own file beside the given
path (``state.json`` → ``state.<hash>.json``, :func:`~stormotel.analyzers.scheduled.shard.
job_state_file`), locked on its own: switching between sharded and unsharded runs, or running
both at once, reads and locks the same state, so each window is analysed once. The given path
itself is the *legacy* combined file (what releases before 2026-11-28 wrote for unsharded
runs): read for a job whose own file does not exist yet (its entry is carried over), and held
with a shared lock for the run, so a run of an older release (which locks it exclusively)
and this one never overlap.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TextIO

import msgspec

from stormotel.atomic import write_atomic
from stormotel.errors import UsageError

STATE_SCHEMA = "stormotel.analyzer-state/v1"


#: Counters and times are int64, non-negative: a state file is input (edited by hand, written
#: by another version), and a string counter or a list of runs would fail every CronJob run.
_Int64 = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]


class StateError(UsageError):
    pass


class StateLocked(StateError):
    """Another run holds the job's state: it is analysing this job right now."""


def _read(path: Path) -> dict[str, Any] | None:
    """A state file's document, validated; None when there is none."""
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text() or "{}")
    except json.JSONDecodeError as e:
        raise StateError(f"state file {path} line {e.lineno}: not valid JSON "
                         f"({e.msg}); fix or delete it") from None
    except OSError as e:
        raise StateError(f"cannot read state file {path}: {e.strerror}") from None
    except RecursionError:
        raise StateError(f"state file {path} is nested too deeply") from None
    try:  # validated by the typed decoder; the dict itself is kept (unknown keys survive)
        typed = msgspec.convert(doc, _State)
    except msgspec.ValidationError as e:
        raise StateError(f"state file {path} is not a {STATE_SCHEMA} file ({e}); "
                         "fix or delete it") from None
    if typed.schema != STATE_SCHEMA:
        raise StateError(f"state file {path} is not a {STATE_SCHEMA} file")
    return doc  # type: ignore[no-any-return]


class _JobState(msgspec.Struct):
    """One job's entry; every field the run reads, typed (other keys are kept, unread)."""

    last_end_ns: _Int64 | None = None
    runs: dict[str, _Int64] = {}
    updated: str | None = None
    finished: str | None = None


class _State(msgspec.Struct):
    schema: str
    jobs: dict[str, _JobState]


class StateFile:
    """``{"schema", "jobs": {job_id: {"last_end_ns", "runs": {outcome: n}, "updated"}}}``.

    Held under an exclusive ``flock`` for the whole run so overlapping cron runs cannot analyse
    the same window twice; written atomically (temp file + rename).
    """

    def __init__(self, path: Path, legacy: Path | None = None) -> None:
        self.path = Path(path)
        #: the combined file of earlier releases (read when this job has no file of its own)
        self.legacy = None if legacy is None or Path(legacy) == self.path else Path(legacy)
        self.doc: dict[str, Any] = {"schema": STATE_SCHEMA, "jobs": {}}
        self._legacy_doc: dict[str, Any] = {"schema": STATE_SCHEMA, "jobs": {}}
        self._lock: TextIO | None = None

    @contextlib.contextmanager
    def locked(self) -> Iterator[StateFile]:
        """Held for the whole run: this file exclusively; the legacy file shared (an older
        release's run holds it exclusively: the two never overlap)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        held: list[TextIO] = []
        try:
            for path, mode in ((self.legacy, fcntl.LOCK_SH), (self.path, fcntl.LOCK_EX)):
                if path is None:
                    continue
                lock = open(path.with_name(path.name + ".lock"), "a+")  # noqa: SIM115
                try:
                    fcntl.flock(lock, mode | fcntl.LOCK_NB)
                except BlockingIOError:
                    lock.close()
                    raise StateLocked(f"state file {path} is locked by another run") from None
                held.append(lock)
            self._load()
            yield self
        finally:
            for held_lock in reversed(held):
                fcntl.flock(held_lock, fcntl.LOCK_UN)
                held_lock.close()

    def read(self) -> StateFile:
        """Load without locking (``--dry-run`` only looks)."""
        self._load()
        return self

    def _load(self) -> None:
        loaded = _read(self.path)
        if loaded is not None:
            self.doc = loaded
        if self.legacy is not None:
            legacy = _read(self.legacy)
            if legacy is not None:
                self._legacy_doc = legacy

    def _entry(self, job_id: str) -> dict[str, Any] | None:
        for doc in (self.doc, self._legacy_doc):
            jobs = doc.get("jobs")
            entry = jobs.get(job_id) if isinstance(jobs, dict) else None
            if isinstance(entry, dict):
                return entry
        return None

    def job(self, job_id: str) -> dict[str, Any]:
        jobs = self.doc["jobs"]
        if job_id not in jobs:  # carried over from the legacy file, else new
            jobs[job_id] = copy.deepcopy(self._entry(job_id)) or {"runs": {}}
        return jobs[job_id]  # type: ignore[no-any-return]

    def last_end_ns(self, job_id: str) -> int | None:
        job = self._entry(job_id)
        v = job.get("last_end_ns") if isinstance(job, dict) else None
        return int(v) if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None

    def save(self) -> None:
        write_atomic(self.path, json.dumps(self.doc, indent=2, sort_keys=True) + "\n",
                     make_parents=False)

    def runs(self, job_id: str) -> dict[str, int]:
        """The job's per-outcome run counters as they stand (a copy)."""
        return dict(self.job(job_id).setdefault("runs", {}))

    def count_run(self, job_id: str, outcome: str, replace: str | None = None
                  ) -> dict[str, int]:
        """Bump the per-outcome run counter (AN_RUNS, kept in the state file), taking one from
        ``replace`` (a run first counted as that); returns the counters."""
        runs: dict[str, int] = self.job(job_id).setdefault("runs", {})
        if replace and runs.get(replace):
            runs[replace] -= 1
        runs[outcome] = runs.get(outcome, 0) + 1
        return dict(runs)

    def mark_finished(self, job_id: str, when: str) -> None:
        """The job ended: its final window was analysed by an earlier run."""
        self.job(job_id)["finished"] = when

    def advance(self, job_id: str, end_ns: int, when: str) -> None:
        """The job's windows up to ``end_ns`` are analysed (the next run starts there)."""
        self.job(job_id)["last_end_ns"] = end_ns
        self.job(job_id)["updated"] = when
