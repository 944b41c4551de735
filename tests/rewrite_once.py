"""Every test module's asserts rewritten once, by the pytest-xdist controller, before its workers
start — instead of by each worker, all at once, in a fresh clone.

pytest rewrites the ``assert`` statements of each test module (``test_*.py``, ``conftest.py``) as
it imports it and caches the result in ``__pycache__/*.cpython-311-pytest-<version>.pyc``,
checked against the source's hash. In a fresh clone (what CI and the busy-host runs start from)
no such file exists yet, so ``make test``'s three workers each parsed, rewrote and compiled the
same ~240 modules while collecting (docs/benchmarks.md, "The suite's own time, session 22"):
collection took 44-50 s of CPU against 21 s once the files exist. Here the controller, which
collects nothing itself, writes them first with pytest's own rewriter (5-7 s of CPU); the
workers then read them as any later run does. A file whose cached result is current is left
alone, so a warm run pays only the header checks (well under a second).

Only the cache is touched, and only with what pytest itself would write there for that source:
the module each worker runs is pytest's rewrite of it either way. It uses pytest's internal
rewrite helpers; if they are missing or fail (another pytest), nothing is written and the
workers rewrite as before.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


def _current(source: bytes, pyc: Path) -> bool:
    """The cached rewrite exists and was made from this source (pytest's own check)."""
    try:
        with open(pyc, "rb") as f:
            head = f.read(16)
    except OSError:
        return False
    return (len(head) == 16 and head[:4] == importlib.util.MAGIC_NUMBER
            and head[4:8] == b"\x03\x00\x00\x00"
            and head[8:16] == importlib.util.source_hash(source)[:8])


def rewrite_test_modules(config: pytest.Config, folder: Path) -> int:
    """Write pytest's rewritten bytecode for each test module under ``folder`` whose cached one
    is missing or stale; returns how many were written. Does nothing unless this process is
    the controller of xdist workers (``-n`` > 0), pytest rewrites asserts, and bytecode may be
    written."""
    if sys.dont_write_bytecode or config.getoption("assertmode", "rewrite") != "rewrite":
        return 0
    if not isinstance(getattr(config.option, "numprocesses", None), int) \
            or config.option.numprocesses < 1 or hasattr(config, "workerinput"):
        return 0
    try:
        from _pytest.assertion import rewrite
        from _pytest.pathlib import fnmatch_ex

        patterns = config.getini("python_files")
        written = 0
        for path in sorted(folder.rglob("*.py")):
            if path.name != "conftest.py" and not any(fnmatch_ex(p, path) for p in patterns):
                continue
            pyc = rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)
            if _current(path.read_bytes(), pyc):
                continue
            try:
                source_hash, code = rewrite._rewrite_test(path, config)
            except SyntaxError:
                continue  # the worker's import reports it, as before
            if rewrite.try_makedirs(pyc.parent) and rewrite._write_pyc(
                    config.stash[rewrite.assertstate_key], code, source_hash, pyc):
                written += 1
        return written
    except Exception:  # another pytest's internals: the workers rewrite for themselves
        return 0
