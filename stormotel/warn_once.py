"""One warning per key for the life of a tracker.

A failing sampler, exporter, dump or watch must not flood a training job's log: the first
failure of each kind is logged, every later one is only counted (the tracker's drop and failure
counters). The tracker and its helpers (the stall witness, the end after an event) share one
:class:`WarnOnce`, so a kind is warned about once whichever of them meets it.
"""

from __future__ import annotations

import logging

__all__ = ["WarnOnce"]


class WarnOnce:
    """``warn(key, message, *args)``: ``logger.warning(message, *args)`` the first time ``key``
    is seen, nothing after."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._keys: set[str] = set()

    def __call__(self, key: str, message: str, *args: object) -> None:
        if key not in self._keys:
            self._keys.add(key)
            self._logger.warning(message, *args)
