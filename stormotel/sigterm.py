"""Flush on SIGTERM, then let the signal do what it did before.

Real launchers (torchrun, Slurm, Kubernetes) stop ranks with SIGTERM. The tracker's final state
(the last sample, the session span, the OOM or stop edge) must leave the process first; then
the handler that was there before runs, or — with the default disposition — the process dies of
the signal, exactly as it would have without the tracker. A handler set outside Python, or an
ignored SIGTERM, is left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["SigtermHandoff"]

log = logging.getLogger("stormotel.tracker")


class SigtermHandoff:
    """The SIGTERM handler of one tracker: ``flush()`` (which calls :meth:`restore`), then the
    previous handler or the default disposition. ``flush`` is held only while installed (as
    the signal table holds the handler): an idle tracker is not kept alive by it."""

    def __init__(self) -> None:
        self._flush: Callable[[], None] | None = None
        self._previous: Any = None
        self._installed = False

    def install(self, flush: Callable[[], None]) -> None:
        """Take SIGTERM over, from the main thread only (where Python runs handlers)."""
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            previous = signal.getsignal(signal.SIGTERM)
            if previous is signal.SIG_IGN or previous is None:  # ignored / set outside Python
                return
            signal.signal(signal.SIGTERM, self._on_sigterm)
        except (ValueError, OSError) as e:  # not the main interpreter, or no signals here
            log.debug("stormotel: cannot install a SIGTERM handler: %s", e)
            return
        self._previous = previous
        self._flush = flush
        self._installed = True

    def restore(self) -> None:
        """The previous handler back, unless someone replaced ours since."""
        if not self._installed:
            return
        self._installed = False
        self._flush = None
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                signal.signal(signal.SIGTERM, self._previous)

    def forget_after_fork(self) -> None:
        """In a forked child: the previous handler back (the parent's flush is not the child's)."""
        if self._installed:
            with contextlib.suppress(Exception):
                signal.signal(signal.SIGTERM, self._previous)
            self._installed = False
            self._flush = None

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        previous, flush = self._previous, self._flush
        try:
            if flush is not None:
                flush()  # restores the previous handler too
        except Exception as e:
            log.debug("stormotel: flush on SIGTERM failed: %s", e)
        if callable(previous):
            previous(signum, frame)
            return
        signal.signal(signum, signal.SIG_DFL)  # the default: die of the signal, as before
        os.kill(os.getpid(), signum)
