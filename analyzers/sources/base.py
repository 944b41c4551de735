"""What every file source shares: the error type, and the load context that counts skips.

A source never raises for one bad record; it calls :meth:`LoadContext.skip`, which counts the
record under a reason and keeps the first few locations (``file:line: what was wrong``) as notes
for the report. Whole-input problems (a named file that does not exist, a file that is not
telemetry at all) raise :class:`stormotel.errors.SourceInputError` (the user's to fix, exit
USAGE) or :class:`stormotel.errors.NoTelemetryError` (nothing readable, exit SOURCE_FAILURE) with a
one-line message the CLI prints as is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from stormotel.analyzers.timeline import TimelineBuilder

ProgressFn = Callable[[str], None]

#: Per skip reason, how many example locations are kept as notes (the rest are only counted).
NOTES_PER_REASON = 3


@dataclass
class LoadContext:
    """One load: the builder every source appends to, plus skip accounting and progress."""

    builder: TimelineBuilder = field(default_factory=TimelineBuilder)
    progress: ProgressFn | None = None
    #: Keep only this job's data when files mix several jobs (others are counted ``other_job``).
    job_id: str | None = None
    _examples: Counter[str] = field(default_factory=Counter)

    def skip(self, reason: str, where: str, detail: str, count: int = 1) -> None:
        """Count ``count`` skipped records under ``reason``; keep the first few as notes."""
        if count <= 0:
            return
        self.builder.skipped[reason] += count
        if self._examples[reason] < NOTES_PER_REASON:
            self._examples[reason] += 1
            extra = f" ({count} records)" if count > 1 else ""
            self.builder.notes.append(f"skipped {reason} at {where}: {detail}{extra}")

    def other_job(self, job_id: object) -> bool:
        """True when a job filter is set and ``job_id`` (if known) belongs to another job."""
        return self.job_id is not None and job_id is not None and str(job_id) != self.job_id

    def note(self, text: str) -> None:
        if text not in self.builder.notes:
            self.builder.notes.append(text)

    def report(self, text: str) -> None:
        if self.progress is not None:
            self.progress(text)
