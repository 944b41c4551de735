"""The store-based barrier at process-group init: the missing ranks, by their absence.

``torch.distributed``'s ``_store_based_barrier`` (``distributed_c10d.py``, 1.8 → main) makes
every rank add 1 to a store key and wait until the count reaches the group's ``world_size``;
while it waits it logs "Waiting in store based barrier … for rank: r, key: k (world_size=W,
worker_count=K …)" (``num_workers_joined`` from 2.0) and at the timeout raises "Timed out
initializing process group in store based barrier on rank r, for key: k (…)". What that proves:

- every reporter **arrived** (a victim); K of W had arrived when it printed;
- the ranks of the group that never report are the ones missing — named only when every
  arrival reported (exactly W - K silent ranks, the count taken at a timeout), else counted;
- K > W is not a slow rank: more processes added to the key than the group has — a second
  launch on the same MASTER_ADDR:PORT, or a rank that restarted and joined again;
- "Rank r: Completed store-based barrier for key: k" means everybody arrived at k.

``world_size`` there is the global world for ``init_process_group`` and for ``new_group``
without ``use_local_synchronization`` (every rank joins every group's barrier), so the ranks
are global and the group is ``range(W)``; keys of a smaller W (local synchronisation) are
only counted. TCPStore's own "Timed out after N seconds waiting for clients. n/N clients
joined." is counted the same way (it names no client).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner, log_finding

KIND = "store_barrier"  #: the event kind (its rule below says when it shows a stall)
_PIDS = ("torch.c10d.store_barrier_waiting", "torch.c10d.store_barrier_timeout",
         "torch.c10d.store_barrier_completed", "torch.store.clients_joined")
_TRIGGERS = ("store based barrier", "store-based barrier", "clients joined")

REMEDIATION = {
    "missing": ["These ranks never reached init_process_group / new_group: read their own "
                "logs (an exception before init, a node that never started, a wrong "
                "RANK/WORLD_SIZE) — the ranks that printed 'Waiting in store based barrier' "
                "only waited for them."],
    "count": ["Some ranks never reached process-group init and the logs do not say which: "
              "collect every rank's log (or the launcher's list of started ranks) — the "
              "ranks absent from the 'Waiting in store based barrier' lines are the candidates."],
    "duplicate": ["More processes joined the barrier than the group has: the job was started "
                  "twice against the same MASTER_ADDR:MASTER_PORT (a stale job, a retried "
                  "launcher, two torchrun on one node) or a rank restarted and joined again. "
                  "Give each job its own port (e.g. derived from SLURM_JOB_ID) and kill stale "
                  "processes; no rank is late."],
}


def _num(text: str | None) -> int | None:
    return gr.parse_int(text) if text else None


class Scanner(LineScanner):
    """Reads the barrier's lines (one line each; the exception may repeat the last)."""

    kind, triggers, patterns = KIND, _TRIGGERS, _PIDS

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        g = m.groupdict()
        try:
            said = gr.parse_rank(g.get("rank"))
            detail: dict[str, object] = {
                "rank": said, "key": g.get("key"),
                "world_size": _num(g.get("w") or g.get("of")),
                "joined": _num(g.get("k") or g.get("n"))}
        except gr.NumberTooLong:
            return None
        return (said if said is not None else rank), detail


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """Per barrier key: the ranks missing by absence, a count, or a duplicate launch."""
    evs = [e for e in events if e.kind == KIND and e.detail and e.pattern in _PIDS]
    done = {e.detail["key"] for e in evs if e.pattern == "torch.c10d.store_barrier_completed"}
    keys: dict[str, list[Any]] = defaultdict(list)
    for e in evs:
        if e.pattern in ("torch.c10d.store_barrier_waiting", "torch.c10d.store_barrier_timeout"):
            keys[str(e.detail.get("key") or "?")].append(e)
    widest = max((e.detail["world_size"] or 0 for k in keys.values() for e in k), default=0)
    out = [f for key, k_evs in keys.items() if key not in done
           if (f := _key_finding(key, k_evs, known, widest)) is not None]
    clients = [e for e in evs if e.pattern == "torch.store.clients_joined"]
    if clients and not out:
        d = clients[-1].detail
        n, of = d.get("joined"), d.get("world_size")
        out.append(log_finding(
            "undecided", [], "not_at_init", "low", "torch.store.clients_joined",
            f"the store's server waited for its clients and only {n} of {of} connected: "
            f"{(of or 0) - (n or 0)} process(es) never reached the store, and the server does "
            "not say which", REMEDIATION["count"], clients))
    return out


def _key_finding(key: str, evs: list[Any], known: int | None, widest: int
                 ) -> StallFinding | None:
    ws = {e.detail["world_size"] for e in evs if e.detail.get("world_size")}
    joined = [e.detail["joined"] for e in evs if e.detail.get("joined") is not None]
    arrived = sorted({e.rank for e in evs if e.rank is not None})
    timed_out = any(e.pattern == "torch.c10d.store_barrier_timeout" for e in evs)
    if len(ws) != 1 or not joined:
        if not timed_out:
            return None
        return log_finding(
            "undecided", [], "not_at_init", "low", "torch.c10d.store_barrier_timeout",
            f"rank(s) {arrived or '?'} timed out in the store-based barrier of {key} without "
            "the counts (or with several world sizes): some rank never reached "
            "process-group init", REMEDIATION["count"], evs, waiting_ranks=arrived,
            barrier_key=key)
    (w,), k = ws, max(joined)
    pattern = "torch.c10d.store_barrier_timeout" if timed_out else \
        "torch.c10d.store_barrier_waiting"
    base: dict[str, Any] = {"barrier_key": key, "world_size_in_line": w, "joined": k,
                            "waiting_ranks": arrived}
    if k > w:
        return log_finding(
            "undecided", [], "duplicate_launch", "low", pattern,
            f"{k} processes joined the barrier of {key}, more than its world_size {w}: a "
            "duplicate launch (a second job on the same MASTER_ADDR:PORT, or a restarted rank "
            "that joined again) — not a late rank", REMEDIATION["duplicate"], evs, **base)
    if k >= w:
        if not timed_out:
            return None  # every rank arrived: a wait that ended (Completed may not be logged)
        # A timeout is never healthy, whatever the count in its line says (the count is read
        # once before the raise; ranks counting on two stores see different counts).
        return log_finding(
            "undecided", [], "not_at_init", "low", pattern,
            f"rank(s) {arrived or '?'} timed out in the store-based barrier of {key} although "
            f"its line counts {k} of {w} joined: the count was read before the timeout, or the "
            "ranks count on different stores (two MASTER_ADDR:PORT); collect every rank's log",
            REMEDIATION["count"], evs, **base)
    missing = w - k
    whole = w == widest and (known is None or known == w) and all(r < w for r in arrived)
    candidates = sorted(set(range(w)) - set(arrived)) if whole else []
    if whole and len(candidates) == missing and len(arrived) == k:
        # several witnesses that agree on the count, at the end of the wait, in a stated
        # world: one lone reporter may be one side of two stores (a split MASTER_ADDR)
        confidence = "medium" if timed_out and known == w and len(arrived) >= 2 \
            and 2 * len(arrived) >= w else "low"
        return log_finding(
            "straggler", candidates, "not_at_init", confidence, pattern,
            f"{k} of {w} ranks reached the store-based barrier of {key} and every one of them "
            f"says so ({arrived if k <= 16 else f'{k} ranks'}); rank(s) {candidates} never "
            "arrived — absent from the waiters, they are the ranks the others wait for",
            REMEDIATION["missing"], evs, missing_count=missing, **base)
    if not whole:
        why = "this barrier's group is not the whole world (its members are not in the log)"
    elif len(arrived) > k:
        why = (f"{len(arrived)} ranks say they wait while the count says {k} arrived (a rank "
               "that restarted, or ranks counting on two different stores)")
    else:
        why = (f"the logs show only {len(arrived)} of the {k} that arrived, so the absent ones "
               "cannot be told apart")
    return log_finding(
        "undecided", [], "not_at_init", "low", pattern,
        f"{missing} of the {w} ranks of {key} never reached the store-based barrier ({k} "
        f"joined), but {why}; collect every rank's log",
        REMEDIATION["count"], evs, missing_count=missing, suspects=candidates[:64],
        collect_next=candidates[:64], **base)
