"""A command's two text streams, handed down its run instead of looked up in ``sys``.

A command run in-process (the ``stormotel serve`` workers, a test suite running dozens of
analyses, a notebook) must not swap ``sys.stdout``/``sys.stderr`` to capture its output: that
swap is process-wide, so every other thread's lines land in the capture while it lasts, two
captures at once steal each other's lines, and the one that ends last puts back the other's
buffer as the process's stderr. So a command's ``main`` takes ``out``/``err``, resolved once at
its entry (:func:`resolve`: the process's streams when none is given), and everything it prints
goes there — its progress, its report, its errors, and argparse's usage and help
(:class:`StreamParser`). A leaf (standard library only): the analyzer and the dashboards
import it.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, NoReturn, TextIO

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

__all__ = ["StreamParser", "resolve"]


def resolve(out: TextIO | None, err: TextIO | None) -> tuple[TextIO, TextIO]:
    """``(out, err)``, each defaulting to the process's stream as it is now."""
    return out or sys.stdout, err or sys.stderr


class StreamParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage, help and errors go to the run's streams (``out`` for
    ``--help``, ``err`` for a usage error), not to whatever ``sys.stdout``/``sys.stderr`` are
    when it prints. Exits as argparse does (``SystemExit``). Set :meth:`use` before parsing;
    until then it prints where argparse would."""

    out: TextIO | None = None
    err: TextIO | None = None

    def use(self, out: TextIO, err: TextIO) -> StreamParser:
        self.out, self.err = out, err
        return self

    def print_usage(self, file: SupportsWrite[str] | None = None) -> None:
        super().print_usage(file or self.out)

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        super().print_help(file or self.out)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            (self.err or sys.stderr).write(message)
        sys.exit(status)

    def error(self, message: str) -> NoReturn:
        self.print_usage(self.err or sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")
