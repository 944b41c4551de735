"""``--html FILE``: the self-contained HTML report (charts and findings,
:mod:`stormotel.analyzers.sinks.html_report`) as a sink of the run, after the text/JSON
report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TextIO

from stormotel.analyzers import messages
from stormotel.analyzers.sinks.base import RunContext, Sink, SinkKind
from stormotel.analyzers.sinks.outputs import job_path


@dataclass
class HtmlSink:
    """Written atomically; in a dry run too (a local file the user asked for)."""

    ctx: RunContext
    path: Path
    name: str = "html"
    kind: ClassVar[SinkKind] = "output"

    @classmethod
    def for_run(cls, ctx: RunContext) -> list[Sink]:
        return [cls(ctx, ctx.output.html)] if ctx.output.html else []

    def plan(self, out: TextIO) -> str:
        return self.write()

    def write(self) -> str:
        from stormotel.analyzers.sinks.html_report import write_html_report

        ctx = self.ctx
        written = write_html_report(job_path(self.path, ctx.report.job_id, several=ctx.several),
                                    ctx.timeline, ctx.report)
        if not ctx.output.quiet:
            messages.say(ctx.stderr,
                         f"wrote {written.path} ({written.size_bytes / 1e6:.1f} MB)")
        return str(written.path)
