"""Stormlog telemetry exports, so Stormlog users can point stormotel at what they already have.

Accepted: schema v2 (as Stormlog documents it), v3, and v4 with ``session_id`` (what stormlog
0.4.x writes); a JSON list, an ``{"events": [...]}`` or ``{"telemetry_events": [...]}`` wrapper,
JSON lines, and the CSV ``MemoryTracker.export_events(format="csv")`` writes; plus the legacy
pre-v2 field names Stormlog itself converts (``timestamp`` in seconds, ``memory_allocated``,
``memory_reserved``, ``memory_mb``, ``total_memory``, ``type``, ``message``).

Records are read into column lists (one list comprehension per field) and converted by numpy in
one pass per column; there is no per-event object. Every event type carries a counter snapshot, so
all of them are samples; a non-empty ``context`` becomes a marker (kind ``collective`` when it
names one), which is what collective attribution uses.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np
from msgspec import Raw
from stormotel.analyzers.gcpause import gc_paused
from stormotel.analyzers.sources import stormlog_fast
from stormotel.analyzers.sources.base import LoadContext
from stormotel.analyzers.sources.columns import bytes_column, time_column
from stormotel.analyzers.sources.jsonio import JSONDecodeError, loads
from stormotel.analyzers.sources.markers import MarkerAccumulator, is_collective
from stormotel.analyzers.sources.stormlog_fast import (
    COMPLETE_KEYS,
    COUNTER_KEYS,
    EVENT_TYPES,
    UNSET,
    CompleteEvent,
)
from stormotel.analyzers.timeline import KIND_CONTEXT, KIND_OOM, RankIdentity

from stormotel.errors import SourceInputError

MIB = 1024 * 1024
SUPPORTED_SCHEMAS = (2, 3, 4)
#: Keys whose presence marks a mapping as a Stormlog event (as Stormlog's own loader decides).
EVENT_KEYS = ("schema_version", "event_type", "type", "memory_allocated", "memory_mb",
              "timestamp", "timestamp_ns")


def looks_like_stormlog(obj: Any) -> bool:
    if isinstance(obj, list):
        return bool(obj) and isinstance(obj[0], Mapping) and _is_event(obj[0])
    if isinstance(obj, Mapping):
        return (isinstance(obj.get("events"), list) or isinstance(obj.get("telemetry_events"), list)
                or _is_event(obj))
    return False


def _is_event(d: Mapping[str, Any]) -> bool:
    return any(k in d for k in EVENT_KEYS)


def csv_header_is_stormlog(header: bytes) -> bool:
    cols = {c.strip().strip('"') for c in header.decode("utf-8", "replace").split(",")}
    return bool(cols & set(EVENT_KEYS))


def records_from_json(obj: Any, path: str) -> list[Any]:
    if isinstance(obj, list):
        return obj
    if isinstance(obj, Mapping):
        for key in ("events", "telemetry_events"):
            if isinstance(obj.get(key), list):
                return obj[key]
        if _is_event(obj):
            return [obj]
    raise SourceInputError(f"{path}: JSON does not contain Stormlog telemetry events "
                      "(expected a list, or an object with an 'events' list)")


def read_json_lines(data: bytes, path: str, ctx: LoadContext) -> list[Any]:
    records: list[Any] = []
    lines = data.split(b"\n")
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(loads(line))
        except JSONDecodeError as exc:
            truncated = lineno == len(lines) and not data.endswith(b"\n")
            ctx.skip("truncated_line" if truncated else "bad_json", f"{path}:{lineno}",
                     f"not valid JSON ({exc})")
    return records


def read_csv(data: bytes, path: str) -> list[dict[str, Any]]:
    text = data.decode("utf-8", "replace")
    reader = csv.DictReader(io.StringIO(text))
    # Empty cells are "not reported" (pandas writes None as an empty cell).
    try:
        return [{k: (None if v == "" else v) for k, v in row.items() if k is not None}
                for row in reader]
    except csv.Error as exc:  # e.g. a field over csv.field_size_limit() (128 KiB)
        raise SourceInputError(f"{path}: line {reader.line_num}: not valid CSV ({exc})") from None


def _first(records: Sequence[Mapping[str, Any]], *keys: str) -> list[Any]:
    """Per record, the value of the first key present (legacy names after current ones).

    The current name is read for every record in one comprehension; legacy names are consulted
    only for the records where it was missing or null (no cost for v2+ exports).
    """
    out = [r.get(keys[0]) for r in records]
    if len(keys) == 1 or None not in out:
        return out
    for i, v in enumerate(out):
        if v is None:
            r = records[i]
            for k in keys[1:]:
                if k in r:
                    out[i] = r[k]
                    break
    return out


#: What stormlog 0.4.x always writes: the v2+ schema's required fields, then (v4)
#: ``schema_version``, ``rank``, ``session_id``; read in one C-level pass.
FULL_KEYS = COMPLETE_KEYS
#: Every key a typed event declares (read in one C-level pass when asked for).
_EVENT_FIELDS = frozenset(stormlog_fast.Event.__struct_fields__)
#: Fields every Stormlog v2+ record carries (schema-required).
CORE_KEYS = FULL_KEYS[:9]


class _ColumnReader:
    """Columns of a record list: one C-level ``map`` per field for the fields every record has
    (all of :data:`FULL_KEYS`, else the v2+ :data:`CORE_KEYS`), else per-column comprehensions
    with legacy fallbacks (:func:`_first`). A list per field, not a tuple per record: the
    records are walked while still in cache and no per-record tuple is built and freed."""

    def __init__(self, records: Sequence[Mapping[str, Any]],
                 kinds: set[type] | None = None) -> None:
        self.records = records
        self.core: dict[str, Sequence[Any] | np.ndarray] = {}
        kinds = set(map(type, records)) if kinds is None else kinds
        typed = bool(kinds) and kinds <= set(EVENT_TYPES)  # stormlog_fast structs
        self.typed = typed
        complete = kinds == {CompleteEvent}  # every key present: checked while decoding
        getter = attrgetter if typed else itemgetter
        columns: dict[str, Sequence[Any] | np.ndarray] = {}
        with gc_paused():
            for key in FULL_KEYS:
                try:
                    column = list(map(getter(key), records))
                except (KeyError, TypeError, AttributeError):
                    break
                if typed and not complete and UNSET in column:
                    break  # a key some event lacks: per-column reads with legacy fallbacks
                columns[key] = column
        if records and len(columns) >= len(CORE_KEYS):
            self.core = columns if len(columns) == len(FULL_KEYS) else \
                {k: columns[k] for k in CORE_KEYS}
        if complete and self.core:
            for key in COUNTER_KEYS:
                self.core[key] = _integer_counts(self.core[key])


    def __call__(self, *keys: str) -> Sequence[Any] | np.ndarray:
        col = self.core.get(keys[0])
        if col is not None:
            return col
        if self.typed and keys[0] in _EVENT_FIELDS:
            # A declared field outside the core (``event_type``): one C-level pass over the
            # structs instead of a Python ``get`` per event (a quarter of a lean export's load).
            # A missing or null value leaves it to the fallbacks, as before.
            with gc_paused():
                column = list(map(attrgetter(keys[0]), self.records))
            if UNSET not in column and (len(keys) == 1 or None not in column):
                return column
        return _first(self.records, *keys)


def _integer_counts(column: Sequence[Any] | np.ndarray) -> Sequence[Any] | np.ndarray:
    """A counter column of Python integers as float64, converted as int64 (twice as fast as
    float conversion of each integer, and the same values: both round to nearest); the column
    as it is when it holds a null (a start/stop event: left to :func:`bytes_column`, which
    tells "not reported" from bad) or an integer beyond int64."""
    try:
        return np.asarray(column, dtype=np.int64).astype(np.float64)
    except (TypeError, OverflowError):
        return column


def _meta(r: Mapping[str, Any], key: str) -> Any:
    m = r.get("metadata")
    if type(m) is Raw:  # a typed event keeps it undecoded until a fallback needs it
        m = stormlog_fast.metadata(m)
    return m.get(key) if isinstance(m, Mapping) else None


def _supported_records(records: list[Any], path: str, ctx: LoadContext
                       ) -> tuple[list[Mapping[str, Any]], _ColumnReader | None]:
    """The records of a supported schema version (the others counted skips), and a column
    reader over them when every record was."""
    supported = {*SUPPORTED_SCHEMAS, *(str(v) for v in SUPPORTED_SCHEMAS)}
    good: list[Mapping[str, Any]] = records
    kinds = set(map(type, records))
    col = _ColumnReader(records, kinds) if kinds in ({dict}, *({t} for t in EVENT_TYPES)) \
        else None
    versions = col("schema_version") if col is not None and "schema_version" in col.core \
        else [r.get("schema_version", 2) if type(r) in (dict, *EVENT_TYPES) else None
              for r in records]
    if not _hashables(versions) <= supported:  # rare: find out what was wrong, record by record
        col = None
        good = []
        for i, r in enumerate(records):
            if not isinstance(r, Mapping):
                ctx.skip("wrong_type", f"{path}: event {i}", "event is not an object")
                continue
            sv = r.get("schema_version")
            if sv is not None and not (_hashable(sv) and sv in supported):
                ctx.skip("unsupported_schema", f"{path}: event {i}",
                         f"schema_version {sv!r} (supported: {SUPPORTED_SCHEMAS} and legacy)")
                continue
            good.append(r)
    return good, col


def load_records(records: list[Any], path: str, ctx: LoadContext) -> int:
    """Validate Stormlog records column-wise and add them to the builder; returns samples."""
    good, col = _supported_records(records, path, ctx)
    if not good:
        return 0
    n = len(good)
    where = path
    col = col if col is not None else _ColumnReader(good)
    # Timestamps: timestamp_ns, else legacy seconds.
    t_raw = col("timestamp_ns")
    if None in t_raw:
        secs = col("timestamp")
        t_raw = [tn if tn is not None else (None if s is None else _secs_to_ns(s))
                 for tn, s in zip(t_raw, secs, strict=True)]
    t, ok = time_column(t_raw, ctx, where, "timestamp_ns")

    allocated = col("allocator_allocated_bytes", "memory_allocated")
    if None in allocated:
        mb = col("memory_mb")
        allocated = [a if a is not None else (None if m is None else _mib(m))
                     for a, m in zip(allocated, mb, strict=True)]
    alloc = bytes_column(allocated, ctx, where, "allocator_allocated_bytes")
    reserved = bytes_column(col("allocator_reserved_bytes", "memory_reserved"), ctx,
                            where, "allocator_reserved_bytes")
    if np.isnan(reserved).any():  # Stormlog: a record without reserved reports allocated
        legacy_res = np.isnan(reserved) & ~np.fromiter(
            (("allocator_reserved_bytes" in r) or ("memory_reserved" in r) for r in good), bool,
            n)
        reserved[legacy_res] = alloc[legacy_res]
    active = bytes_column(col("allocator_active_bytes"), ctx, where,
                          "allocator_active_bytes")
    used = bytes_column(col("device_used_bytes"), ctx, where, "device_used_bytes")
    if np.isnan(used).any():  # Stormlog: a record without device used reports allocated
        legacy_used = np.isnan(used) & ~np.fromiter(("device_used_bytes" in r for r in good),
                                                    bool, n)
        used[legacy_used] = alloc[legacy_used]
    total_raw = col("device_total_bytes", "total_memory", "device_total", "total_bytes")
    if None in total_raw:
        total_raw = [v if v is not None else (_meta(r, "total_memory") or _meta(r, "device_total"))
                     for v, r in zip(total_raw, good, strict=True)]
    total = bytes_column(total_raw, ctx, where, "device_total_bytes")
    free = bytes_column(col("device_free_bytes"), ctx, where, "device_free_bytes")
    # Stormlog's inactive counter is the allocator's inactive-split bytes (its fragmentation).
    inactive = bytes_column(col("allocator_inactive_bytes"), ctx, where,
                            "allocator_inactive_bytes")

    ranks = _ranks(col, good, path, ctx)
    if ctx.job_id is not None:
        jobs = col("job_id")
        other = np.fromiter((ctx.other_job(j) for j in jobs), bool, n)
        if other.any():
            ctx.skip("other_job", where, "events of another job_id", int((other & ok).sum()))
            ok &= ~other
    bad_rank = ranks < 0
    if bad_rank.any():
        ctx.skip("bad_rank", where, "rank is negative or not an integer", int(bad_rank.sum()))
        ok &= ~bad_rank

    _oom_markers(col("event_type", "type"), good, t, ok, ranks, ctx)
    # Events without any counter (Stormlog v4 "start"/"stop" carry nulls) are not samples.
    no_counters = np.isnan(alloc) & np.isnan(reserved) & np.isnan(used)
    ok &= ~no_counters
    _identities(good, ranks, ctx)
    added = 0
    b = ctx.builder
    for rank in _distinct(ranks[ok]):
        sel = ok & (ranks == rank)
        b.add_samples(int(rank), t[sel], allocated=alloc[sel], reserved=reserved[sel],
                      active=active[sel], device_used=used[sel], device_total=total[sel],
                      device_free=free[sel], inactive_split=inactive[sel])
        added += int(sel.sum())
    _context_markers(col("context", "message"), t, ok, ranks, ctx)
    _sessions(col, good, ctx)
    return added


def _ranks(col: _ColumnReader, good: list[Mapping[str, Any]], path: str,
           ctx: LoadContext) -> np.ndarray:
    """Each record's rank (its field, else its metadata's, else 0 as Stormlog does)."""
    rank_raw = col("rank")
    ranks = _int_column(rank_raw, default=0)
    if all(v is None for v in rank_raw):
        rank_raw = [_meta(r, "rank") for r in good]
        ranks = _int_column(rank_raw, default=0)
        if all(v is None for v in rank_raw):
            ctx.note(f"{path}: no rank field; treated as rank 0 (as Stormlog does)")
    return ranks


def _sessions(col: _ColumnReader, good: list[Mapping[str, Any]], ctx: LoadContext) -> None:
    """The Stormlog session ids seen, in the Timeline's meta."""
    sessions = _hashables(col("session_id")) - {None}
    if not sessions:  # legacy exports keep it in metadata
        sessions = _hashables(_meta(r, "session_id") for r in good) - {None}
    if sessions:
        known = ctx.builder.meta.setdefault("stormlog_sessions", [])
        assert isinstance(known, list)
        known.extend(sorted(str(s) for s in sessions if str(s) not in known))


def _hashable(v: Any) -> bool:
    return isinstance(v, str | int | float | bool) or v is None


def _hashables(values: Iterable[Any]) -> set[Any]:
    """The distinct values, with unhashable ones (a list or object where a scalar belongs)
    replaced by their type name so a set comparison reports them instead of raising.

    A column of JSON scalars (every real export) is one C-level ``set``; only a column with
    something else in it pays the per-value check."""
    values = values if isinstance(values, list | tuple) else list(values)
    try:
        distinct = set(values)
    except TypeError:  # a list or object among them
        distinct = None
    if distinct is not None and {type(v) for v in distinct} <= _SCALAR_TYPES:
        return distinct
    return {v if _hashable(v) else f"<{type(v).__name__}>" for v in values}


_SCALAR_TYPES = {str, int, float, bool, type(None)}


def _secs_to_ns(s: Any) -> int | None:
    try:
        return int(float(s) * 1_000_000_000)
    except (TypeError, ValueError, OverflowError):
        return None


def _mib(m: Any) -> float | None:
    try:
        return float(m) * MIB
    except (TypeError, ValueError):
        return None


def _int_column(values: Sequence[Any] | np.ndarray, default: int) -> np.ndarray:
    try:
        arr = np.asarray([default if v is None else v for v in values] if None in values
                         else values, dtype=np.float64)
        if arr.ndim != 1:  # a [rank] list in every row converts to 2-D
            raise TypeError("nested value")
    except (TypeError, ValueError, OverflowError):
        arr = np.array([_safe_int(v, default) for v in values], dtype=np.float64)
    bad = ~np.isfinite(arr) | (arr != np.round(arr)) | (np.abs(arr) >= 2.0**63)
    arr[bad] = -1
    return arr.astype(np.int64)


def _safe_int(v: Any, default: int) -> float:
    if v is None:
        return default
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return -1


def _distinct(ranks: np.ndarray) -> list[int]:
    """The ranks present, ascending; one file is usually one rank (np.unique would also import
    numpy.ma, a tenth of a files run's start-up)."""
    if not ranks.size:
        return []
    if bool((ranks == ranks[0]).all()):
        return [int(ranks[0])]
    return sorted(set(ranks.tolist()))


def _identities(good: list[Mapping[str, Any]], ranks: np.ndarray, ctx: LoadContext) -> None:
    """One identity per rank, from the first record of that rank (cheap: ranks are few)."""
    first_idx: dict[int, int] = {}
    if ranks.size and bool((ranks == ranks[0]).all()):
        first_idx[int(ranks[0])] = 0
    else:
        for i, r in enumerate(ranks.tolist()):
            first_idx.setdefault(r, i)
    for _rank, i in sorted(first_idx.items()):
        r = good[int(i)]
        rank = int(ranks[i])
        if rank < 0:
            continue
        dev = r.get("device_id")
        ctx.builder.set_identity(RankIdentity(
            rank=rank, job_id=_s(r.get("job_id") or _meta(r, "job_id")),
            local_rank=_i(r.get("local_rank")), world_size=_i(r.get("world_size")),
            host=_s(r.get("host") or _meta(r, "host")),
            gpu=None if dev is None else str(dev)))


def _s(v: Any) -> str | None:
    if v is None or v == "" or not _hashable(v):
        return None
    return str(v)


def _i(v: Any) -> int | None:
    try:
        return None if v is None or v == "" else int(float(v))
    except (TypeError, ValueError, OverflowError):
        return None


_TEXT_OR_NONE = {str, type(None)}
#: How Stormlog's OOM ``error`` event's context begins: ``OOM detected (<reason>)``.
OOM_CONTEXT = "OOM detected"


def _oom_markers(event_types: Sequence[Any] | np.ndarray, records: Sequence[Mapping[str, Any]],
                 t: np.ndarray, ok: np.ndarray, ranks: np.ndarray, ctx: LoadContext) -> None:
    """Stormlog's OOM events → OOM markers. Stormlog (0.4.x) records no allocator OOM
    counter; an OOM is in its export only as the ``error`` event its ``capture_oom`` writes,
    with ``oom_reason``/``oom_dump_path`` in the metadata (what its own ``is_oom_event`` reads),
    and ``OOM detected (<reason>)`` as its context (all the CSV export keeps: it writes the
    metadata as a Python repr). Only ``error`` events are looked at: they are few."""
    kinds = np.empty(len(event_types), dtype=object)
    kinds[:] = event_types
    acc = MarkerAccumulator()
    for i in np.flatnonzero(ok & (kinds == "error")).tolist():
        reason = _meta(records[i], "oom_reason")
        context = records[i].get("context")
        said = isinstance(context, str) and context.startswith(OOM_CONTEXT)
        if reason is None and _meta(records[i], "oom_dump_path") is None and not said:
            continue
        acc.add(int(ranks[i]), int(t[i]), int(t[i]), "OOM", KIND_OOM,
                {"reason": str(reason)} if reason is not None else {})
    for rank, m in acc.build().items():
        ctx.builder.add_markers(rank, m)


def _context_markers(contexts: Sequence[Any] | np.ndarray, t: np.ndarray, ok: np.ndarray,
                     ranks: np.ndarray, ctx: LoadContext) -> None:
    """Context strings → markers; consecutive events of a rank with the same context become one
    interval (a tracker sets the context for a whole phase, not one event)."""
    if not set(map(type, contexts)) <= _TEXT_OR_NONE:  # a number or object where text belongs
        contexts = [c if c is None or isinstance(c, str) else None for c in contexts]
    has = ok & np.fromiter(map(bool, contexts), bool, len(contexts))
    idx = np.flatnonzero(has)
    if idx.size == 0:
        return
    names = np.empty(len(contexts), dtype=object)
    names[:] = contexts
    names = names[idx]
    r = ranks[idx]
    new_run = np.ones(idx.size, bool)
    new_run[1:] = (np.diff(idx) != 1) | (r[1:] != r[:-1]) | (names[1:] != names[:-1])
    starts = np.flatnonzero(new_run)
    ends = np.append(starts[1:], idx.size) - 1
    acc = MarkerAccumulator()
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        name = str(names[a])
        acc.add(int(r[a]), int(t[idx[a]]), int(t[idx[b]]), name,
                "collective" if is_collective(name) else KIND_CONTEXT)
    for rank, m in acc.build().items():
        ctx.builder.add_markers(rank, m)
