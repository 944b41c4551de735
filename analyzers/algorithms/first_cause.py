"""Cross-rank first cause: which rank's device memory rose first, and how sure we can be.

Per rank, the *first qualifying rise* is the first sample whose device-used bytes stand at least
``max(rise_fraction × rank peak, rise_floor_bytes)`` above the running baseline — the minimum so
far (or over a trailing window). The seed resets its cumulative delta on every non-positive
delta, so one noisy dip restarts a genuine rise; a running minimum does not care about dips.

The *cluster onset* is the second-earliest first rise (as in the seed): if one rank rose before
everyone else, it leads the onset by ``lead_ns``. Confidence compares the lead with the
resolution (the coarsest median sampling interval): a lead of at least one interval by a single
rank with no missing ranks is ``high``; a shorter lead or missing ranks make it ``medium``; ties
and thin evidence make it ``low``. Everything happens on the timeline as aligned by
:mod:`analyzers.align`; the alignment is stated in the result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzers.algorithms.robust import rolling_min
from analyzers.algorithms.settings import Settings
from analyzers.report import Confidence, CrossRank, Suspect
from analyzers.timeline import RankSeries, Timeline

FIELD = "device_used"


@dataclass(frozen=True)
class FirstRise:
    rank: int
    t_ns: int  # first sample at or above the threshold
    delta_bytes: float  # rise above the baseline at that sample
    threshold_bytes: float
    baseline_ns: int  # when the baseline (running minimum) was set
    baseline_bytes: float
    peak_bytes: float


def first_rise(series: RankSeries, settings: Settings) -> FirstRise | None:
    """The rank's first qualifying rise in device-used memory, or None."""
    x = series.values.get(FIELD)
    if x is None or len(series) < 2:
        return None
    ok = np.isfinite(x)
    if ok.sum() < 2:
        return None
    t, v = series.t_ns[ok], x[ok]
    peak = float(v.max())
    threshold = max(settings.rise_fraction * peak, settings.rise_floor_bytes)
    if settings.rise_window_s > 0:
        interval = max(int(np.median(np.diff(t))), 1)
        window = max(2, int(np.ceil(settings.rise_window_s * 1e9 / interval)) + 1)
        base = rolling_min(v, window)
    else:
        base = np.minimum.accumulate(v)
    hit = np.flatnonzero(v - base >= threshold)
    if hit.size == 0:
        return None
    i = int(hit[0])
    # The baseline sample: the last time the series was at its baseline value before the hit.
    at_base = np.flatnonzero(v[: i + 1] == base[i])
    j = int(at_base[-1]) if at_base.size else 0
    # Report the rise against the level around the baseline, not its single lowest (noisy) sample.
    level = float(np.median(v[max(0, j - 4): j + 1]))
    return FirstRise(series.rank, int(t[i]), float(v[i] - level), threshold, int(t[j]), level,
                     peak)


def analyze_first_cause(timeline: Timeline, settings: Settings) -> tuple[CrossRank, dict]:
    """Cluster onset and ranked suspects; also returns the per-rank first-rise table."""
    res = timeline.resolution_ns()
    out = CrossRank(alignment=timeline.alignment, resolution_ns=res)
    missing = timeline.missing_ranks()
    with_field = [r for r, s in timeline.ranks.items() if s.has(FIELD)]
    rises = {r: fr for r in with_field if (fr := first_rise(timeline.ranks[r], settings))}
    table = {r: {"first_spike_ns": fr.t_ns, "delta_bytes": fr.delta_bytes,
                 "threshold_bytes": fr.threshold_bytes, "baseline_ns": fr.baseline_ns}
             for r, fr in sorted(rises.items())}
    no_field = sorted(set(timeline.ranks) - set(with_field))
    if no_field:
        out.notes.append(f"ranks without device-used memory (not compared): {no_field}")
    if len(with_field) < 2:
        out.notes.append("first-cause analysis needs at least two ranks with device-used memory;"
                         f" have {len(with_field)}")
        return out, table
    if not rises:
        out.notes.append("no rank showed a qualifying rise (>= "
                         f"{settings.rise_fraction:.0%} of its peak and >= "
                         f"{settings.rise_floor_bytes / 2**20:.0f} MiB)")
        return out, table
    order = sorted(rises.values(), key=lambda fr: (fr.t_ns, fr.rank))
    first = order[0]
    if missing:
        out.notes.append(f"missing ranks {missing} may have risen earlier; confidence lowered")
    if len(order) == 1:
        # Only one rank rose at all; it led every other rank by at least their observed span.
        others_end = min(int(timeline.ranks[r].t_ns[-1]) for r in with_field if r != first.rank)
        lead = max(others_end - first.t_ns, 0)
        out.cluster_onset_ns = None
        conf: Confidence = "high" if res and lead >= res and not missing else (
            "medium" if lead > 0 else "low")
        out.first_cause_suspects.append(_suspect(first, lead, conf, res, timeline,
                                                 alone=True))
        out.notes.append(f"only rank {first.rank} rose; the others never reached their "
                         "threshold (lead measured to the end of their data)")
        return out, table
    onset = order[1].t_ns
    out.cluster_onset_ns = onset
    tied = [fr for fr in order if fr.t_ns == first.t_ns]
    if len(tied) > 1:
        for fr in tied:
            out.first_cause_suspects.append(_suspect(fr, 0, "low", res, timeline, tied=len(tied)))
        out.notes.append(
            f"ranks {[fr.rank for fr in tied]} rose at the same aligned time: a shared cause "
            "(a collective or the input pipeline) is more likely than one faulty rank")
        return out, table
    lead = onset - first.t_ns
    if res is None:
        conf = "low"
    elif lead >= res:
        conf = "medium" if missing else "high"
    else:
        conf = "low" if missing else "medium"
        out.notes.append(f"rank {first.rank} leads by {lead / 1e6:.1f} ms, less than the "
                         f"{res / 1e6:.1f} ms sampling interval")
    out.first_cause_suspects.append(_suspect(first, lead, conf, res, timeline))
    return out, table


def _suspect(fr: FirstRise, lead: int, conf: Confidence, res: int | None, timeline: Timeline,
             *, alone: bool = False, tied: int = 0) -> Suspect:
    ev = {"timestamp_ns": fr.t_ns, "lead_ns": lead, "delta_bytes": fr.delta_bytes,
          "threshold_bytes": fr.threshold_bytes, "baseline_ns": fr.baseline_ns,
          "baseline_bytes": fr.baseline_bytes, "peak_bytes": fr.peak_bytes,
          "resolution_ns": res, "lead_intervals": (lead / res) if res else None,
          "alignment": timeline.alignment,
          "offset_ns": timeline.offsets_ns.get(fr.rank, 0)}
    if alone:
        ev["only_rank_to_rise"] = True
    if tied:
        ev["tied_ranks"] = tied
    return Suspect(rank=fr.rank, confidence=conf, first_spike_ns=fr.t_ns, lead_ns=lead,
                   delta_bytes=fr.delta_bytes, evidence=ev)
