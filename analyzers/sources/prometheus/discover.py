"""What an endpoint holds for the job before anything is read: which spellings of each field,
which ranks and their identities, the estimate and edge series, the native sample interval
(the quick path from label values, the series listing as the check)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from stormotel.analyzers.http import EndpointError
from stormotel.analyzers.sources.bulk_read import BulkReader
from stormotel.analyzers.sources.prometheus_api import (
    PrometheusAPI,
    label_selector,
    name_regex,
    parse_matrix_values,
    values_regex,
    with_matcher,
)
from stormotel.analyzers.sources.protocol import QueryWindow
from stormotel.analyzers.timeline import (
    KIND_OOM,
    KIND_STEP,
    META_ESTIMATE_BYTES,
    META_STOP_REPORTED,
    RankIdentity,
    TimelineBuilder,
)

from stormotel import schema

#: Series turned into Timeline markers: the step gauge (one "step N" slice per value) and
#: the OOM counter (an instant wherever it increases). Spans are not in a TSDB; these are.
MARKER_METRICS: dict[str, schema.Metric] = {KIND_STEP: schema.STEP, KIND_OOM: schema.OOMS}


# --- loading a job ---------------------------------------------------------------------------

@dataclass
class Discovery:
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
    #: Spellings of the tracker's clean-stop gauges present: its stop timestamp, and whether
    #: it delivers that stop (read once each over the window, :func:`read_clean_stops`).
    stop_names: list[str] = field(default_factory=list)
    stop_reported_names: list[str] = field(default_factory=list)
    #: Spellings of the tracker's start gauge present (read once over the window,
    #: :func:`read_tracker_starts`).
    start_names: list[str] = field(default_factory=list)
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


def int_label(labels: dict[str, str], key: str) -> int | None:
    v = labels.get(key)
    if not isinstance(v, str) or not v.isdigit() or len(v) > 18:  # a list, "inf", 401 digits
        return None
    return int(v)


def _str_label(labels: dict[str, str], key: str) -> str | None:
    v = labels.get(key)
    return v if isinstance(v, str) else None


def identity_from_labels(labels: dict[str, str]) -> RankIdentity | None:
    rank = int_label(labels, schema.ATTR_RANK)
    if rank is None or rank < 0:
        return None
    return RankIdentity(rank=rank, job_id=_str_label(labels, schema.ATTR_JOB_ID),
                        local_rank=int_label(labels, schema.ATTR_LOCAL_RANK),
                        world_size=int_label(labels, schema.ATTR_WORLD_SIZE),
                        host=_str_label(labels, schema.ATTR_HOST),
                        gpu=_str_label(labels, schema.ATTR_GPU),
                        gpu_uuid=_str_label(labels, schema.ATTR_GPU_UUID))


def _rank_order(value: str) -> tuple[int, str]:
    """Numeric ranks in numeric order (so a split asks for contiguous ranges), others after."""
    return (int(value), "") if value.isdigit() and len(value) <= 18 else (2**63, value)


def spellings() -> tuple[set[str], list[str]]:
    """(the spellings that do not make a rank one that reports memory, every spelling
    discovery asks for)."""
    fields = _field_names()
    side_names = (set(schema.EDGE_TIMESTAMP.prom_aliases) | set(schema.EDGE_GAP.prom_aliases)
                  | set(schema.SAMPLING_INTERVAL.prom_aliases)
                  | set(schema.TRACKER_STOP.prom_aliases)
                  | set(schema.TRACKER_STOP_REPORTED.prom_aliases)
                  | set(schema.TRACKER_START.prom_aliases))
    not_memory = set(schema.ESTIMATE.prom_aliases) | side_names | {
        n for m in MARKER_METRICS.values() for n in m.prom_aliases}
    all_names = sorted({n for plain, peak in fields.values() for n in (*plain, *peak)}
                       | not_memory)
    return not_memory, all_names


def discovery_selector(window: QueryWindow, names: Iterable[str]) -> str:
    return label_selector({schema.ATTR_JOB_ID: window.job_id},
                          {"__name__": name_regex(names)}, window.extra_matchers)


def discover(api: PrometheusAPI, window: QueryWindow, builder: TimelineBuilder,
              want_native: bool) -> Discovery:
    """Every series of the job listed (labels only): which spellings are present, which ranks
    report memory and each one's identity."""
    identities, present, bad_rank = list_series(api, window)
    note_bad_ranks(api, builder, bad_rank)
    return discovery_of(api, window, present, identities, sorted(identities), want_native)


def discover_quick(api: PrometheusAPI, window: QueryWindow, want_native: bool
                    ) -> Discovery | None:
    """The spellings present and the ranks that report memory from two label-values answers
    (the index alone: a few KB where the listing of 10,000 ranks is 140,000 label maps), so the
    reads can start while the identities are listed beside them (:func:`list_series`). None
    when the server does not answer them (the listing then comes first, as it always could)."""
    not_memory, all_names = spellings()
    memory_names = sorted(set(all_names) - not_memory)
    try:
        # A name counts where a series carries it with a valid rank (as in the listing).
        present = set(api.label_values(
            "__name__", with_matcher(discovery_selector(window, all_names),
                                     f'{schema.ATTR_RANK}=~"[0-9]{{1,18}}"'),
            window.start_ns, window.end_ns))
        values = api.label_values(schema.ATTR_RANK, discovery_selector(window, memory_names),
                                  window.start_ns, window.end_ns)
    except EndpointError:
        return None
    ranks = sorted({r for v in values if (r := int_label({"r": v}, "r")) is not None})
    if not ranks:  # nothing to read ahead of the listing (which says why: no series, bad ranks)
        return None
    d = discovery_of(api, window, present, {}, ranks, want_native)
    d.listing_pending = True
    return d


def list_series(api: PrometheusAPI, window: QueryWindow
                 ) -> tuple[dict[int, RankIdentity], set[str], int]:
    """(identity of each rank that reports memory, the spellings present, series without a
    valid rank label) from the listing of every series of the job."""
    not_memory, all_names = spellings()
    # One answer when the server allows it, else split by rank (VictoriaMetrics refuses more
    # than 30,000 series per answer by default: ~2,100 ranks of a tracker's 14 series).
    series = api.series_split(discovery_selector(window, all_names), window.start_ns,
                              window.end_ns, schema.ATTR_RANK, sort_key=_rank_order)
    present: set[str] = set()
    identities: dict[int, RankIdentity] = {}
    bad_rank = 0
    for labels in series:
        rank = int_label(labels, schema.ATTR_RANK)  # what identity_from_labels accepts
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


def note_bad_ranks(api: PrometheusAPI, builder: TimelineBuilder, bad_rank: int) -> None:
    if bad_rank:
        builder.skipped["series_without_valid_rank_label"] += bad_rank
        builder.notes.append(f"{api.url}: {bad_rank} series had no valid integer "
                             f"'{schema.ATTR_RANK}' label and were skipped")


def discovery_of(api: PrometheusAPI, window: QueryWindow, present: set[str],
                  identities: dict[int, RankIdentity], ranks: list[int],
                  want_native: bool) -> Discovery:
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
    return Discovery(api, names, peak_fields, identities, native, estimates,
                      {k: v for k, v in markers.items() if v},
                      [n for n in schema.EDGE_TIMESTAMP.prom_aliases if n in present],
                      [n for n in schema.SAMPLING_INTERVAL.prom_aliases if n in present],
                      [n for n in schema.EDGE_GAP.prom_aliases if n in present],
                      [n for n in schema.TRACKER_STOP.prom_aliases if n in present],
                      [n for n in schema.TRACKER_STOP_REPORTED.prom_aliases if n in present],
                      ranks=ranks,
                      start_names=[n for n in schema.TRACKER_START.prom_aliases if n in present])


def whole_window_by_rank(d: Discovery, window: QueryWindow, name: str, over_time: str,
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


def read_estimates(d: Discovery, window: QueryWindow, builder: TimelineBuilder) -> None:
    """The tracker's pre-run estimate per rank (constant per run): one instant query."""
    out: dict[int, float] = builder.meta.setdefault(META_ESTIMATE_BYTES, {})  # type: ignore[assignment]
    for name in d.estimate_names:
        values = whole_window_by_rank(d, window, name, "last_over_time", builder,
                                       "estimate series")
        if values is None:
            return
        for rank, v in values:
            if v > 0:
                out[rank] = v


#: ``Timeline.meta`` key, on a side read's builder only: rank → its latest clean stop (ns).
SIDE_STOPS = "tracker_stops_ns"


def read_clean_stops(d: Discovery, window: QueryWindow, builder: TimelineBuilder) -> None:
    """Each rank's latest clean stop in the window (``last_over_time`` of its stop gauge: one
    instant query, one value a rank) into ``builder.meta[SIDE_STOPS]``, and the ranks whose
    tracker says it delivers its stop (``max_over_time`` of that gauge is 1) into
    :data:`META_STOP_REPORTED`; the caller turns the stops into markers of the ranks read."""
    stops: dict[int, int] = builder.meta.setdefault(SIDE_STOPS, {})  # type: ignore[assignment]
    for name in d.stop_names:
        values = whole_window_by_rank(d, window, name, "last_over_time", builder,
                                       "tracker stop series")
        for rank, v in values or ():
            if 0 < v < 1e11:  # Unix seconds (a stop in year 5138 is not one)
                stops[rank] = max(stops.get(rank, 0), round(v * 1000) * 1_000_000)
    reports: list[int] = builder.meta.setdefault(META_STOP_REPORTED, [])  # type: ignore[assignment]
    for name in d.stop_reported_names:
        values = whole_window_by_rank(d, window, name, "max_over_time", builder,
                                       "tracker stop-reported series")
        reports.extend(r for r, v in values or () if v == 1 and r not in reports)


#: ``Timeline.meta`` keys, on a side read's builder only: rank → its tracker's earliest start
#: (ns), and rank → every later start (ns, ascending), where a later tracker started (the
#: rank restarted).
SIDE_STARTS = "tracker_starts_ns"
SIDE_RESTARTS = "tracker_restarts_ns"
#: Ranks per ``=~`` alternation when the start gauge's stored samples are read.
_RAW_RANKS = 500


def _start_ns(v: float) -> int | None:
    """A start gauge's value (Unix seconds) as ns, ms-rounded; None for a value that is not
    one (a start in year 5138 is not one, as for the stop gauge)."""
    return round(v * 1000) * 1_000_000 if 0 < v < 1e11 else None


def read_tracker_starts(d: Discovery, window: QueryWindow, builder: TimelineBuilder) -> None:
    """Every tracker start each rank's gauge reported in the window: the earliest into
    ``builder.meta[SIDE_STARTS]``, the later ones (each a restart) into ``[SIDE_RESTARTS]``;
    the caller turns them into start markers of the ranks read. The gauge's value is the
    start whenever it was scraped: a target first scraped late still says when its tracker
    began. It is set once per process, so each later value is a later process — the rank
    restarted (torchrun's elastic restart of the worker group, a pod restarted).

    Three instant queries per spelling, none when the gauge is absent: ``min_over_time`` and
    ``max_over_time`` of each series (every value of a series that held at most two: a pod
    restarted is a series per process, each with its one start) and ``changes`` (how often
    each series' value changed). A series that changed twice or more holds a start between
    its first and its last (torchrun restarting the workers on one node: one series), so the
    stored samples of its ranks are read (:func:`_read_every_start`): with two restarts in the
    window the middle one's warm-up must be set aside too, and only its time places it (a
    count says a restart happened, not where its warm-up is)."""
    found: dict[int, set[int]] = {}
    more: set[int] = set()  # ranks with a series that may hold more than its min and max
    for name in d.start_names:
        for over_time in ("min_over_time", "max_over_time"):
            for rank, v in whole_window_by_rank(d, window, name, over_time, builder,
                                                "tracker start series") or ():
                t = _start_ns(v)
                if t is not None:
                    found.setdefault(rank, set()).add(t)
        more.update(rank for rank, v in whole_window_by_rank(
            d, window, name, "changes", builder, "tracker start series") or () if v >= 2)
    for rank, t in _read_every_start(d, window, builder, sorted(more & found.keys())):
        found[rank].add(t)
    starts: dict[int, int] = builder.meta.setdefault(SIDE_STARTS, {})  # type: ignore[assignment]
    restarts: dict[int, list[int]] = builder.meta.setdefault(  # type: ignore[assignment]
        SIDE_RESTARTS, {})
    for rank, ts in found.items():  # with what another endpoint of the job said
        every = ts | set(restarts.get(rank, [])) | ({starts[rank]} if rank in starts else set())
        starts[rank] = min(every)
        if len(every) > 1:
            restarts[rank] = sorted(every - {starts[rank]})


def _read_every_start(d: Discovery, window: QueryWindow, builder: TimelineBuilder,
                      ranks: list[int]) -> list[tuple[int, int]]:
    """(rank, start) for every value the start gauge's stored samples of ``ranks`` hold in
    the window: a range-vector read of one gauge, only for ranks with a series that changed
    twice or more; a note, and nothing more, if the endpoint fails."""
    out: list[tuple[int, int]] = []
    secs = max(1, math.ceil(window.seconds))
    end_s = window.end_ns / 1e9
    for name in d.start_names:
        for i in range(0, len(ranks), _RAW_RANKS):
            sel = label_selector(
                {"__name__": name, schema.ATTR_JOB_ID: window.job_id},
                regex={schema.ATTR_RANK: values_regex(str(r) for r in ranks[i:i + _RAW_RANKS])},
                extra=window.extra_matchers)
            try:
                series = d.api.query_raw_series(sel, end_s - secs, end_s, secs + 1)
            except EndpointError as e:
                builder.notes.append(f"{d.api.url}: could not read every tracker start: {e}")
                return out
            for s in series:
                ident = identity_from_labels(s.labels) if s.labels is not None else None
                if ident is None or s.v is None:
                    continue
                for v in np.unique(s.v[np.isfinite(s.v)]).tolist():
                    t = _start_ns(float(v))
                    if t is not None:
                        out.append((ident.rank, t))
    return out


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
