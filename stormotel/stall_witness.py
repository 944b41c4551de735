"""The tracker's side of a stall: a stack snapshot when the rank stops making progress.

:mod:`stormotel.stall_watch` is the watch itself (re-armed on each step/mark; the sampling
thread writes the snapshot with the GIL, the interpreter's C-level watchdog a grace later when
another thread holds the GIL). This is what a tracker does
with it: one watch per tracking session, written where the archive is, headed with the rank's
identity and torchrun's restart count; progress from ``step()``/``mark()``; and each snapshot
turned into a count, an edge (gauge and span event) and a Flight Recorder dump of the same
moment where the recorder is on. A watch that fails is switched off, never raised into the
training loop.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from stormotel import schema
from stormotel.fr_dump import dump_in_background
from stormotel.identity import Identity
from stormotel.samplers.base import span_memory
from stormotel.stall_watch import StallSettings, StallSnapshot, StallWatch
from stormotel.telemetry import TrackerState
from stormotel.warn_once import WarnOnce

__all__ = ["StallWitness"]

log = logging.getLogger("stormotel.tracker")

#: ``edge(event, timestamp_ns, attributes)``: the tracker's zero-length span with one event.
EdgeEmitter = Callable[[str, int, dict[str, Any]], None]


class StallWitness:
    """One rank's stall watch across tracking sessions (``watch`` is None when off)."""

    def __init__(self, config: StallSettings, identity: Identity, state: TrackerState,
                 env: Mapping[str, str], warn: WarnOnce, poll_interval_s: float) -> None:
        self.config = config
        self._poll_interval_s = poll_interval_s  # the sampling thread's: sets the C grace
        self._identity = identity
        self._state = state
        self._env = env
        self._warn = warn
        self.watch: StallWatch | None = None

    def start(self, edge: EdgeEmitter) -> None:
        """A fresh watch for a tracking session, when snapshots are on; its snapshots reach
        the session's spans through ``edge`` (held by the watch, dropped with it)."""
        cfg = self.config
        if not cfg.enabled:
            self.watch = None
            return
        header = {**self._identity.labels(), "rank": self._identity.rank}
        # which incarnation of the job (torchrun restarts it under the same job id): the
        # analyzer never judges an earlier incarnation's snapshots with the latest one's
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "")
        if restart.isdigit() and len(restart) < 10:
            header["restart_count"] = int(restart)
        self.watch = StallWatch(cfg.directory, header, multiple=cfg.multiple,
                                floor_s=cfg.floor_s, poll_interval_s=self._poll_interval_s,
                                on_snapshot=functools.partial(self._on_snapshot, edge))

    def progress(self, step: int | None = None, mark: str | None = None) -> None:
        """A step or mark began: the watch re-arms; a stalled rank is no longer stalled."""
        stall = self.watch
        if stall is not None:
            try:
                stall.progress(step, mark)
            except Exception as e:  # the training loop must never see the watch fail
                self.watch = None
                with contextlib.suppress(Exception):
                    stall.close()
                self._warn("stall", "stormotel: stack snapshots disabled (%s: %s)",
                           type(e).__name__, e)
                return
            if self._state.stalled:
                self._state.stalled = False

    def poll(self) -> None:
        """From the sampling thread: write a due snapshot (or finish the watchdog's)."""
        if self.watch is not None:
            self.watch.poll()

    def pause(self) -> None:
        """An exception is leaving a step/mark: no snapshot for the wait that follows."""
        if self.watch is not None:
            self.watch.pause()

    def close(self, *, progressed: bool = False) -> None:
        """The session ends: the watch stops (``progressed``: a deliberate stop, see
        :meth:`StallWatch.close`)."""
        stall, self.watch = self.watch, None
        if stall is not None:
            stall.close(progressed=progressed)

    def forget_after_fork(self) -> None:
        """In a forked child: the C watchdog thread is the parent's."""
        if self.watch is not None:
            self.watch.forget_after_fork()
            self.watch = None

    def _on_snapshot(self, edge: EdgeEmitter, snap: StallSnapshot) -> None:
        """A snapshot was taken: count it, an edge (gauge and span event), and the Flight
        Recorder's view of the same moment where the recorder is on."""
        state = self._state
        with state.lock:
            state.stall_snapshots += 1
            state.stalled = True
        state.record_edge(schema.EDGE_STALL, snap.timestamp_ns, span_memory(state.latest) or 0)
        rank = self._identity.rank
        fr_dir = snap.path.parent.parent / schema.FR_DUMPS_DIR
        fr_asked = dump_in_background(fr_dir, rank, self._env) is not None
        attrs: dict[str, Any] = {schema.EVENT_ATTR_STACK_PATH: str(snap.path),
                                 schema.EVENT_ATTR_SINCE_PROGRESS: snap.since_progress_s,
                                 schema.EVENT_ATTR_DEADLINE: round(
                                     self.watch.deadline_s if self.watch else 0.0, 3)}
        if fr_asked:  # written when torch answers (gloo: once the collective completes)
            attrs[schema.EVENT_ATTR_DUMP_PATH] = str(fr_dir / f"nccl_trace_rank_{rank}")
        with contextlib.suppress(Exception):
            edge(schema.EVENT_STALL, snap.timestamp_ns, attrs)
        log.warning("stormotel: rank %s made no progress for %.0f s: stack snapshot %s",
                    rank, snap.since_progress_s, snap.path)
