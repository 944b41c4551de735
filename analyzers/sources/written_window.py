"""Where the previous run stopped, read back from what it wrote to the TSDB.

A CronJob's default volume (``emptyDir``) is gone after every run, so the state file alone
would make every run start over from ``--since``. Every successful run writes its findings
series stamped with its window end (``stormotel_analyzer_missing_ranks`` always, one sample per
job), so the newest such sample's own timestamp is the previous run's window end.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx
import msgspec
from stormotel.analyzers import http
from stormotel.analyzers.sources.prometheus_api import PrometheusAPI, sample_values

from stormotel import schema

#: Window ends the read-back accepts: after 2001, before 2262 (int64 nanoseconds).
_MIN_END_S, _MAX_END_S = 1e9, 9.2e9


def _window_end_ns(value: float) -> int | None:
    """A read-back value (seconds) as nanoseconds, or None outside int64 nanoseconds."""
    if not _MIN_END_S <= value <= _MAX_END_S:
        return None
    return round(value * 1000) * 1_000_000  # the sample's own millisecond timestamp


def last_end_query(job_id: str, lookback_s: int) -> str:
    escaped = job_id.replace("\\", "\\\\").replace('"', '\\"')
    return (f'max(max_over_time(timestamp({schema.AN_MISSING_RANKS}'
            f'{{{schema.ATTR_JOB_ID}="{escaped}"}})[{max(60, lookback_s)}s:60s]))')


def last_window_end_ns(client: httpx.Client, urls: Sequence[str], job_id: str, *, now_ns: int,
                       lookback_s: int, settings: http.HttpSettings,
                       deadline: http.Deadline | None = None) -> int | None:
    """The latest window end the analyzer wrote for ``job_id`` within ``lookback_s`` (None when
    it wrote none, or no endpoint answered: the caller falls back to ``--since``)."""
    best: int | None = None
    for url in urls:
        api = PrometheusAPI(url, client, settings, deadline, method="GET")
        try:
            values = sample_values(api.instant_response(last_end_query(job_id, lookback_s),
                                                        now_ns).json())
        except (http.EndpointError, ValueError, msgspec.ValidationError):
            continue  # the caller falls back to the state file or --since
        for v in values:
            ns = _window_end_ns(v)
            if ns is not None:
                best = ns if best is None else max(best, ns)
    return best
