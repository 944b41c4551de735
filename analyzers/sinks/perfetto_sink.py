"""``--perfetto FILE``: the merged multi-rank timeline with the findings as Chrome trace JSON
(:mod:`stormotel.analyzers.sinks.perfetto`)."""

from __future__ import annotations

from typing import TextIO

from stormotel.analyzers.sinks import perfetto
from stormotel.analyzers.sinks.base import BaseSink


class PerfettoSink(BaseSink):
    """The trace at ``--perfetto FILE`` (the job's own path in a run over several jobs)."""

    name = "perfetto"
    option = "sinks.perfetto"
    per_job = True

    def plan(self, out: TextIO) -> str:
        n = len(perfetto.trace_events(self.ctx.timeline, self.ctx.report))
        print(f"# would write {n} trace event(s) to {self.target}", file=out)
        return ""

    def write(self) -> str:
        n = perfetto.write_trace(self.target, self.ctx.timeline, self.ctx.report)
        return f"events={n}"
