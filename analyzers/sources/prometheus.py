"""Read a job's memory telemetry from Prometheus-compatible HTTP APIs into one Timeline.

Works against anything that speaks the Prometheus query API (Prometheus, VictoriaMetrics,
Thanos, Mimir, Cortex): ranks are discovered with ``/api/v1/series``, each field is fetched with
``/api/v1/query_range`` in chunks that stay under the 11,000-points-per-series limit, queries
run concurrently with a bound, and transient failures are retried by
:mod:`stormotel.analyzers.http`.

A failure never loses what did arrive: the Timeline holds every rank that could be read, and
its ``notes``/``skipped`` say which endpoint and ranks failed and why, so the job can report a
partial result honestly instead of crashing or pretending to be complete.

Names come from :mod:`stormotel.schema`; every spelling a translator may produce is accepted
(pull exporter vs. OTLP receiver), and the tracker's rolling peak series is preferred when it
exported one, so a spike between two scrapes is not lost.

**Resolution.** Memory series are read as raw samples at their own timestamps (range-vector
selectors, chunked), never re-gridded onto a shared step: a scrape offset between two targets
is not a lead. The tracker's edge gauges (``…_edge_timestamp_seconds``) become first-rise,
threshold and OOM markers at the tracker's own sample time, with the tracker's sampling interval
as their resolution. Several endpoints (an HA pair, one per cluster) merge deterministically:
the same answer in any order, exact duplicates removed, conflicting values at one timestamp
resolved to the larger one and noted.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TypeVar

import httpx
import numpy as np
from stormotel.analyzers.gcpause import gc_paused
from stormotel.analyzers.http import Deadline, EndpointError, HttpSettings, make_client
from stormotel.analyzers.rankspec import format_rank_list
from stormotel.analyzers.sources.bulk_read import QUERY_LABEL, BulkReader, choose_reader
from stormotel.analyzers.sources.markers import MarkerAccumulator, counter_increases
from stormotel.analyzers.sources.prometheus_api import (
    MAX_POINTS_PER_QUERY,
    PrometheusAPI,
    Series,
    is_too_large,
    label_selector,
    name_regex,
    parse_matrix_values,
    with_matcher,
)
from stormotel.analyzers.timeline import (
    EDGE_MARKER_KINDS,
    EDGE_RESOLUTION_ATTR,
    KIND_OOM,
    KIND_STEP,
    META_ESTIMATE_BYTES,
    OOM_FROM_COUNTER,
    OOM_SOURCE_ATTR,
    Markers,
    RankIdentity,
    Timeline,
    TimelineBuilder,
)

from stormotel import schema
from stormotel.errors import SourceFailureError

#: Upper bound on points fetched per series over the whole window (sets the coarsest step).
MAX_POINTS_PER_SERIES = 200_000
#: Ranks per query: failures are reported per batch, long selectors stay reasonable.
RANK_BATCH = 64
DEFAULT_CONCURRENCY = 4
#: Samples one raw read may bring back (a short window reads more ranks per query: 10,000 ranks
#: x 1 h in 64-rank reads was 1,256 requests, most of their cost per request, not per sample).
TARGET_SAMPLES_PER_READ = 200_000
#: Ranks per read at most: the rank alternation stays ~6 KB, under VictoriaMetrics'
#: ``-search.maxQueryLen`` (16 KiB).
MAX_RANK_BATCH = 1000
#: Series turned into Timeline markers: the step gauge (one "step N" slice per value) and
#: the OOM counter (an instant wherever it increases). Spans are not in a TSDB; these are.
MARKER_METRICS: dict[str, schema.Metric] = {KIND_STEP: schema.STEP, KIND_OOM: schema.OOMS}
#: Never query finer than this (ms resolution is what Prometheus stores).
MIN_STEP_S = 1.0

@dataclass
class QueryWindow:
    """What to read: one job over ``[start_ns, end_ns]``."""

    job_id: str
    start_ns: int
    end_ns: int
    #: Query step in seconds; ``None`` derives it from the series' own sample density.
    step_s: float | None = None
    #: Extra PromQL label matchers, e.g. ``namespace="train"`` (added to every selector).
    extra_matchers: str = ""

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


@dataclass
class LoadOutcome:
    """What happened per endpoint, for exit codes and the summary line."""

    endpoints_ok: list[str] = field(default_factory=list)
    #: endpoint → reason it gave nothing at all.
    endpoints_failed: dict[str, str] = field(default_factory=dict)
    #: endpoint → ranks for which at least one query failed.
    ranks_failed: dict[str, set[int]] = field(default_factory=dict)
    queries: int = 0
    step_s: float | None = None

    @property
    def partial(self) -> bool:
        return bool(self.endpoints_failed or self.ranks_failed)


def step_range(step_s: float) -> str:
    """Range literal for "the step before this point": one ms short of the step, because
    Prometheus 2 ranges are closed at both ends and would otherwise see a sample twice."""
    return f"{max(1, round(step_s * 1000) - 1)}ms"


def clean_byte_series(values: object, builder: TimelineBuilder
                      ) -> tuple[np.ndarray, np.ndarray] | None:
    """One series' matrix values as byte arrays, bad points counted on ``builder``.

    ``None`` for a malformed series (counted as ``malformed_series``); NaN, infinite and
    negative byte values are dropped and counted as ``non_finite_or_negative_bytes``.
    """
    try:
        t_ns, v = parse_matrix_values(values)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        builder.skipped["malformed_series"] += 1
        return None
    bad = ~np.isfinite(v) | (v < 0)
    if bad.any():
        builder.skipped["non_finite_or_negative_bytes"] += int(bad.sum())
        t_ns, v = t_ns[~bad], v[~bad]
    return t_ns, v


# --- loading a job ---------------------------------------------------------------------------

@dataclass
class _Discovery:
    api: PrometheusAPI
    #: field → metric names present at this endpoint (peak names first when present).
    names: dict[str, list[str]]
    peak_fields: set[str]
    identities: dict[int, RankIdentity]
    native_interval_s: float | None
    #: Spellings of the pre-run estimate series present at this endpoint.
    estimate_names: list[str] = field(default_factory=list)
    #: marker kind → spellings of its series present (step gauge, OOM counter).
    marker_names: dict[str, list[str]] = field(default_factory=dict)
    #: Spellings of the edge-timestamp gauge and the sampling-interval gauge present.
    edge_names: list[str] = field(default_factory=list)
    interval_names: list[str] = field(default_factory=list)
    #: Spellings of the edge-gap gauge (the tracker's real gap before each edge) present.
    gap_names: list[str] = field(default_factory=list)
    #: The ranks that report memory, in read order (the identities' keys, or, on the quick
    #: path, the rank label's values before the identities are listed beside the reads).
    ranks: list[int] = field(default_factory=list)
    #: True when ``identities`` is still to be listed (the quick path).
    listing_pending: bool = False
    #: The bulk API that reads this endpoint's raw series (None: the query API).
    reader: BulkReader | None = None

    def __post_init__(self) -> None:
        if not self.ranks:
            self.ranks = sorted(self.identities)


def _field_names() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """field → (plain aliases, peak aliases), all derived from the schema."""
    out = {}
    for fname, metric in schema.FIELD_METRICS.items():
        peak = schema.FIELD_PEAK_METRICS.get(fname)
        out[fname] = (metric.prom_aliases, peak.prom_aliases if peak else ())
    return out


def _int_label(labels: dict[str, str], key: str) -> int | None:
    v = labels.get(key)
    if not isinstance(v, str) or not v.isdigit() or len(v) > 18:  # a list, "inf", 401 digits
        return None
    return int(v)


def _str_label(labels: dict[str, str], key: str) -> str | None:
    v = labels.get(key)
    return v if isinstance(v, str) else None


def identity_from_labels(labels: dict[str, str]) -> RankIdentity | None:
    rank = _int_label(labels, schema.ATTR_RANK)
    if rank is None or rank < 0:
        return None
    return RankIdentity(rank=rank, job_id=_str_label(labels, schema.ATTR_JOB_ID),
                        local_rank=_int_label(labels, schema.ATTR_LOCAL_RANK),
                        world_size=_int_label(labels, schema.ATTR_WORLD_SIZE),
                        host=_str_label(labels, schema.ATTR_HOST),
                        gpu=_str_label(labels, schema.ATTR_GPU),
                        gpu_uuid=_str_label(labels, schema.ATTR_GPU_UUID))


def _rank_order(value: str) -> tuple[int, str]:
    """Numeric ranks in numeric order (so a split asks for contiguous ranges), others after."""
    return (int(value), "") if value.isdigit() and len(value) <= 18 else (2**63, value)


def _spellings() -> tuple[set[str], list[str]]:
    """(the spellings that do not make a rank one that reports memory, every spelling
    discovery asks for)."""
    fields = _field_names()
    side_names = (set(schema.EDGE_TIMESTAMP.prom_aliases) | set(schema.EDGE_GAP.prom_aliases)
                  | set(schema.SAMPLING_INTERVAL.prom_aliases))
    not_memory = set(schema.ESTIMATE.prom_aliases) | side_names | {
        n for m in MARKER_METRICS.values() for n in m.prom_aliases}
    all_names = sorted({n for plain, peak in fields.values() for n in (*plain, *peak)}
                       | not_memory)
    return not_memory, all_names


def _discovery_selector(window: QueryWindow, names: Iterable[str]) -> str:
    return label_selector({schema.ATTR_JOB_ID: window.job_id},
                          {"__name__": name_regex(names)}, window.extra_matchers)


def _discover(api: PrometheusAPI, window: QueryWindow, builder: TimelineBuilder,
              want_native: bool) -> _Discovery:
    """Every series of the job listed (labels only): which spellings are present, which ranks
    report memory and each one's identity."""
    identities, present, bad_rank = _list_series(api, window)
    _note_bad_ranks(api, builder, bad_rank)
    return _discovery_of(api, window, present, identities, sorted(identities), want_native)


def _discover_quick(api: PrometheusAPI, window: QueryWindow, want_native: bool
                    ) -> _Discovery | None:
    """The spellings present and the ranks that report memory from two label-values answers
    (the index alone: a few KB where the listing of 10,000 ranks is 140,000 label maps), so the
    reads can start while the identities are listed beside them (:func:`_list_series`). None
    when the server does not answer them (the listing then comes first, as it always could)."""
    not_memory, all_names = _spellings()
    memory_names = sorted(set(all_names) - not_memory)
    try:
        # A name counts where a series carries it with a valid rank (as in the listing).
        present = set(api.label_values(
            "__name__", with_matcher(_discovery_selector(window, all_names),
                                     f'{schema.ATTR_RANK}=~"[0-9]{{1,18}}"'),
            window.start_ns, window.end_ns))
        values = api.label_values(schema.ATTR_RANK, _discovery_selector(window, memory_names),
                                  window.start_ns, window.end_ns)
    except EndpointError:
        return None
    ranks = sorted({r for v in values if (r := _int_label({"r": v}, "r")) is not None})
    if not ranks:  # nothing to read ahead of the listing (which says why: no series, bad ranks)
        return None
    d = _discovery_of(api, window, present, {}, ranks, want_native)
    d.listing_pending = True
    return d


def _list_series(api: PrometheusAPI, window: QueryWindow
                 ) -> tuple[dict[int, RankIdentity], set[str], int]:
    """(identity of each rank that reports memory, the spellings present, series without a
    valid rank label) from the listing of every series of the job."""
    not_memory, all_names = _spellings()
    # One answer when the server allows it, else split by rank (VictoriaMetrics refuses more
    # than 30,000 series per answer by default: ~2,100 ranks of a tracker's 14 series).
    series = api.series_split(_discovery_selector(window, all_names), window.start_ns,
                              window.end_ns, schema.ATTR_RANK, sort_key=_rank_order)
    present: set[str] = set()
    identities: dict[int, RankIdentity] = {}
    bad_rank = 0
    for labels in series:
        rank = _int_label(labels, schema.ATTR_RANK)  # what identity_from_labels accepts
        name = labels.get("__name__", "")
        if rank is None or not isinstance(name, str):  # label values are strings, or input
            bad_rank += 1
            continue
        present.add(name)
        # A rank is one that reports memory; its first such series gives its identity (built
        # once per rank, not for each of its ~14 series).
        if name not in not_memory and rank not in identities:
            ident = identity_from_labels(labels)
            if ident is not None:
                identities[rank] = ident
    return identities, present, bad_rank


def _note_bad_ranks(api: PrometheusAPI, builder: TimelineBuilder, bad_rank: int) -> None:
    if bad_rank:
        builder.skipped["series_without_valid_rank_label"] += bad_rank
        builder.notes.append(f"{api.url}: {bad_rank} series had no valid integer "
                             f"'{schema.ATTR_RANK}' label and were skipped")


def _discovery_of(api: PrometheusAPI, window: QueryWindow, present: set[str],
                  identities: dict[int, RankIdentity], ranks: list[int],
                  want_native: bool) -> _Discovery:
    """What to read, from the spellings present and the ranks that report memory."""
    fields = _field_names()
    names: dict[str, list[str]] = {}
    peak_fields: set[str] = set()
    for fname, (plain, peak) in fields.items():
        peaks = [n for n in peak if n in present]
        if peaks:
            names[fname] = peaks
            peak_fields.add(fname)
        else:
            plains = [n for n in plain if n in present]
            if plains:
                names[fname] = plains
    native = None
    if want_native and names and ranks:
        native = _native_interval(api, window, names, min(ranks))
    estimates = [n for n in schema.ESTIMATE.prom_aliases if n in present]
    markers = {kind: [n for n in m.prom_aliases if n in present]
               for kind, m in MARKER_METRICS.items()}
    return _Discovery(api, names, peak_fields, identities, native, estimates,
                      {k: v for k, v in markers.items() if v},
                      [n for n in schema.EDGE_TIMESTAMP.prom_aliases if n in present],
                      [n for n in schema.SAMPLING_INTERVAL.prom_aliases if n in present],
                      [n for n in schema.EDGE_GAP.prom_aliases if n in present],
                      ranks=ranks)


def _whole_window_by_rank(d: _Discovery, window: QueryWindow, name: str, over_time: str,
                          builder: TimelineBuilder, what: str) -> list[tuple[int, float]] | None:
    """``over_time(name[window])`` at the window's end, as (rank, value) for every result that
    names a rank and holds a finite number; None (and a note) when the endpoint failed."""
    sel = label_selector({"__name__": name, schema.ATTR_JOB_ID: window.job_id},
                         extra=window.extra_matchers)
    secs = max(1, math.ceil(window.seconds))
    try:
        result = d.api.query(f"{over_time}({sel}[{secs}s])", window.end_ns)
    except EndpointError as e:
        builder.notes.append(f"{d.api.url}: could not read the {what}: {e}")
        return None
    out = []
    for r in result:
        labels, value = r.get("metric"), r.get("value")
        ident = identity_from_labels(labels) if isinstance(labels, dict) else None
        try:
            v = float(value[1])  # type: ignore[index]
        except (TypeError, ValueError, IndexError, KeyError):
            continue
        if ident is not None and math.isfinite(v):
            out.append((ident.rank, v))
    return out


def _read_estimates(d: _Discovery, window: QueryWindow, builder: TimelineBuilder) -> None:
    """The tracker's pre-run estimate per rank (constant per run): one instant query."""
    out: dict[int, float] = builder.meta.setdefault(META_ESTIMATE_BYTES, {})  # type: ignore[assignment]
    for name in d.estimate_names:
        values = _whole_window_by_rank(d, window, name, "last_over_time", builder,
                                       "estimate series")
        if values is None:
            return
        for rank, v in values:
            if v > 0:
                out[rank] = v


def _native_interval(api: PrometheusAPI, window: QueryWindow,
                     names: dict[str, list[str]], rank: int) -> float | None:
    """The stored samples' spacing: median timestamp difference of one series' raw samples.

    Probes the last hour of the window first (the cron case: the job is running now); if that
    holds too few samples, falls back to ``window / count_over_time`` — an upper bound that is
    exact when the job spans the window.
    """
    name = next(iter(names.values()))[0]
    sel = label_selector({"__name__": name, schema.ATTR_JOB_ID: window.job_id,
                          schema.ATTR_RANK: str(rank)}, extra=window.extra_matchers)
    probe = max(1, math.ceil(min(window.seconds, 3600.0)))
    for r in api.query(f"{sel}[{probe}s]", window.end_ns)[:1]:
        values = r.get("values")
        if isinstance(values, list) and len(values) >= 3:
            try:
                t_ns, _ = parse_matrix_values(values)
            except ValueError:  # not [time, "number"] pairs: the server's answer is input
                break
            spacing = float(np.median(np.diff(t_ns))) / 1e9
            return spacing if spacing > 0 else None
    secs = max(1, math.ceil(window.seconds))
    for r in api.query(f"count_over_time({sel}[{secs}s])", window.end_ns)[:1]:
        value = r.get("value")
        try:
            count = float(value[1])  # type: ignore[index]
        except (TypeError, ValueError, IndexError, KeyError):
            continue
        if math.isfinite(count) and count > 1:
            return window.seconds / count
    return None


def choose_step(window: QueryWindow, native_interval_s: float | None,
                max_points_per_series: int = MAX_POINTS_PER_SERIES) -> float:
    """The finest step worth asking for: the data's own spacing, bounded by total points."""
    if window.step_s:
        return float(window.step_s)
    step = native_interval_s or 15.0
    step = max(step, window.seconds / max_points_per_series, MIN_STEP_S)
    return round(step, 3)


def adaptive_rank_batch(window: QueryWindow, step: float,
                        target: int = TARGET_SAMPLES_PER_READ) -> int:
    """Ranks per raw read: ``RANK_BATCH`` for long windows, more for short ones, so each read
    returns about ``target`` samples (one series per rank)."""
    per_series = max(1.0, window.seconds / max(step, MIN_STEP_S))
    return int(min(MAX_RANK_BATCH, max(RANK_BATCH, target // per_series)))


def load_prometheus(urls: Sequence[str], window: QueryWindow, *,
                    settings: HttpSettings | None = None, client: httpx.Client | None = None,
                    deadline: Deadline | None = None, concurrency: int = DEFAULT_CONCURRENCY,
                    rank_batch: int = RANK_BATCH, max_points: int = MAX_POINTS_PER_QUERY,
                    progress: Callable[[str], None] | None = None,
                    read_api: str = "auto") -> tuple[Timeline, LoadOutcome]:
    """Read one job from every endpoint into one Timeline; SourceFailureError if none answers.

    Several endpoints (one per cluster or region, or an HA pair) merge deterministically: every
    series is read at its own sample timestamps, the same rank's samples from all endpoints are
    united, exact duplicates dropped and conflicts resolved the same way whatever the order of
    ``urls``. ``window.step_s`` (or the stored samples' spacing) only sizes the raw chunks.

    The reads start from what two label-values answers say (spellings, ranks) while the series
    listing that gives each rank's identity runs beside them; should the listing disagree with
    them (a server that ignores ``match[]`` on label values) or fail, the job is read again
    the plain way, listing first.

    ``read_api`` picks how raw series are read (:mod:`.bulk_read`): ``auto`` probes each
    endpoint for remote read or the export API and falls back to the query API.
    """
    settings = settings or HttpSettings()
    deadline = deadline or Deadline(None)
    own_client = client is None
    http = client or make_client(settings)
    urls = sorted(dict.fromkeys(u.rstrip("/") for u in urls))  # order never changes the answer
    try:
        apis = [PrometheusAPI(u, http, settings, deadline) for u in urls]
        try:
            return _load(apis, window, concurrency, rank_batch, max_points, progress,
                         quick=True, read_api=read_api)
        except _ListingDisagrees as e:
            if progress:
                progress(f"prometheus: reading again with the series listed first ({e})")
            return _load(apis, window, concurrency, rank_batch, max_points, progress,
                         quick=False, read_api=read_api)
    finally:
        if own_client:
            http.close()


class _ListingDisagrees(Exception):
    """The series listing did not confirm what the label-values answers said (or failed)."""


def _load(apis: list[PrometheusAPI], window: QueryWindow, concurrency: int, rank_batch: int,
          max_points: int, progress: Callable[[str], None] | None, *, quick: bool,
          read_api: str = "auto") -> tuple[Timeline, LoadOutcome]:
    builder = TimelineBuilder()
    outcome = LoadOutcome()
    urls = [api.url for api in apis]
    # No cyclic GC while reading: 140,000 label maps in discovery and millions of decoded
    # numbers, all kept or dropped by reference counting (a collection finds nothing).
    with gc_paused():
        discovery_notes_at = len(builder.notes)
        discoveries = _discover_all(apis, window, builder, outcome, concurrency, quick=quick)
        _choose_readers(discoveries, window, builder, read_api)
        natives = [d.native_interval_s for d in discoveries if d.native_interval_s]
        step = choose_step(window, max(natives) if natives else None)
        outcome.step_s = step
        if rank_batch == RANK_BATCH:  # the default: as many ranks as keep a read's size bounded
            readers = {d.reader.samples_per_read if d.reader else TARGET_SAMPLES_PER_READ
                       for d in discoveries if d.ranks}
            rank_batch = adaptive_rank_batch(window, step, min(readers, default=0)
                                             or TARGET_SAMPLES_PER_READ)
        tasks = _plan_queries(discoveries, window, step, rank_batch)
        if progress and discoveries:  # none answered: the error that follows says why
            progress(f"prometheus: {len(tasks)} raw-sample queries (chunks of {max_points} "
                     f"samples at ~{step:g}s) over {len(discoveries)} endpoint(s)")
        # The two whole-window instant queries run beside the reads (the TSDB answers them
        # while this process decodes); their notes and values join in the order they had.
        notes_at = len(builder.notes)
        side_i, side_e, listed = TimelineBuilder(), TimelineBuilder(), TimelineBuilder()
        pending = [d for d in discoveries if d.listing_pending]
        with ThreadPoolExecutor(max_workers=1) as side, \
                ThreadPoolExecutor(max_workers=1) as lister:
            listings = [lister.submit(_list_series, d.api, window) for d in pending]
            intervals = side.submit(_read_intervals, discoveries, window, side_i)
            estimates = side.submit(_read_all_estimates, discoveries, window, side_e)
            checked: list[bool] = []

            def confirm() -> None:
                """The listing must confirm the label values before more than the first
                reads go out: label values naming 10^6 ranks for a 4-rank job cost a few
                requests, then the listing decides (they cost thousands)."""
                if not checked:
                    checked.append(True)
                    for d, listing in zip(pending, listings, strict=True):
                        _take_listing(d, listing, listed)

            with_data = _run_queries(tasks, builder, outcome, step, max_points, concurrency,
                                     intervals.result, confirm if pending else None)
            intervals.result()
            estimates.result()
            confirm()
        _join_reads(builder, outcome, discoveries, with_data, side_i, side_e, listed, notes_at,
                    discovery_notes_at, urls, step)
    if not outcome.endpoints_ok:
        reasons = "; ".join(f"{u}: {r}" for u, r in outcome.endpoints_failed.items())
        raise SourceFailureError(f"no Prometheus endpoint answered for job {window.job_id!r}: "
                                 f"{reasons}")
    with gc_paused():
        timeline = builder.build(job_id=window.job_id)
    timeline.meta["prometheus"] = {"step_s": step, "endpoints_ok": outcome.endpoints_ok,
                                   "endpoints_failed": outcome.endpoints_failed,
                                   "ranks_failed": {u: sorted(r) for u, r
                                                    in outcome.ranks_failed.items()},
                                   "window_start_ns": window.start_ns,
                                   "raw_samples": True,
                                   "read_api": {d.api.url: d.reader.name if d.reader
                                                else "query" for d in discoveries}}
    return timeline, outcome


def _join_reads(builder: TimelineBuilder, outcome: LoadOutcome, discoveries: list[_Discovery],
                with_data: dict[str, set[int]], side_i: TimelineBuilder,
                side_e: TimelineBuilder, listed: TimelineBuilder, notes_at: int,
                discovery_notes_at: int, urls: list[str], step: float) -> None:
    """The side reads' notes and values join the main builder in the order they had when the
    reads ran one after another (reports stay byte-identical), then which endpoints answered."""
    for d in discoveries:
        if d.reader is not None and d.reader.skipped_chunks:
            builder.skipped["bulk_chunk_skipped"] += d.reader.skipped_chunks
            builder.notes.append(f"{d.api.url}: {d.reader.skipped_chunks} chunk(s) of "
                                 "another encoding or unreadable bits passed over")
    builder.notes[notes_at:notes_at] = side_i.notes
    builder.notes[discovery_notes_at:discovery_notes_at] = listed.notes
    builder.skipped.update(listed.skipped)
    builder.notes.extend(side_e.notes)
    if META_ESTIMATE_BYTES in side_e.meta:
        builder.meta[META_ESTIMATE_BYTES] = side_e.meta[META_ESTIMATE_BYTES]
    if not builder.meta.get(META_ESTIMATE_BYTES):
        builder.meta.pop(META_ESTIMATE_BYTES, None)
    for d in discoveries:
        got = with_data.get(d.api.url, set())
        for ident in d.identities.values():
            if ident.rank in got:
                builder.set_identity(ident)
        if d.ranks and not got and d.api.url in outcome.ranks_failed:
            outcome.endpoints_failed[d.api.url] = "every range query failed"
    for d in discoveries:
        if d.api.url not in outcome.endpoints_failed:
            outcome.endpoints_ok.append(d.api.url)
    builder.sources.extend(f"prometheus:{u}" for u in urls)
    _resolution_notes(builder, discoveries, step)


def _choose_readers(discoveries: list[_Discovery], window: QueryWindow,
                    builder: TimelineBuilder, read_api: str) -> None:
    """Each endpoint's raw-series API, probed once (a note says which, and why)."""
    _, all_names = _spellings()
    for d in discoveries:
        if d.ranks:
            d.reader, note = choose_reader(d.api, _discovery_selector(window, all_names),
                                           window.end_ns / 1e9, read_api)
            builder.notes.append(note)


def _take_listing(d: _Discovery,
                  listing: Future[tuple[dict[int, RankIdentity], set[str], int]],
                  listed: TimelineBuilder) -> None:
    """The identities a listing gave, once it confirms what the quick discovery read by."""
    try:
        identities, present, bad_rank = listing.result()
    except EndpointError as e:
        raise _ListingDisagrees(f"{d.api.url}: the series listing failed: {e}") from None
    listed_d = _discovery_of(d.api, QueryWindow("", 0, 0), present, identities,
                             sorted(identities), want_native=False)
    if listed_d.ranks != d.ranks or _read_names(listed_d) != _read_names(d):
        raise _ListingDisagrees(f"{d.api.url}: the series listing found other ranks or "
                                "spellings than the label values did")
    d.identities = identities
    d.listing_pending = False
    _note_bad_ranks(d.api, listed, bad_rank)


def _read_names(d: _Discovery) -> tuple[object, ...]:
    """Everything a discovery decides to read by, besides its ranks."""
    return (d.names, d.peak_fields, d.estimate_names, d.marker_names, d.edge_names,
            d.interval_names, d.gap_names)


def _read_all_estimates(discoveries: list[_Discovery], window: QueryWindow,
                        builder: TimelineBuilder) -> None:
    for d in discoveries:
        _read_estimates(d, window, builder)


def _read_intervals(discoveries: list[_Discovery], window: QueryWindow,
                    builder: TimelineBuilder) -> dict[int, int]:
    """rank → the tracker's sampling interval (ns): the resolution of its edge timestamps.
    The largest any endpoint reports wins (the cautious choice, and order-independent)."""
    out: dict[int, int] = {}
    for d in discoveries:
        for name in d.interval_names:
            values = _whole_window_by_rank(d, window, name, "max_over_time", builder,
                                           "sampling interval")
            for rank, v in values or ():
                if 0 < v < 3600:
                    out[rank] = max(out.get(rank, 0), int(v * 1e9))
    return out


def _discover_all(apis: list[PrometheusAPI], window: QueryWindow, builder: TimelineBuilder,
                  outcome: LoadOutcome, concurrency: int, *, quick: bool = False
                  ) -> list[_Discovery]:
    def one(api: PrometheusAPI) -> _Discovery | EndpointError:
        want_native = window.step_s is None
        try:
            fast = _discover_quick(api, window, want_native) if quick else None
            return fast if fast is not None else _discover(api, window, builder, want_native)
        except EndpointError as e:
            return e

    found: list[_Discovery] = []
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(apis)))) as pool:
        for api, res in zip(apis, pool.map(one, apis), strict=True):
            if isinstance(res, EndpointError):
                outcome.endpoints_failed[api.url] = str(res)
                builder.notes.append(f"endpoint {api.url} failed, its ranks are missing: {res}")
                builder.skipped["endpoint_failed"] += 1
            elif not res.ranks:
                builder.notes.append(f"endpoint {api.url} has no stormotel series for job_id="
                                     f"{window.job_id!r} in the window")
                found.append(res)
            else:
                found.append(res)
    return found


@dataclass
class _Task:
    api: PrometheusAPI
    fname: str
    selector: str
    ranks: list[int]
    peak: bool
    start_s: float
    end_s: float
    #: "field" (a sample field), "marker" (step gauge, OOM counter) or "edge" (edge gauge).
    what: str = "field"
    #: The selector without its rank matcher (a refused read is asked again per rank set).
    base: str = ""
    #: The endpoint's bulk API (None: the query API).
    reader: BulkReader | None = None

    def split(self) -> list[_Task]:
        """Two tasks over half the ranks each (a read the server refused as too large)."""
        half = len(self.ranks) // 2
        return [replace(self, ranks=part, selector=rank_selector(self.base, part))
                for part in (self.ranks[:half], self.ranks[half:])]


def rank_selector(base: str, ranks: list[int]) -> str:
    """``base`` narrowed to ``ranks``."""
    return with_matcher(base, f'{schema.ATTR_RANK}=~"{"|".join(map(str, ranks))}"')


def _plan_queries(discoveries: list[_Discovery], window: QueryWindow, step: float,
                  rank_batch: int) -> list[_Task]:
    start_s = window.start_ns / 1e9
    end_s = window.end_ns / 1e9
    tasks = []
    for d in discoveries:
        ranks = d.ranks
        for start in range(0, len(ranks), rank_batch):
            batch = ranks[start:start + rank_batch]
            wanted = [(fname, name, "field") for fname, names in d.names.items()
                      for name in names]
            wanted += [(kind, name, "marker") for kind, names in d.marker_names.items()
                       for name in names]
            wanted += [(schema.ATTR_EDGE, name, "edge") for name in d.edge_names]
            wanted += [(schema.ATTR_EDGE, name, "edge_gap") for name in d.gap_names]
            for fname, name, what in wanted:
                base = label_selector({"__name__": name, schema.ATTR_JOB_ID: window.job_id},
                                      None, window.extra_matchers)
                tasks.append(_Task(d.api, fname, rank_selector(base, batch), batch,
                                   fname in d.peak_fields, start_s, end_s, what, base,
                                   d.reader))
    return tasks


#: Failed-query notes per endpoint before they are summarised as a count.
MAX_FAILURE_NOTES = 5

_Parts = dict[tuple[int, str], list[tuple[np.ndarray, np.ndarray]]]


#: Reads answered before a quick discovery's ranks must be confirmed by the series listing.
CONFIRM_AFTER_QUERIES = 8


def _run_queries(tasks: list[_Task], builder: TimelineBuilder, outcome: LoadOutcome,
                 step: float, max_points: int, concurrency: int,
                 intervals: Callable[[], dict[int, int]] | None = None,
                 confirm: Callable[[], None] | None = None) -> dict[str, set[int]]:
    """Run every raw-sample query and hand each rank to the builder as soon as every query
    that names it (on every endpoint) has answered; returns endpoint → ranks that received
    samples. ``confirm`` runs once :data:`CONFIRM_AFTER_QUERIES` reads have answered (it
    raises when the series listing disagrees with what the reads were planned from).

    Streaming by rank keeps memory to the ranks still being read (their decoded parts), and
    the merge and markers of finished ranks run while the TSDB answers the next reads."""
    with_data: dict[str, set[int]] = {}
    failures: dict[str, int] = {}
    if not tasks:
        return with_data
    chunk_s = max(60.0, step * max(2, max_points - 1))
    finish = _RankFinisher(builder, intervals or dict)
    waiting: dict[int, int] = {}  # rank → its queries not answered yet
    for task in tasks:
        for rank in task.ranks:
            waiting[rank] = waiting.get(rank, 0) + 1

    def one(task: _Task) -> list[Series] | EndpointError:
        return _read_task(task, chunk_s)

    for task, res in _in_order_bounded(one, tasks, max(1, concurrency)):
        outcome.queries += 1
        if confirm is not None and outcome.queries >= CONFIRM_AFTER_QUERIES:
            confirm()
        if isinstance(res, EndpointError):
            outcome.ranks_failed.setdefault(task.api.url, set()).update(task.ranks)
            builder.skipped["query_failed"] += 1
            failures[task.api.url] = failures.get(task.api.url, 0) + 1
            if failures[task.api.url] <= MAX_FAILURE_NOTES:
                builder.notes.append(f"{task.api.url}: {task.fname} for ranks "
                                     f"{format_rank_list(task.ranks)} failed: {res}")
        elif task.what == "marker":
            _collect_marker_series(res, task, finish.marker_series)
        elif task.what == "edge":
            _collect_edges(res, task, finish.edges)
        elif task.what == "edge_gap":
            _collect_edges(res, task, finish.gaps)
        else:
            got = _collect_samples(res, task, builder, finish.samples)
            with_data.setdefault(task.api.url, set()).update(got)
            finish.have_data.update(got)
        del res  # this answer's arrays live on in the parts only
        done = []
        for rank in task.ranks:
            waiting[rank] -= 1
            if not waiting[rank]:
                done.append(rank)
        if done:
            finish(done)
    finish.close()
    for url, n in failures.items():
        if n > MAX_FAILURE_NOTES:
            builder.notes.append(f"{url}: {n - MAX_FAILURE_NOTES} more range queries failed "
                                 f"(ranks {format_rank_list(outcome.ranks_failed[url])})")
    return with_data


def _read_task(task: _Task, chunk_s: float) -> list[Series] | EndpointError:
    """A refused read is split by rank set first (a server's series and samples limits
    count whole series), then, down to one rank, in time (a bulk read refused for one
    rank is asked again through the query API, which splits in time)."""
    try:
        if task.reader is not None:
            try:
                return task.reader.read(task.selector, task.start_s, task.end_s)
            except EndpointError as e:
                if not is_too_large(e):
                    return e
                if len(task.ranks) > 1:
                    raise
        return task.api.query_raw_series(task.selector, task.start_s, task.end_s, chunk_s,
                                         split_time=len(task.ranks) == 1)
    except EndpointError as e:
        if not (is_too_large(e) and len(task.ranks) > 1):
            return e
    out: list[Series] = []
    for part in task.split():
        got = _read_task(part, chunk_s)
        if isinstance(got, EndpointError):
            return got
        out += got
    return out


_K = TypeVar("_K")
_V = TypeVar("_V")
_I = TypeVar("_I")
_R = TypeVar("_R")
#: Answers decoded but not yet taken in, per worker: the read-ahead that keeps the TSDB busy
#: while a slow answer (a retry) holds up the ones behind it, without holding them all.
READ_AHEAD_PER_WORKER = 2


def _in_order_bounded(fn: Callable[[_I], _R], items: Sequence[_I], workers: int
                      ) -> Iterator[tuple[_I, _R]]:
    """``(item, fn(item))`` in the order of ``items``, ``workers`` at a time, with at most
    ``READ_AHEAD_PER_WORKER * workers`` submitted and not yet yielded (``pool.map`` submits
    everything at once: a slow first answer would let every other one pile up decoded)."""
    ahead = READ_AHEAD_PER_WORKER * workers
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: deque[tuple[_I, Future[_R]]] = deque()
        todo = iter(items)
        for item in todo:
            pending.append((item, pool.submit(fn, item)))
            if len(pending) >= ahead:
                break
        while pending:
            item, fut = pending.popleft()
            got = fut.result()
            for nxt in todo:
                pending.append((nxt, pool.submit(fn, nxt)))
                break
            yield item, got


def _pop_keys(d: dict[_K, _V], keys: list[_K]) -> dict[_K, _V]:
    """The entries of ``keys`` that ``d`` holds, moved out of it."""
    return {k: d.pop(k) for k in keys if k in d}


class _RankFinisher:
    """What the reads brought so far, per rank, and the step that turns a rank whose reads
    are all answered into builder samples and markers (its parts then let go)."""

    def __init__(self, builder: TimelineBuilder,
                 intervals: Callable[[], dict[int, int]]) -> None:
        self.builder = builder
        #: rank → sampling interval, asked for only when a rank has edges (it may still be
        #: in flight beside the reads).
        self.intervals = intervals
        self.samples: _Parts = {}
        self.marker_series: dict[tuple[str, int], list[tuple[np.ndarray, np.ndarray]]] = {}
        self.edges: _Parts = {}
        self.gaps: _Parts = {}
        #: Ranks that received samples from any endpoint (only those get markers).
        self.have_data: set[int] = set()
        self.conflicts = 0
        #: One step name and attribute map per step number, shared by every rank.
        self.shared_steps = StepNames()

    def __call__(self, ranks: list[int]) -> None:
        ranks = sorted(ranks)
        samples = _pop_keys(self.samples, [(r, f) for r in ranks for f in schema.FIELD_METRICS])
        markers = _pop_keys(self.marker_series, [(k, r) for r in ranks for k in MARKER_METRICS])
        edges = _pop_keys(self.edges, [(r, k) for r in ranks for k in EDGE_MARKER_KINDS])
        gaps = _pop_keys(self.gaps, [(r, k) for r in ranks for k in EDGE_MARKER_KINDS])
        self.conflicts += _merge_samples(samples, self.builder)
        for rank, m in markers_from_series(markers, self.shared_steps).items():
            if rank in self.have_data:
                self.builder.add_markers(rank, m)
        for rank, m in markers_from_edges(edges, self.intervals() if edges else {},
                                          gaps).items():
            if rank in self.have_data:
                self.builder.add_markers(rank, m)

    def close(self) -> None:
        """Every rank is finished by now; anything left (a series naming a rank no query
        asked for) is dropped as before, and the conflicts are noted once."""
        if self.conflicts:
            self.builder.skipped["conflicting_sample"] += self.conflicts
            self.builder.notes.append(
                f"prometheus: {self.conflicts} timestamp(s) held different values on "
                "different endpoints (or spellings); the larger value was kept, whatever the "
                "endpoint order")


def matrix_series(results: list[dict[str, object]], builder: TimelineBuilder
                  ) -> Iterator[tuple[dict[str, str], list[object]]]:
    """Each well-formed series of a range query's matrix as (labels, values), labels as strings;
    a malformed one is counted (``malformed_series``) and passed over."""
    for r in results:
        labels = r.get("metric")
        values = r.get("values")
        if not isinstance(labels, dict) or not isinstance(values, list):
            builder.skipped["malformed_series"] += 1
            continue
        yield {str(k): str(v) for k, v in labels.items()}, values


def clean_series(s: Series, builder: TimelineBuilder) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`clean_byte_series` for a decoded :class:`Series` (values already parsed)."""
    if s.t_ns is None or s.v is None:
        builder.skipped["malformed_series"] += 1
        return None
    if s.clean:
        return s.t_ns, s.v
    t_ns, v = s.t_ns, s.v
    bad = ~np.isfinite(v) | (v < 0)
    if bad.any():
        builder.skipped["non_finite_or_negative_bytes"] += int(bad.sum())
        t_ns, v = t_ns[~bad], v[~bad]
    return t_ns, v


def _collect_samples(results: list[Series], task: _Task, builder: TimelineBuilder,
                     out: _Parts) -> set[int]:
    got: set[int] = set()
    ranks = set(task.ranks)
    for s in results:
        if s.labels is None:
            builder.skipped["malformed_series"] += 1
            continue
        rank = _int_label(s.labels, schema.ATTR_RANK)  # what identity_from_labels accepts
        if rank is None or rank not in ranks:
            builder.skipped["series_without_valid_rank_label"] += 1
            continue
        cleaned = clean_series(s, builder)
        if cleaned is None:
            continue
        t_ns, v = cleaned
        if t_ns.size:
            out.setdefault((rank, task.fname), []).append((t_ns, v))
            got.add(rank)
    return got


def merge_parts(parts: list[tuple[np.ndarray, np.ndarray]]
                ) -> tuple[np.ndarray, np.ndarray, int, int]:
    """One series from several reads (endpoints, chunks, spellings): sorted by time, exact
    duplicates dropped, and where values conflict at one timestamp the larger kept — a rule
    that gives the same answer in any read order. Returns (t, v, duplicates, conflicts)."""
    t = np.concatenate([p[0] for p in parts]) if len(parts) > 1 else parts[0][0]
    v = np.concatenate([p[1] for p in parts]) if len(parts) > 1 else parts[0][1]
    if t.size < 2 or bool((t[1:] > t[:-1]).all()):  # the usual read: already in order, unique
        return t, v, 0, 0
    order = np.lexsort((v, t))  # by time, then value
    t, v = t[order], v[order]
    same_t = t[1:] == t[:-1]
    same_v = v[1:] == v[:-1]
    dups = int((same_t & same_v).sum())
    conflict_ts = np.unique(t[1:][same_t & ~same_v])
    keep = np.r_[~same_t, True]  # the last of each equal-time run: the largest value
    return t[keep], v[keep], dups, int(conflict_ts.size)


def _merge_samples(samples: _Parts, builder: TimelineBuilder) -> int:
    """Each rank's fields into the builder as one chunk on the union of their timestamps (NaN
    where a field has no sample): what the builder's own merge of one chunk per field gives,
    without holding every field's chunk padded to all fields first (7x the memory). Returns
    how many timestamps held conflicting values (the caller notes them once)."""
    conflicts = 0
    by_rank: dict[int, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    usual = _one_scrape_ranks(samples)
    for (rank, fname), parts in sorted(samples.items()):
        if rank in usual:
            by_rank.setdefault(rank, {})[fname] = parts[0]
            continue
        t, v, dups, bad = merge_parts(parts)
        by_rank.setdefault(rank, {})[fname] = (t, v)
        if dups:
            builder.skipped["duplicate_sample"] += dups
        conflicts += bad
    samples.clear()  # the parts are merged: let them go before the rank chunks are built
    for rank, fields in by_rank.items():
        if rank in usual:
            t_union = next(iter(fields.values()))[0]
            builder.add_samples(rank, t_union, **{f: v for f, (_, v) in fields.items()})
            continue
        t_union, cols = _rank_chunk(fields)
        builder.add_samples(rank, t_union, **cols)
    return conflicts


def _one_scrape_ranks(samples: _Parts) -> set[int]:
    """The ranks whose every field came in one read, on the same strictly increasing
    timestamps (the usual: one scrape target, one endpoint): nothing to merge. Checked for
    all ranks at once over joined arrays; :func:`merge_parts` and :func:`_rank_chunk` give
    the others (and would give these the same result, one small array at a time)."""
    ref: dict[int, np.ndarray] = {}
    entries: list[tuple[int, np.ndarray]] = []
    odd: set[int] = set()
    for (rank, _), parts in samples.items():
        if len(parts) != 1:
            odd.add(rank)
            continue
        t = parts[0][0]
        first = ref.setdefault(rank, t)
        if t.shape != first.shape or not t.size:
            odd.add(rank)
        entries.append((rank, t))
    ranks = [r for r in ref if r not in odd]
    if not ranks:
        return set()
    # Each rank's timestamps strictly increasing: one diff over them all, rank edges excused.
    refs = [ref[r] for r in ranks]
    joined = np.concatenate(refs)
    sizes = np.fromiter((a.size for a in refs), dtype=np.int64, count=len(refs))
    edges = np.cumsum(sizes)
    rising = np.ones(joined.size, dtype=bool)
    rising[1:] = joined[1:] > joined[:-1]
    rising[edges[:-1]] = True
    ok_rank = np.logical_and.reduceat(rising, edges - sizes)  # every size is above 0
    good = {r for r, ok in zip(ranks, ok_rank.tolist(), strict=True) if ok}
    # Every field on its rank's timestamps: one comparison of every entry with its reference.
    kept = [(r, t) for r, t in entries if r in good]
    if kept:
        mine = np.concatenate([t for _, t in kept])
        theirs = np.concatenate([ref[r] for r, _ in kept])
        same = mine == theirs
        lens = np.fromiter((t.size for _, t in kept), dtype=np.int64, count=len(kept))
        ends = np.cumsum(lens)
        each = np.logical_and.reduceat(same, ends - lens)
        good -= {r for (r, _), ok in zip(kept, each.tolist(), strict=True) if not ok}
    return good


def _rank_chunk(fields: dict[str, tuple[np.ndarray, np.ndarray]]
                ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Sorted unique per-field series → (union of timestamps, one column per field)."""
    series = list(fields.values())
    first = series[0][0]
    if all(t.shape == first.shape and np.array_equal(t, first) for t, _ in series[1:]):
        return first, {f: v for f, (_, v) in fields.items()}  # one scrape: the usual case
    t_union = np.unique(np.concatenate([t for t, _ in series]))
    cols = {}
    for f, (t, v) in fields.items():
        col = np.full(t_union.shape, np.nan)
        col[np.searchsorted(t_union, t)] = v
        cols[f] = col
    return t_union, cols


def _collect_edges(results: list[Series], task: _Task, out: _Parts) -> None:
    ranks = set(task.ranks)
    for s in results:
        if s.labels is None or s.t_ns is None or s.v is None:
            continue
        ident = identity_from_labels(s.labels)
        kind = s.labels.get(schema.ATTR_EDGE, "")
        if ident is None or ident.rank not in ranks or kind not in EDGE_MARKER_KINDS:
            continue
        out.setdefault((ident.rank, kind), []).append((s.t_ns, s.v))


def markers_from_edges(edges: _Parts, intervals: dict[int, int],
                       gaps: _Parts | None = None) -> dict[int, Markers]:
    """Each distinct value of an edge-timestamp gauge is one edge at that (tracker) time. Its
    resolution is the tracker's sampling interval, when known, or the edge-gap gauge scraped
    with it when that is longer (the sampler ran late before the edge's sample)."""
    acc = MarkerAccumulator()
    for (rank, kind), parts in sorted(edges.items()):
        t_scrape = np.concatenate([p[0] for p in parts])
        v = np.concatenate([p[1] for p in parts])
        ok = np.isfinite(v) & (v > 0)
        t_scrape, edge_ms = t_scrape[ok], np.rint(v[ok] * 1000.0).astype(np.int64)
        gap_at = _gap_by_scrape((gaps or {}).get((rank, kind), []))
        for t_ms in sorted(set(edge_ms.tolist())):
            t = int(t_ms) * 1_000_000
            attrs: dict[str, object] = {schema.ATTR_EDGE: kind}
            res = [intervals[rank]] if rank in intervals else []
            res += [g for ts in t_scrape[edge_ms == t_ms].tolist()
                    if (g := gap_at.get(int(ts))) is not None]
            if res:
                attrs[EDGE_RESOLUTION_ATTR] = max(res)
            acc.add(rank, t, t, kind, EDGE_MARKER_KINDS[kind], attrs)
    return acc.build()


def _gap_by_scrape(parts: list[tuple[np.ndarray, np.ndarray]]) -> dict[int, int]:
    """Scrape time → the edge-gap gauge's value then (ns); the largest where endpoints differ."""
    out: dict[int, int] = {}
    for t_ns, v in parts:
        for ts, g in zip(t_ns.tolist(), v.tolist(), strict=True):
            if g == g and 0 < g < 1e6:  # finite, positive, under ~11 days
                out[int(ts)] = max(out.get(int(ts), 0), int(g * 1e9))
    return out


def _collect_marker_series(results: list[Series], task: _Task,
                           out: dict[tuple[str, int], list[tuple[np.ndarray, np.ndarray]]]
                           ) -> None:
    ranks = set(task.ranks)
    for s in results:
        if s.labels is None or s.t_ns is None or s.v is None:
            continue
        rank = _int_label(s.labels, schema.ATTR_RANK)  # what identity_from_labels accepts
        if rank is None or rank not in ranks:
            continue
        out.setdefault((task.fname, rank), []).append((s.t_ns, s.v))


class StepNames:
    """One name and one attribute map (never written after) per step number, shared by every
    rank: a thousand ranks' markers hold one copy of each, and a rank's names are looked up
    with one ``searchsorted`` (every rank passes through the same steps) instead of a dict
    lookup per step."""

    def __init__(self) -> None:
        self.keys = np.empty(0, np.int64)  # sorted step numbers
        self.names = np.empty(0, dtype=object)
        self.attrs = np.empty(0, dtype=object)
        self._other: dict[int, tuple[str, Mapping[str, object]]] = {}

    def lookup(self, steps: np.ndarray) -> np.ndarray:
        """Positions in ``names``/``attrs`` of any int64 ``steps`` (unsorted, repeated): one
        ``searchsorted`` when every step is known already (every batch of ranks after the
        first passes through the same steps), else the new ones added first."""
        pos = np.searchsorted(self.keys, steps)
        if self.keys.size and pos.size:
            known = self.keys[np.minimum(pos, self.keys.size - 1)] == steps
            if bool(known.all()):
                return pos
            steps_new = np.unique(steps[~known])
        else:
            steps_new = np.unique(steps)
        self._add(steps_new)
        return np.searchsorted(self.keys, steps)

    def _add(self, new: np.ndarray) -> None:
        """Names and attribute maps for ``new`` step numbers (sorted, unique, none known)."""
        keys = np.concatenate([self.keys, new])
        order = np.argsort(keys, kind="stable")
        names = np.empty(new.size, dtype=object)
        attrs = np.empty(new.size, dtype=object)
        for i, n in enumerate(new.tolist()):
            names[i], attrs[i] = f"step {n}", {schema.SPAN_ATTR_STEP: n}
        self.keys = keys[order]
        self.names = np.concatenate([self.names, names])[order]
        self.attrs = np.concatenate([self.attrs, attrs])[order]

    def get(self, n: int) -> tuple[str, Mapping[str, object]]:
        """The pair for one step number beyond int64 (no array lookup)."""
        got = self._other.get(n)
        if got is None:
            got = self._other[n] = (f"step {n}", {schema.SPAN_ATTR_STEP: n})
        return got


def markers_from_series(series: dict[tuple[str, int], list[tuple[np.ndarray, np.ndarray]]],
                        shared: StepNames | None = None) -> dict[int, Markers]:
    """Step gauge → one ``step N`` slice per run of equal values; OOM counter → an instant at
    each increase. Chunks of one series are joined first so no step is cut at a chunk edge.

    Steps are built as arrays (a training job scraped every 15 s shows a new step at nearly
    every scrape: millions of markers at cluster scale), every rank of a call in one pass, in
    the order and shape the marker accumulator gives them; ``shared`` keeps their names across
    calls."""
    per_rank: dict[int, list[Markers | None]] = {}
    shared = StepNames() if shared is None else shared
    steps: list[tuple[int, int, np.ndarray, np.ndarray]] = []  # rank, its slot, t, v
    for (kind, rank), parts in sorted(series.items()):
        if len(parts) == 1:
            t, v = parts[0]
        else:
            t = np.concatenate([p[0] for p in parts])
            v = np.concatenate([p[1] for p in parts])
        if t.size > 1 and not bool((t[1:] >= t[:-1]).all()):
            order = np.argsort(t, kind="stable")
            t, v = t[order], v[order]
        ok = np.isfinite(v)
        if not ok.all():
            t, v = t[ok], v[ok]
        if not t.size:
            continue
        if kind == KIND_STEP:
            slots = per_rank.setdefault(rank, [])
            steps.append((rank, len(slots), t, v))
            slots.append(None)  # filled below, with every rank's steps at once
            continue
        if bool((v[1:] == v[:-1]).all()):
            continue  # a counter that never moved: no increase (the usual OOM counter)
        acc = MarkerAccumulator()  # an OOM lies between the scrape that shows it and the one before
        for at, before, count in counter_increases(t, v):
            acc.add(rank, at, at, "OOM", KIND_OOM,
                    {"count": count, OOM_SOURCE_ATTR: OOM_FROM_COUNTER,
                     EDGE_RESOLUTION_ATTR: at - before})
        if len(acc):
            per_rank.setdefault(rank, []).append(acc.build()[rank])
    built = _steps_of_ranks([(t, v) for _, _, t, v in steps], shared)
    for (rank, slot, _, _), m in zip(steps, built, strict=True):
        per_rank[rank][slot] = m
    return {rank: _concat_markers([m for m in ms if m is not None])
            for rank, ms in per_rank.items()}


def _steps_of_ranks(series: list[tuple[np.ndarray, np.ndarray]], shared: StepNames
                    ) -> list[Markers]:
    """:func:`_step_markers` of each (t, v), sorted and finite, computed over all of them at
    once (one pass over the joined arrays instead of a dozen small ones per rank); the same
    markers, rank by rank."""
    if len(series) < 2:
        return [_step_markers(t, v, shared) for t, v in series]
    t = np.concatenate([s[0] for s in series])
    v = np.concatenate([s[1] for s in series])
    sizes = np.fromiter((s[0].size for s in series), dtype=np.int64, count=len(series))
    offsets = np.zeros(len(series) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    change = np.empty(v.shape, dtype=bool)
    change[0] = True
    np.not_equal(v[1:], v[:-1], out=change[1:])
    change[offsets[:-1]] = True  # each rank's first sample starts its first step
    starts = np.flatnonzero(change)
    first = v[starts]
    if not bool((np.abs(first) < 2**62).all()):  # a step number beyond int64: rank by rank
        return [_step_markers(tt, vv, shared) for tt, vv in series]
    ends = np.empty(starts.shape, dtype=np.int64)
    ends[:-1] = t[starts[1:]]
    own = np.searchsorted(starts, offsets)  # each rank's steps: starts[own[i]:own[i + 1]]
    ends[own[1:] - 1] = t[offsets[1:] - 1]  # a rank's last step ends at its last sample
    at = shared.lookup(first.astype(np.int64))  # int() of each: truncation toward zero
    names, attrs = shared.names[at], shared.attrs[at]
    begin = t[starts].astype(np.int64)
    out = []
    for i in range(len(series)):
        a, b = int(own[i]), int(own[i + 1])
        out.append(Markers(start_ns=begin[a:b].copy(), end_ns=ends[a:b].copy(),
                           name=names[a:b], kind=np.full(b - a, KIND_STEP, dtype=object),
                           attrs=tuple(attrs[a:b].tolist())))
    return out


def _step_markers(t: np.ndarray, v: np.ndarray, shared: StepNames) -> Markers:
    """A step lasts until the next one is first seen (the last until its last sample)."""
    change = np.empty(v.shape, dtype=bool)
    change[0] = True
    np.not_equal(v[1:], v[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    ends = np.empty(starts.shape, dtype=np.int64)
    ends[:-1] = t[starts[1:]]
    ends[-1] = t[-1]
    first = v[starts]
    if (np.abs(first) < 2**62).all():
        at = shared.lookup(first.astype(np.int64))  # int() of each: truncation toward zero
        names, attrs = shared.names[at], shared.attrs[at]
    else:
        pairs = [shared.get(int(x)) for x in first.tolist()]
        names = np.empty(len(pairs), dtype=object)
        attrs = np.empty(len(pairs), dtype=object)
        for i, (name, attr) in enumerate(pairs):
            names[i], attrs[i] = name, attr
    return Markers(start_ns=t[starts].astype(np.int64), end_ns=ends,
                   name=names, kind=np.full(len(starts), KIND_STEP, dtype=object),
                   attrs=tuple(attrs.tolist()))


def _concat_markers(ms: list[Markers]) -> Markers:
    if len(ms) == 1:
        return ms[0]
    return Markers(start_ns=np.concatenate([m.start_ns for m in ms]),
                   end_ns=np.concatenate([m.end_ns for m in ms]),
                   name=np.concatenate([m.name for m in ms]),
                   kind=np.concatenate([m.kind for m in ms]),
                   attrs=tuple(a for m in ms for a in m.attrs))


def _resolution_notes(builder: TimelineBuilder, discoveries: list[_Discovery],
                      step: float) -> None:
    native = [d.native_interval_s for d in discoveries if d.native_interval_s]
    peaks = sorted({f for d in discoveries for f in d.peak_fields})
    msg = "prometheus: raw samples at their own timestamps"
    if native:
        msg += f" (stored every ~{max(native):.3g}s)"
    msg += "; a lead shorter than the evidence's resolution is called a tie"
    if any(d.edge_names for d in discoveries):
        msg += "; the tracker's edge gauges time rises to its own samples"
    if peaks:
        msg += f"; used the rolling peak series for {', '.join(peaks)}"
    apis = sorted({d.reader.label if d.reader else QUERY_LABEL for d in discoveries if d.ranks})
    if apis:
        msg += f"; read through the {' and the '.join(apis)}"
    builder.notes.append(msg)
