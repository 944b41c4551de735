"""The tracker's compact archive read into arrays: structure decoded once, points by numpy.

A compact archive line is one ``ExportMetricsServiceRequest`` with ten samples per memory gauge
(stormotel/archive_writer.py). Decoding every data point as an object and converting lists to
arrays cost ~0.3 s of CPU per rank-hour; here msgspec decodes only the structure (metric names,
the resource's bytes) and leaves each ``dataPoints`` array as raw bytes, then the memory arrays of
the whole file are parsed together by :func:`otlp_points.int_points`.

Per line only C runs where it can: the lines are decoded in one tight loop (a blank line or one
that is not a request sends the file through the line-by-line decoder, which counts bad lines
exactly as the other decoders do), each metrics list is taken apart by its layout's
``itemgetter`` and the memory metrics' ``dataPoints`` by ``map``. What a rank-hour costs, and
why msgspec's scan plus zstd bound it, is in docs/benchmarks.md ("where a companion-less
rank-hour's CPU goes").

A file takes this path when every line is a metrics request whose resources name a rank (and,
with a job filter, that job), whose memory metrics are gauges, and whose memory data points are
all plain integer points: what the tracker writes, and what any producer writes without
per-point attributes. Everything is checked *before* anything is recorded, so a file that does
not qualify leaves no trace and the general typed decoder reads it, with the result it always
had. The estimate (one point per context line) is read as a dict by the same code as in the
other decoders; so are the OOM counter, the OOM edge gauge and the tracker's clean-stop and
start gauges (the typed decoder's
:func:`~stormotel.analyzers.sources.otlp_fast.read_context_metric`; the other edges come from
spans).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from operator import attrgetter, itemgetter
from typing import Any

import msgspec
import numpy as np
from stormotel.analyzers.sources.jsonio import JSONDecodeError, loads
from stormotel.analyzers.sources.otlp_archive import (
    METRIC_FIELDS,
    OtlpFileReader,
    identity_from,
    numbered_lines,
)
from stormotel.analyzers.sources.otlp_fast import (
    CONTEXT_METRICS,
    Metric,
    OtlpPoint,
    OtlpResource,
    ScopeMetrics,
    attrs_of,
    read_context_metric,
)
from stormotel.analyzers.sources.otlp_points import int_points

from stormotel import schema

__all__ = ["read_compact"]

_ABSENT = msgspec.Raw()
_NO_POINTS = msgspec.Raw(b"[]")


class _Body(msgspec.Struct, rename="camel", gc=False):
    data_points: msgspec.Raw = _ABSENT
    aggregation_temporality: int | str = 0


_Metric = Metric[_Body]


class _ResourceMetrics(msgspec.Struct, rename="camel", gc=False):
    resource: msgspec.Raw = _ABSENT  # compared as bytes; decoded only when it changes
    scope_metrics: list[ScopeMetrics[_Body]] = []


class _Request(msgspec.Struct, rename="camel", gc=False):
    resource_metrics: list[_ResourceMetrics] = []
    # Present only in other shapes (spans, a bare ResourceMetrics): such a file is not compact.
    resource_spans: msgspec.Raw = _ABSENT
    resource: msgspec.Raw = _ABSENT
    scope_metrics: msgspec.Raw = _ABSENT
    scope_spans: msgspec.Raw = _ABSENT


_decoder = msgspec.json.Decoder(_Request, strict=False)
_points_decoder = msgspec.json.Decoder(list[OtlpPoint], strict=False)


#: A metrics list's layout: a picker of its memory metrics, their columns, and its estimate and
#: context metrics as (position, is the estimate).
_Layout = tuple[Callable[[list[_Metric]], Sequence[_Metric]], list[int], list[tuple[int, bool]]]


@dataclass
class _BadLine:
    """A line that is not JSON at all: skipped and counted exactly as the other decoders do."""

    where: str
    cut: bool
    error: Exception


@dataclass
class _Plan:
    """What a qualifying file records, gathered before anything is recorded."""

    requests: int = 0
    bad_lines: list[_BadLine] = field(default_factory=list)
    #: resource bytes → its attributes, in order of first appearance (identities are kept
    #: first-come per rank, as in the other decoders)
    resources: dict[bytes, tuple[dict[str, Any], int]] = field(default_factory=dict)
    estimates: list[tuple[int, _Metric]] = field(default_factory=list)
    context: list[tuple[int, _Metric]] = field(default_factory=list)  # CONTEXT_METRICS
    keys: dict[tuple[int, str, bool], int] = field(default_factory=dict)  # column → index
    by_rank: dict[int, dict[str, int]] = field(default_factory=dict)  # metric name → index
    #: the memory metrics, in file order, and each one's column (``body_keys``); then their
    #: ``dataPoints`` texts (``bodies``), empty arrays left out
    picked: list[_Metric] = field(default_factory=list)
    bodies: list[msgspec.Raw] = field(default_factory=list)
    body_keys: list[int] = field(default_factory=list)
    #: (rank, metric names of a scope) → :func:`_layout`
    layouts: dict[tuple[int, tuple[str, ...]], _Layout] = field(default_factory=dict)

    def columns(self, rank: int) -> dict[str, int]:
        """Memory metric name → column index, for one rank (columns made on first use)."""
        known = self.by_rank.get(rank)
        if known is None:
            known = self.by_rank[rank] = {
                name: self.keys.setdefault((rank, field, peak), len(self.keys))
                for name, (field, peak) in METRIC_FIELDS.items()}
        return known


def read_compact(reader: OtlpFileReader, data: bytes | bytearray) -> bool:
    """Read ``data`` (JSON lines) into ``reader`` and return True; or return False having
    recorded nothing, when the file is not a compact archive."""
    plan = _Plan()
    requests = _decode_every_line(data)
    if requests is None:  # a blank, odd or bad line somewhere: line by line, counted as before
        requests = _decode_line_by_line(plan, data, reader.path)
        if requests is None:
            return False
    if not _plan_requests(plan, requests, reader):
        return False
    del requests  # the bodies keep only what they need of the text
    if not _take_bodies(plan):
        return False
    points = _int_points_chunked(plan.bodies)
    if points is None:
        return False
    _record(reader, plan, points)
    return True


def _decode_every_line(data: bytes | bytearray) -> list[_Request] | None:
    """Every line decoded, one msgspec call each with no per-line bookkeeping: the usual file
    (lines of requests, newline-terminated, the last one perhaps not). None at the first line
    that is blank or does not decode (:func:`_decode_line_by_line` then reads the file)."""
    decode = _decoder.decode
    view = memoryview(data)
    find = data.find
    out: list[_Request] = []
    append = out.append
    start, size = 0, len(data)
    try:
        while start < size:
            end = find(b"\n", start)
            if end < 0:
                end = size
            append(decode(view[start:end]))  # a blank line is a DecodeError here too
            start = end + 1
    except (msgspec.DecodeError, UnicodeDecodeError):  # msgspec: bad UTF-8 in a string
        return None
    return out


def _decode_line_by_line(plan: _Plan, data: bytes | bytearray, path: str
                         ) -> list[_Request] | None:
    """The lines that are requests, with each line that is not JSON noted in ``plan`` (counted
    as the other decoders count it); None when a line is JSON of another shape."""
    out: list[_Request] = []
    for line, where, cut in numbered_lines(data, path):
        try:
            out.append(_decoder.decode(line))
        except (msgspec.DecodeError, UnicodeDecodeError):
            try:
                loads(line)
            except JSONDecodeError as exc:  # not JSON: counted as the other decoders count it
                plan.bad_lines.append(_BadLine(where, cut, exc))
                continue
            return None  # JSON of another shape
    return out


#: Bytes of data-point text parsed per :func:`int_points` call. Its vectorised passes each make
#: a temporary the size of the text: ~1 MB keeps them in cache (a 60 MB collector file's points
#: in one call took twice the CPU of the same points in 1-2 MB calls).
POINTS_CHUNK_BYTES = 1 << 20


def _int_points_chunked(bodies: list[msgspec.Raw]
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`int_points` over ``bodies`` a cache-sized group at a time (None if any group is
    not the canonical text). The groups are cut where the running text size passes each
    multiple of :data:`POINTS_CHUNK_BYTES` (one vectorised search, no loop per body)."""
    if not bodies:
        return None
    sizes = np.fromiter(map(len, bodies), dtype=np.int64, count=len(bodies))
    ends = np.cumsum(sizes)
    cuts = np.searchsorted(ends, np.arange(POINTS_CHUNK_BYTES, int(ends[-1]),
                                           POINTS_CHUNK_BYTES), side="left") + 1
    bounds = [0, *sorted(set(cuts.tolist()) - {0, len(bodies)}), len(bodies)]
    parts = []
    for i, j in pairwise(bounds):
        part = int_points(bodies[i:j])
        if part is None:
            return None
        parts.append(part)
    if len(parts) == 1:
        return parts[0]
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]))


_name = attrgetter("name")
_gauge = attrgetter("gauge")
_data_points = attrgetter("data_points")
#: Compares unequal to every resource a line can hold (a decoded Raw is never a NUL byte).
_NO_RESOURCE = msgspec.Raw(b"\0")


def _plan_requests(plan: _Plan, requests: list[_Request], reader: OtlpFileReader) -> bool:
    """Every request's resources, memory metrics (kept as the metric structs, in file order,
    with their columns) and estimate/context metrics; False at the first thing the array
    path does not read. No per-metric Python for memory metrics: each metrics list is taken
    apart by its layout's ``itemgetter`` in C."""
    picked, body_keys, estimates = plan.picked, plan.body_keys, plan.estimates
    layouts = plan.layouts
    last, rank = _NO_RESOURCE, -1
    for request in requests:
        if not request.resource_metrics or request.resource_spans or request.resource or \
                request.scope_metrics or request.scope_spans:
            return False
        for rm in request.resource_metrics:
            if rm.resource != last:  # the usual line: the same resource as the last one
                found = _rank(plan, bytes(rm.resource), reader)
                if found is None:
                    return False
                last, rank = rm.resource, found
            for sm in rm.scope_metrics:
                metrics = sm.metrics
                # Lines of one file list the same metrics in the same order: what each
                # position is (a memory column, an estimate, a context metric, nothing) is
                # worked out once.
                key = (rank, tuple(map(_name, metrics)))
                layout = layouts.get(key)
                if layout is None:
                    layout = layouts[key] = _layout(plan, rank, key[1])
                pick, columns, extras = layout
                if columns:
                    picked += pick(metrics)
                    body_keys += columns
                for i, is_estimate in extras:
                    (estimates if is_estimate else plan.context).append((rank, metrics[i]))
    plan.requests = len(requests)
    return True


def _take_bodies(plan: _Plan) -> bool:
    """The picked memory metrics' ``dataPoints`` texts into ``plan.bodies`` (C-level maps),
    leaving out empty arrays; False when a memory metric is a sum (the general decoder
    reads sums: delta or cumulative)."""
    gauges = list(map(_gauge, plan.picked))
    keys = plan.body_keys
    if None in gauges:  # rare: a memory metric without a gauge
        if any(m.sum is not None for m, g in zip(plan.picked, gauges, strict=True)
               if g is None):
            return False
        keys = [k for k, g in zip(keys, gauges, strict=True) if g is not None]
        gauges = [g for g in gauges if g is not None]
    bodies = list(map(_data_points, gauges))
    sizes = np.fromiter(map(len, bodies), dtype=np.int64, count=len(bodies))
    maybe_empty = np.flatnonzero(sizes <= len(_NO_POINTS))
    empty = [i for i in maybe_empty.tolist() if not bodies[i] or bodies[i] == _NO_POINTS]
    if empty:
        drop = set(empty)
        keys = [k for i, k in enumerate(keys) if i not in drop]
        bodies = [b for i, b in enumerate(bodies) if i not in drop]
    plan.bodies, plan.body_keys, plan.picked = bodies, keys, []
    return True


def _layout(plan: _Plan, rank: int, names: tuple[str, ...]) -> _Layout:
    """Where one metrics list's memory columns are — a picker of those positions and their
    columns — and its estimate and context metrics (position, is the estimate); other
    metrics are not read."""
    columns = plan.columns(rank)
    positions, picks, extras = [], [], []
    for i, name in enumerate(names):
        column = columns.get(name)
        if column is not None:
            positions.append(i)
            picks.append(column)
        elif name == schema.ESTIMATE.name:
            extras.append((i, True))
        elif name in CONTEXT_METRICS:
            extras.append((i, False))
    return _picker(positions), picks, extras


def _picker(positions: list[int]) -> Callable[[list[_Metric]], Sequence[_Metric]]:
    """A C-level ``metrics -> the metrics at positions`` (always a sequence)."""
    if len(positions) == 1:
        only = positions[0]
        return lambda metrics: (metrics[only],)
    if not positions:
        return lambda metrics: ()
    return itemgetter(*positions)


def _rank(plan: _Plan, resource: bytes, reader: OtlpFileReader) -> int | None:
    """The resource's rank; None when it has none, or belongs to another job."""
    known = plan.resources.get(resource)
    if known is not None:
        return known[1]
    if not resource:
        return None
    try:
        attrs = attrs_of(msgspec.json.decode(resource, type=OtlpResource, strict=False).attributes)
    except (msgspec.DecodeError, UnicodeDecodeError):  # bad UTF-8 (msgspec < 0.23 raised
        return None  # UnicodeDecodeError, 0.23 its DecodeError); ValidationError is one
    ident = identity_from(attrs)
    if ident is None or reader.ctx.other_job(attrs.get(schema.ATTR_JOB_ID)):
        return None
    plan.resources[resource] = (attrs, ident.rank)
    return ident.rank


def _record(reader: OtlpFileReader, plan: _Plan,
            points: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    for bad in plan.bad_lines:
        reader.skip_bad_json(bad.where, bad.cut, bad.error)
    reader.records += plan.requests
    for attrs, _ in plan.resources.values():
        reader._resource_rank(attrs)
    for rank, metric in plan.estimates:
        reader._estimate(rank, _as_dict(metric))
    for rank, metric in plan.context:
        body = metric.gauge or metric.sum
        if body is None or not body.data_points:
            continue
        try:
            decoded = _points_decoder.decode(body.data_points)
        except (msgspec.DecodeError, UnicodeDecodeError):
            continue  # a malformed context point: the memory columns stand without it
        read_context_metric(reader, rank, metric.name, decoded,
                            body.aggregation_temporality if metric.gauge is None else 0)
    times, values, per_body = points
    keys = list(plan.keys)
    for index, picked in _points_by_column(np.asarray(plan.body_keys), per_body):
        reader.cols.set_arrays(keys[index], times[picked], values[picked].astype(np.float64))


def _points_by_column(body_keys: np.ndarray, per_body: np.ndarray
                      ) -> list[tuple[int, np.ndarray]]:
    """(column, indices of its points in file order) per column, columns in the order their
    first points came. One stable sort of the *bodies* by column, not one pass over every
    point per column: a collector's file holds the columns of hundreds of ranks at once."""
    order = np.argsort(body_keys, kind="stable")
    sorted_keys = body_keys[order]
    counts = per_body[order]
    starts = np.cumsum(per_body) - per_body  # where each body's points begin
    # each sorted body's point indices: its start, +1, +2 ... (one vectorised arange)
    ends = np.cumsum(counts)
    shift = np.repeat(starts[order] - (ends - counts), counts)
    picked = np.arange(int(ends[-1]) if len(ends) else 0) + shift
    cuts = np.flatnonzero(np.diff(sorted_keys)) + 1
    lo = np.concatenate(([0], cuts))
    hi = np.concatenate((cuts, [len(sorted_keys)]))
    point_lo = ends[lo] - counts[lo]
    point_hi = ends[hi - 1]
    first = {int(k): i for i, k in enumerate(sorted_keys[lo].tolist())}
    groups = [(k, picked[point_lo[first[k]]:point_hi[first[k]]])
              for k in dict.fromkeys(body_keys.tolist())]
    return groups


def _as_dict(metric: _Metric) -> dict[str, Any]:
    """A metric as the dict walker sees it (its points decoded only now: they are few)."""
    def body(b: _Body | None) -> dict[str, Any] | None:
        if b is None:
            return None
        try:
            return {"dataPoints": msgspec.json.decode(b.data_points) if b.data_points else []}
        except (msgspec.DecodeError, UnicodeDecodeError):  # bad UTF-8 in a point's string
            return {"dataPoints": []}

    return {"name": metric.name, "gauge": body(metric.gauge), "sum": body(metric.sum)}
