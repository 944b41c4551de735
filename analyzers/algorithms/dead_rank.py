"""Dead ranks: a rank whose samples stop while most of its peers go on reporting.

Before this module the analyzer said nothing about such a rank: it had data, so it was not
*missing*, and the memory algorithms only judge the samples that exist. Yet a rank that dies
(SIGKILL, the kernel's OOM killer, a node lost) while its peers keep sampling is the first thing
the on-call wants named, with when it stopped — its peers will hang in their next collective.

A rank is named when, over the window:

* at least three ranks have samples (two ranks cannot tell "one died" from "one outlived the
  other": rank 0 writing a checkpoint after its peers exit is normal);
* its last sample is followed by at least ``SILENCE_INTERVALS`` of the sampling interval (its own
  or its peers', whichever is longer) and never less than ``MIN_SILENCE_S`` of silence while
* a strict majority of its peers (and at least two) still report after that silence.

A staggered clean exit (most ranks stop, one goes on) names nobody. Confidence is ``medium``,
never ``high``: the analyzer does not read the tracker's clean-stop edge, and a rank stopped on
purpose while its peers go on would look the same. The finding is a ``rank_failure`` stall
finding from ``telemetry`` (category ``stopped_reporting``), a root cause: every consumer
(summary, annotations, findings series, exit code) leads with it.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.timeline import KIND_OOM, Timeline

#: Silence that counts, in sampling intervals: a scrape or two missed is not a death.
SILENCE_INTERVALS = 4
#: ... and never shorter than this (a raw 10 Hz archive must not name a rank for a GC pause).
MIN_SILENCE_S = 5.0
CATEGORY = "stopped_reporting"

REMEDIATION = ("Look at this rank's exit around the time it stopped (exit status, the kernel's "
               "OOM-killer log, a signal, its node's health): its peers will hang in their next "
               "collective and time out as its consequence.")


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def dead_ranks(timeline: Timeline) -> list[StallFinding]:
    """One finding per rank that stopped reporting while most of its peers went on, the
    earliest stop first."""
    ranks = {r: s for r, s in timeline.ranks.items() if len(s) >= 2}
    if len(ranks) < 3:
        return []
    last = {r: int(s.t_ns[-1]) for r, s in ranks.items()}
    interval = {r: s.median_interval_ns() or 0 for r, s in ranks.items()}
    peer_interval = int(np.median(list(interval.values())))
    # Every rank's last sample, sorted once: the peers still reporting after a rank's silence
    # are a suffix of it (the rank itself never is: its silence is > 0), so each rank costs a
    # binary search, not a walk over its peers (that walk was quadratic: 24 s at 10,000 ranks).
    ends = np.sort(np.fromiter(last.values(), dtype=np.int64, count=len(last)))
    n_peers = len(last) - 1
    out: list[tuple[int, StallFinding]] = []
    for rank, end in last.items():
        silence = max(SILENCE_INTERVALS * max(interval[rank], peer_interval),
                      int(MIN_SILENCE_S * 1e9))
        first_after = int(np.searchsorted(ends, end + silence, side="left"))
        n_after = len(ends) - first_after
        if n_after < 2 or 2 * n_after <= n_peers:
            continue
        went_on = int(np.median(ends[first_after:]))
        m = ranks[rank].markers
        ooms = [int(t) for t, k in zip(m.start_ns, m.kind, strict=True)
                if k == KIND_OOM and int(t) <= end + silence]
        reason = (f"rank {rank} stopped reporting at {_iso(end)} while {n_after} of its "
                  f"{n_peers} peers went on for {(went_on - end) / 1e9:.0f} s"
                  + (" (it recorded an out-of-memory event first)" if ooms else ""))
        ev: dict[str, object] = {
            "category": CATEGORY, "reason": reason, "time_ns": end, "last_sample_ns": end,
            "stopped_at": _iso(end), "peers": n_peers, "peers_reporting_after": n_after,
            "peers_last_sample_ns": went_on, "silence_s": round((went_on - end) / 1e9, 3),
            "silence_threshold_s": round(silence / 1e9, 3),
            "note": "the tracker's clean-stop edge is not read: a rank stopped on purpose "
                    "while its peers go on would look the same (hence medium)"}
        if ooms:
            ev["oom_ns"] = min(ooms)
        out.append((end, StallFinding(kind="rank_failure", ranks=[rank], process_group=None,
                                      seq_id=None, op=None, source="telemetry",
                                      confidence="medium", evidence=ev,
                                      remediation=[REMEDIATION])))
    return [f for _, f in sorted(out, key=lambda x: (x[0], x[1].ranks))]
