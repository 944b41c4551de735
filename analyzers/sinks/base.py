"""The one small interface every sink of a run has: a name, what it would do for a dry run, and
writing. Adding a sink is adding one class that has these three."""

from __future__ import annotations

from typing import Protocol, TextIO


class Sink(Protocol):
    """One destination for a run's findings.

    ``plan`` prints what ``write`` would do (``--dry-run``) and changes nothing; ``write`` does
    it. Both return a short detail for the progress line ("" for none) and raise
    ``http.EndpointError``, ``http.ConfigError``, ``OSError`` or ``ValueError`` on failure.
    """

    name: str

    def plan(self, out: TextIO) -> str: ...

    def write(self) -> str: ...
