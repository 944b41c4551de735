"""Which training jobs have telemetry in a window: one CronJob for the whole cluster instead of
one per job id listed by hand.

A job is "there" when any rank's device-memory gauge (any spelling the analyzer reads: pull
exporter, OTLP receiver) has a sample in the window; an optional PromQL selector
(``namespace="ml"``) narrows it. A job that ended before the window has no
sample in it, so it is not found again: its final analysis was the run whose window held its end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import httpx
import msgspec
from stormotel.analyzers import http
from stormotel.analyzers.sources.prometheus_api import (
    PrometheusAPI,
    escape,
    instant_entries,
    is_too_large,
    name_regex,
    values_regex,
    with_matcher,
)

from stormotel import schema
from stormotel.errors import SourceFailureError


class DiscoveryError(SourceFailureError):
    """No endpoint answered the discovery query."""


class _Series(msgspec.Struct):
    metric: dict[str, str]


#: Candidate job ids per discovery query when the whole query was refused as too large.
JOBS_PER_QUERY = 100
#: Longest job id taken from a discovery answer (a label value is input).
MAX_JOB_ID_CHARS = 512


def _job_id(entry: object) -> str | None:
    """The entry's ``job_id`` label, or None for an entry of the wrong shape (a bare string, a
    numeric label, an empty or overlong id): skipped, never a crash of the whole run."""
    try:
        job_id = msgspec.convert(entry, _Series).metric.get(schema.ATTR_JOB_ID)
    except msgspec.ValidationError:
        return None
    return job_id if job_id and len(job_id) <= MAX_JOB_ID_CHARS else None


def discovery_query(selector: str, window_s: int) -> str:
    """``group by (job_id) (last_over_time({__name__=~"device used…", selector}[window]))``."""
    names = "|".join(a.replace(".", "\\\\.") for a in schema.DEVICE_USED.prom_aliases)
    matchers = [f'__name__=~"{names}"', f'{schema.ATTR_JOB_ID}!=""']
    inner = selector.strip().strip("{}").strip()
    if inner:
        matchers.append(inner)
    sel = "{" + ", ".join(matchers) + "}"
    return f"group by ({schema.ATTR_JOB_ID}) (last_over_time({sel}[{max(1, window_s)}s]))"


def _answer(api: PrometheusAPI, expr: str, at_ns: int, selector: str, start_ns: int,
            end_ns: int) -> list[object]:
    """The discovery query's result entries; when the server refuses it as too large (more
    series than it may touch in one query), the same query per set of candidate job ids."""
    try:
        return _result(api.instant_response(expr, at_ns))
    except http.EndpointError as e:
        if not is_too_large(e):
            raise
    inner = selector.strip().strip("{}").strip()
    base = with_matcher("{" + inner + "}",
                        f'__name__=~"{escape(name_regex(schema.DEVICE_USED.prom_aliases))}"')
    try:
        candidates = api.label_values(schema.ATTR_JOB_ID, base, start_ns, end_ns)
    except http.EndpointError as e:  # the matcher itself touches too many series: every id
        if not is_too_large(e):
            raise
        candidates = api.label_values(schema.ATTR_JOB_ID, "", start_ns, end_ns)
    candidates = sorted(set(candidates))
    window_s = (end_ns - start_ns) // 1_000_000_000
    out: list[object] = []
    for i in range(0, len(candidates), JOBS_PER_QUERY):
        out += _for_jobs(api, inner, candidates[i:i + JOBS_PER_QUERY], window_s, at_ns)
    return out


def _for_jobs(api: PrometheusAPI, inner: str, ids: list[str], window_s: int,
              at_ns: int) -> list[object]:
    """The discovery query narrowed to ``ids``, halved while the server refuses it."""
    narrowed = ", ".join(p for p in (inner,
                                     f'{schema.ATTR_JOB_ID}=~"{escape(values_regex(ids))}"') if p)
    try:
        return _result(api.instant_response(discovery_query(narrowed, window_s), at_ns))
    except http.EndpointError as e:
        if not (is_too_large(e) and len(ids) > 1):
            raise
    half = len(ids) // 2
    return (_for_jobs(api, inner, ids[:half], window_s, at_ns)
            + _for_jobs(api, inner, ids[half:], window_s, at_ns))


def _result(resp: httpx.Response) -> list[object]:
    return instant_entries(resp.json())


def discover_jobs(client: httpx.Client, urls: Sequence[str], *, selector: str, start_ns: int,
                  end_ns: int, settings: http.HttpSettings,
                  deadline: http.Deadline | None = None,
                  warn: Callable[[str], None] | None = None) -> list[str]:
    """Job ids with samples in ``[start, end)`` on any endpoint, sorted; raises
    :class:`DiscoveryError` only when every endpoint failed. Answer entries of the wrong shape
    are skipped and counted (``warn`` is told how many)."""
    expr = discovery_query(selector, (end_ns - start_ns) // 1_000_000_000)
    found: set[str] = set()
    errors = []
    skipped = 0
    for url in urls:
        api = PrometheusAPI(url, client, settings, deadline, method="GET")
        try:
            result = _answer(api, expr, end_ns - 1, selector, start_ns, end_ns)
        except (http.EndpointError, ValueError) as e:
            errors.append(str(e))
            continue
        except msgspec.ValidationError as e:
            errors.append(f"{url}: not a Prometheus query answer ({e})")
            continue
        for r in result:
            job_id = _job_id(r)
            if job_id is not None:
                found.add(job_id)
            else:
                skipped += 1
    if skipped and warn is not None:
        warn(f"job discovery skipped {skipped} answer entr{'y' if skipped == 1 else 'ies'} "
             f"without a string {schema.ATTR_JOB_ID} label (wrong shape)")
    if errors and len(errors) == len(urls):
        raise DiscoveryError("job discovery failed: " + "; ".join(errors))
    return sorted(found)
