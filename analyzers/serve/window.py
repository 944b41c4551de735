"""Where a receiver's run starts reading: the job's first sample, at most ``--max-window`` ago.

Reading a whole day of an hour-old job costs the empty part too (measured at 1,024 ranks:
9.5 s instead of 4.3 s from page to report, docs/benchmarks.md). The trackers export their
start time as a gauge (``stormotel_tracker_start_timestamp_seconds``, the start edge the alert
rules use), so one instant query — the smallest value any rank of the job held over the
window — gives the job's start. A minute of margin keeps the first scrape. Without the series
(an older tracker, a failed query), the run reads the whole ``--max-window``: the answer is the
same, only slower.
"""

from __future__ import annotations

import msgspec
from stormotel.analyzers import http
from stormotel.analyzers.options import JobOptions
from stormotel.analyzers.sources.prometheus_api import PrometheusAPI, escape, name_regex

from stormotel import schema

#: Read this much before the job's start (a rank's first scrape may precede its gauge's).
MARGIN_NS = 60 * 10**9


class _Answer(msgspec.Struct):
    class _Data(msgspec.Struct):
        class _Sample(msgspec.Struct):
            value: tuple[float, str]

        result: list[_Sample] = []

    data: _Data = msgspec.field(default_factory=_Data)


def start_query(job_id: str, window_s: float) -> str:
    names = name_regex(schema.TRACKER_START.prom_aliases)
    sel = f'{{__name__=~"{escape(names)}", {schema.ATTR_JOB_ID}="{escape(job_id)}"}}'
    return f"min(min_over_time({sel}[{max(1, int(window_s))}s]))"


def window_start_ns(job: JobOptions, job_id: str, now_ns: int, max_window_s: float) -> int:
    """The first instant a run for ``job_id`` reads: the job's start minus a margin, never
    earlier than ``max_window_s`` before ``now_ns``."""
    earliest = now_ns - int(max_window_s * 1e9)
    starts = []
    try:
        with http.make_client(job.http) as client:
            for url in job.tsdb.prometheus:
                api = PrometheusAPI(url, client, job.http, http.Deadline(10.0))
                try:
                    body = api.instant_response(start_query(job_id, max_window_s), now_ns)
                    answer = msgspec.json.decode(body.content, type=_Answer)
                    # a value that is no number (``"abc"``) raised here, outside the run's
                    # own error handling: it ended the worker thread that asked
                    starts += [float(s.value[1]) for s in answer.data.result]
                except (http.EndpointError, msgspec.DecodeError, ValueError):
                    return earliest  # one endpoint unknown: its ranks may have started earlier
    except http.ConfigError:
        return earliest
    finite = [s for s in starts if s == s and 0 < s < now_ns / 1e9]
    if not finite:
        return earliest
    return max(earliest, int(min(finite) * 1e9) - MARGIN_NS)
