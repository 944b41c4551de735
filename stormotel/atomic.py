"""Atomic file writes: a reader (Prometheus' file SD, a CronJob's next run, a person opening a
report) sees the old file or the whole new one, never half of one.

The temp file lives beside the target (same filesystem, so the rename is atomic), is fsynced
before the rename, and is removed if writing fails. The file gets the mode any other tool's new
file would (0666 less the umask: 0644 usually; ``mkstemp``'s private 0600 made reports that a
team shares unreadable), and an error names the path the caller gave, not the hidden temp file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows (another thread may be
    creating files); elsewhere set and restored at once."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _named(exc: OSError, target: Path) -> OSError:
    """The same error, naming ``target`` (the user's path) instead of the temp file."""
    if exc.filename is not None and str(exc.filename) == str(target):
        return exc
    return type(exc)(exc.errno, exc.strerror or str(exc), str(target)) if exc.errno \
        else OSError(f"{target}: {exc}")


@contextmanager
def atomic_open(path: str | os.PathLike[str], *, make_parents: bool = True,
                mode: int = 0o666) -> Iterator[IO[str]]:
    """A text handle whose content replaces ``path`` when the ``with`` block ends cleanly.

    ``mode`` is masked by the umask, as ``open()`` does for a new file."""
    target = Path(path)
    try:
        if make_parents:
            target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise _named(e, target) from e
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), mode & ~current_umask())
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise _named(e, target) from e
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: str | os.PathLike[str], text: str, *, make_parents: bool = True,
                 mode: int = 0o666) -> Path:
    """Write ``text`` to ``path`` atomically; returns the path."""
    with atomic_open(path, make_parents=make_parents, mode=mode) as fh:
        fh.write(text)
    return Path(path)
