"""Reading one job from every endpoint: discovery, the planned queries run with bounded
concurrency and read-ahead, each rank finished as its last answer arrives, the outcome per
endpoint (:func:`load_prometheus`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar, cast

import httpx
import numpy as np
from stormotel.analyzers.gcpause import gc_paused
from stormotel.analyzers.http import Deadline, EndpointError, HttpSettings, make_client
from stormotel.analyzers.rankspec import format_rank_list
from stormotel.analyzers.sources.bulk_read import choose_reader
from stormotel.analyzers.sources.prometheus.discover import (
    MARKER_METRICS,
    SIDE_RESTARTS,
    SIDE_STARTS,
    SIDE_STOPS,
    Discovery,
    discover,
    discover_quick,
    discovery_of,
    discovery_selector,
    list_series,
    note_bad_ranks,
    read_clean_stops,
    read_estimates,
    read_tracker_starts,
    spellings,
    whole_window_by_rank,
)
from stormotel.analyzers.sources.prometheus.markers import (
    StepNames,
    collect_edges,
    collect_marker_series,
    markers_from_edges,
    markers_from_series,
    resolution_notes,
)
from stormotel.analyzers.sources.prometheus.plan import (
    DEFAULT_CONCURRENCY,
    RANK_BATCH,
    TARGET_SAMPLES_PER_READ,
    Parts,
    QueryTask,
    SampleParts,
    adaptive_rank_batch,
    choose_step,
    plan_queries,
)
from stormotel.analyzers.sources.prometheus.samples import collect_samples, merge_samples
from stormotel.analyzers.sources.prometheus_api import (
    MAX_POINTS_PER_QUERY,
    PrometheusAPI,
    Series,
    is_too_large,
)
from stormotel.analyzers.sources.protocol import LoadOutcome, QueryWindow
from stormotel.analyzers.timeline import (
    EDGE_MARKER_KINDS,
    KIND_TRACKER_START,
    KIND_TRACKER_STOP,
    META_ESTIMATE_BYTES,
    META_STOP_REPORTED,
    Markers,
    RankIdentity,
    Timeline,
    TimelineBuilder,
)

from stormotel import schema
from stormotel.errors import SourceFailureError


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
        tasks = plan_queries(discoveries, window, step, rank_batch)
        if progress and discoveries:  # none answered: the error that follows says why
            progress(f"prometheus: {len(tasks)} raw-sample queries (chunks of {max_points} "
                     f"samples at ~{step:g}s) over {len(discoveries)} endpoint(s)")
        # The whole-window instant queries (intervals; estimates, clean stops) run beside the
        # reads (the TSDB answers them
        # while this process decodes); their notes and values join in the order they had.
        notes_at = len(builder.notes)
        side_i, side_e, listed = TimelineBuilder(), TimelineBuilder(), TimelineBuilder()
        pending = [d for d in discoveries if d.listing_pending]
        with ThreadPoolExecutor(max_workers=1) as side, \
                ThreadPoolExecutor(max_workers=1) as lister:
            listings = [lister.submit(list_series, d.api, window) for d in pending]
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


def _join_reads(builder: TimelineBuilder, outcome: LoadOutcome, discoveries: list[Discovery],
                with_data: dict[str, set[int]], side_i: TimelineBuilder,
                side_e: TimelineBuilder, listed: TimelineBuilder, notes_at: int,
                discovery_notes_at: int, urls: list[str], step: float) -> None:
    """The side reads' notes and values join the main builder in the order they had when the
    reads ran one after another (reports stay byte-identical), then which endpoints answered."""
    for d in discoveries:
        if d.reader is not None:
            builder.notes.extend(d.reader.notes)
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
    _join_clean_stops(builder, side_e, with_data)
    for d in discoveries:
        got = with_data.get(d.api.url, set())
        for ident in d.identities.values():
            if ident.rank in got:
                builder.set_identity(ident)
        if d.ranks and not got and d.api.url in outcome.ranks_failed:
            why = outcome.first_failure.get(d.api.url)  # a damaged answer says how
            outcome.endpoints_failed[d.api.url] = ("every range query failed"
                                                   + (f" (the first: {why})" if why else ""))
    for d in discoveries:
        if d.api.url not in outcome.endpoints_failed:
            outcome.endpoints_ok.append(d.api.url)
    builder.sources.extend(f"prometheus:{u}" for u in urls)
    resolution_notes(builder, discoveries, step)


def _join_clean_stops(builder: TimelineBuilder, side: TimelineBuilder,
                      with_data: dict[str, set[int]]) -> None:
    """The side read's clean stops and tracker starts as markers of the ranks that have
    samples, and the ranks whose tracker delivers its stop (no key when none: the meta stays
    as it was)."""
    read = set().union(*with_data.values()) if with_data else set()
    for key, name, kind in ((SIDE_STARTS, "tracker start", KIND_TRACKER_START),
                            (SIDE_RESTARTS, "tracker start", KIND_TRACKER_START),
                            (SIDE_STOPS, "tracker stop", KIND_TRACKER_STOP)):
        for rank, at in sorted(cast("dict[int, int | list[int]]", side.meta.get(key) or {})
                               .items()):
            if rank in read:  # one time a rank, or (the restarts) every later start
                t = np.array(at if isinstance(at, list) else [at], np.int64)
                builder.add_markers(rank, Markers(
                    t, t.copy(), np.array([name] * len(t), object),
                    np.array([kind] * len(t), object), ({},) * len(t)))
    reports = [r for r in cast("list[int]", side.meta.get(META_STOP_REPORTED) or [])
               if r in read]
    if reports:
        builder.meta[META_STOP_REPORTED] = sorted(reports)


def _choose_readers(discoveries: list[Discovery], window: QueryWindow,
                    builder: TimelineBuilder, read_api: str) -> None:
    """Each endpoint's raw-series API, probed once (a note says which, and why)."""
    _, all_names = spellings()
    for d in discoveries:
        if d.ranks:
            d.reader, note = choose_reader(d.api, discovery_selector(window, all_names),
                                           window.end_ns / 1e9, read_api)
            builder.notes.append(note)


def _take_listing(d: Discovery,
                  listing: Future[tuple[dict[int, RankIdentity], set[str], int]],
                  listed: TimelineBuilder) -> None:
    """The identities a listing gave, once it confirms what the quick discovery read by."""
    try:
        identities, present, bad_rank = listing.result()
    except EndpointError as e:
        raise _ListingDisagrees(f"{d.api.url}: the series listing failed: {e}") from None
    listed_d = discovery_of(d.api, QueryWindow("", 0, 0), present, identities,
                             sorted(identities), want_native=False)
    if listed_d.ranks != d.ranks or _read_names(listed_d) != _read_names(d):
        raise _ListingDisagrees(f"{d.api.url}: the series listing found other ranks or "
                                "spellings than the label values did")
    d.identities = identities
    d.listing_pending = False
    note_bad_ranks(d.api, listed, bad_rank)


def _read_names(d: Discovery) -> tuple[object, ...]:
    """Everything a discovery decides to read by, besides its ranks."""
    return (d.names, d.peak_fields, d.estimate_names, d.marker_names, d.edge_names,
            d.interval_names, d.gap_names, d.stop_names, d.stop_reported_names, d.start_names)


def _read_all_estimates(discoveries: list[Discovery], window: QueryWindow,
                        builder: TimelineBuilder) -> None:
    """The per-rank constants: the pre-run estimate, then the trackers' clean stops and
    starts."""
    for d in discoveries:
        read_estimates(d, window, builder)
    for d in discoveries:
        read_clean_stops(d, window, builder)
    for d in discoveries:
        read_tracker_starts(d, window, builder)


def _read_intervals(discoveries: list[Discovery], window: QueryWindow,
                    builder: TimelineBuilder) -> dict[int, int]:
    """rank → the tracker's sampling interval (ns): the resolution of its edge timestamps.
    The largest any endpoint reports wins (the cautious choice, and order-independent)."""
    out: dict[int, int] = {}
    for d in discoveries:
        for name in d.interval_names:
            values = whole_window_by_rank(d, window, name, "max_over_time", builder,
                                           "sampling interval")
            for rank, v in values or ():
                if 0 < v < 3600:
                    out[rank] = max(out.get(rank, 0), int(v * 1e9))
    return out


def _discover_all(apis: list[PrometheusAPI], window: QueryWindow, builder: TimelineBuilder,
                  outcome: LoadOutcome, concurrency: int, *, quick: bool = False
                  ) -> list[Discovery]:
    def one(api: PrometheusAPI) -> Discovery | EndpointError:
        want_native = window.step_s is None
        try:
            fast = discover_quick(api, window, want_native) if quick else None
            return fast if fast is not None else discover(api, window, builder, want_native)
        except EndpointError as e:
            return e

    found: list[Discovery] = []
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


#: Failed-query notes per endpoint before they are summarised as a count.
MAX_FAILURE_NOTES = 5


#: Reads answered before a quick discovery's ranks must be confirmed by the series listing.
CONFIRM_AFTER_QUERIES = 8


def _run_queries(tasks: list[QueryTask], builder: TimelineBuilder, outcome: LoadOutcome,
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

    def one(task: QueryTask) -> list[Series] | EndpointError:
        return _read_task(task, chunk_s)

    for task, res in _in_order_bounded(one, tasks, max(1, concurrency)):
        outcome.queries += 1
        if confirm is not None and outcome.queries >= CONFIRM_AFTER_QUERIES:
            confirm()
        if isinstance(res, EndpointError):
            outcome.ranks_failed.setdefault(task.api.url, set()).update(task.ranks)
            outcome.first_failure.setdefault(task.api.url, str(res))
            builder.skipped["query_failed"] += 1
            failures[task.api.url] = failures.get(task.api.url, 0) + 1
            if failures[task.api.url] <= MAX_FAILURE_NOTES:
                builder.notes.append(f"{task.api.url}: {task.fname} for ranks "
                                     f"{format_rank_list(task.ranks)} failed: {res}")
        elif task.what == "marker":
            collect_marker_series(res, task, finish.marker_series)
        elif task.what == "edge":
            collect_edges(res, task, finish.edges)
        elif task.what == "edge_gap":
            collect_edges(res, task, finish.gaps)
        else:
            got = collect_samples(res, task, builder, finish.samples)
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


def _read_task(task: QueryTask, chunk_s: float) -> list[Series] | EndpointError:
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
        self.samples: SampleParts = {}
        self.marker_series: dict[tuple[str, int], list[tuple[np.ndarray, np.ndarray]]] = {}
        self.edges: Parts = {}
        self.gaps: Parts = {}
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
        self.conflicts += merge_samples(samples, self.builder)
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
