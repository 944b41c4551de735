"""Cross-rank first cause: which rank's device memory rose first, and how sure we can be.

Per rank, the *first qualifying rise* is the first sample whose device-used bytes stand at least
``max(rise_fraction × rank peak, rise_floor_bytes)`` above the running baseline — the minimum so
far (or over a trailing window). The seed resets its cumulative delta on every non-positive
delta, so one noisy dip restarts a genuine rise; a running minimum does not care about dips.

The *cluster onset* is the second-earliest first rise (as in the seed): if one rank rose before
everyone else, it leads the onset by ``lead_ns``. An incident without a clear leader (a tie or a
sub-interval lead, e.g. the warm-up where every rank allocates at once) is set aside, with a
note, and the next incident is examined. Confidence compares the lead with the
resolution (the coarsest median sampling interval): a lead of at least one interval by a single
rank with no missing ranks is ``high``; a shorter lead or missing ranks make it ``medium``; ties
and thin evidence make it ``low``. Everything happens on the timeline as aligned by
:mod:`analyzers.align`; the alignment is stated in the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from analyzers.algorithms.robust import rolling_min
from analyzers.algorithms.settings import Settings
from analyzers.report import Confidence, CrossRank, Suspect
from analyzers.timeline import KIND_FIRST_RISE, RankSeries, Timeline

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
    settled_ns: int  # when the rise stopped climbing (steps < 10% of the threshold)
    hole_ns: int  # time since the previous sample: the rise happened somewhere in there
    from_edge_event: bool = False  # timed by the tracker's in-process first-rise event


def first_rise(series: RankSeries, settings: Settings, after_ns: int | None = None
               ) -> FirstRise | None:
    """The rank's first qualifying rise in device-used memory (after ``after_ns``), or None."""
    x = series.values.get(FIELD)
    if x is None or len(series) < 2:
        return None
    ok = np.isfinite(x)
    if ok.sum() < 2:
        return None
    t, v = series.t_ns[ok], x[ok]
    peak = float(v.max())  # the threshold is relative to the whole series' peak, every round
    if after_ns is not None:
        keep = t > after_ns
        t, v = t[keep], v[keep]
        if t.shape[0] < 2:
            return None
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
    # Where the rise levels off: the next incident is looked for after that, so a multi-sample
    # ramp (a warm-up) is one incident, not several.
    slow = np.flatnonzero(np.diff(v[i:]) < 0.1 * threshold)
    settled = int(t[i + int(slow[0])]) if slow.size else int(t[-1])
    hole = int(t[i] - t[i - 1]) if i > 0 else 0
    rise_t, edge = int(t[i]), False
    # The tracker detects rises in-process at its own sampling rate and emits the exact time as
    # a span event; when one falls inside this sample's hole, it is the better timestamp.
    m = series.markers
    if len(m) and hole:
        ev = m.start_ns[(m.kind == KIND_FIRST_RISE) & (m.start_ns > t[i] - hole)
                        & (m.start_ns <= t[i])]
        if ev.size:
            rise_t, edge, hole = int(ev.min()), True, 0
    return FirstRise(series.rank, rise_t, float(v[i] - level), threshold, int(t[j]), level,
                     peak, settled, hole, edge)


#: Incidents examined at most (each is one vectorised pass per rank).
MAX_ROUNDS = 16


@dataclass
class _Round:
    rises: dict[int, FirstRise]
    onset_ns: int | None
    suspects: list[Suspect]
    notes: list[str]
    decisive: bool  # one rank led by at least one sampling interval


def analyze_first_cause(timeline: Timeline, settings: Settings) -> tuple[CrossRank, dict]:
    """Cluster onset and ranked suspects; also returns the per-rank first-rise table.

    Rises are examined incident by incident: when the first incident has no clear leader (ranks
    tied, or a lead shorter than one sampling interval — typically the job's warm-up, where
    every rank allocates at once), the analysis moves past it (after the last rank of that
    incident stopped rising) and looks at the next one, up to ``MAX_ROUNDS``. The first incident
    with a clear leader is reported; if none has one, the first incident is reported as it is.
    """
    res = timeline.resolution_ns()
    out = CrossRank(alignment=timeline.alignment, resolution_ns=res)
    missing = timeline.missing_ranks()
    with_field = [r for r in timeline.rank_ids if timeline.ranks[r].has(FIELD)]
    no_field = sorted(set(timeline.ranks) - set(with_field))
    if no_field:
        out.notes.append(f"ranks without device-used memory (not compared): {no_field}")
    if len(with_field) < 2:
        out.notes.append("first-cause analysis needs at least two ranks with device-used memory;"
                         f" have {len(with_field)}")
        return out, {}
    if missing:
        out.notes.append(f"missing ranks {missing} may have risen earlier; confidence lowered")
    rounds: list[_Round] = []
    after: int | None = None
    for _ in range(MAX_ROUNDS):
        rises = {r: fr for r in with_field
                 if (fr := first_rise(timeline.ranks[r], settings, after)) is not None}
        if not rises:
            break
        rounds.append(_judge(rises, timeline, with_field, missing, res))
        if rounds[-1].decisive:
            break
        after = max(fr.settled_ns for fr in rises.values())
    if not rounds:
        out.notes.append("no rank showed a qualifying rise (>= "
                         f"{settings.rise_fraction:.0%} of its peak and >= "
                         f"{settings.rise_floor_bytes / 2**20:.0f} MiB)")
        return out, {}
    chosen = next((r for r in rounds if r.decisive), rounds[0])
    for earlier in rounds[: rounds.index(chosen)]:
        ranks = sorted(earlier.rises)
        t0 = min(fr.t_ns for fr in earlier.rises.values())
        spread = max(fr.t_ns for fr in earlier.rises.values()) - t0
        out.notes.append(
            f"an earlier rise of ranks {ranks[:16]}{' ...' if len(ranks) > 16 else ''} at "
            f"{_iso(t0)} (within {spread / 1e6:.1f} ms of each other, no rank leading by a "
            "sampling interval — e.g. the job's warm-up or a shared cause) was set aside")
    out.cluster_onset_ns = chosen.onset_ns
    out.first_cause_suspects = chosen.suspects
    out.notes.extend(chosen.notes)
    table = {r: {"first_spike_ns": fr.t_ns, "delta_bytes": fr.delta_bytes,
                 "threshold_bytes": fr.threshold_bytes, "baseline_ns": fr.baseline_ns}
             for r, fr in sorted(chosen.rises.items())}
    return out, {"rounds_examined": len(rounds), "chosen_round": rounds.index(chosen) + 1,
                 "ranks": table}


def _judge(rises: dict[int, FirstRise], timeline: Timeline, with_field: list[int],
           missing: list[int], res: int | None) -> _Round:
    """One incident: the seed's onset (second-earliest rise), leader, confidence."""
    order = sorted(rises.values(), key=lambda fr: (fr.t_ns, fr.rank))
    first = order[0]
    if len(order) == 1:
        # Only one rank rose; it led every other rank by at least their observed span.
        others_end = min(int(timeline.ranks[r].t_ns[-1]) for r in with_field if r != first.rank)
        lead = max(others_end - first.t_ns, 0)
        conf: Confidence = "high" if res and lead >= res and not missing else (
            "medium" if lead > 0 else "low")
        note = (f"only rank {first.rank} rose; the others never reached their threshold (lead "
                "measured to the end of their data)")
        return _Round(rises, None, [_suspect(first, lead, conf, res, timeline, alone=True)],
                      [note], bool(res and lead >= res))
    onset = order[1].t_ns
    tied = [fr for fr in order if fr.t_ns == first.t_ns]
    if len(tied) > 1:
        note = (f"ranks {[fr.rank for fr in tied]} rose at the same aligned time: a shared cause "
                "(a collective or the input pipeline) is more likely than one faulty rank")
        return _Round(rises, onset, [_suspect(fr, 0, "low", res, timeline, tied=len(tied))
                                     for fr in tied], [note], False)
    lead = onset - first.t_ns
    notes = []
    # A follower whose samples have a hole before its rise may really have risen first.
    # (Only matters when the lead is at least one interval; shorter leads are unsure anyway.)
    unsure = [fr.rank for fr in order[1:] if fr.t_ns - fr.hole_ns < first.t_ns] \
        if res and lead >= res else []
    if res is None:
        conf = "low"
    elif lead >= res:
        conf = "medium" if (missing or unsure) else "high"
    else:
        conf = "low" if missing else "medium"
        notes.append(f"rank {first.rank} leads by {lead / 1e6:.1f} ms, less than the "
                     f"{res / 1e6:.1f} ms sampling interval")
    if unsure:
        notes.append(f"ranks {unsure[:16]} have a sampling hole before their rise and may have "
                     f"risen before rank {first.rank}")
    return _Round(rises, onset, [_suspect(first, lead, conf, res, timeline)], notes,
                  bool(res and lead >= res and not unsure))


def _suspect(fr: FirstRise, lead: int, conf: Confidence, res: int | None, timeline: Timeline,
             *, alone: bool = False, tied: int = 0) -> Suspect:
    ev = {"timestamp_ns": fr.t_ns, "lead_ns": lead, "delta_bytes": fr.delta_bytes,
          "threshold_bytes": fr.threshold_bytes, "baseline_ns": fr.baseline_ns,
          "baseline_bytes": fr.baseline_bytes, "peak_bytes": fr.peak_bytes,
          "resolution_ns": res, "lead_intervals": (lead / res) if res else None,
          "sample_hole_before_ns": fr.hole_ns, "timed_by_edge_event": fr.from_edge_event,
          "alignment": timeline.alignment,
          "offset_ns": timeline.offsets_ns.get(fr.rank, 0)}
    if alone:
        ev["only_rank_to_rise"] = True
    if tied:
        ev["tied_ranks"] = tied
    return Suspect(rank=fr.rank, confidence=conf, first_spike_ns=fr.t_ns, lead_ns=lead,
                   delta_bytes=fr.delta_bytes, evidence=ev)


def _iso(ns: int) -> str:
    """Wall-clock ISO-8601 (ms, UTC) for notes a person reads; the JSON keeps raw ns elsewhere."""
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
