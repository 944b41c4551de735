"""Calibration of the blind-rank cap (:func:`stormotel.analyzers.algorithms.read_lag.blind_gaps`):
counts per threshold pair, not timings.

    .venv/bin/python benchmarks/eval_blind_cap.py [--seeds 20] [--fleet-seeds 10]

Why: the cap (a rank with a hole of more than ``BLIND_FACTOR`` × its median interval and more
than ``BLIND_MIN_NS`` over the span where its rise would have come first keeps the leader at
low) was reasoned, not measured. Here every labelled job is analysed once per threshold pair
(the module constants patched, ``analyze`` run on the same Timeline) and with the cap off:

* **lost** — an innocent rank (not the planted leader) missed scrapes near the incident: the
  planted leader was named at high/medium with the cap off and is not with the cap (a right
  high answer lost);
* **saved / still wrong** — the planted leader's own scrapes were missed over its rise (its
  host starved or its target down; the rise stays, or falls back before the hole ends, as an
  OOM'd allocation does): a wrong rank named at high/medium with the cap off, and with the cap.

The jobs are production-shaped Prometheus reads, built as Timelines the way
``tests/analyzers/synth`` builds them (the real-process harness of ``tests/production`` starts
a tracker per rank and cannot run thousands of jobs on a shared 2-core host): staggered starts
(0–60 s) with a warm-up each, a per-target scrape phase, scrape intervals of 15, 30 and 60 s,
a loaded host (each stamp 0–J s late and each value read a further 0–J s after its stamp,
J = 0 or 10 s), 2 to 1,024 ranks, a leader rising 4 GiB and (half the jobs) every other rank
following it within the cascade window. Missed scrapes: 1, 2, 3 or 5 in a row, the target
down for 5 minutes, or a target found late (its first scrape 0-60 s after that span, its
tracker running from its start: with ``--start-edge`` every rank carries its tracker's start
marker, as a Prometheus read of the start gauge gives, and that head is blind). With ``--peak
30`` each value is what the tracker's rolling 30 s peak gauge gives (the Prometheus source
prefers it): a rise that fell back shows for 30 s after it (steps and the first sample are their
own peak; the noise's peak is left out). With ``--tracker-reads`` each rank is read as its
tracker exports it over Prometheus (the peak gauge by its time buckets, the start marker, the
first_rise edge gauges), through the Prometheus source's own series-to-Timeline code; results:
docs/benchmarks.md ("The calibration jobs read as the tracker exports them"). The fleet part
gives every rank of a 1,024-rank job random misses at
production-like rates (each scrape missed with probability p, in runs of 1 (70 %), 2 (20 %)
or 3–6 (10 %)) around one rank's lone rise, and counts how often the cap takes that right
high answer away. Results and the choice: docs/benchmarks.md ("Blind-rank
cap calibration"), docs/algorithms.md ("Late reads").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormotel.analyzers.algorithms import first_cause, read_lag
from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.sources.prometheus.markers import markers_from_edges
from stormotel.analyzers.sources.prometheus.plan import Parts, SampleParts
from stormotel.analyzers.sources.prometheus.samples import merge_samples
from stormotel.analyzers.timeline import (
    KIND_TRACKER_START,
    Markers,
    RankIdentity,
    Timeline,
    TimelineBuilder,
)

from stormotel import schema
from tests.analyzers.synth import GIB, MIB, T0, RankData, to_timeline

S = 1_000_000_000
SURE = ("high", "medium")
SPAN_S = 1200.0  # each job's data: 20 minutes
INCIDENT_S = 600.0  # the leader's rise, 10 minutes in
WINDOW_S = 30.0  # Settings.cascade_window_s
#: (BLIND_FACTOR, BLIND_MIN_NS in s); None = the cap off.
PAIRS: list[tuple[float, float] | None] = [
    None, (2, 1), (3, 1), (4, 1), (5, 1), (6, 1), (8, 1)]
#: Missed scrapes in a row (an int), a target down that many seconds (a float), or a target
#: found late (``"head"``: no scrape from the tracker's start until 0-60 s after the span).
HOLES: tuple[int | float | str, ...] = (1, 2, 3, 5, 300.0, "head")
#: ``--start-edge``: every rank carries its tracker's start marker (what a Prometheus read of a
#: stormotel tracker's start gauge gives), so a target found late is blind over its head.
START_EDGE = [False]
#: ``--peak``: every value scraped is the tracker's rolling peak over this many seconds
#: (``stormotel.device.memory.usage.peak``, which the Prometheus source prefers), not the
#: instant's: a rise that fell back shows for the peak window after it.
PEAK_S = [0.0]
#: ``--tracker-reads``: every rank is read as a stormotel tracker exports it over Prometheus —
#: the rolling peak gauge by its own time buckets (telemetry.RollingPeak: ``PEAK_WINDOW_S``
#: in 30 buckets, so it covers 29-30 s back from the latest sample), its start marker, and
#: the first_rise edge gauges, each scrape answering the latest edge the tracker had set by
#: then; the samples and edges go through the Prometheus source's own merge_samples and
#: markers_from_edges. None: plain samples.
TRACKER: list[dict[int, tuple[np.ndarray, np.ndarray]] | None] = [None]
#: The tracker's default sampling interval (tracker.py: ``interval = 0.1`` when unset), its
#: first-rise warm-up samples and re-arm quiet time (config.ThresholdConfig's defaults).
TRACKER_DT_S = 0.1
PEAK_BUCKETS = 30  # RollingPeak's buckets
BLIND_NOTE = "have no sample over part of the span"


def job(rng: np.random.Generator, world: int, interval_s: float, jitter_s: float, leader: int,
        follow: bool, lead_s: float, transient_s: float | None = None) -> list[RankData]:
    """Scheduled scrapes of every rank with their values (the hole is cut out later)."""
    out = []
    window = max(WINDOW_S, 2 * interval_s)
    for r in range(world):
        start = rng.uniform(0, 60)
        phase = rng.uniform(0, interval_s)
        sched = start + phase + interval_s * np.arange(int((SPAN_S - start - phase) // interval_s))
        stamp = sched + rng.uniform(0, jitter_s, len(sched))
        read = stamp + rng.uniform(0, jitter_s, len(sched))  # the value the late answer saw
        base = 30 * GIB + rng.normal(0, 64 * MIB, len(sched))
        reserved = np.where(np.arange(len(sched)) == 0, 2 * GIB, base)  # warm-up: 1st sample
        rises: list[float] = []  # the times this rank's memory steps up 4 GiB
        if r == leader:
            up = read >= INCIDENT_S
            if transient_s is not None:  # risen and fallen back (an OOM'd allocation freed)
                up &= _peak_from(read) < INCIDENT_S + transient_s
            reserved = reserved + np.where(up, 4 * GIB, 0)
            rises.append(INCIDENT_S)
        elif follow:
            at = INCIDENT_S + min(lead_s, 0.9 * window) + rng.uniform(0, 1)
            reserved = reserved + np.where(read >= at, 4 * GIB, 0)
            rises.append(at)
        t = T0 + (stamp * S).astype(np.int64)
        edges = TRACKER[0]
        if edges is not None:
            edges[r] = (t, _first_rise_gauge(read, start, rises))
        began = T0 + int(start * S)
        marks = [(began, began, "tracker start", KIND_TRACKER_START)] if START_EDGE[0] else []
        out.append(RankData(r, t, 0.75 * reserved, reserved, reserved + 512 * MIB,
                            np.full(len(t), 80.0 * GIB), marks))
    return out


def _peak_from(read: np.ndarray) -> np.ndarray:
    """Per read, the earliest time (s) its value covers: the instant's without a peak gauge;
    ``--peak``: that many s back; ``--tracker-reads``: the start of the oldest time bucket
    RollingPeak still holds (its buckets by absolute sample time)."""
    if TRACKER[0] is None or not PEAK_S[0]:
        return read - PEAK_S[0]
    bucket = PEAK_S[0] / PEAK_BUCKETS
    t0 = T0 / S
    return (np.floor((t0 + read) / bucket) - (PEAK_BUCKETS - 1)) * bucket - t0


def _first_rise_gauge(read: np.ndarray, start: float, rises: list[float]) -> np.ndarray:
    """The first_rise edge-timestamp gauge (unix s; 0 before any) each scrape read, as
    stormotel.edges.FirstRiseDetector sets it on the tracker's samples (every TRACKER_DT_S from
    ``start``): the 4 GiB step (exactly the default bar, 5 % of the 80 GiB device, over the
    steady level: the between-scrape noise is not modelled at the tracker's rate) qualifies at
    the first sample at or after it; the gauge keeps it after a transient falls back (the
    detector re-arms ``rise_rearm_s`` later on the steady level, and nothing rises again).

    The warm-up's edge is left out: these jobs tie each rank's warm-up to its first scrape
    (0-60 s after its tracker's start, at random per rank), which no program does, and an edge
    timing those warm-ups precisely makes incidents of them by the analyzer's 20 s warm-up
    rule (measured: 60 of 432 held-out controls then named a wrong rank at high, every one
    at warm-up time, 500 s before the planted rise). The detector is armed on the steady level
    at the incident either way (its warm-up edge re-arms it ``rise_rearm_s`` later)."""
    dt = TRACKER_DT_S
    set_at = np.array([start + math.ceil((x - start) / dt - 1e-9) * dt for x in rises])
    if not len(set_at):
        return np.zeros(len(read))
    latest = np.searchsorted(set_at, read, side="right") - 1
    return np.where(latest >= 0, T0 / S + set_at[np.maximum(latest, 0)], 0.0)


def timeline(data: list[RankData]) -> Timeline:
    """The Timeline of ``data``: synth's, or with ``--tracker-reads`` what the Prometheus source
    builds from the same series (its merge_samples, its markers_from_edges on the first_rise
    gauge and the edge-gap gauge, the tracker's sampling interval as each edge's resolution)."""
    edges = TRACKER[0]
    if edges is None:
        return to_timeline(data)
    b = TimelineBuilder()
    samples: SampleParts = {}
    parts: Parts = {}
    gaps: Parts = {}
    for d in data:
        b.set_identity(RankIdentity(rank=d.rank, job_id="job-synth", world_size=len(data)))
        for f in ("allocated", "reserved", "device_used", "device_total"):
            samples[(d.rank, f)] = [(d.t_ns, getattr(d, f), "synth")]
        t_all, v_all = edges[d.rank]
        v = v_all[np.searchsorted(t_all, d.t_ns)]
        parts[(d.rank, schema.EDGE_FIRST_RISE)] = [(d.t_ns, v)]
        gaps[(d.rank, schema.EDGE_FIRST_RISE)] = [(d.t_ns, np.where(v > 0, TRACKER_DT_S, 0.0))]
    merge_samples(samples, b)
    for d in (d for d in data if d.markers):  # the start markers (no attributes)
        starts, ends, names, kinds = (list(c) for c in zip(*d.markers, strict=True))
        b.add_markers(d.rank, Markers(np.array(starts, np.int64), np.array(ends, np.int64),
                                      np.array(names, object), np.array(kinds, object),
                                      tuple({} for _ in names)))
    dt_ns = int(TRACKER_DT_S * S)
    for rank, m in markers_from_edges(parts, {d.rank: dt_ns for d in data}, gaps).items():
        b.add_markers(rank, m)
    return b.build()


def drop(d: RankData, keep: np.ndarray) -> RankData:
    return RankData(d.rank, d.t_ns[keep], d.allocated[keep], d.reserved[keep],
                    d.device_used[keep], d.device_total[keep], d.markers)


def cut(d: RankData, rng: np.random.Generator, hole: int | float | str,
        over_s: float) -> RankData:
    """``d`` with ``hole`` (missed scrapes in a row, seconds down, or its head unscraped)
    covering ``over_s``."""
    t = (d.t_ns - T0) / S
    if isinstance(hole, str):  # the target found late: first scraped after ``over_s``
        return drop(d, t >= over_s + rng.uniform(0, 60))
    if isinstance(hole, float):
        a = over_s - rng.uniform(0, hole)
        return drop(d, (t < a) | (t >= a + hole))
    first = int(np.searchsorted(t, over_s)) - int(rng.integers(0, hole))
    keep = np.ones(len(t), bool)
    keep[max(first, 1):max(first, 1) + hole] = False
    return drop(d, keep)


@contextmanager
def thresholds(pair: tuple[float, float] | None) -> Iterator[None]:
    saved = read_lag.BLIND_FACTOR, read_lag.BLIND_MIN_NS
    if pair is None:
        read_lag.BLIND_FACTOR, read_lag.BLIND_MIN_NS = 10**9, 10**18  # type: ignore[assignment]
    else:
        read_lag.BLIND_FACTOR = pair[0]  # type: ignore[assignment]
        read_lag.BLIND_MIN_NS = int(pair[1] * S)
    try:
        yield
    finally:
        read_lag.BLIND_FACTOR, read_lag.BLIND_MIN_NS = saved


def verdicts(tl: Timeline, leader: int,
             pairs: Sequence[tuple[float, float] | None] = PAIRS,
             why: dict[str, list[dict[str, Any]]] | None = None,
             ) -> dict[str, tuple[bool, bool, bool, bool]]:
    """Per pair: (planted leader named at high/medium, wrong rank at high/medium, cap fired,
    planted leader named at high).
    Wrong counts every incident's leader, as tests/production's judge does. ``why`` gets, per
    pair, each wrong high/medium answer: the rank, its confidence, the incident's kind, its
    ranks and its rises relative to the planted rise (to classify the wrong answers by cause)."""
    out = {}
    for pair in pairs:
        with thresholds(pair):
            cr = analyze(tl).cross_rank
        sure = [s.rank for s in cr.first_cause_suspects if s.confidence in SURE]
        sure += [i["leader"] for i in cr.incidents if i["leader"] is not None
                 and i["confidence"] in SURE]
        fired = any(BLIND_NOTE in n for i in cr.incidents for n in i["notes"])
        high = [s.rank for s in cr.first_cause_suspects if s.confidence == "high"]
        high += [i["leader"] for i in cr.incidents if i["confidence"] == "high"]
        out[str(pair)] = (leader in sure, any(r != leader for r in sure), fired, leader in high)
        if why is not None:
            why[str(pair)] = [_wrong(i) for i in cr.incidents if i["leader"] is not None
                              and i["leader"] != leader and i["confidence"] in SURE]
    return out


def _wrong(inc: dict[str, Any]) -> dict[str, Any]:
    """One wrong answer, in seconds from the planted rise."""
    at = T0 + int(INCIDENT_S * S)
    return {"rank": inc["leader"], "confidence": inc["confidence"], "kind": inc["kind"],
            "ranks": inc["ranks"][:8], "n_ranks": len(inc["ranks"]),
            "rises": {r: [round((v["earliest_ns"] - at) / S, 2), round((v["t_ns"] - at) / S, 2)]
                      for r, v in list(inc["rises"].items())[:8]},
            "bound_s": round(inc["lead_lower_bound_ns"] / S, 2)}


def labelled(seeds: int, first: int = 0) -> Iterator[dict[str, Any]]:
    """The innocent-hole and hidden-culprit jobs, one row per job (seeds from ``first``)."""
    for seed in range(first, first + seeds):
        for world in (2, 8, 64):
            for interval_s in (15.0, 30.0, 60.0):
                for jitter_s in (0.0, 10.0):
                    for hole in HOLES:
                        code = HOLES.index(hole) + 1000 if isinstance(hole, str) else int(hole)
                        rng = np.random.default_rng([seed, world, int(interval_s),
                                                     int(jitter_s), code])
                        leader = int(rng.integers(world))
                        follow = seed % 2 == 0
                        lead = rng.uniform(1.0, 2.0) * interval_s
                        base = dict(world=world, interval_s=interval_s, jitter_s=jitter_s,
                                    hole=hole, follow=follow, seed=seed)
                        data = job(rng, world, interval_s, jitter_s, leader, follow, lead)
                        # An innocent rank missed scrapes where a rise of its would lead.
                        other = int((leader + 1 + rng.integers(world - 1)) % world)
                        span = rng.uniform(INCIDENT_S - max(WINDOW_S, 2 * interval_s),
                                           INCIDENT_S + lead)
                        d = list(data)
                        d[other] = cut(d[other], rng, hole, span)
                        why: dict[str, list[dict[str, Any]]] = {}
                        yield {**base, "kind": "innocent", "leader": leader, "holed": other,
                               "v": verdicts(timeline(d), leader, why=why), "why": why}
                        # The leader's own scrapes missed over its rise (stays or falls back).
                        for transient in (None, 0.5 * interval_s):
                            rng2 = np.random.default_rng([seed, world, int(interval_s),
                                                          int(jitter_s), code, 7])
                            d = job(rng2, world, interval_s, jitter_s, leader, follow, lead,
                                    transient)
                            cwhy: dict[str, list[dict[str, Any]]] = {}
                            ctl = verdicts(timeline(d), leader, (None,), cwhy)["None"]
                            d[leader] = cut(d[leader], rng2, hole, INCIDENT_S + 0.1)
                            why = {}
                            yield {**base, "kind": "culprit" if transient is None
                                   else "culprit-transient", "control": ctl,
                                   "control_why": cwhy["None"], "leader": leader,
                                   "holed": leader,
                                   "v": verdicts(timeline(d), leader, why=why), "why": why}


def fleet(seeds: int, world: int = 1024) -> Iterator[dict[str, Any]]:
    """Every rank of a large job misses scrapes at random, the leader included."""
    for p in (0.0, 0.001, 0.01):
        for interval_s in (15.0, 60.0):
            for seed in range(seeds):
                rng = np.random.default_rng([seed, int(p * 1000), int(interval_s), 99])
                leader = int(rng.integers(world))
                data = job(rng, world, interval_s, 10.0, leader, False, 0.0)
                for i, d in enumerate(data):
                    keep = np.ones(len(d.t_ns), bool)
                    for k in np.flatnonzero(rng.random(len(keep)) < p):
                        u = rng.random()
                        n = 1 if u < 0.7 else 2 if u < 0.9 else int(rng.integers(3, 7))
                        keep[k:k + n] = False
                    keep[0] = True
                    data[i] = drop(d, keep)
                yield {"kind": "fleet", "world": world, "interval_s": interval_s, "p": p,
                       "seed": seed, "v": verdicts(timeline(data), leader)}


def tables(rows: list[dict[str, Any]]) -> str:
    pairs = [str(p) for p in PAIRS[1:]]
    head = ("| jobs | n | named, cap off | wrong, cap off | "
            + " | ".join(f"F = {p[1:-1].split(', ')[0]}" for p in pairs) + " |")
    lines = [head, "|" + "---|" * (4 + len(pairs))]
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        key = (r["kind"], r.get("hole", r.get("p")), r["interval_s"])
        groups[key].append(r)
    for (kind, hole, interval_s), sel in sorted(groups.items(), key=str):
        if kind.startswith("culprit"):  # the wrong answers the hole made (none without it)
            sel = [r for r in sel if not r["control"][1]]
        off = [r["v"]["None"] for r in sel]
        named = sum(v[0] for v in off)
        wrong = sum(v[1] for v in off)
        cells = []
        for p in pairs:
            if kind in ("innocent", "fleet"):  # right high answers the cap took away
                lost = sum(r["v"]["None"][0] and not r["v"][p][0] for r in sel)
                cells.append(f"lost {lost}/{named}")
            else:  # wrong high answers left standing
                still = sum(r["v"][p][1] for r in sel)
                cells.append(f"wrong {still}/{wrong}")
        if kind == "fleet":
            what = f"fleet 1,024 ranks, p = {hole:g}, {interval_s:.0f} s"
        elif isinstance(hole, str):
            what = f"{kind}, found late, {interval_s:.0f} s"
        elif isinstance(hole, float):
            what = f"{kind}, down {hole:.0f} s, {interval_s:.0f} s"
        else:
            what = f"{kind}, {hole} missed, {interval_s:.0f} s"
        lines.append(f"| {what} | {len(sel)} | {named} | {wrong} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    started = time.time()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for flag, default, what in (("--seeds", 20, "jobs per shape"),
                                ("--fleet-seeds", 10, "1,024-rank jobs per rate, interval")):
        ap.add_argument(flag, type=int, default=default, help=f"{what} (default {default})")
    ap.add_argument("--first-seed", type=int, default=0, help="to extend an earlier run")
    ap.add_argument("--json", default=None, help="write every job's verdicts here")
    ap.add_argument("--start-edge", action="store_true",
                    help="every rank carries its tracker's start marker")
    ap.add_argument("--peak", type=float, default=0.0,
                    help="values are the tracker's rolling peak over this many s (default 0:"
                         " the instant's value)")
    ap.add_argument("--tracker-reads", action="store_true",
                    help="read every rank as the tracker exports it over Prometheus: the rolling"
                         " peak gauge (--peak, default schema.PEAK_WINDOW_S, by its time"
                         " buckets), the start marker and the first_rise edge gauges, through"
                         " the Prometheus source's own series-to-Timeline code")
    ap.add_argument("--without-unseen-edges", action="store_true",
                    help="first_cause without its unseen-edge rule (the rule's before, on the"
                         " same jobs)")
    ap.add_argument("--factors", default=None,
                    help="only these factors, comma-separated (with the cap off; a quicker run)")
    args = ap.parse_args()
    START_EDGE[0] = args.start_edge
    PEAK_S[0] = args.peak
    if args.without_unseen_edges:
        first_cause._unseen = lambda *_: []  # type: ignore[assignment]
    if args.tracker_reads:
        START_EDGE[0] = True
        PEAK_S[0] = args.peak or schema.PEAK_WINDOW_S
        TRACKER[0] = {}
    if args.factors:
        keep = {float(f) for f in args.factors.split(",")}
        PAIRS[:] = [p for p in PAIRS if p is None or p[0] in keep]
    rows = list(labelled(args.seeds, args.first_seed)) + list(fleet(args.fleet_seeds))
    print(tables(rows))
    print(f"wall {time.time() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows))


if __name__ == "__main__":
    main()
