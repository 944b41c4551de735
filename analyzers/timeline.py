"""The columnar multi-rank Timeline every algorithm takes.

Sources parse their input once into per-rank numpy arrays (time-sorted, de-duplicated, identity
kept); algorithms are then vectorised functions over those arrays. There are no per-sample Python
objects anywhere after a source's parser: sources append *chunks* (arrays) to a
:class:`TimelineBuilder`, which concatenates, sorts and de-duplicates once at the end.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
from stormotel.analyzers.alignments import ALIGN_FIRST_SAMPLE as ALIGN_FIRST_SAMPLE
from stormotel.analyzers.alignments import ALIGN_MARKERS as ALIGN_MARKERS
from stormotel.analyzers.alignments import ALIGN_WALL as ALIGN_WALL
from stormotel.analyzers.alignments import ALIGNMENTS as ALIGNMENTS

from stormotel import schema
from stormotel.errors import UsageError

#: Sample fields, all float64 bytes; NaN means "this rank did not report it".
FIELDS: tuple[str, ...] = ("allocated", "reserved", "active", "device_used", "device_total",
                           "device_free", "inactive_split")
#: ``inactive_split``: bytes in freed blocks split off a segment still in use — true allocator
#: fragmentation (PyTorch ``inactive_split_bytes``; Stormlog ``allocator_inactive_bytes``).

#: No job has this many ranks; larger world sizes or ranks are input errors (counted, not
#: allocated for: ``expected_ranks`` builds one entry per rank).
MAX_WORLD_SIZE = 1_000_000
#: Samples stamped further than this past the analyzer's clock are impossible (skipped).
MAX_FUTURE_NS = 24 * 3600 * 1_000_000_000
#: Fields that can never exceed the device's total memory (1 % slack for rounding).
BOUNDED_BY_TOTAL = ("allocated", "reserved", "active", "device_used", "inactive_split")
TOTAL_SLACK = 1.01


# Marker kinds (``Markers.kind``): sources write them, algorithms, stalls and sinks read them,
# so they live here, beside the object every stage shares.
KIND_STEP = "step"
KIND_MARK = "mark"
KIND_COLLECTIVE = "collective"
KIND_THRESHOLD = "threshold"
KIND_FIRST_RISE = "first_rise"
KIND_OOM = "oom"
KIND_CONTEXT = "context"
#: The tracker's clean stop (``stop_tracking``, SIGTERM, exit): an instant at the time its stop
#: gauge (``schema.TRACKER_STOP``) holds. A process killed (SIGKILL, the OOM killer, a lost
#: node) writes none, so a rank silent with this marker at its last sample stopped on purpose.
KIND_TRACKER_STOP = "tracker_stop"
#: An exception left one of the rank's step or mark spans (OpenTelemetry's ``exception`` event):
#: attributes ``type``, ``message`` and ``frames`` (the traceback's last frames, innermost last).
KIND_EXCEPTION = "exception"
#: The tracker's start (an instant at the time its start gauge, ``schema.TRACKER_START``, holds):
#: when the rank began sampling, whether or not anything read it then (a scrape target found
#: late, a query window cut into the run). :mod:`.algorithms.tracker_edges` reads it.
KIND_TRACKER_START = "tracker_start"
#: The tracker's edge gauges (label ``edge``) → marker kind; sources that read them (TSDB, OTLP
#: metrics) put the tracker's sampling interval, the edge's resolution, in ``EDGE_RESOLUTION_ATTR``.
EDGE_MARKER_KINDS: dict[str, str] = {
    schema.EDGE_FIRST_RISE: KIND_FIRST_RISE, schema.EDGE_THRESHOLD_WARNING: KIND_THRESHOLD,
    schema.EDGE_THRESHOLD_CRITICAL: KIND_THRESHOLD, schema.EDGE_OOM: KIND_OOM}
EDGE_RESOLUTION_ATTR = "resolution_ns"
#: Marker attribute a TSDB source puts on each edge: the stamp (ns) of the earliest scrape that
#: reported that edge's value. A scrape is stamped when it starts; one that reports an edge
#: lying after its own stamp was answered at least that late (its exporter was starved), so its
#: samples' stamps do not bound when what they show happened (:mod:`.algorithms.read_lag`).
EDGE_SEEN_ATTR = "first_seen_ns"
#: Marker attribute (bool) a TSDB source sets when the tracker's edge-gap gauge stated how long
#: before the edge its previous sample was: the edge is then trusted to that gap, however late
#: the scrape that reported it was answered.
EDGE_GAP_STATED_ATTR = "gap_stated"
#: Marker attribute saying where an OOM marker came from: ``counter`` when the allocator's OOM
#: counter went up (no event announced it); such a marker carries ``EDGE_RESOLUTION_ATTR`` too.
OOM_SOURCE_ATTR = "source"
OOM_FROM_COUNTER = "counter"

# ``Timeline.meta`` keys a source fills and an algorithm reads.
#: per-rank estimates from ``stormotel estimate`` (rank → bytes)
META_ESTIMATE_BYTES = "estimate_bytes"
#: the capture_oom ring dumps found beside the telemetry (list of OomDump)
META_OOM_DUMPS = "oom_dumps"
#: the ranks whose tracker says it delivers its clean stop (``schema.TRACKER_STOP_REPORTED``
#: was 1): a list, so builders merge it (absorb joins lists)
META_STOP_REPORTED = "stop_reported_ranks"
#: the runs of device-used samples an HA pair's other replica filled into a rank's series, as
#: (rank, first, last) times before alignment (a list, so builders merge it): that replica's
#: phase of a swing within a step, not comparable with the chosen replica's level
#: (sources/prometheus/samples.py, algorithms/replica_mix.py)
META_REPLICA_FILLS = "replica_fills"
#: the field whose filled samples are recorded: the one first cause reads (algorithms/rises.py)
REPLICA_FILL_FIELD = "device_used"


@dataclass(frozen=True)
class OomDump:
    """One rank's OOM (a ``capture_oom`` ring dump, or an OOM marker the analysis reads like one;
    ``path`` empty): when it ran out and what its memory looked like at the last sample."""

    path: str
    rank: int
    oom_ns: int
    sampling_interval_s: float | None
    last: dict[str, float | None]
    error: str = ""
    context: str = ""


@dataclass(frozen=True)
class RankIdentity:
    """Who produced a rank's data. Only ``rank`` is mandatory."""

    rank: int
    job_id: str | None = None
    local_rank: int | None = None
    world_size: int | None = None
    host: str | None = None
    gpu: str | None = None
    gpu_uuid: str | None = None
    #: Where the rank ran (Kubernetes pod/namespace/node, Slurm job), when a source knew it.
    pod: str | None = None
    namespace: str | None = None
    node: str | None = None
    slurm_job_id: str | None = None


@dataclass(frozen=True)
class Markers:
    """Per-rank named intervals: steps, ``tracker.mark`` phases, collectives.

    ``end_ns == start_ns`` for instants. ``kind`` is e.g. ``step``, ``mark``, ``collective``,
    ``threshold``, ``oom``, ``first_rise``. ``attrs`` holds optional per-marker dicts (kept as a
    Python list because markers are few compared to samples).
    """

    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64
    name: np.ndarray  # object (str)
    kind: np.ndarray  # object (str)
    attrs: tuple[Mapping[str, object], ...] = ()

    @staticmethod
    def empty() -> Markers:
        return Markers(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, object),
                       np.empty(0, object), ())

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    @cached_property
    def kinds(self) -> frozenset[str]:
        """The kinds present, found once per marker set: an analysis asks each rank whether
        it has first-rise, OOM or collective markers, and comparing the object array with a
        kind costs more than the rest of the question (most ranks have steps only)."""
        return frozenset(self.kind.tolist())

    def shifted(self, offset_ns: int) -> Markers:
        return replace(self, start_ns=self.start_ns + offset_ns, end_ns=self.end_ns + offset_ns)


@dataclass(frozen=True)
class RankSeries:
    """One rank's samples: ``t_ns`` (int64, sorted, unique) and one float64 array per field."""

    identity: RankIdentity
    t_ns: np.ndarray
    values: Mapping[str, np.ndarray]
    markers: Markers = field(default_factory=Markers.empty)

    @property
    def rank(self) -> int:
        return self.identity.rank

    def __len__(self) -> int:
        return int(self.t_ns.shape[0])

    def field(self, name: str) -> np.ndarray:
        return self.values[name]

    @cached_property
    def reported_fields(self) -> frozenset[str]:
        """Fields with at least one reported (non-NaN) value; computed once per series (a
        finite first sample answers without reading the rest)."""
        return frozenset(k for k, a in self.values.items()
                         if a.shape[0] and (math.isfinite(a[0]) or bool(np.isfinite(a).any())))

    def has(self, name: str) -> bool:
        """True when the field has at least one reported (non-NaN) value."""
        return name in self.reported_fields

    @property
    def gap(self) -> np.ndarray:
        """device used − allocator reserved (NaN where either is missing)."""
        return self.values["device_used"] - self.values["reserved"]

    def median_interval_ns(self) -> int | None:
        return self._median_interval

    @cached_property
    def _median_interval(self) -> int | None:
        if len(self) < 2:
            return None
        # np.median's arithmetic without its overhead (10,000 ranks ask once each): one
        # selection in the diffs (their own copy), then the middle value, or the mean of the
        # two middle ones as np.mean takes it in float64 (``0.0 +`` is its reduction's start).
        d = np.diff(self.t_ns)
        mid = d.shape[0] // 2
        d.partition(mid)
        if d.shape[0] % 2:
            return int(float(d[mid]))
        return int((float(d[:mid].max()) + (0.0 + float(d[mid]))) / 2)

    def shifted(self, offset_ns: int) -> RankSeries:
        return replace(self, t_ns=self.t_ns + offset_ns, markers=self.markers.shifted(offset_ns))


@dataclass
class Timeline:
    """All ranks of one job, plus what the sources had to say about the input."""

    ranks: dict[int, RankSeries]
    job_id: str | None = None
    world_size: int | None = None
    #: Human-readable notes from loading (skipped records, assumptions, resolution).
    notes: list[str] = field(default_factory=list)
    #: Counted skips by reason, e.g. {"nan_bytes": 3, "truncated_line": 1}.
    skipped: Counter[str] = field(default_factory=Counter)
    #: Which sources contributed (paths, URLs), for the report.
    sources: list[str] = field(default_factory=list)
    #: How clocks were aligned; set by :func:`stormotel.analyzers.align.align` (algorithms
    #: never guess).
    alignment: str = ALIGN_WALL
    #: Per-rank offsets (ns) applied by alignment.
    offsets_ns: dict[int, int] = field(default_factory=dict)
    #: Extra labels a source learned (e.g. dcgm mode), free-form.
    meta: dict[str, object] = field(default_factory=dict)

    @property
    def rank_ids(self) -> list[int]:
        return sorted(self.ranks)

    def expected_ranks(self) -> list[int]:
        if self.world_size:
            return list(range(self.world_size))
        return self.rank_ids

    def missing_ranks(self) -> list[int]:
        have = set(self.ranks)
        return [r for r in self.expected_ranks() if r not in have]

    def resolution_ns(self) -> int | None:
        """The coarsest per-rank median sampling interval: the bound on any claimed lead."""
        intervals = [iv for s in self.ranks.values() if (iv := s.median_interval_ns())]
        return max(intervals) if intervals else None

    def select(self, ranks: Iterable[int] | None) -> Timeline:
        if ranks is None:
            return self
        wanted = set(ranks)
        return replace(self, ranks={r: s for r, s in self.ranks.items() if r in wanted})

    def total_samples(self) -> int:
        return sum(len(s) for s in self.ranks.values())


class MixedJobsError(UsageError):
    """The input holds several jobs and no ``--job-id`` chose one: merging them would compare
    ranks of different jobs, so the run is refused with the ids listed."""


def _ids_list(ids: Iterable[str], limit: int = 10) -> str:
    from stormotel.textsafe import printable

    ids = sorted(ids)
    shown = ", ".join(repr(printable(i, 80)) for i in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


class TimelineBuilder:
    """Accumulates array chunks per rank from any number of sources, then builds once.

    Samples with the same (rank, timestamp) are merged: for each field the last non-NaN value
    wins, so a rank split over several files (or a metric per file) is reassembled, and exact
    duplicates collapse. Duplicates are counted in ``skipped["duplicate_sample"]`` (conflicting
    values in ``skipped["conflicting_sample"]``, with a note).
    """

    def __init__(self) -> None:
        self._chunks: dict[int, list[tuple[np.ndarray, dict[str, np.ndarray]]]] = {}
        self._markers: dict[int, list[Markers]] = {}
        self._identity: dict[int, RankIdentity] = {}
        self.notes: list[str] = []
        self.skipped: Counter[str] = Counter()
        self.sources: list[str] = []
        self.job_ids: Counter[str] = Counter()
        self.world_sizes: Counter[int] = Counter()
        self.meta: dict[str, object] = {}

    def set_identity(self, identity: RankIdentity) -> None:
        """Record identity; later, more complete identities fill gaps in earlier ones."""
        old = self._identity.get(identity.rank)
        if old is not None:
            identity = RankIdentity(**{k: (getattr(identity, k) if getattr(identity, k) is not None
                                          else getattr(old, k)) for k in old.__dataclass_fields__})
        self._identity[identity.rank] = identity
        if identity.job_id:
            self.job_ids[identity.job_id] += 1
        if identity.world_size:
            self.world_sizes[identity.world_size] += 1

    def add_samples(self, rank: int, t_ns: np.ndarray, **fields: np.ndarray) -> None:
        """Append a chunk. Fields not given are NaN for this chunk."""
        t = np.asarray(t_ns, dtype=np.int64)
        cols: dict[str, np.ndarray] = {}
        for name in FIELDS:
            arr = fields.get(name)
            cols[name] = (np.full(t.shape, np.nan) if arr is None
                          else np.asarray(arr, dtype=np.float64))
            if cols[name].shape != t.shape:
                raise ValueError(f"field {name!r} has {cols[name].shape[0]} values for "
                                 f"{t.shape[0]} timestamps")
        unknown = set(fields) - set(FIELDS)
        if unknown:
            raise ValueError(f"unknown sample field(s): {sorted(unknown)}")
        self._chunks.setdefault(rank, []).append((t, cols))
        self._identity.setdefault(rank, RankIdentity(rank=rank))

    def add_markers(self, rank: int, markers: Markers) -> None:
        if len(markers):
            self._markers.setdefault(rank, []).append(markers)
            self._identity.setdefault(rank, RankIdentity(rank=rank))

    def absorb(self, other: TimelineBuilder) -> None:
        """Take over everything another builder collected (a worker process's file)."""
        for rank, chunks in other._chunks.items():
            self._chunks.setdefault(rank, []).extend(chunks)
        for rank, markers in other._markers.items():
            self._markers.setdefault(rank, []).extend(markers)
        for ident in other._identity.values():
            self.set_identity(ident)
        self.notes.extend(n for n in other.notes if n not in self.notes)
        self.skipped.update(other.skipped)
        self.sources.extend(other.sources)
        for key, value in other.meta.items():
            mine = self.meta.get(key)
            if isinstance(mine, list) and isinstance(value, list):
                mine.extend(v for v in value if v not in mine)
            else:
                self.meta.setdefault(key, value)

    def build(self, *, job_id: str | None = None, world_size: int | None = None,
              now_ns: int | None = None) -> Timeline:
        """The Timeline; physically impossible data is dropped here, counted and noted:
        ranks outside the world, samples from the future, bytes above the device's total.

        Raises :class:`MixedJobsError` when the data holds several job ids and none was chosen.
        """
        if len(self.job_ids) > 1 and not job_id:
            raise MixedJobsError(
                f"the input holds {len(self.job_ids)} jobs ({_ids_list(self.job_ids)}); pass "
                "--job-id to analyse one of them")
        ws = self._world_size(world_size)
        limit = min(ws, MAX_WORLD_SIZE) if ws else MAX_WORLD_SIZE
        outside = [r for r in self._identity if not 0 <= r < limit]
        if outside:
            self._skip_outside(outside, ws)
        horizon = (time.time_ns() if now_ns is None else now_ns) + MAX_FUTURE_NS
        ranks: dict[int, RankSeries] = {}
        order = [r for r in sorted(self._identity) if 0 <= r < limit]
        clean = _possible_single_chunks({r: self._chunks.get(r, []) for r in order}, horizon)
        for rank in order:
            if rank in clean:  # one ordered chunk, nothing impossible: what the two calls give
                t, cols = clean[rank]
            else:
                t, cols = self._merge_chunks(self._chunks.get(rank, []))
                t, cols = self._drop_impossible(rank, t, cols, horizon)
            ranks[rank] = RankSeries(self._identity[rank], t, cols,
                                     concat_markers(self._markers.get(rank, [])))
        jid = job_id or (self.job_ids.most_common(1)[0][0] if self.job_ids else None)
        return Timeline(ranks=ranks, job_id=jid, world_size=ws, notes=list(self.notes),
                        skipped=Counter(self.skipped), sources=list(self.sources),
                        meta=dict(self.meta))

    def _world_size(self, given: int | None) -> int | None:
        """The world size: given, else the largest plausible one the ranks reported."""
        if given:
            return given
        sizes = [w for w in self.world_sizes if 0 < w <= MAX_WORLD_SIZE]
        absurd = sorted(w for w in self.world_sizes if not 0 < w <= MAX_WORLD_SIZE)
        if absurd:
            self.skipped["implausible_world_size"] += sum(self.world_sizes[w] for w in absurd)
            self.notes.append(f"ignored world_size {absurd[:3]}: not between 1 and "
                              f"{MAX_WORLD_SIZE}")
        ws = max(sizes) if sizes else None
        if len(sizes) > 1:
            self.notes.append(f"ranks disagree on world_size {sorted(sizes)}; using {ws}")
        return ws

    def _skip_outside(self, outside: list[int], ws: int | None) -> None:
        n = sum(sum(c[0].shape[0] for c in self._chunks.get(r, [])) for r in outside)
        self.skipped["rank_outside_world"] += max(n, len(outside))
        bound = f"world size {ws}" if ws else f"the limit of {MAX_WORLD_SIZE} ranks"
        shown = ", ".join(map(str, sorted(outside)[:5]))
        self.notes.append(f"ignored rank(s) {shown}{' ...' if len(outside) > 5 else ''}: "
                          f"outside {bound} ({n} samples)")

    def _drop_impossible(self, rank: int, t: np.ndarray, cols: dict[str, np.ndarray],
                         horizon: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Samples stamped in the future go; byte values above the device total become NaN."""
        # t is sorted here (_merge_chunks): only its last stamp can tell that some are late.
        future = t > horizon if t.size and t[-1] > horizon else None
        if future is not None:
            n = int(future.sum())
            self.skipped["future_timestamp"] += n
            self.notes.append(f"rank {rank}: {n} sample(s) stamped more than a day after now "
                              "were ignored (clock or input error)")
            keep = ~future
            t = t[keep]
            cols = {f: a[keep] for f, a in cols.items()}
        total = cols.get("device_total")
        finite = np.isfinite(total) if total is not None else None
        if total is None or finite is None or not finite.any():
            return t, cols
        cap = np.where(finite, total * TOTAL_SLACK, np.inf)
        with np.errstate(invalid="ignore"):  # once per rank: entering it costs ~3 µs
            # The largest bounded value at each stamp first (NaN only where all are): nearly
            # always none is above the cap, and one comparison says so.
            if not bool((np.fmax.reduce([cols[f] for f in BOUNDED_BY_TOTAL]) > cap).any()):
                return t, cols
            overs = [(f, cols[f] > cap) for f in BOUNDED_BY_TOTAL]
        over_any = 0
        for f, over in overs:
            if over.any():
                over_any += int(over.sum())
                a = cols[f].copy()
                a[over] = np.nan
                cols[f] = a
        if over_any:
            self.skipped["above_device_total"] += over_any
            self.notes.append(f"rank {rank}: {over_any} byte value(s) above the device's "
                              "total memory were ignored (impossible)")
        return t, cols

    def _merge_chunks(self, chunks: list[tuple[np.ndarray, dict[str, np.ndarray]]]
                      ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        if not chunks:
            return np.empty(0, np.int64), {f: np.empty(0) for f in FIELDS}
        if len(chunks) == 1:
            t, cols = chunks[0][0], dict(chunks[0][1])
        else:
            t = np.concatenate([c[0] for c in chunks])
            cols = {f: np.concatenate([c[1][f] for c in chunks]) for f in FIELDS}
        if strictly_increasing(t):  # one file per rank, fields in one chunk: nothing to merge
            return t, cols
        order = np.argsort(t, kind="stable")
        t = t[order]
        cols = {f: a[order] for f, a in cols.items()}
        uniq, start = np.unique(t, return_index=True)
        if uniq.shape[0] == t.shape[0]:
            return t, cols
        # Merge rows sharing a timestamp: last non-NaN value per field wins.
        group = np.repeat(np.arange(uniq.shape[0]), np.diff(np.append(start, t.shape[0])))
        merged: dict[str, np.ndarray] = {}
        for f, a in cols.items():
            out = np.full(uniq.shape, np.nan)
            ok = np.isfinite(a)
            # Writing in order means later rows overwrite earlier ones within a group.
            out[group[ok]] = a[ok]
            merged[f] = out
        self._count_exact_duplicates(t, cols)
        return uniq, merged

    def _count_exact_duplicates(self, t: np.ndarray, cols: dict[str, np.ndarray]) -> None:
        """Count samples reported twice (same timestamp, same value) and conflicting ones.

        Counted per field, because sources may deliver one field per chunk (a metric per OTLP
        data-point list); ``duplicate_sample`` is the largest per-field count, i.e. how many
        samples arrived more than once. Conflicts (same timestamp, different value) are counted
        separately: the last one read wins.
        """
        dups = conflicts = 0
        for a in cols.values():
            ok = np.isfinite(a)
            tf, vf = t[ok], a[ok]
            same_t = tf[1:] == tf[:-1]
            same_v = vf[1:] == vf[:-1]
            dups = max(dups, int((same_t & same_v).sum()))
            conflicts = max(conflicts, int((same_t & ~same_v).sum()))
        if dups:
            self.skipped["duplicate_sample"] += dups
        if conflicts:
            self.skipped["conflicting_sample"] += conflicts
            note = ("some samples were reported twice with different values "
                    "(same rank and timestamp); the last one read was kept")
            if note not in self.notes:
                self.notes.append(note)


#: Ranks checked together by :func:`_possible_single_chunks` (bounds its joined copies).
POSSIBLE_BATCH = 1024


def _possible_single_chunks(chunks: dict[int, list[tuple[np.ndarray, dict[str, np.ndarray]]]],
                            horizon: int) -> dict[int, tuple[np.ndarray, dict[str, np.ndarray]]]:
    """The ranks whose data is one strictly increasing chunk (a TSDB read: one scrape target)
    with no stamp past ``horizon`` and no bounded value above the device total, as the
    (t, columns) :meth:`TimelineBuilder._merge_chunks` and ``_drop_impossible`` would return
    unchanged for them. Checked a batch of ranks at a time over joined arrays (the same
    element-wise comparisons), instead of a dozen small numpy calls per rank at 10,000 ranks;
    every other rank goes through those two methods as before."""
    single = [(r, c[0]) for r, c in chunks.items()
              if len(c) == 1 and c[0][0].shape[0] and strictly_increasing(c[0][0])]
    out: dict[int, tuple[np.ndarray, dict[str, np.ndarray]]] = {}
    for lo in range(0, len(single), POSSIBLE_BATCH):
        batch = single[lo:lo + POSSIBLE_BATCH]
        sizes = np.fromiter((t.shape[0] for _, (t, _) in batch), dtype=np.int64,
                            count=len(batch))
        starts = np.cumsum(sizes) - sizes
        # Each rank's last stamp is its latest (strictly increasing).
        late = np.fromiter((int(t[-1]) for _, (t, _) in batch), dtype=np.int64,
                           count=len(batch)) > horizon
        total = np.concatenate([cols["device_total"] for _, (_, cols) in batch])
        finite = np.isfinite(total)
        cap = np.where(finite, total * TOTAL_SLACK, np.inf)
        top = np.concatenate([cols[BOUNDED_BY_TOTAL[0]] for _, (_, cols) in batch])
        for f in BOUNDED_BY_TOTAL[1:]:
            np.fmax(top, np.concatenate([cols[f] for _, (_, cols) in batch]), out=top)
        with np.errstate(invalid="ignore"):
            over = np.logical_or.reduceat(top > cap, starts)  # every size is above 0
        for (rank, (t, cols)), bad in zip(batch, (late | over).tolist(), strict=True):
            if not bad:
                out[rank] = (t, dict(cols))
    return out


def strictly_increasing(t: np.ndarray) -> bool:
    """Sorted without repeats: one vectorised comparison instead of a sort."""
    return t.shape[0] < 2 or bool((t[1:] > t[:-1]).all())


def distinct_count(t: np.ndarray) -> int:
    """How many distinct timestamps ``t`` holds (sorted only when it has to be)."""
    return int(t.shape[0]) if strictly_increasing(t) else int(np.unique(t).shape[0])


def concat_markers(parts: list[Markers]) -> Markers:
    """Several marker sets of one rank as one, ordered by start time."""
    if not parts:
        return Markers.empty()
    only = parts[0]
    if len(parts) == 1 and len(only.attrs) == len(only) \
            and bool((only.start_ns[1:] >= only.start_ns[:-1]).all()):
        return only  # already one ordered set (a TSDB read's steps): what the sort would give
    start = np.concatenate([p.start_ns for p in parts])
    order = np.argsort(start, kind="stable")
    attrs: list[Mapping[str, object]] = []
    for p in parts:
        attrs.extend(p.attrs if p.attrs else [{}] * len(p))
    return Markers(start[order], np.concatenate([p.end_ns for p in parts])[order],
                   np.concatenate([p.name for p in parts])[order],
                   np.concatenate([p.kind for p in parts])[order],
                   tuple(attrs[i] for i in order))
