"""``--remote-write URL…``: the findings' and the run's series to each URL (Prometheus remote
write, :mod:`stormotel.analyzers.sinks.remote_write`); a rejected batch fails the sink unless the
TSDB verifiably holds it already."""

from __future__ import annotations

import re
from typing import Any, ClassVar, TextIO

import msgspec
from stormotel.analyzers import http
from stormotel.analyzers.sinks import findings_series, remote_write
from stormotel.analyzers.sinks.base import BaseSink, SinkKind
from stormotel.analyzers.sources.prometheus_api import PrometheusAPI, escape, sample_values

from stormotel.textsafe import one_line


class RemoteWriteSink(BaseSink):
    """Findings and run series to one remote-write URL (``remote_write1``, ``remote_write2``…
    when several are given)."""

    name = "remote_write"
    kind: ClassVar[SinkKind] = "series"
    option = "sinks.remote_write"

    def plan(self, out: TextIO) -> str:
        points = self.ctx.points or []
        print(f"# would remote-write {len(points)} sample(s) to {one_line(self.target)}",
              file=out)
        print(findings_series.render_text(points), file=out)
        return ""

    def write(self) -> str:
        with http.make_client(self.ctx.settings) as client:
            return write_checked(client, self.target, self.ctx.points or [], self.ctx.settings,
                                 self.ctx.deadline, self.ctx.query_urls)


_ALREADY_STORED = re.compile(r"duplicate sample|out of order|out of bounds|too old",
                             re.IGNORECASE)


def write_checked(client: Any, url: str, points: list[findings_series.SeriesPoint],
                  settings: http.HttpSettings, deadline: http.Deadline | None,
                  query_urls: tuple[str, ...]) -> str:
    """Remote write, and a rejected batch is a failure unless the TSDB already holds it.

    A re-run may re-send samples the TSDB already holds; Prometheus answers 400 ("duplicate
    sample", "out of order", "too old") for those. That is idempotence only if every sample is
    really there: each one is looked up (``timestamp(series)`` at its own time) on the query
    endpoints; one missing sample, or no endpoint to ask, makes the sink fail."""
    try:
        n = remote_write.write(client, url, points, settings=settings, deadline=deadline)
    except http.EndpointError as e:
        if e.status == 400 and _ALREADY_STORED.search(e.body) and query_urls:
            missing = _not_stored(client, query_urls[0], points, settings, deadline)
            if not missing:
                return f"samples={len(points)} (already stored, verified)"
            raise http.EndpointError(url, f"rejected {missing} sample(s) that the TSDB does not"
                                          f" hold ({e.body.strip()[:200]})",
                                     status=e.status, body=e.body) from None
        raise
    return f"samples={n}"


def _not_stored(client: Any, query_url: str, points: list[findings_series.SeriesPoint],
                settings: http.HttpSettings, deadline: http.Deadline | None) -> int:
    """How many of ``points`` the TSDB behind ``query_url`` does not hold at their timestamp."""
    api = PrometheusAPI(query_url, client, settings, deadline, method="GET")
    missing = 0
    for p in points:
        matchers = ",".join(f'{k}="{escape(v)}"' for k, v in sorted(p.labels.items()))
        expr = f'timestamp({{__name__="{p.name}",{matchers}}})'
        resp = api.instant_response(expr, p.timestamp_ms * 1_000_000)
        try:  # the TSDB's answer is input: typed-decoded, a wrong shape holds nothing
            values = sample_values(resp.json())
        except (ValueError, msgspec.ValidationError):
            values = []
        held = any(abs(v * 1000 - p.timestamp_ms) < 1 for v in values)
        missing += not held
    return missing
