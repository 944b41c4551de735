"""The report itself, as text (the summary) or JSON (``--format``), on stdout or at
``--output`` (the job's own path in a run over several jobs): the first sink of every run (it
imports no server sink, so a run over files loads none)."""

from __future__ import annotations

from typing import ClassVar, TextIO

from stormotel.analyzers import messages
from stormotel.analyzers.report import Report
from stormotel.analyzers.sinks.base import BaseSink, SinkKind
from stormotel.analyzers.sinks.outputs import job_path


def render(report: Report, fmt: str) -> str:
    """The report as ``fmt`` (``json``, else the human summary)."""
    if fmt == "json":
        return report.to_json()
    from stormotel.analyzers.summary import render_summary

    return render_summary(report)


class ReportSink(BaseSink):
    """``--format``/``--output``: written in a dry run too (it is the run's output, not a
    change anywhere else)."""

    name = "report"
    kind: ClassVar[SinkKind] = "output"

    def plan(self, out: TextIO) -> str:
        return self.write()

    def write(self) -> str:
        output, report = self.ctx.output, self.ctx.report
        text = render(report, output.format) + "\n"
        if not output.output or output.output == "-":
            self.ctx.stdout.write(text)
            return ""
        path = job_path(output.output, report.job_id, several=self.ctx.several)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if not output.quiet:
            messages.say(self.ctx.stderr, f"wrote {path}")
        return str(path)
