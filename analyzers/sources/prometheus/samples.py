"""Memory samples as they arrive: cleaned (finite, non-negative byte values), collected per
rank and field across endpoints, merged deterministically (duplicates removed, conflicts
resolved to the larger value and noted)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import cast

import numpy as np
from stormotel.analyzers.sources.prometheus.discover import (
    int_label,
)
from stormotel.analyzers.sources.prometheus.plan import QueryTask, SampleParts
from stormotel.analyzers.sources.prometheus_api import (
    Series,
    parse_matrix_values,
)
from stormotel.analyzers.timeline import (
    META_REPLICA_FILLS,
    REPLICA_FILL_FIELD,
    TimelineBuilder,
)

from stormotel import schema


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
    """:func:`clean_byte_series` for a decoded :class:`Series` (values already parsed), in
    whole bytes (:func:`whole_bytes`)."""
    if s.t_ns is None or s.v is None:
        builder.skipped["malformed_series"] += 1
        return None
    if s.clean:
        return s.t_ns, whole_bytes(s.v)
    t_ns, v = s.t_ns, s.v
    bad = ~np.isfinite(v) | (v < 0)
    if bad.any():
        builder.skipped["non_finite_or_negative_bytes"] += int(bad.sum())
        t_ns, v = t_ns[~bad], v[~bad]
    return t_ns, whole_bytes(v)


def whole_bytes(v: np.ndarray) -> np.ndarray:
    """Memory sample values rounded to whole bytes. A byte count is an integer, but a TSDB
    may hand it back a last bit off, and not always the same way: VictoriaMetrics stores a
    block's values as int64 mantissas of one decimal exponent, and when it merges a series'
    integer block with the block holding only its staleness marker (exponent -1024) it
    rescales the integers by 10^9 (``lib/decimal`` ``CalibrateScale``), after which
    ``float64(v) / 1e9`` is one ulp off beyond 2^53 — 6,826,610,141 bytes read
    6,826,610,140.999999 through every API of that server once the merge ran, 6,826,610,141.0
    before it (tests/job/test_vm_native.py). Rounding makes a job's reports the same whenever
    the server merged, on every read path and across an HA pair in different merge states
    (whose values would otherwise conflict); a genuinely fractional byte value (a recording
    rule's average) moves by under half a byte."""
    return np.rint(v)


def collect_samples(results: list[Series], task: QueryTask, builder: TimelineBuilder,
                     out: SampleParts) -> set[int]:
    got: set[int] = set()
    ranks = set(task.ranks)
    for s in results:
        if s.labels is None:
            builder.skipped["malformed_series"] += 1
            continue
        rank = int_label(s.labels, schema.ATTR_RANK)  # what identity_from_labels accepts
        if rank is None or rank not in ranks:
            builder.skipped["series_without_valid_rank_label"] += 1
            continue
        cleaned = clean_series(s, builder)
        if cleaned is None:
            continue
        t_ns, v = cleaned
        if t_ns.size:
            out.setdefault((rank, task.fname), []).append((t_ns, v, task.api.url))
            got.add(rank)
    return got


def merge_parts(parts: list[tuple[np.ndarray, np.ndarray]],
                servers: Sequence[str] | None = None
                ) -> tuple[np.ndarray, np.ndarray, int, int, np.ndarray]:
    """One series from several reads (endpoints, chunks, spellings): replicas scraping at other
    moments taken as one (:func:`replicas_as_one`), then sorted by time, exact duplicates
    dropped, and where values conflict at one timestamp the larger kept — a rule that gives the
    same answer in any read order. ``servers``: the endpoint of each part (None: each part its
    own read). Returns (t, v, duplicates, conflicts, filled): ``filled``, the times of the
    samples another replica filled in (:func:`filled_runs` makes runs)."""
    filled = _NONE
    if len(parts) > 1 and (servers is None or len(set(servers)) > 1):
        parts, filled = replicas_as_one(parts, servers)
    t = np.concatenate([p[0] for p in parts]) if len(parts) > 1 else parts[0][0]
    v = np.concatenate([p[1] for p in parts]) if len(parts) > 1 else parts[0][1]
    if t.size < 2 or bool((t[1:] > t[:-1]).all()):  # the usual read: already in order, unique
        return t, v, 0, 0, filled
    order = np.lexsort((v, t))  # by time, then value
    t, v = t[order], v[order]
    same_t = t[1:] == t[:-1]
    same_v = v[1:] == v[:-1]
    dups = int((same_t & same_v).sum())
    conflict_ts = np.unique(t[1:][same_t & ~same_v])
    keep = np.r_[~same_t, True]  # the last of each equal-time run: the largest value
    return t[keep], v[keep], dups, int(conflict_ts.size), filled


_NONE = np.empty(0, np.int64)


def replicas_as_one(parts: list[tuple[np.ndarray, np.ndarray]],
                    servers: Sequence[str] | None = None
                    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """Reads of one series by servers that scraped it at other moments (an HA pair) as one:
    the server with the most samples, and another's samples only where that one has none within
    half its interval (its holes, before its first sample, after its last) — how Thanos and
    Cortex deduplicate replicas. Interleaved, two replicas sampling a memory swing within a
    training step at fixed, different phases (2.58 GiB on one, 4.58 GiB on the other, for the
    same target) made a series that zigzags by 2 GiB, and a zigzag at a rank's start was named
    a first cause at high (docs/benchmarks.md, session 17). ``servers`` names each part's
    endpoint: one server's parts (the time chunks of a long or refused read) are joined into
    its replica first — compared part by part, every chunk but the chosen one interleaved the
    replicas, unrecorded. Without ``servers`` each part is its own read, and a read of other
    times than the chosen one's is taken for a chunk. Reads sharing most timestamps (the same
    samples from two TSDBs, one server listed twice) are left to :func:`merge_parts`' own rule.
    Chosen by content, never by read or server order.

    Also returns the times of the samples filled in from another replica (another server, or
    without ``servers`` a read overlapping the chosen one's time range): such a sample is that
    replica's phase of the swing, so a rise measured from one replica's sample to the other's
    may be the phase difference alone (:mod:`stormotel.analyzers.algorithms.replica_mix`)."""
    names = list(servers) if servers is not None else [str(i) for i in range(len(parts))]
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        groups.setdefault(name, []).append(i)
    reads = {name: _joined([parts[i] for i in idx]) for name, idx in groups.items()}

    def key(name: str) -> tuple[int, int, float, bytes, bytes]:
        t, v = reads[name]
        return (-t.size, int(t[0]) if t.size else 0, float(np.nansum(v)), t.tobytes(),
                v.tobytes())
    order = sorted(groups, key=key)
    t_kept = np.unique(reads[order[0]][0])
    if t_kept.size < 2:
        return parts, _NONE
    half = float(np.median(np.diff(t_kept))) / 2
    out = [parts[i] for i in groups[order[0]]]
    filled = []
    for name in order[1:]:
        t_all = reads[name][0]
        if not t_all.size or float(np.isin(t_all, t_kept).mean()) >= 0.5:
            out += [parts[i] for i in groups[name]]  # the same samples twice: merge_parts dedups
            continue
        kept = []
        for i in groups[name]:
            t, v = parts[i]
            at = np.clip(np.searchsorted(t_kept, t), 1, t_kept.size - 1)
            near = np.minimum(np.abs(t - t_kept[at - 1]), np.abs(t_kept[at] - t))
            keep = near > half
            out.append((t[keep], v[keep]))
            kept.append(t[keep])
        if servers is not None or (t_all[-1] >= t_kept[0] and t_all[0] <= t_kept[-1]):
            filled += kept  # another replica (without servers: not a chunk of other times)
    return out, np.unique(np.concatenate(filled)) if filled else _NONE


def _joined(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """One server's reads as one, sorted by time then value (whatever order they came in)."""
    t = np.concatenate([p[0] for p in parts])
    v = np.concatenate([p[1] for p in parts])
    order = np.lexsort((v, t))
    return t[order], v[order]


def filled_runs(t: np.ndarray, filled: np.ndarray) -> list[tuple[int, int]]:
    """The merged series ``t``'s runs of consecutive filled samples, as (first, last) times: a
    run holds no sample of the chosen replica, so a time within one is a filled sample."""
    if not filled.size:
        return []
    mask = np.isin(t, filled)
    edges = np.diff(np.r_[0, mask.view(np.int8), 0])
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    return [(int(t[a]), int(t[b])) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


def merge_samples(samples: SampleParts, builder: TimelineBuilder) -> int:
    """Each rank's fields into the builder as one chunk on the union of their timestamps (NaN
    where a field has no sample): what the builder's own merge of one chunk per field gives,
    without holding every field's chunk padded to all fields first (7x the memory). Returns
    how many timestamps held conflicting values (the caller notes them once)."""
    conflicts = 0
    by_rank: dict[int, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    usual = _one_scrape_ranks(samples)
    for (rank, fname), parts in sorted(samples.items()):
        if rank in usual:
            by_rank.setdefault(rank, {})[fname] = parts[0][:2]
            continue
        t, v, dups, bad, filled = merge_parts([(t, v) for t, v, _ in parts],
                                              [server for _, _, server in parts])
        by_rank.setdefault(rank, {})[fname] = (t, v)
        if fname == REPLICA_FILL_FIELD and filled.size:
            runs = cast(list[tuple[int, int, int]],
                        builder.meta.setdefault(META_REPLICA_FILLS, []))
            runs.extend((rank, a, b) for a, b in filled_runs(t, filled))
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


def _one_scrape_ranks(samples: SampleParts) -> set[int]:
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
