"""``--perfetto FILE``: the merged multi-rank timeline with the findings as Chrome trace JSON
(:mod:`stormotel.analyzers.sinks.perfetto`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TextIO

from stormotel.analyzers.sinks import perfetto
from stormotel.analyzers.sinks.base import RunContext, Sink, SinkKind
from stormotel.analyzers.sinks.outputs import job_path


@dataclass
class PerfettoSink:
    """The trace at ``--perfetto FILE`` (the job's own path in a run over several jobs)."""

    ctx: RunContext
    path: Path
    name: str = "perfetto"
    kind: ClassVar[SinkKind] = "destination"

    @classmethod
    def for_run(cls, ctx: RunContext) -> list[Sink]:
        path = ctx.sinks.perfetto
        if path is None:
            return []
        return [cls(ctx, job_path(path, ctx.report.job_id, several=ctx.several))]

    def plan(self, out: TextIO) -> str:
        n = len(perfetto.trace_events(self.ctx.timeline, self.ctx.report))
        print(f"# would write {n} trace event(s) to {self.path}", file=out)
        return ""

    def write(self) -> str:
        n = perfetto.write_trace(self.path, self.ctx.timeline, self.ctx.report)
        return f"events={n}"
