"""Where the previous run stopped, read back from what it wrote to the TSDB.

A CronJob's default volume (``emptyDir``) is gone after every run, so the state file alone
would make every run start over from ``--since``. Every successful run writes its findings
series stamped with its window end (``stormotel_analyzer_missing_ranks`` always, one sample per
job), so the newest such sample's own timestamp is the previous run's window end.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx
from stormotel.analyzers import http

from stormotel import schema


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
        try:
            resp = http.request(client, "GET", url.rstrip("/") + "/api/v1/query",
                                settings=settings, deadline=deadline,
                                params={"query": last_end_query(job_id, lookback_s),
                                        "time": f"{now_ns / 1e9:.3f}"})
            result = resp.json().get("data", {}).get("result", [])
        except (http.EndpointError, ValueError):
            continue
        for r in result:
            value = float(r["value"][1])
            ns = round(value * 1000) * 1_000_000  # the sample's own millisecond timestamp
            best = ns if best is None else max(best, ns)
    return best
