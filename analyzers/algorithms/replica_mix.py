"""A rise measured across an HA pair's two replicas is not a rise of the rank.

Two Prometheus servers scrape one target at their own, fixed phases; a memory swing within a
training step puts one replica's samples at one level and the other's at another (2.58 GiB and
4.58 GiB in the session-17 busy run). The TSDB source takes one replica per series and fills
its holes from the other (:func:`..sources.prometheus.samples.replicas_as_one`), and records the
filled runs (:data:`..timeline.META_REPLICA_FILLS`). A filled sample is the other replica's
phase: one at the high phase in a low-phase series is a rise of the phase difference, one at the
low phase in a high-phase series a dip the next sample "rises" from; either named a healthy rank
the leader at high (tests/analyzers/test_prometheus_merge.py). So a rise whose baseline, last
sample before it and first sample at it are not all from one replica proves nothing about
when — or whether — the rank rose: the incident it leads or follows is a tie at low, with a
note saying why and what to collect. A rise the tracker's own edge times is its own proof.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from stormotel.analyzers.algorithms.rises import FirstRise
from stormotel.analyzers.timeline import META_REPLICA_FILLS, Timeline


def fill_runs(timeline: Timeline) -> dict[int, np.ndarray]:
    """Rank → its filled runs as an ``(n, 2)`` array of (first, last) times on the timeline's
    clock (the source's times plus the rank's alignment offset). Taken once per analysis."""
    raw = timeline.meta.get(META_REPLICA_FILLS)
    if not isinstance(raw, list) or not raw:
        return {}
    by_rank: dict[int, list[tuple[int, int]]] = {}
    for rank, a, b in raw:
        by_rank.setdefault(int(rank), []).append((int(a), int(b)))
    return {r: np.array(runs, np.int64) + timeline.offsets_ns.get(r, 0)
            for r, runs in by_rank.items()}


def _filled(runs: np.ndarray, t_ns: int) -> bool:
    return bool(((runs[:, 0] <= t_ns) & (t_ns <= runs[:, 1])).any())


def across_replicas(runs: dict[int, np.ndarray], rises: Iterable[FirstRise]) -> list[int]:
    """The ranks whose rise mixes replicas: its baseline sample, last sample before it and
    crossing sample not all filled or all chosen. Edge-timed rises are the tracker's own."""
    out = []
    for fr in rises:
        mine = runs.get(fr.rank)
        if mine is None or fr.from_edge_event:
            continue
        origins = {_filled(mine, t) for t in (fr.baseline_ns, fr.earliest_ns, fr.t_ns)}
        if len(origins) > 1:
            out.append(fr.rank)
    return sorted(out)


def mixed_note(ranks: list[int], leader: int) -> str:
    """Why no rank is named above low: the rise compares two replicas' phases."""
    return (f"the rise of ranks {ranks[:16]} is measured from one Prometheus replica's samples "
            "to the other's (an HA pair's hole filled from its twin): two servers scrape a "
            "swing within a training step at different phases, so such a rise may be the "
            f"phase difference alone; rank {leader} is not named above low. Either server's "
            "series on its own over the span, the trackers' archives, or edge gauges on every "
            "rank would decide it")
