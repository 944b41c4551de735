"""``stormotel analyze``: parse the flags, turn them into typed options, run.

:func:`main` parses (:mod:`stormotel.analyzers.cli.flags`), builds the options once
(:func:`stormotel.analyzers.cli.args.options_from_args`), then hands them to the run: the
file run (:func:`stormotel.analyzers.run.run_files`) or the TSDB run
(:func:`stormotel.analyzers.scheduled.run.run_tsdb`); both are
:func:`stormotel.analyzers.run.run_once` around their source. This module is the one boundary
where failures become exit codes (:mod:`stormotel.exitcodes`): user mistakes and unreadable
input print one ``stormotel analyze: error: ...`` line and exit non-zero, never a traceback.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn, TextIO

from stormotel.analyzers import messages
from stormotel.analyzers.cli.args import options_from_args
from stormotel.analyzers.cli.flags import build_parser
from stormotel.analyzers.messages import PROG

from stormotel import errors
from stormotel.streams import StreamParser, resolve
from stormotel.textsafe import one_line

__all__ = ["PROG", "build_parser", "main"]


def _fail(parser: StreamParser, exc: errors.StormotelError) -> NoReturn:
    parser.exit(errors.exit_code_of(exc), messages.line(f"error: {one_line(exc)}") + "\n")


def _one_blas_thread() -> None:
    """Before numpy loads: one OpenBLAS thread (unless the user chose a number).

    The analyzer does no matrix work (vector reductions only), but OpenBLAS starts a pool of
    one thread per core at import, which busy-waits: 0.1 s of CPU per run, as much as parsing
    50 MB of telemetry, and again in forked loader processes. A process that already loaded
    numpy (a caller of :func:`main` in-process) is left as it is."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: list[str] | None = None, *, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    """``stormotel analyze ARGV``: every line of the run — help, usage errors, progress, the
    report, warnings — goes to ``out``/``err`` (the process's streams when None), never to a
    stream looked up in ``sys`` later, so runs in threads of one process keep their own."""
    _one_blas_thread()
    out, err = resolve(out, err)
    parser = build_parser().use(out, err)
    try:
        opts = options_from_args(parser.parse_args(argv))
        if opts.job.tsdb.wanted:
            from stormotel.analyzers.scheduled.run import run_tsdb

            return run_tsdb(opts, out=out, err=err)
        from stormotel.analyzers.run import run_files

        return run_files(opts, out=out, err=err)
    except errors.StormotelError as exc:
        _fail(parser, exc)


if __name__ == "__main__":
    sys.exit(main())
