"""``--html FILE``: the self-contained HTML report (charts and findings,
:mod:`stormotel.analyzers.sinks.html_report`) as a sink of the run, after the text/JSON
report."""

from __future__ import annotations

from typing import ClassVar, TextIO

from stormotel.analyzers import messages
from stormotel.analyzers.sinks.base import BaseSink, SinkKind


class HtmlSink(BaseSink):
    """Written atomically; in a dry run too (a local file the user asked for)."""

    name = "html"
    kind: ClassVar[SinkKind] = "output"
    option = "output.html"
    per_job = True

    def plan(self, out: TextIO) -> str:
        return self.write()

    def write(self) -> str:
        from stormotel.analyzers.sinks.html_report import write_html_report

        ctx = self.ctx
        written = write_html_report(self.target, ctx.timeline, ctx.report)
        if not ctx.output.quiet:
            messages.say(ctx.stderr,
                         f"wrote {written.path} ({written.size_bytes / 1e6:.1f} MB)")
        return str(written.path)
