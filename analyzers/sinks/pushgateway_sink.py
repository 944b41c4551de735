"""``--pushgateway URL``: the findings' and the run's series as the job's Pushgateway group,
replaced each run (:mod:`stormotel.analyzers.sinks.pushgateway`)."""

from __future__ import annotations

from typing import ClassVar, TextIO

from stormotel.analyzers import http
from stormotel.analyzers.sinks import pushgateway
from stormotel.analyzers.sinks.base import BaseSink, SinkKind

from stormotel.textsafe import one_line


class PushgatewaySink(BaseSink):
    """Findings and run series as the job's Pushgateway group (replaced each run)."""

    name = "pushgateway"
    kind: ClassVar[SinkKind] = "series"
    option = "sinks.pushgateway"

    def plan(self, out: TextIO) -> str:
        print(f"# would push {len(self.ctx.points or [])} series to {one_line(self.target)} "
              f"(job={pushgateway.PUSH_JOB}, job_id={self.ctx.job_id})", file=out)
        return ""

    def write(self) -> str:
        with http.make_client(self.ctx.settings) as client:
            n = pushgateway.push(client, self.target, self.ctx.job_id,
                                 self.ctx.points or [], settings=self.ctx.settings,
                                 deadline=self.ctx.deadline)
        return f"series={n}"
