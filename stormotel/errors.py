"""The exception hierarchy every command shares: each class carries its exit code.

A command raises the class that says *whose* problem it is (the user's flags or input, the
telemetry source, a sink) and the one boundary in :mod:`stormotel.cli` turns it into a one-line
message and that class's code from :mod:`stormotel.exitcodes`. Anything else that escapes a
command is a bug and exits :data:`~stormotel.exitcodes.INTERNAL`, never FINDINGS, so cron and CI
cannot read a crash as "findings".
"""

from __future__ import annotations

from stormotel import exitcodes


class StormotelError(Exception):
    """Base of every error a command reports as one line; ``exit_code`` decides the exit."""

    exit_code: int = exitcodes.INTERNAL


class UsageError(StormotelError):
    """A flag value or an input file the user can fix (exit USAGE)."""

    exit_code = exitcodes.USAGE


class SourceInputError(UsageError):
    """A telemetry input the user named that cannot be used at all: a missing file, a file that
    is not telemetry, a corrupt archive (exit USAGE). The message names the file (and line) and
    the problem; the fix is the user's. A bad record inside a usable file is a counted skip."""


class SourceFailureError(StormotelError):
    """No telemetry could be read at all: every server failed or refused, or what was read holds
    none (exit SOURCE_FAILURE). The fix is on the data path, not in the invocation."""

    exit_code = exitcodes.SOURCE_FAILURE


class NoTelemetryError(SourceFailureError):
    """The sources were read (files parsed, endpoints answered) but hold no telemetry for the
    job and window asked for."""


class SinkFailureError(StormotelError):
    """Analysis done, but writing its results failed (exit SINK_FAILURE)."""

    exit_code = exitcodes.SINK_FAILURE


class LimitExceededError(UsageError):
    """Input larger or deeper than a documented bound (docs/security.md); exit USAGE when the
    user named the input, a counted skip when it was found by walking a folder."""


class MissingExtraError(UsageError):
    """A command needs an optional dependency that this install lacks (exit USAGE): the
    message names the ``pip install 'stormotel[EXTRA]'`` that adds it."""


def exit_code_of(exc: BaseException) -> int:
    """The exit code an exception stands for (INTERNAL for anything not in the hierarchy)."""
    code = getattr(exc, "exit_code", None) if isinstance(exc, StormotelError) else None
    return code if isinstance(code, int) else exitcodes.INTERNAL
