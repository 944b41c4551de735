"""The analyzer's voice on stderr: every line it prints about a run begins with its name.

``stormotel analyze: …`` is spelled here once — the command line's ``prog``, the progress lines
(:class:`~stormotel.analyzers.sources.protocol.Progress`), the warnings, the errors and the
"wrote …" lines of the sinks all come through :func:`line`, so a renamed command or a changed
prefix is one edit. A leaf (standard library only): every layer may import it.
"""

from __future__ import annotations

from typing import TextIO

__all__ = ["PROG", "error", "line", "say", "warn"]

PROG = "stormotel analyze"


def line(text: str) -> str:
    """``text`` as the analyzer says it: ``stormotel analyze: text``."""
    return f"{PROG}: {text}"


def say(stream: TextIO, text: str, *, flush: bool = False) -> None:
    """One line on ``stream`` (the run's stderr), as is: callers make ``text`` one line."""
    print(line(text), file=stream, flush=flush)


def warn(stream: TextIO, text: str) -> None:
    say(stream, f"warning: {text}")


def error(stream: TextIO, text: str) -> None:
    say(stream, f"error: {text}")
