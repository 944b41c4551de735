"""Atomic file writes: a reader (Prometheus' file SD, a CronJob's next run, a person opening a
report) sees the old file or the whole new one, never half of one.

The temp file lives beside the target (same filesystem, so the rename is atomic), is fsynced
before the rename, and is removed if writing fails.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


@contextmanager
def atomic_open(path: str | os.PathLike[str], *, make_parents: bool = True) -> Iterator[IO[str]]:
    """A text handle whose content replaces ``path`` when the ``with`` block ends cleanly."""
    target = Path(path)
    if make_parents:
        target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: str | os.PathLike[str], text: str, *, make_parents: bool = True) -> Path:
    """Write ``text`` to ``path`` atomically; returns the path."""
    with atomic_open(path, make_parents=make_parents) as fh:
        fh.write(text)
    return Path(path)
