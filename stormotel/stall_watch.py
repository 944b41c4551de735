"""A witness in every rank: stack snapshots of every thread when the rank stops making progress.

Two writers, the GIL first and C as the fallback. When a snapshot is due, the tracker's sampling
thread (which calls :meth:`StallWatch.poll` every sample, holding the GIL) writes it itself from
:func:`sys._current_frames`, in faulthandler's exact text format. A rank stuck in a collective,
in I/O or in a pure-Python loop lets the GIL go (a Python loop at every switch interval), so
the sampling thread runs and the snapshot is taken safely: the frames it reads cannot change
under it. :func:`faulthandler.dump_traceback_later` stays armed as the fallback, ``grace_s``
later: its C thread reads every thread's frames WITHOUT the GIL, which is right only when no
Python runs (a thread holds the GIL in C: a catastrophic regex, a C extension), and then the
sampling thread never gets the GIL and the C dump is the only snapshot there is. Reading frames
without the GIL while a thread runs Python is not safe (CPython 3.11's frames live in data-stack
chunks that are pushed, popped and freed): a rank spinning in Python died by SIGSEGV in the C
dump (1 in 3 runs of ``tokenizer_spin3``), which is why C is no longer the first writer.
``grace_s`` is max(:data:`MIN_GRACE_S`, :data:`GRACE_POLLS` x the sampling interval): the
sampling thread misses its due moment by that much only when it could not get the GIL (a poll
waits one interval at most; a slow sampler or a busy machine a few). The header says which
writer wrote the file (``"writer": "python"`` or ``"faulthandler"``) and ``timeout_s`` is that
writer's delay after ``armed_unix_ns``.

How it stays cheap: progress (``tracker.step()``/``mark()``) only appends a time; the timers
are re-armed (a new C thread each time) at most once per deadline, with a timeout of twice the
deadline. The Python snapshot therefore fires between one and two deadlines after the last
progress (at the first poll at or after that moment: up to a sampling interval later), never
earlier than one; the C fallback ``grace_s`` after that. A poll that is not due costs one clock
read and one comparison.

The deadline is the rank's own rhythm: ``multiple`` × the median interval between its recent
progress events, never below ``floor_s``. The watch arms only after it has seen
:data:`MIN_INTERVALS` intervals, so a job that never calls ``step()``/``mark()`` (and start-up,
before the first steps) never takes a snapshot.

Files (one per snapshot, in ``directory``): a pre-opened ``rank-R-PID-N.stack.pending`` whose
first line is a JSON header (rank, pid, thread ids, the rhythm, when it was armed, the writer);
the sampling thread writes the Python snapshot into it (or sees the C dump there), appends the
progress trailer, renames it to ``….stack.txt`` (atomic), counts it and emits a span event. A
rank that never gets the GIL back leaves the C dump in the ``.pending`` file: the analyzer reads
both. Both writers bound the dump alike (100 threads, 100 frames each, names cut at 500
characters); one difference: a thread with no Python frame at all (a C thread that once called
into Python) is listed by faulthandler as ``<no Python frame>`` and left out by the Python
writer (:func:`sys._current_frames` does not return it). :data:`MAX_SNAPSHOTS` bounds the files.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import logging
import math
import os
import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from stormotel import environment, schema

log = logging.getLogger("stormotel")

#: progress intervals seen before the watch arms (the rhythm needs a few steps to be known)
MIN_INTERVALS = 3
#: intervals kept for the median
RHYTHM_WINDOW = 64
#: snapshots one process writes at most (each stall episode takes a few, with a growing delay)
MAX_SNAPSHOTS = 20
#: snapshots in one stall episode (no progress in between): at 1, 2 and 4 deadlines
MAX_PER_EPISODE = 3
#: marks of one step remembered for the progress trailer (a step's collectives, in order)
MAX_MARKS_PER_STEP = 32
#: longest mark name kept in the trailer
MAX_MARK_CHARS = 128
DEFAULT_MULTIPLE = 20.0
DEFAULT_FLOOR_S = 20.0
#: the largest multiple of the median step interval a deadline may be
MAX_MULTIPLE = 10_000.0
#: the longest deadline (a day): the C timer is armed with twice it, times 4 in an episode
MAX_DEADLINE_S = environment.MAX_SECONDS
#: the C fallback fires this long after the Python snapshot was due, at least (seconds) ...
MIN_GRACE_S = 2.0
#: ... or this many sampling intervals, when longer
GRACE_POLLS = 4
#: the sampling interval assumed when the tracker does not say (its default)
DEFAULT_POLL_INTERVAL_S = 0.1
#: CPython's limits in Python/traceback.c (3.11): threads and frames dumped, name characters
MAX_DUMP_THREADS = 100
MAX_DUMP_FRAMES = 100
MAX_DUMP_CHARS = 500
#: the header's ``writer``: who wrote the traceback
WRITER_PYTHON = "python"
WRITER_C = "faulthandler"


@dataclass(frozen=True)
class StallSettings:
    """The stall watch as resolved: arguments, then the environment, then the defaults."""

    enabled: bool
    multiple: float
    floor_s: float
    directory: Path


def stall_settings(env: Mapping[str, str], enabled: bool | None, multiple: float | None,
                 floor_s: float | None, directory: str | os.PathLike[str] | None,
                 default_directory: Path) -> StallSettings:
    """Arguments first (out of range: a one-line ``ValueError``), then ``STORMOTEL_STALL_*``
    variables (out of range: a warning and the default), then the defaults (on). Both numbers
    are bounded so the deadline they make can never overflow the C timer inside ``step()``."""
    def number(value: float | None, var: str, default: float, low: float, high: float) -> float:
        if value is None:
            return environment.env_number(env, var, default, low, high, low_open=True)
        try:
            out = float(value)
        except (TypeError, ValueError):
            out = math.nan
        if isinstance(value, bool) or not low < out <= high:
            raise ValueError(f"{var}: {value!r} must be a number in ({low:g}, {high:g}]")
        return out

    if enabled is None:
        enabled = environment.env_flag(env, environment.STALL_SNAPSHOTS, True)
    return StallSettings(bool(enabled),
                       number(multiple, environment.STALL_MULTIPLE, DEFAULT_MULTIPLE, 0.0,
                              MAX_MULTIPLE),
                       number(floor_s, environment.STALL_FLOOR_S, DEFAULT_FLOOR_S, 0.0,
                              MAX_DEADLINE_S),
                       Path(directory) if directory is not None else default_directory)


@dataclass(frozen=True)
class StallSnapshot:
    """A snapshot the sampling thread wrote, or the C watchdog wrote and the tracker has seen."""

    path: Path
    since_progress_s: float
    timestamp_ns: int
    writer: str = WRITER_C


class StallWatch:
    """Arms the snapshot from the rank's progress: due for the sampling thread, and
    faulthandler's timer ``grace_s`` later; see the module docstring."""

    def __init__(self, directory: Path, header: dict[str, object], *,
                 multiple: float = DEFAULT_MULTIPLE, floor_s: float = DEFAULT_FLOOR_S,
                 on_snapshot: Callable[[StallSnapshot], None] | None = None,
                 poll_interval_s: float = DEFAULT_POLL_INTERVAL_S) -> None:
        if not (0 < multiple <= MAX_MULTIPLE and 0 < floor_s <= MAX_DEADLINE_S):
            raise ValueError(f"stall multiple={multiple!r} and floor={floor_s!r} must be > 0")
        if not 0 < poll_interval_s <= MAX_DEADLINE_S:
            raise ValueError(f"stall poll interval {poll_interval_s!r} must be > 0")
        self.grace_s = max(MIN_GRACE_S, GRACE_POLLS * float(poll_interval_s))
        self.directory = Path(directory)
        self.header = dict(header)
        self.multiple = float(multiple)
        self.floor_s = float(floor_s)
        self.on_snapshot = on_snapshot
        self._intervals: deque[float] = deque(maxlen=RHYTHM_WINDOW)
        self._last: float | None = None
        self._last_wall_ns = 0
        self._training_thread: int | None = None  # the thread that calls step()/mark()
        # where the rank is in its program, for the trailer: the step, the marks entered in
        # it so far, and the previous step's marks (the order every step follows)
        self._step: int | None = None
        self._marks: list[str] = []
        self._prev_marks: tuple[str, ...] | None = None
        self._progress_count = 0
        self._armed_at: float | None = None
        self._due_at: float | None = None  # when the sampling thread writes the snapshot
        self._due_timeout_s = 0.0  # the Python writer's delay after the arming
        self._deadline_s = self.floor_s
        self._fd: int | None = None
        self._pending: Path | None = None
        self._header_len = 0
        self._armed_unix_ns: int | None = None  # the header's, kept by the Python writer
        self._written = 0
        self._episode = 0  # snapshots in the current episode
        self._lock = threading.Lock()
        self._closed = False
        self.snapshots: list[StallSnapshot] = []

    @property
    def deadline_s(self) -> float:
        return self._deadline_s

    @property
    def stalled(self) -> bool:
        return self._episode > 0

    # -- the training thread ----------------------------------------------------------------
    def progress(self, step: int | None = None, mark: str | None = None) -> None:
        """A step (``step``) or mark (``mark``) began: the rank is making progress. Costs a
        clock read and two appends, plus a re-arm at most once per deadline. The step and the
        marks say where in its program the rank is: a rank that entered a later mark of the
        step than its peers, without the marks before it, skipped a collective."""
        now = time.monotonic()
        self._progress_count += 1
        if mark is not None:
            if len(self._marks) < MAX_MARKS_PER_STEP:
                self._marks.append(mark[:MAX_MARK_CHARS])
        elif step is not None:
            if self._step is not None:
                self._prev_marks = tuple(self._marks)
            self._step, self._marks = step, []
        last, self._last = self._last, now
        if last is not None:
            self._intervals.append(now - last)
        self._last_wall_ns = time.time_ns()
        self._training_thread = threading.get_ident()
        if self._episode:
            self._episode = 0
        if self._closed or len(self._intervals) < MIN_INTERVALS:
            return
        armed = self._armed_at
        if armed is None or now - armed > self._deadline_s:
            self._arm(now)

    def _arm(self, now: float) -> None:
        with self._lock:
            # a dump that fired just before this progress is a real (ended) stall: keep it
            snap = self._finalize_locked()
            self._arm_locked(now)
        if snap is not None and self.on_snapshot is not None:
            self.on_snapshot(snap)

    def _arm_locked(self, now: float) -> None:
        if self._closed or self._written >= MAX_SNAPSHOTS:
            return
        self._deadline_s = min(MAX_DEADLINE_S, max(
            self.floor_s, self.multiple * statistics.median(self._intervals)))
        try:
            faulthandler.cancel_dump_traceback_later()  # before the header is rewritten
            fd = self._fd if self._fd is not None else self._open_pending()
            self._arm_timers(fd, 2 * self._deadline_s, now)
        except (OSError, ValueError, RuntimeError, OverflowError) as e:
            log.warning("stormotel: stack snapshots disabled (%s: %s)", type(e).__name__, e)
            self._closed = True
            self._discard_pending()
            return

    def _arm_timers(self, fd: int, timeout_s: float, now: float) -> None:
        """The snapshot is due for the sampling thread ``timeout_s`` from ``now``; the C
        fallback fires ``grace_s`` later (its header written now, as the C dump keeps it)."""
        c_timeout = timeout_s + self.grace_s
        self._write_header(timeout_s=c_timeout)
        faulthandler.dump_traceback_later(c_timeout, repeat=False, file=fd, exit=False)
        self._armed_at = now
        self._due_timeout_s = timeout_s
        self._due_at = now + timeout_s

    def _open_pending(self) -> int:
        self.directory.mkdir(parents=True, exist_ok=True)
        name = (f"{schema.ARCHIVE_RANK_PREFIX}{self.header.get('rank', 'x')}-{os.getpid()}-"
                f"{self._written + 1}{schema.STACK_PENDING_SUFFIX}")
        self._pending = self.directory / name
        self._fd = os.open(self._pending, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        return self._fd

    def _write_header(self, timeout_s: float, writer: str = WRITER_C,
                      armed_unix_ns: int | None = None) -> None:
        assert self._fd is not None
        if armed_unix_ns is None:
            armed_unix_ns = self._armed_unix_ns = time.time_ns()
        head = {**self.header, "pid": os.getpid(), "writer": writer,
                "grace_s": round(self.grace_s, 3),
                "main_thread": threading.main_thread().ident,
                "training_thread": self._training_thread,
                "deadline_s": round(self._deadline_s, 3), "timeout_s": round(timeout_s, 3),
                "median_interval_s": round(statistics.median(self._intervals), 6)
                if self._intervals else None,
                "armed_unix_ns": armed_unix_ns,
                "last_progress_unix_ns": self._last_wall_ns}
        line = (schema.STACK_HEADER_PREFIX + json.dumps(head, sort_keys=True) + "\n").encode()
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        os.write(self._fd, line)
        self._header_len = len(line)

    def pause(self) -> None:
        """An exception left a step or mark: the rank is failing or handling it, not stuck in
        its rhythm. Cancel the timer (its teardown must not pass for a hang); the next progress
        arms it again."""
        with self._lock:
            if self._armed_at is None or self._closed:
                return
            faulthandler.cancel_dump_traceback_later()
            self._armed_at = self._due_at = None

    # -- the sampling thread ----------------------------------------------------------------
    def poll(self) -> StallSnapshot | None:
        """Called by the sampling thread (holding the GIL): when a snapshot is due, write it
        from :func:`sys._current_frames` — or finalize the C dump, if the sampling thread came
        too late and the fallback fired — and arm the next one of the episode (later each
        time). Not due: one clock read and one comparison."""
        due = self._due_at
        if due is None or time.monotonic() < due:
            return None
        with self._lock:
            snap = None
            if self._due_at is not None and self._fd is not None and not self._closed:
                snap = self._snapshot_locked()
            if snap is not None and not self._closed:
                self._arm_next_locked()
        if snap is not None and self.on_snapshot is not None:
            self.on_snapshot(snap)
        return snap

    def _snapshot_locked(self) -> StallSnapshot | None:
        """The due snapshot: the C timer cancelled first (cancelling waits for a dump under
        way), then the C dump if it fired, else this thread's own."""
        fd = self._fd
        assert fd is not None
        if self._last is not None and time.monotonic() - self._last < self._deadline_s:
            # the rank progressed since the arming, too late for this arming to cover it: its
            # re-arming waits for this lock (a snapshot now would show it there). No stall.
            return None
        faulthandler.cancel_dump_traceback_later()
        try:
            fired = os.fstat(fd).st_size > self._header_len
            if not fired:
                self._write_header(timeout_s=self._due_timeout_s, writer=WRITER_PYTHON,
                                   armed_unix_ns=self._armed_unix_ns)
                os.write(fd, format_threads(sys._current_frames(), threading.get_ident(),
                                            self._due_timeout_s).encode("ascii"))
        except (OSError, ValueError) as e:
            log.debug("stormotel: stack snapshot not written: %s", e)
            self._discard_pending()
            return None
        return self._finalize_locked(WRITER_C if fired else WRITER_PYTHON)

    def _finalize_locked(self, writer: str = WRITER_C) -> StallSnapshot | None:
        fd, pending = self._fd, self._pending
        if fd is None or pending is None:
            return None
        try:
            if os.fstat(fd).st_size <= self._header_len:
                return None
        except OSError:
            return None
        # The C watchdog may still be writing (the file grows as it goes): cancelling waits
        # for its dump to end. Closing first would let its last writes land in whatever file
        # reuses the descriptor number — the next snapshot's, seen once.
        faulthandler.cancel_dump_traceback_later()
        self._write_trailer(fd)
        self._fd = self._pending = None
        with contextlib.suppress(OSError):
            os.close(fd)
        final = pending.with_name(pending.name[:-len(schema.STACK_PENDING_SUFFIX)]
                                  + schema.STACK_SUFFIX)
        try:
            os.replace(pending, final)
        except OSError:
            final = pending
        self._written += 1
        self._episode += 1
        self._armed_at = self._due_at = None
        since = 0.0 if self._last is None else time.monotonic() - self._last
        snap = StallSnapshot(final, round(since, 3), time.time_ns(), writer)
        self.snapshots.append(snap)
        return snap

    def _write_trailer(self, fd: int) -> None:
        """Where the rank was in its program when the dump was seen (the sampling thread runs:
        the rank waits with the GIL free): its step, the marks it entered in that step and the
        previous step's marks. ``last_progress_unix_ns`` says whether the rank moved on
        since the dump (then the trailer describes a later moment, and the analyzer knows)."""
        tail = {"step": self._step, "marks": list(self._marks),
                "previous_step_marks": None if self._prev_marks is None
                else list(self._prev_marks),
                "progress_count": self._progress_count,
                "last_progress_unix_ns": self._last_wall_ns, "written_unix_ns": time.time_ns()}
        line = "\n" + schema.STACK_TRAILER_PREFIX + json.dumps(tail, sort_keys=True) + "\n"
        with contextlib.suppress(OSError, ValueError):
            os.lseek(fd, 0, os.SEEK_END)
            os.write(fd, line.encode())

    def _arm_next_locked(self) -> None:
        """The next snapshot of this episode, if any: at 2x, 4x ... the deadline."""
        if self._episode >= MAX_PER_EPISODE or self._written >= MAX_SNAPSHOTS:
            return
        try:
            fd = self._open_pending()
            self._arm_timers(fd, self._deadline_s * (2 ** self._episode), time.monotonic())
        except (OSError, ValueError, RuntimeError, OverflowError) as e:
            log.debug("stormotel: next stack snapshot not armed: %s", e)
            self._discard_pending()

    def close(self, *, progressed: bool = False) -> None:
        """Cancel the timer; keep a dump that fired just before the stop, remove an unfired
        pending file (the tracker is stopping).

        ``progressed``: the stop is a deliberate one (``stop_tracking()`` or the interpreter's
        normal exit, not SIGTERM or an uncaught exception). Called from the training thread,
        it is that thread's progress: it returned from whatever a snapshot caught it in (the
        last step's collective, waiting for a slow peer), so a snapshot before it was a stall
        the rank got over — the ``.stack.progress`` file says so, as a later step would have.
        Without it, a rank whose last step waited past the deadline left snapshots that read
        as a hang of a job that ended well."""
        with self._lock:
            if self._closed and self._fd is None:
                return
            self._closed = True
            self._due_at = None  # no Python snapshot after the stop either
            faulthandler.cancel_dump_traceback_later()
            snap = self._finalize_locked()
            if progressed and self._written and self._training_thread == threading.get_ident():
                self._last_wall_ns = time.time_ns()
                self._episode = 0
                if self._fd is None:  # the episode's last snapshot armed no next file
                    with contextlib.suppress(OSError):
                        self._open_pending()
            if self._written and not self._episode:
                self._keep_progress_header()
            else:
                self._discard_pending()
        if snap is not None and self.on_snapshot is not None:
            self.on_snapshot(snap)

    def forget_after_fork(self) -> None:
        """In a forked child (a data-loader worker): the timer belongs to the parent; close the
        inherited descriptor and never touch the parent's pending file."""
        fd, self._fd, self._pending = self._fd, None, None
        self._closed = True
        _close_quietly(fd)

    def _keep_progress_header(self) -> None:
        """After a stall this process got over, leave the unfired file (its header only): its
        ``last_progress_unix_ns`` tells the analyzer the earlier snapshot was not the end."""
        fd, pending = self._fd, self._pending
        if fd is not None:  # its header as of now: the progress since its arming included
            with contextlib.suppress(OSError):
                self._write_header(timeout_s=2 * self._deadline_s)
        self._fd = self._pending = None
        _close_quietly(fd)
        if pending is not None:
            with contextlib.suppress(OSError):
                os.replace(pending, pending.with_name(
                    pending.name[:-len(schema.STACK_PENDING_SUFFIX)]
                    + schema.STACK_PROGRESS_SUFFIX))

    def _discard_pending(self) -> None:
        fd, pending = self._fd, self._pending
        self._fd = self._pending = None
        self._due_at = None
        _close_quietly(fd)
        if pending is not None:
            with contextlib.suppress(OSError):
                pending.unlink()


def format_threads(frames: Mapping[int, FrameType], current: int | None,
                   timeout_s: float | None = None) -> str:
    """Every thread's traceback as faulthandler writes it (CPython 3.11's
    ``_Py_DumpTracebackThreads``, ``dump_traceback``, ``dump_frame`` and ``_Py_DumpASCII`` in
    Python/traceback.c; ``timeout_s``: ``dump_traceback_later``'s "Timeout" line first), so the
    analyzer reads either writer's file alike. ``frames``: :func:`sys._current_frames`, whose
    order is the interpreter's thread list, newest first, as faulthandler walks it;
    ``current``: the thread writing (faulthandler's "Current thread")."""
    out = [] if timeout_s is None else [_timeout_line(timeout_s)]
    for n, (ident, frame) in enumerate(frames.items()):
        if n:
            out.append("\n")
        if n >= MAX_DUMP_THREADS:
            out.append("...\n")
            break
        out.append(f"{'Current thread' if ident == current else 'Thread'} 0x{ident:016x}"
                   " (most recent call first):\n")
        f: FrameType | None = frame
        depth = 0
        while f is not None:
            if depth >= MAX_DUMP_FRAMES:
                out.append("  ...\n")
                break
            code = f.f_code
            line = f.f_lineno
            out.append(f'  File "{_ascii(code.co_filename)}", line '
                       f'{"???" if line is None or line < 0 else line} in '
                       f"{_ascii(code.co_name)}\n")
            f = f.f_back
            depth += 1
    return "".join(out)


def _ascii(text: str) -> str:
    """``_Py_DumpASCII``: printable ASCII as is, the rest as ``\\xHH``/``\\uHHHH``/
    ``\\UHHHHHHHH`` (lower-case hex), cut at :data:`MAX_DUMP_CHARS` characters with "..."."""
    cut = text[:MAX_DUMP_CHARS]
    if not (cut.isascii() and cut.isprintable()):
        cut = "".join(c if " " <= c <= "~" else
                      f"\\x{ord(c):02x}" if ord(c) <= 0xFF else
                      f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"
                      for c in cut)
    return cut + "..." if len(text) > MAX_DUMP_CHARS else cut


def _timeout_line(timeout_s: float) -> str:
    """faulthandler's ``format_timeout``: the delay in microseconds, rounded up as
    ``dump_traceback_later`` rounds it (``_PyTime_ROUND_TIMEOUT``)."""
    us = -(-math.ceil(timeout_s * 1e9) // 1000)
    sec, us = divmod(us, 1_000_000)
    minutes, sec = divmod(sec, 60)
    hours, minutes = divmod(minutes, 60)
    frac = f".{us:06d}" if us else ""
    return f"Timeout ({hours}:{minutes:02d}:{sec:02d}{frac})!\n"


def _close_quietly(fd: int | None) -> None:
    """Close a snapshot file's descriptor, if any; a failing close loses nothing more."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
