"""Telemetry files (``PATH``\\ s: archives, Stormlog exports, folders, globs) and the OOM ring
dumps beside them, as a run's :class:`~stormotel.analyzers.sources.protocol.Source`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from stormotel.analyzers.options import SourceOptions
from stormotel.analyzers.sources.protocol import Progress

if TYPE_CHECKING:
    from stormotel.analyzers.http import Deadline
    from stormotel.analyzers.sources.protocol import LoadOutcome
    from stormotel.analyzers.timeline import Timeline
    from stormotel.analyzers.window import Window


@dataclass(frozen=True)
class FileSource:
    """The files ``options`` name (only ``job_id``'s data when given); the window is ignored:
    files hold what they hold."""

    options: SourceOptions
    job_id: str | None = None
    telemetry: ClassVar[bool] = True

    @property
    def outcome(self) -> LoadOutcome | None:
        return None

    def read(self, window: Window | None, deadline: Deadline | None,
             progress: Progress) -> Timeline:
        from stormotel.analyzers.sources import load_paths
        from stormotel.analyzers.sources.oom_dumps import attach_oom_dumps

        paths = list(self.options.paths)
        timeline = load_paths(paths, progress=progress.fn, job_id=self.job_id)
        dirs = [p for p in paths if Path(p).is_dir()]  # a job folder holds its oom/ dumps
        return attach_oom_dumps(timeline, [*dirs, *self.options.oom_dumps])
