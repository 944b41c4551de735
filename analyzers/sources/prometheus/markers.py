"""Timeline markers from the series a TSDB holds: the tracker's edge gauges (first rise,
thresholds, OOM at the tracker's own sample time), the step gauge (one "step N" slice per value)
and the OOM counter; and the notes that say at which resolution they were read."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from stormotel.analyzers.sources.bulk_read import QUERY_LABEL
from stormotel.analyzers.sources.markers import MarkerAccumulator, counter_increases
from stormotel.analyzers.sources.prometheus.discover import (
    Discovery,
    identity_from_labels,
    int_label,
)
from stormotel.analyzers.sources.prometheus.plan import Parts, QueryTask
from stormotel.analyzers.sources.prometheus_api import (
    Series,
)
from stormotel.analyzers.timeline import (
    EDGE_GAP_STATED_ATTR,
    EDGE_MARKER_KINDS,
    EDGE_RESOLUTION_ATTR,
    EDGE_SEEN_ATTR,
    KIND_OOM,
    KIND_STEP,
    OOM_FROM_COUNTER,
    OOM_SOURCE_ATTR,
    Markers,
    TimelineBuilder,
)

from stormotel import schema


def collect_edges(results: list[Series], task: QueryTask, out: Parts) -> None:
    ranks = set(task.ranks)
    for s in results:
        if s.labels is None or s.t_ns is None or s.v is None:
            continue
        ident = identity_from_labels(s.labels)
        kind = s.labels.get(schema.ATTR_EDGE, "")
        if ident is None or ident.rank not in ranks or kind not in EDGE_MARKER_KINDS:
            continue
        out.setdefault((ident.rank, kind), []).append((s.t_ns, s.v))


def markers_from_edges(edges: Parts, intervals: dict[int, int],
                       gaps: Parts | None = None) -> dict[int, Markers]:
    """Each distinct value of an edge-timestamp gauge is one edge at that (tracker) time. Its
    resolution is the tracker's sampling interval, when known, or the edge-gap gauge scraped
    with it when that is longer (the sampler ran late before the edge's sample). Each edge also
    keeps the stamp of the earliest scrape that reported it (``EDGE_SEEN_ATTR``; the minimum
    over every endpoint, so the same in any endpoint order): a scrape stamped before the edge
    it reports was answered late, and its samples' stamps are not when they were read."""
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
            seen = t_scrape[edge_ms == t_ms]
            attrs[EDGE_SEEN_ATTR] = int(seen.min())
            res = [intervals[rank]] if rank in intervals else []
            stated = [g for ts in seen.tolist() if (g := gap_at.get(int(ts))) is not None]
            res += stated
            if stated:
                attrs[EDGE_GAP_STATED_ATTR] = True
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


def collect_marker_series(results: list[Series], task: QueryTask,
                           out: dict[tuple[str, int], list[tuple[np.ndarray, np.ndarray]]]
                           ) -> None:
    ranks = set(task.ranks)
    for s in results:
        if s.labels is None or s.t_ns is None or s.v is None:
            continue
        rank = int_label(s.labels, schema.ATTR_RANK)  # what identity_from_labels accepts
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
    joined = [(kind, rank, *_joined(parts)) for (kind, rank), parts in sorted(series.items())]
    tidy, flat = _usual_series([(t, v) for _, _, t, v in joined])
    for (kind, rank, t, v), ready, still in zip(joined, tidy, flat, strict=True):
        if not ready:  # out of order or not all finite: put in order, keep the finite ones
            if t.size > 1 and not bool((t[1:] >= t[:-1]).all()):
                order = np.argsort(t, kind="stable")
                t, v = t[order], v[order]
            ok = np.isfinite(v)
            if not ok.all():
                t, v = t[ok], v[ok]
            still = bool((v[1:] == v[:-1]).all())
        if not t.size:
            continue
        if kind == KIND_STEP:
            slots = per_rank.setdefault(rank, [])
            steps.append((rank, len(slots), t, v))
            slots.append(None)  # filled below, with every rank's steps at once
            continue
        if still:
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


def _joined(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """A series' chunks as one (t, v), in read order."""
    if len(parts) == 1:
        return parts[0]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _usual_series(series: list[tuple[np.ndarray, np.ndarray]]
                  ) -> tuple[list[bool], list[bool]]:
    """Per (t, v): is it already in time order with every value finite (the usual read, which
    then needs no sort and no filtering), and does its value never change? Both answered for
    every series at once over the joined arrays, rank edges excused; an empty series is
    "ready" and "never changes" (what the per-series checks say of it)."""
    n = len(series)
    if n == 0:
        return [], []
    sizes = np.fromiter((t.shape[0] for t, _ in series), dtype=np.int64, count=n)
    has = sizes > 0
    ready = np.ones(n, dtype=bool)
    still = np.ones(n, dtype=bool)
    if has.any():
        t = np.concatenate([s[0] for s in series])
        v = np.concatenate([s[1] for s in series])
        starts = (np.cumsum(sizes) - sizes)[has]  # reduceat needs no empty segment
        rising = np.empty(t.shape, dtype=bool)
        rising[0] = True
        np.greater_equal(t[1:], t[:-1], out=rising[1:])
        rising[starts] = True
        same = np.empty(v.shape, dtype=bool)
        same[0] = True
        np.equal(v[1:], v[:-1], out=same[1:])
        same[starts] = True
        ready[has] = (np.logical_and.reduceat(rising, starts)
                      & np.logical_and.reduceat(np.isfinite(v), starts))
        still[has] = np.logical_and.reduceat(same, starts)
    return ready.tolist(), still.tolist()


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
    # One kind column for every rank, each rank's markers a view of its own stretch of it (as
    # ``names``): one fill of an object array instead of one per rank.
    kinds = np.full(starts.shape[0], KIND_STEP, dtype=object)
    attr_list = attrs.tolist()
    bounds = own.tolist()
    out = []
    for i in range(len(series)):
        a, b = bounds[i], bounds[i + 1]
        out.append(Markers(start_ns=begin[a:b].copy(), end_ns=ends[a:b].copy(),
                           name=names[a:b], kind=kinds[a:b], attrs=tuple(attr_list[a:b])))
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


def resolution_notes(builder: TimelineBuilder, discoveries: list[Discovery],
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
