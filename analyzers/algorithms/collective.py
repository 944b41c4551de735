"""Collective attribution: gap spikes that line up across ranks, strengthened by markers.

1. Per rank, gap spike episodes (:func:`stormotel.analyzers.algorithms.gap.gap_spikes`, the rank's
own
   robust z-score — never pooled), as gap analysis found them.
2. All episodes are sorted by peak time once and cut into groups wherever consecutive peaks are
   more than the synchrony window apart (max of ``sync_window_s`` and 1.5 sampling intervals):
   O(E log E) for E episodes, no pairwise comparison. A group's synchrony is the number of
   distinct ranks in it over the ranks that have gap data.
3. Per rank, collective markers (step/mark spans or context strings naming NCCL, all_reduce, ...)
   are checked for overlap with each episode by binary search over marker starts plus a running
   maximum of marker ends: O(log M) per episode.
4. score = 0.5·synchrony + 0.35·marker (1 own, 0.6 a peer's) + 0.15·magnitude; buckets
   ``collective_confident`` / ``collective_likely`` / ``collective_suspect`` at the preset's
   scores. Without synchrony *and* without a marker a spike is not attributed to a collective
   (it stays a transient-spike gap finding).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from stormotel.analyzers.algorithms.gap import SpikeEpisodes, spike_episodes
from stormotel.analyzers.algorithms.settings import Settings
from stormotel.analyzers.report import CollectiveAttribution, CollectiveClass
from stormotel.analyzers.timeline import KIND_COLLECTIVE, Markers, Timeline

W_SYNC, W_MARKER, W_MAG = 0.5, 0.35, 0.15
PEER_MARKER = 0.6


def _collective_intervals(m: Markers) -> tuple[np.ndarray, np.ndarray]:
    """Collective markers sorted by start, with the running max of their ends."""
    if not len(m):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    sel = m.kind == KIND_COLLECTIVE
    start, end = m.start_ns[sel], m.end_ns[sel]
    order = np.argsort(start, kind="stable")
    return start[order], np.maximum.accumulate(end[order]) if order.size else end


def _overlaps(starts: np.ndarray, cummax_end: np.ndarray, lo: np.ndarray, hi: np.ndarray
              ) -> np.ndarray:
    """For each query [lo, hi]: does any interval overlap it? (vectorised binary search)."""
    if starts.size == 0:
        return np.zeros(lo.shape, np.bool_)
    k = np.searchsorted(starts, hi, side="right")  # intervals starting at or before hi
    ok = k > 0
    out = np.zeros(lo.shape, np.bool_)
    out[ok] = cummax_end[k[ok] - 1] >= lo[ok]
    return out


def analyze_collectives(timeline: Timeline, settings: Settings,
                        episodes: Mapping[int, SpikeEpisodes] | None = None
                        ) -> tuple[list[CollectiveAttribution], list[str]]:
    """Attributions of gap spike episodes to collectives. ``episodes`` (rank → its episodes,
    for every rank with gap data) are the ones gap analysis found; computed when absent."""
    res = timeline.resolution_ns() or 0
    window = int(max(settings.sync_window_s * 1e9, 1.5 * res))
    cols: dict[str, list[np.ndarray]] = {k: [] for k in
                                         ("rank", "start", "end", "peak", "excess", "z")}
    episodes = spike_episodes(timeline, settings) if episodes is None else episodes
    with_gap = len(episodes)
    for rank_id, eps in sorted(episodes.items()):
        if not len(eps):
            continue
        cols["rank"].append(np.full(len(eps), rank_id, np.int64))
        cols["start"].append(eps.start_ns)
        cols["end"].append(eps.end_ns)
        cols["peak"].append(eps.peak_ns)
        cols["excess"].append(eps.peak_excess_bytes)
        cols["z"].append(eps.peak_z)
    notes: list[str] = []
    if not cols["rank"]:
        return [], notes
    rank, start, end, peak, excess, z = (np.concatenate(cols[k]) for k in
                                         ("rank", "start", "end", "peak", "excess", "z"))
    order = np.argsort(peak, kind="stable")
    rank, start, end, peak, excess, z = (a[order] for a in (rank, start, end, peak, excess, z))
    group = np.concatenate(([0], np.cumsum(np.diff(peak) > window)))
    n_groups = int(group[-1]) + 1
    # distinct ranks per group: the sorted distinct (group, rank) keys (np.unique's result,
    # without np.unique, which imports numpy.ma on first use: ~25 ms of a CLI run)
    key = np.sort(group * (int(rank.max()) + 1) + rank)
    key = key[np.concatenate(([True], key[1:] != key[:-1]))]
    sync_ranks = np.bincount(key // (int(rank.max()) + 1), minlength=n_groups)
    n = max(with_gap, 1)
    sync_frac = sync_ranks[group] / n
    synced = (sync_ranks[group] >= 2) & (sync_frac >= settings.min_sync_fraction)
    # markers: own overlap per episode, then "a peer in the group has one"
    own = np.zeros(rank.shape, np.bool_)
    by_rank = np.argsort(rank, kind="stable")
    for sel in np.split(by_rank, np.flatnonzero(np.diff(rank[by_rank])) + 1):
        ms, me = _collective_intervals(timeline.ranks[int(rank[sel[0]])].markers)
        own[sel] = _overlaps(ms, me, start[sel] - window, end[sel] + window)
    group_has_marker = np.bincount(group, weights=own.astype(float), minlength=n_groups) > 0
    peer = ~own & group_has_marker[group]
    marker = np.where(own, 1.0, np.where(peer, PEER_MARKER, 0.0))
    sync_score = np.where(synced, sync_frac, 0.5 * sync_frac)
    if with_gap < 2:
        sync_score = np.zeros_like(sync_score)
        notes.append("collective attribution with one rank: synchrony cannot be checked, "
                     "only collective markers count")
    mag = np.minimum(1.0, z / (2 * settings.spike_z))
    score = W_SYNC * sync_score + W_MARKER * marker + W_MAG * mag
    keep = (score >= settings.suspect_score) & (synced | own | peer)
    out: list[CollectiveAttribution] = []
    for i in np.flatnonzero(keep):
        cls: CollectiveClass = ("collective_confident" if score[i] >= settings.confident_score
                                else "collective_likely" if score[i] >= settings.likely_score
                                else "collective_suspect")
        reasons = ["gap_spike"]
        reasons.append("synchronized_across_ranks" if synced[i] else
                       "single_rank" if with_gap < 2 else "weak_synchrony")
        reasons.append("collective_marker_overlap" if own[i] else
                       "collective_marker_on_peer" if peer[i] else "no_collective_marker")
        if mag[i] >= 1.0:
            reasons.append("large_gap_jump")
        g = int(group[i])
        out.append(CollectiveAttribution(
            rank=int(rank[i]), classification=cls, confidence=round(float(score[i]), 3),
            interval_start_ns=int(start[i]), interval_end_ns=int(end[i]), reason_codes=reasons,
            evidence={"peak_ns": int(peak[i]), "peak_gap_excess_bytes": float(excess[i]),
                      "z": float(z[i]), "synchronized_ranks": int(sync_ranks[g]),
                      "expected_world_size": timeline.world_size or len(timeline.ranks),
                      "ranks_with_gap_data": with_gap, "window_ns": window, "group": g}))
    out.sort(key=lambda a: (a.interval_start_ns, a.rank))
    return out, notes
