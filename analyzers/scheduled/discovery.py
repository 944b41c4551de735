"""Which training jobs have telemetry in a window: one CronJob for the whole cluster instead of
one per job id listed by hand.

A job is "there" when any rank's device-memory gauge (any spelling the analyzer reads: pull
exporter, OTLP receiver) has a sample in the window; an optional PromQL selector
(``namespace="ml"``) narrows it. A job that ended before the window has no
sample in it, so it is not found again: its final analysis was the run whose window held its end.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx
from stormotel.analyzers import http

from stormotel import schema
from stormotel.errors import SourceFailureError


class DiscoveryError(SourceFailureError):
    """No endpoint answered the discovery query."""


def discovery_query(selector: str, window_s: int) -> str:
    """``group by (job_id) (last_over_time({__name__=~"device used…", selector}[window]))``."""
    names = "|".join(a.replace(".", "\\\\.") for a in schema.DEVICE_USED.prom_aliases)
    matchers = [f'__name__=~"{names}"', f'{schema.ATTR_JOB_ID}!=""']
    inner = selector.strip().strip("{}").strip()
    if inner:
        matchers.append(inner)
    sel = "{" + ", ".join(matchers) + "}"
    return f"group by ({schema.ATTR_JOB_ID}) (last_over_time({sel}[{max(1, window_s)}s]))"


def discover_jobs(client: httpx.Client, urls: Sequence[str], *, selector: str, start_ns: int,
                  end_ns: int, settings: http.HttpSettings,
                  deadline: http.Deadline | None = None) -> list[str]:
    """Job ids with samples in ``[start, end)`` on any endpoint, sorted; raises
    :class:`DiscoveryError` only when every endpoint failed."""
    expr = discovery_query(selector, (end_ns - start_ns) // 1_000_000_000)
    found: set[str] = set()
    errors = []
    for url in urls:
        try:
            resp = http.request(client, "GET", url.rstrip("/") + "/api/v1/query",
                                settings=settings, deadline=deadline,
                                params={"query": expr, "time": f"{(end_ns - 1) / 1e9:.3f}"})
            doc = resp.json()
        except (http.EndpointError, ValueError) as e:
            errors.append(str(e))
            continue
        for r in doc.get("data", {}).get("result", []):
            job_id = r.get("metric", {}).get(schema.ATTR_JOB_ID)
            if job_id:
                found.add(job_id)
    if errors and len(errors) == len(urls):
        raise DiscoveryError("job discovery failed: " + "; ".join(errors))
    return sorted(found)
