"""Dead ranks: a rank whose samples stop while most of its peers go on reporting.

Before this module the analyzer said nothing about such a rank: it had data, so it was not
*missing*, and the memory algorithms only judge the samples that exist. Yet a rank that dies
(SIGKILL, the kernel's OOM killer, a node lost) while its peers keep sampling is the first thing
the on-call wants named, with when it stopped — its peers will hang in their next collective.

A rank is named when, over the window:

* at least three ranks have samples (one sample is enough: such a rank is named at ``low``
  at most, its own interval unknown; two ranks cannot tell "one died" from "one outlived the
  other": rank 0 writing a checkpoint after its peers exit is normal);
* its last sample is followed by at least ``SILENCE_INTERVALS`` of the sampling interval (its own
  or its peers', whichever is longer) and never less than ``MIN_SILENCE_S`` of silence while
* a strict majority of its peers (and at least two) still report after that silence;
* and it did not leave on purpose. Its tracker's clean stop (a ``KIND_TRACKER_STOP`` marker:
  ``stormotel.tracker.stop.timestamp``, written on ``stop_tracking``, SIGTERM and at the
  interpreter's exit, never on SIGKILL, the OOM killer or a lost node) from
  ``STOP_BEFORE_INTERVALS`` sampling intervals before its last sample to the end of the silence
  threshold after it (:func:`.tracker_edges.clean_stop`, which the stall verdict asks too),
  with no OOM recorded first, *and* a strict majority of the peers still reporting that have
  step markers starting ``PROGRESS_STEPS`` steps after it (the job went on working without it:
  a rank done early on uneven data, an early-stopping rank, one leaving an elastic job) is not
  named; a note lists such ranks. A clean stop alone is not enough: an uncaught exception
  also ends in the tracker's exit handler and writes the same edge, and the peers it leaves
  behind block in their next collective (at most one more step started). So a clean stop whose
  peers made no such progress is named at ``medium`` (``stop_edge: clean_peers_stalled``).

**No peer has steps** (decided in docs/algorithms.md, "A clean stop without step data"): the
rank is named at ``low`` — undecided, exit 1 — whatever its peers did next
(``clean_no_progress_data``), and the finding counts how their data ends
(``peers_after_stop``): with their own clean stop, or without one (still running or blocked
when read; or killed, aborted, lost). Peers that all stop cleanly later do not clear it:
SIGTERM writes the same edge, and a launcher tearing the job down after a rank's exception
(torchrun) or a person cancelling a hung job stops every peer that way; only the peers' steps
tell those from an early finish. Ranks that stop within the silence threshold of one another
(a job ending) name nobody.

A staggered clean exit (most ranks stop, one goes on) names nobody. Confidence stays ``medium``
at most, never ``high``: no labelled set measures it higher, and the stop edge only reaches the
analyzer where the data carries it — a tracker whose stop is not delivered (a Prometheus
endpoint without ``--prometheus-linger``: ``stormotel.tracker.stop.reported`` 0, or an older
tracker) stopped on purpose looks the same as one that died. Where the rank's tracker says it
delivers its stop (``stop.reported`` 1, :data:`META_STOP_REPORTED`) and none came, the finding
says so (``stop_edge``: ``expected_missing``); otherwise ``unknown``. The finding is a
``rank_failure`` stall finding from ``telemetry`` (category ``stopped_reporting``), a root cause:
every consumer (summary, annotations, findings series, exit code) leads with it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

import numpy as np
from stormotel.analyzers.algorithms.tracker_edges import clean_stop
from stormotel.analyzers.report import Confidence, StallFinding
from stormotel.analyzers.timeline import (
    KIND_OOM,
    KIND_STEP,
    META_STOP_REPORTED,
    RankSeries,
    Timeline,
)

#: Silence that counts, in sampling intervals: a scrape or two missed is not a death.
SILENCE_INTERVALS = 4
#: ... and never shorter than this (a raw 10 Hz archive must not name a rank for a GC pause).
MIN_SILENCE_S = 5.0
#: Steps a peer must start after the rank's last sample for the job to have gone on working
#: without it (one it may start and block in; a second means the first completed).
PROGRESS_STEPS = 2
CATEGORY = "stopped_reporting"

#: Why a rank with a single sample is named at ``low`` only (undecided): its own sampling
#: interval is unknown, so a rank sampled far slower than its peers (a 15 s scrape among 1 s
#: archives) would look the same; a rank killed right after its first export looks like this.
ONE_SAMPLE_NOTE = ("this rank has a single sample, so its own sampling interval is unknown and "
                   "the silence after it is measured with its peers' (a rank sampled far more "
                   "slowly would look the same; hence low, undecided): look at how it ended, and "
                   "collect its tracker's archive or scrapes at its peers' interval")

REMEDIATION = ("Look at this rank's exit around the time it stopped (exit status, the kernel's "
               "OOM-killer log, a signal, its node's health): its peers will hang in their next "
               "collective and time out as its consequence.")


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def silence_ns(interval_ns: int) -> int:
    """The silence that counts after a last sample, for series sampled every ``interval_ns``
    (``SILENCE_INTERVALS`` of it, never under ``MIN_SILENCE_S``)."""
    return max(SILENCE_INTERVALS * interval_ns, int(MIN_SILENCE_S * 1e9))


def dead_ranks(timeline: Timeline, notes: list[str] | None = None) -> list[StallFinding]:
    """One finding per rank that stopped reporting while most of its peers went on, the
    earliest stop first. A rank whose tracker stopped cleanly there is not one; ``notes``
    (when given) receives one line naming such ranks."""
    # A rank with one sample is judged too (a rank SIGKILLed right after its first export
    # leaves one; skipping it printed "healthy"), against its peers' interval (its own is
    # unknown) and at ``low`` at most: see :data:`ONE_SAMPLE_NOTE`.
    ranks = {r: s for r, s in timeline.ranks.items() if len(s) >= 1}
    if len(ranks) < 3:
        return []
    last = {r: int(s.t_ns[-1]) for r, s in ranks.items()}
    interval = {r: s.median_interval_ns() or 0 for r, s in ranks.items()}
    measured = [i for r, i in interval.items() if len(ranks[r]) >= 2]
    peer_interval = int(np.median(measured)) if measured else 0
    # Every rank's last sample, sorted once: the peers still reporting after a rank's silence
    # are a suffix of it (the rank itself never is: its silence is > 0), so each rank costs a
    # binary search, not a walk over its peers (that walk was quadratic: 24 s at 10,000 ranks).
    ends = np.sort(np.fromiter(last.values(), dtype=np.int64, count=len(last)))
    n_peers = len(last) - 1
    out: list[tuple[int, StallFinding]] = []
    stopped: list[tuple[int, int]] = []
    reports_stop = set(cast("list[int]", timeline.meta.get(META_STOP_REPORTED) or []))
    progress: _Progress | None = None  # the peers' steps, gathered when a clean stop asks
    for rank, end in last.items():
        step = max(interval[rank], peer_interval)
        silence = silence_ns(step)
        first_after = int(np.searchsorted(ends, end + silence, side="left"))
        n_after = len(ends) - first_after
        if n_after < 2 or 2 * n_after <= n_peers:
            continue
        m = ranks[rank].markers
        ooms = [int(t) for t, k in zip(m.start_ns, m.kind, strict=True)
                if k == KIND_OOM and int(t) <= end + silence]
        clean = clean_stop(ranks[rank], end, step, silence)
        stop_ev = _stop_evidence(rank in reports_stop)
        confidence: Confidence = "medium"
        if clean is not None and not ooms:
            if progress is None:
                progress = _Progress(ranks, last, interval, peer_interval)
            went, with_steps = progress.after(first_after, end)
            if with_steps and 2 * went > with_steps:
                stopped.append((rank, clean))
                continue
            stop_ev = _clean_stop_evidence(clean, went, with_steps, progress.ends(first_after))
            confidence = "medium" if with_steps else "low"  # nothing tells the two apart
        if len(ranks[rank]) < 2:
            confidence = "low"
            stop_ev = {**stop_ev, "own_interval": "unknown", "note": ONE_SAMPLE_NOTE}
        went_on = int(np.median(ends[first_after:]))
        reason = (f"rank {rank} stopped reporting at {_iso(end)} while {n_after} of its "
                  f"{n_peers} peers went on for {(went_on - end) / 1e9:.0f} s"
                  + (" (it recorded an out-of-memory event first)" if ooms else "")
                  + (f" ({stop_ev['stop_edge_text']})" if "stop_edge_text" in stop_ev else ""))
        stop_ev.pop("stop_edge_text", None)
        ev: dict[str, object] = {
            "category": CATEGORY, "reason": reason, "time_ns": end, "last_sample_ns": end,
            "stopped_at": _iso(end), "peers": n_peers, "peers_reporting_after": n_after,
            "peers_last_sample_ns": went_on, "silence_s": round((went_on - end) / 1e9, 3),
            "silence_threshold_s": round(silence / 1e9, 3), **stop_ev}
        if ooms:
            ev["oom_ns"] = min(ooms)
        if clean is not None:
            ev["clean_stop_ns"] = clean
        out.append((end, StallFinding(kind="rank_failure", ranks=[rank], process_group=None,
                                      seq_id=None, op=None, source="telemetry",
                                      confidence=confidence, evidence=ev,
                                      remediation=[REMEDIATION])))
    if stopped and notes is not None:
        notes.append(_stopped_note(sorted(stopped)))
    return [f for _, f in sorted(out, key=lambda x: (x[0], x[1].ranks))]


class _Progress:
    """Each rank's ``PROGRESS_STEPS``-th latest step start, in the order of the ranks' last
    samples (that of ``ends``: the peers still reporting after a silence are a suffix), found
    once; a clean stop's question is then two counts over that suffix, not a walk over each
    peer's markers (an elastic job whose thousands of ranks leave one by one asks it for each).
    A peer blocked on the rank that left may start one more step (its collective then waits);
    ``PROGRESS_STEPS`` started after the rank's last sample mean a step completed without it.
    Also how each peer's own data ends (its clean stop at its last sample or not), for the
    finding's words where no peer has steps."""

    def __init__(self, ranks: dict[int, RankSeries], last: dict[int, int],
                 interval: dict[int, int], peer_interval: int) -> None:
        order = sorted(last, key=last.__getitem__)
        kth = np.full(len(order), np.iinfo(np.int64).min, dtype=np.int64)
        has = np.zeros(len(order), dtype=bool)
        self.clean_end = np.zeros(len(order), dtype=bool)
        for i, rank in enumerate(order):
            m = ranks[rank].markers
            step = max(interval[rank], peer_interval)
            self.clean_end[i] = clean_stop(ranks[rank], last[rank], step,
                                           silence_ns(step)) is not None
            if KIND_STEP not in m.kinds:
                continue
            starts = m.start_ns[m.kind == KIND_STEP]
            has[i] = True
            if starts.shape[0] >= PROGRESS_STEPS:
                kth[i] = np.partition(starts, -PROGRESS_STEPS)[-PROGRESS_STEPS]
        self.kth, self.has = kth, has

    def after(self, first: int, end: int) -> tuple[int, int]:
        """(peers from position ``first`` on that started ``PROGRESS_STEPS`` steps after
        ``end``, those peers that have step markers at all)."""
        return (int(np.count_nonzero(self.kth[first:] > end)),
                int(np.count_nonzero(self.has[first:])))

    def ends(self, first: int) -> dict[str, int]:
        """How the data of the peers from position ``first`` on ends: with their tracker's
        clean stop at their last sample, or without one (still running when the data was
        read, or killed, aborted, lost: a timeline does not know where its window ended)."""
        n_clean = int(np.count_nonzero(self.clean_end[first:]))
        return {"stopped_cleanly": n_clean,
                "no_clean_stop": int(self.clean_end.size) - first - n_clean}


def _clean_stop_evidence(clean: int, went: int, with_steps: int, peers_end: dict[str, int]
                         ) -> dict[str, object]:
    """Why a rank that stopped cleanly is still named: its peers stalled, or nothing says —
    and then how the peers that went on ended, in words (``peers_after_stop``)."""
    if with_steps:
        return {"stop_edge": "clean_peers_stalled",
                "stop_edge_text": f"its tracker stopped cleanly at {_iso(clean)}, but only "
                                  f"{went} of the {with_steps} peers with steps made progress "
                                  "after it: its exit stalled them",
                "note": "a clean stop is also what an uncaught exception leaves (the tracker "
                        "stops at the interpreter's exit); the peers' steps say the job did "
                        "not go on working without it"}
    ended, unended = peers_end["stopped_cleanly"], peers_end["no_clean_stop"]
    how = []
    if ended:
        how.append(f"{ended} of the peers that went on stopped cleanly later too (an early "
                   "finish leaves that, and so does a failure whose peers a launcher or a "
                   "person then stopped with SIGTERM)")
    if unended:
        how.append(f"{unended} of the peers that went on have no clean stop at the end of "
                   "their data (still running, or blocked on it, when read; or killed, aborted "
                   "or lost — what a watchdog's abort of peers blocked on it leaves)")
    return {"stop_edge": "clean_no_progress_data",
            "stop_edge_text": f"its tracker stopped cleanly at {_iso(clean)}; no step data "
                              f"says whether its peers went on working; {'; '.join(how)}",
            "peers_after_stop": peers_end,
            "note": "a clean stop is what stop_tracking, SIGTERM and also an uncaught exception "
                    "leave; without the peers' steps the analyzer cannot tell an early finish "
                    "from a failure that stalls them (hence low, undecided); record steps "
                    "(tracker.step() each iteration) and a rank that finished early is not "
                    "named"}


def _stop_evidence(reports_stop: bool) -> dict[str, object]:
    """What the finding says about the missing clean stop (why it stays medium)."""
    if reports_stop:
        return {"stop_edge": "expected_missing",
                "note": "its tracker delivers a clean stop and none came: it did not stop on "
                        "purpose (killed, crashed, node lost) or its last export was lost "
                        "(medium: not measured higher)"}
    return {"stop_edge": "unknown",
            "note": "no clean stop came, but this rank's tracker does not say it delivers one "
                    "(stop.reported is not 1): a rank stopped on purpose while its peers go on "
                    "would look the same (hence medium)"}


def _stopped_note(stopped: list[tuple[int, int]]) -> str:
    shown = ", ".join(f"{r} at {_iso(t)}" for r, t in stopped[:5])
    more = f" and {len(stopped) - 5} more" if len(stopped) > 5 else ""
    return (f"{len(stopped)} rank(s) stopped reporting while most of their peers went on, but "
            f"their tracker stopped cleanly there (its stop timestamp: stop_tracking, SIGTERM "
            f"or exit) and most peers kept stepping after it, so none is named dead: "
            f"rank {shown}{more}")
