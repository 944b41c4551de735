"""Gap analysis, per rank (never pooled across ranks): drift, transient spikes, fragmentation.

``gap = device used − allocator reserved`` is memory the framework allocator does not know about
(NCCL buffers, cuDNN workspaces, other libraries). Each rank is judged against its own history, so
one rank's normal level never hides another's anomaly (pooling all ranks, as a single mean/std
over the merged stream would, does exactly that).

- **persistent drift**: least-squares slope of the gap with R² ≥ ``drift_min_r2``, fitted growth
  ≥ ``drift_min_growth_bytes`` (or ≥ ``drift_floor_bytes`` when the device would be full within
  ``drift_horizon_s`` at that slope), still growing in the second half of the window, and no
  single stretch of 5 % of the samples holding 60 % of the growth (that is a step, not a drift);
  projected time until the device is full = (total − used) / slope.
- **transient spikes**: robust z-score of the gap's residual (median/MAD instead of mean/std, so
  the spikes do not inflate the yardstick that should find them) ≥ ``spike_z`` and ≥
  ``spike_min_bytes`` above the baseline; consecutive samples form one episode.
- **fragmentation**: (reserved − allocated) / reserved ≥ ``frag_ratio`` with ≥
  ``frag_min_bytes`` idle in the pool, in at least ``frag_sustain`` of the samples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from stormotel.analyzers.algorithms.gap_batch import quiet_ranks
from stormotel.analyzers.algorithms.robust import (
    LinearFit,
    all_finite,
    linear_fit,
    linear_slope,
    median_of,
    robust_center,
    runs,
)
from stormotel.analyzers.algorithms.scratch import Scratch
from stormotel.analyzers.algorithms.settings import Settings
from stormotel.analyzers.report import GapFinding, Severity
from stormotel.analyzers.timeline import RankSeries, Timeline

HOUR_S = 3600.0
DAY_S = 24 * HOUR_S
MAX_EPISODES_IN_EVIDENCE = 10

REMEDIATION_DRIFT = [
    "Memory outside the allocator grows steadily: look for NCCL communicators or process groups "
    "created per step, CUDA graphs or cuDNN/cuBLAS workspaces that are never released, and "
    "libraries that allocate with cudaMalloc directly.",
    "Compare steps: if growth follows a specific phase, wrap it with tracker.mark(...) to confirm.",
    "Set NCCL_BUFFSIZE / TORCH_NCCL_AVOID_RECORD_STREAMS and reuse process groups.",
]
REMEDIATION_SPIKE = [
    "A one-off allocation bypassed the caching allocator: check cuDNN benchmark mode "
    "(torch.backends.cudnn.benchmark), workspace limits (CUBLAS_WORKSPACE_CONFIG), and "
    "collectives with large temporary buffers.",
    "If the spikes coincide across ranks, see the collective attributions.",
]
REMEDIATION_FRAG = [
    "The caching allocator holds much more than live tensors: try "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, or max_split_size_mb to limit splitting.",
    "Avoid highly variable tensor shapes (pad or bucket sequence lengths); call "
    "torch.cuda.empty_cache() only between phases, not per step.",
]


@dataclass(frozen=True)
class SpikeEpisodes:
    """One rank's gap spike episodes (arrays, one entry per episode)."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    peak_ns: np.ndarray
    peak_excess_bytes: np.ndarray  # above the rank's baseline
    peak_gap_bytes: np.ndarray
    peak_z: np.ndarray
    recovered: np.ndarray  # the gap came back below threshold after the episode

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])


@dataclass(frozen=True)
class RankGap:
    """One rank's gap series prepared once: finite samples, seconds, linear fit, spikes.

    ``t_ns``, ``gap`` and ``t_s`` may live in the analysis' :class:`Scratch` (valid for this
    rank only); ``episodes`` are the rank's own arrays."""

    t_ns: np.ndarray
    gap: np.ndarray
    t_s: np.ndarray  # seconds since the first gap sample
    fit: LinearFit
    episodes: SpikeEpisodes


def _gap(series: RankSeries, work: Scratch) -> tuple[np.ndarray, np.ndarray] | None:
    if not (series.has("device_used") and series.has("reserved")):
        return None
    g = np.subtract(series.values["device_used"], series.values["reserved"],
                    out=work.floats("gap", len(series)))
    if all_finite(g):
        return series.t_ns, g
    ok = np.isfinite(g)
    return series.t_ns[ok], g[ok]


def prepare_gap(series: RankSeries, settings: Settings, scratch: Scratch | None = None
                ) -> RankGap | None:
    """The rank's gap, its linear fit and its spike episodes (None without gap data)."""
    work = scratch or Scratch()
    tg = _gap(series, work)
    if tg is None or tg[0].shape[0] < settings.min_samples:
        return None
    return _prepared(*tg, settings, work)


def _prepared(t: np.ndarray, g: np.ndarray, settings: Settings, work: Scratch) -> RankGap:
    n = t.shape[0]
    ts = np.divide(np.subtract(t, t[0], out=work.array("gap_t_ns", n, np.int64)), 1e9,
                   out=work.floats("gap_t_s", n))
    fit = linear_fit(ts, g, work)
    return RankGap(t, g, ts, fit, _spikes(t, g, ts, fit, settings, work))


def _flat(g: np.ndarray, settings: Settings) -> bool:
    """The gap never moves (NCCL buffers and the CUDA context usually do not: most ranks of a
    window cut into a running job), and its mean is exactly that value: then the fit is
    slope 0, R² 0 and the level (every deviation is exactly 0), so the residual is constant
    whichever way _spikes takes it and no sample stands ``spike_min_bytes`` > 0 above it, and
    no drift is possible (no fitted slope is positive, and a trailing window's rise between
    its first and last tenth is 0). Such a rank has no gap finding and no spike episode; the
    fit and the spike pass are skipped. Three reductions."""
    c = float(g[0])
    if not (settings.spike_min_bytes > 0 and abs(c) < 1e300):
        return False
    return float(g.max()) == c and float(g.min()) == c and \
        float(np.add.reduce(g) / g.shape[0]) == c  # the fit's own mean, as _slope takes it


def gap_spikes(series: RankSeries, settings: Settings) -> SpikeEpisodes | None:
    """Transient gap spikes of one rank (None if the rank has no gap data)."""
    rg = prepare_gap(series, settings)
    return None if rg is None else rg.episodes


def _spikes(t: np.ndarray, g: np.ndarray, ts: np.ndarray, fit: LinearFit, settings: Settings,
            work: Scratch) -> SpikeEpisodes:
    """Runs of samples whose residual has robust z >= ``spike_z`` and stands >=
    ``spike_min_bytes`` above the median; each run's peak is its first largest excess."""
    n = g.shape[0]
    resid = g
    if fit.r2 >= settings.drift_min_r2:
        # Remove a drift line first, so a drifting rank's late samples are not "spikes".
        line = np.add(np.multiply(ts, fit.slope, out=work.floats("spike_line", n)),
                      fit.intercept, out=work.floats("spike_line", n))
        resid = np.subtract(g, line, out=work.floats("spike_line", n))
    if float(resid.max()) - float(resid.min()) < settings.spike_min_bytes:
        # No sample can stand spike_min_bytes above the median, which lies within the range
        # (rounding is monotonic: each excess is at most this difference): nothing is hot.
        return _empty_episodes()
    med, scale = robust_center(resid, work)
    excess = np.subtract(resid, med, out=work.floats("spike_excess", n))
    # z only where the excess is large enough (z = excess / scale, element by element).
    large = np.flatnonzero(np.greater_equal(excess, settings.spike_min_bytes,
                                            out=work.flags("spike_large", n)))
    z_large = excess[large] / scale
    hot = large[z_large >= settings.spike_z]
    if hot.size == 0:
        return _empty_episodes()
    z_hot = z_large[z_large >= settings.spike_z]
    breaks = np.flatnonzero(np.diff(hot) != 1)
    heads = np.concatenate(([0], breaks + 1))
    starts, ends = hot[heads], hot[np.concatenate((breaks, [hot.size - 1]))]
    # Peak of each episode: its first sample with the episode's largest excess.
    hot_excess = excess[hot]
    episode = np.repeat(np.arange(heads.size), np.diff(np.concatenate((heads, [hot.size]))))
    at_max = np.flatnonzero(hot_excess == np.maximum.reduceat(hot_excess, heads)[episode])
    first = at_max[np.concatenate(([True], episode[at_max[1:]] != episode[at_max[:-1]]))]
    peak = hot[first]
    return SpikeEpisodes(start_ns=t[starts], end_ns=t[ends], peak_ns=t[peak],
                         peak_excess_bytes=hot_excess[first], peak_gap_bytes=g[peak],
                         peak_z=z_hot[first], recovered=ends < (n - 1))


def _no_episodes() -> SpikeEpisodes:
    e = np.empty(0, np.int64)
    f = np.empty(0, np.float64)
    b = np.empty(0, bool)
    for a in (e, f, b):
        a.flags.writeable = False
    return SpikeEpisodes(e, e, e, f, f, f, b)


#: What most ranks have: one shared, read-only instance instead of three arrays per rank.
_NO_EPISODES = _no_episodes()


def _empty_episodes() -> SpikeEpisodes:
    return _NO_EPISODES


def _last_finite(a: np.ndarray | None) -> float | None:
    if a is None or not a.shape[0]:
        return None
    if np.isfinite(a[-1]):
        return float(a[-1])
    ok = np.flatnonzero(np.isfinite(a))
    return float(a[ok[-1]]) if ok.size else None


#: Trailing shares of a long window tried when the whole window shows no drift: a leak that
#: started late and is still growing at the end is a drift whatever happened before it.
TAIL_SHARES = (0.5, 0.25, 0.125)


def drift_finding(series: RankSeries, settings: Settings, rg: RankGap | None = None,
                  scratch: Scratch | None = None) -> GapFinding | None:
    work = scratch or Scratch()
    rg = rg if rg is not None else prepare_gap(series, settings, work)
    if rg is None or rg.gap.shape[0] < 4:
        return None
    found = _drift(series, settings, rg.t_ns, rg.gap, rg.t_s, rg.fit, work)
    if found is not None:
        return found
    span = float(rg.t_s[-1])
    spread: float | None = None
    for share in TAIL_SHARES:
        start = int(rg.t_s.searchsorted(span * (1.0 - share)))
        n = rg.gap.shape[0] - start
        if n < max(settings.min_samples, 20):
            break
        if spread is None:
            spread = _spread(rg.gap)
        if spread * math.sqrt(2 * n) * 1.01 < settings.drift_floor_bytes:
            continue  # too flat to grow by the floor: see _spread
        ts = np.subtract(rg.t_s[start:], rg.t_s[start], out=work.floats("drift_tail_t_s", n))
        g = rg.gap[start:]
        slope = linear_slope(ts, g, work)
        if slope <= 0 or slope * float(ts[-1]) < settings.drift_floor_bytes:
            continue  # no growth for _drift to judge: its R² need not be computed
        found = _drift(series, settings, rg.t_ns[start:], g, ts, linear_fit(ts, g, work), work)
        if found is not None:
            found.evidence["window_share"] = share
            found.evidence["note"] = (f"growing over the last {share:.0%} of the window and "
                                      "still growing at its end")
            return found
    return None


def _spread(g: np.ndarray) -> float:
    """A bound on |slope| × duration of any least-squares line through a stretch of ``g``
    over ``n`` samples, once multiplied by sqrt(2n): a tail that cannot grow by the drift floor
    needs no fit, and a flat gap (the usual case: NCCL buffers and the CUDA context do not
    move) is most ranks.

    Why: the slope is Σ dt·dy / Σ dt² with |dy| at most the range of ``g`` (plus the rounding
    of its mean, far below the relative 1e-6 added here) and Σ dt² at least T²/2 (the first
    and last sample alone, t running from 0 to T), so by Cauchy–Schwarz |slope|·T ≤
    range·sqrt(2n); the caller keeps a 1 % margin for the rounding of the sums."""
    hi, lo = float(g.max()), float(g.min())
    return (hi - lo) + 1e-6 * max(abs(hi), abs(lo))


def _drift(series: RankSeries, settings: Settings, t: np.ndarray, g: np.ndarray,
           ts: np.ndarray, fit: LinearFit, work: Scratch) -> GapFinding | None:
    """Persistent drift over exactly these samples, or None."""
    duration = float(ts[-1])
    if duration <= 0:
        return None
    growth = fit.slope * duration
    if fit.slope <= 0 or fit.r2 < settings.drift_min_r2 or growth < settings.drift_floor_bytes:
        return None
    n = ts.shape[0]
    half = n // 2
    s1 = linear_fit(ts[:half], g[:half], work).slope
    s2 = linear_fit(ts[half:], g[half:], work).slope
    if s2 < 0.25 * fit.slope:
        return None  # grew, then stopped: not persistent
    # A step concentrates the growth in a few samples; a drift spreads it (even one that only
    # started part-way through the window). Largest rise over 5 % of the samples vs. the total.
    k = max(1, n // 20)
    edge = max(1, n // 10)
    total_rise = median_of(g[-edge:]) - median_of(g[:edge])
    largest_jump = float(np.max(g[k:] - g[:-k]))
    if total_rise <= 0 or largest_jump >= 0.6 * total_rise:
        return None
    total = _last_finite(series.values.get("device_total"))
    used = _last_finite(series.values.get("device_used"))
    ttf = (total - used) / fit.slope if total and used is not None and total > used else None
    if total and used is not None and used >= total:
        ttf = 0.0
    soon = ttf is not None and ttf <= settings.drift_horizon_s
    if growth < settings.drift_min_growth_bytes and not soon:
        return None
    severity: Severity
    if ttf is None:
        severity = "warning"
    elif ttf <= HOUR_S:
        severity = "critical"
    elif ttf <= DAY_S:
        severity = "warning"
    else:
        severity = "info"
    confidence = float(min(1.0, fit.r2 * min(1.0, growth / (2 * settings.drift_min_growth_bytes))
                           + 0.0))
    return GapFinding(
        rank=series.rank, classification="persistent_drift", severity=severity,
        confidence=round(max(confidence, 0.5 * fit.r2), 3),
        evidence={"slope_bytes_per_s": fit.slope, "r2": fit.r2, "growth_bytes": growth,
                  "first_half_slope": s1, "second_half_slope": s2, "duration_s": duration,
                  "largest_jump_bytes": largest_jump,
                  "gap_start_bytes": float(fit.intercept), "gap_end_bytes": float(g[-1]),
                  "device_total_bytes": total, "device_used_bytes": used,
                  "time_to_full_s": ttf, "samples": int(g.shape[0])},
        remediation=list(REMEDIATION_DRIFT), start_ns=int(t[0]), end_ns=int(t[-1]))


def spike_finding(series: RankSeries, settings: Settings, rg: RankGap | None = None
                  ) -> GapFinding | None:
    rg = rg if rg is not None else prepare_gap(series, settings)
    eps = None if rg is None else rg.episodes
    if eps is None or len(eps) == 0:
        return None
    total = _last_finite(series.values.get("device_total"))
    worst = int(np.argmax(eps.peak_excess_bytes))
    worst_excess = float(eps.peak_excess_bytes[worst])
    severity: Severity = "info"
    if worst_excess >= (0.1 * total if total else 1024**3):
        severity = "warning"
    used = series.values.get("device_used")
    if total and used is not None:
        at = np.searchsorted(series.t_ns, eps.peak_ns)
        if np.nanmax(used[at]) >= 0.95 * total:
            severity = "critical"
    zmax = float(eps.peak_z.max())
    confidence = min(1.0, 0.5 + 0.5 * min(1.0, (zmax - settings.spike_z) / settings.spike_z))
    top = np.argsort(-eps.peak_excess_bytes)[:MAX_EPISODES_IN_EVIDENCE]
    top = top[np.argsort(eps.start_ns[top])]
    episodes = [{"start_ns": int(eps.start_ns[i]), "end_ns": int(eps.end_ns[i]),
                 "peak_ns": int(eps.peak_ns[i]), "excess_bytes": float(eps.peak_excess_bytes[i]),
                 "gap_bytes": float(eps.peak_gap_bytes[i]), "z": float(eps.peak_z[i]),
                 "recovered": bool(eps.recovered[i])} for i in top]
    return GapFinding(
        rank=series.rank, classification="transient_spike", severity=severity,
        confidence=round(confidence, 3),
        evidence={"episodes": len(eps), "max_excess_bytes": worst_excess, "max_z": zmax,
                  "z_threshold": settings.spike_z, "top_episodes": episodes},
        remediation=list(REMEDIATION_SPIKE), start_ns=int(eps.start_ns.min()),
        end_ns=int(eps.end_ns.max()))


def _none_fragmented(res: np.ndarray, idle: np.ndarray, settings: Settings) -> bool:
    """No sample can be fragmented (finite samples, every reservation positive): the largest
    idle is below the byte floor, or below the ratio against the smallest reservation
    (idle/reserved ≤ most/least; the margin covers the division's rounding). Most ranks: then
    nothing is divided or counted."""
    most = float(idle.max())
    return most < settings.frag_min_bytes or (
        settings.frag_ratio > 0 and most < settings.frag_ratio * float(res.min()) * (1 - 1e-9))


def fragmentation_finding(series: RankSeries, settings: Settings,
                          scratch: Scratch | None = None) -> GapFinding | None:
    """Idle bytes in the allocator's pool, sustained.

    With the inactive-split counter (PyTorch ``inactive_split_bytes``, Stormlog
    ``allocator_inactive_bytes``) the idle bytes are those split blocks — real fragmentation;
    without it, reserved − allocated (the seed's definition), which also counts cached blocks
    the allocator can reuse.
    """
    if not (series.has("reserved") and (series.has("allocated")
                                        or series.has("inactive_split"))):
        return None
    work = scratch or Scratch()
    res = series.values["reserved"]
    split = series.has("inactive_split")
    idle_all = series.values["inactive_split"] if split else np.subtract(
        res, series.values["allocated"], out=work.floats("frag_idle", len(series)))
    ok: np.ndarray | None = None  # every sample usable
    r, t, idle = res, series.t_ns, idle_all
    if all_finite(res) and all_finite(idle_all) and float(res.min()) > 0:
        if _none_fragmented(res, idle_all, settings):
            return None
    else:
        ok = np.isfinite(res) & np.isfinite(idle_all) & (res > 0)
        r, t, idle = res[ok], series.t_ns[ok], idle_all[ok]
    n = r.shape[0]
    if n < settings.min_samples:
        return None
    ratio = np.divide(idle, r, out=work.floats("frag_ratio", n))
    frag = np.logical_and(
        np.greater_equal(ratio, settings.frag_ratio, out=work.flags("frag", n)),
        np.greater_equal(idle, settings.frag_min_bytes, out=work.flags("frag_idle_large", n)),
        out=work.flags("frag", n))
    # A boolean mean is the count over n: counted, without a float copy of the mask.
    fragmented = np.count_nonzero(frag)
    if fragmented == 0:
        return None  # (frag_sustain=0 would otherwise let an empty mask through)
    share = fragmented / n
    window_share = 1.0
    if share < settings.frag_sustain:
        # Like a late leak: fragmentation that set in part-way and holds to the end of a long
        # window is sustained over the window's trailing part.
        for tail in TAIL_SHARES:
            k = int(np.searchsorted(t, t[0] + (t[-1] - t[0]) * (1.0 - tail)))
            if frag.shape[0] - k < settings.min_samples:
                break
            tail_share = np.count_nonzero(frag[k:]) / (n - k)
            if tail_share >= settings.frag_sustain and frag[-1]:
                share, window_share = tail_share, tail
                break
        else:
            return None
        if window_share == 1.0:
            return None
    starts, ends = runs(frag)
    longest = int(np.argmax(ends - starts))
    severity: Severity = "warning"
    total = series.values.get("device_total")
    used = series.values.get("device_used")
    pressure = None
    if total is not None and used is not None:
        util = used / total if ok is None else used[ok] / total[ok]
        if np.isfinite(util[frag]).any():
            pressure = float(np.nanmax(util[frag]))
            if pressure >= 0.9:
                severity = "critical"
    return GapFinding(
        rank=series.rank, classification="fragmentation", severity=severity,
        confidence=round(min(1.0, share), 3),
        evidence={"measure": "inactive_split" if split else "reserved_minus_allocated",
                  "median_ratio": median_of(ratio[frag]), "ratio_threshold":
                  settings.frag_ratio, "median_idle_bytes": median_of(idle[frag]),
                  "fragmented_share": share, "window_share": window_share,
                  "max_device_utilization": pressure,
                  "longest_start_ns": int(t[starts[longest]]),
                  "longest_end_ns": int(t[ends[longest]])},
        remediation=list(REMEDIATION_FRAG), start_ns=int(t[starts[0]]), end_ns=int(t[ends[-1]]))


@dataclass(frozen=True)
class GapAnalysis:
    """Gap findings and notes, and each rank's spike episodes for collective attribution
    (ranks with gap data only): what outlives the per-rank pass, nothing the size of a rank."""

    findings: list[GapFinding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    episodes: Mapping[int, SpikeEpisodes] = field(default_factory=dict)


def gap_analysis(timeline: Timeline, settings: Settings) -> GapAnalysis:
    """All gap findings in one pass over the ranks: each rank's gap is computed, fitted and
    judged (drift, spikes, fragmentation) while it is at hand, in reused work arrays."""
    work = Scratch()
    findings: list[GapFinding] = []
    episodes: dict[int, SpikeEpisodes] = {}
    no_gap: list[int] = []
    quiet = quiet_ranks(timeline, timeline.rank_ids, settings)  # most ranks, a batch at a time
    for rank in timeline.rank_ids:
        if rank in quiet:
            episodes[rank] = _NO_EPISODES  # flat (see _flat) and never fragmented
            continue
        s = timeline.ranks[rank]
        tg = _gap(s, work)
        if tg is None or tg[0].shape[0] < settings.min_samples:
            no_gap.append(rank)
        elif _flat(tg[1], settings):
            episodes[rank] = _NO_EPISODES  # no drift, no spike: see _flat
        else:
            rg = _prepared(*tg, settings, work)
            episodes[rank] = rg.episodes
            drift = drift_finding(s, settings, rg, work)
            spike = spike_finding(s, settings, rg)
            if drift is not None and spike is not None and drift.start_ns is not None and \
                    spike.start_ns is not None and spike.start_ns >= drift.start_ns:
                spike = None  # the leak's own growth, above an earlier level: not a spike
            findings.extend(f for f in (drift, spike) if f is not None)
        frag = fragmentation_finding(s, settings, work)
        if frag is not None:
            findings.append(frag)
    notes = []
    if no_gap:
        notes.append(f"gap analysis skipped for ranks without both device-used and allocator-"
                     f"reserved memory (or fewer than {settings.min_samples} samples): "
                     f"{no_gap[:20]}{' ...' if len(no_gap) > 20 else ''}")
    return GapAnalysis(findings, notes, episodes)


def analyze_gaps(timeline: Timeline, settings: Settings) -> tuple[list[GapFinding], list[str]]:
    """All gap findings, rank by rank, plus notes (ranks that could not be analysed)."""
    done = gap_analysis(timeline, settings)
    return done.findings, done.notes


def spike_episodes(timeline: Timeline, settings: Settings) -> dict[int, SpikeEpisodes]:
    """Each rank's gap spike episodes (ranks with gap data only)."""
    work = Scratch()
    out = {}
    for rank in timeline.rank_ids:
        rg = prepare_gap(timeline.ranks[rank], settings, work)
        if rg is not None:
            out[rank] = rg.episodes
    return out
