"""Several ``stormotel estimate`` runs in one interpreter, each captured as a subprocess would be.

``python -m tests.estimate.cli_batch OUT`` reads ``OUT/runs.json`` (``{name: [arg, ...]}``) and
calls the command's own entry point (``stormotel.cli.main``, what ``python -m stormotel`` runs)
once per run, in that order, with file descriptors 1 and 2 pointed at ``OUT/<name>.out`` and
``OUT/<name>.err`` (so output that C++ code writes straight to the descriptor is captured too,
as in a child process), and writes ``OUT/<name>.code``. An argparse exit (``SystemExit``)
becomes the exit code it carries.

Why: each estimate in its own interpreter imports torch and PyTorch's memory trackers again,
about 4 s of CPU each, ten times in tests/estimate/test_cli.py. Start-up is not what those
runs test (their factory, flags, output and exit code are), and ``estimate`` is written to run
many times in one process (it collects the previous run's garbage first). The suite keeps
fresh interpreters for the runs where start-up is part of the claim.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path


def run_one(out: Path, name: str, args: list[str]) -> int:
    """``stormotel estimate ARGS`` with fds 1 and 2 redirected to ``out/name.{out,err}``."""
    from stormotel.cli import main

    return run_captured(out, name, lambda: main(["estimate", *args]))


def run_captured(out: Path, name: str, call: Callable[[], int | None]) -> int:
    """``call()`` with fds 1 and 2 redirected to ``out/name.{out,err}``; its exit code (``None``
    is 0, a ``SystemExit`` the code it carries) written to ``out/name.code`` and returned.
    Also used by tests/tracker/torchrun_batch.py (several torchrun launches, one interpreter)."""
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    files = {1: open(out / f"{name}.out", "w"), 2: open(out / f"{name}.err", "w")}  # noqa: SIM115
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        for fd, fh in files.items():
            os.dup2(fh.fileno(), fd)
        try:
            result = call()
            code = 0 if result is None else result
        except SystemExit as exc:  # argparse's usage errors and --help, as the interpreter exits
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        for fd, dup in saved.items():
            os.dup2(dup, fd)
            os.close(dup)
        for fh in files.values():
            fh.close()
    (out / f"{name}.code").write_text(str(code))
    return code


if __name__ == "__main__":
    target = Path(sys.argv[1])
    for run_name, run_args in json.loads((target / "runs.json").read_text()).items():
        run_one(target, run_name, run_args)
