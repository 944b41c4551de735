"""Triage parsed watchdog evidence: per-rank state, initiator vs observers, the culprit.

The rules follow how ProcessGroupNCCL behaves (and how an experienced engineer reads the logs):

- ``last enqueued == last completed`` on a rank while others have work pending means that rank
  never entered the stuck collective: it is the straggler, stuck *outside* NCCL (training loop,
  data loading, an OOM it survived or died of);
- a rank of the known world with no watchdog evidence at all, while the others time out, is the
  straggler too (it may have died before its watchdog could speak);
- "First PG on this rank to signal dumping" marks an initiator (its own watchdog fired);
  "Observed flight recorder dump signal from another rank" an observer, which may never have been
  in the collective;
- different OpType / NumelIn / NumelOut at the same SeqNum are a mismatched collective; different
  SeqNums at the timeout are a collective-count split; culprits are the minority by vote;
- everybody waiting in the same collective with nothing else wrong points at the fabric — no rank
  is blamed (``undecided``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from analyzers.report import StallFinding
from analyzers.stalls import logs_parser as lp

CATEGORY_REMEDIATION: dict[str, list[str]] = {
    "mismatched_collective": [
        "Ranks called different collectives (or the same with different sizes) at the same "
        "sequence number: find the rank-dependent code path before this collective.",
        "Reproduce with TORCH_DISTRIBUTED_DEBUG=DETAIL to make the mismatch fail fast.",
    ],
    "straggler_outside_nccl": [
        "The straggler had nothing pending in NCCL: it was stuck in the training loop. Get its "
        "Python stack (py-spy dump, faulthandler) at the next hang.",
        "Check rank-dependent work before the collective (checkpointing, logging, evaluation).",
    ],
    "collective_count_split": [
        "Ranks issued different numbers of collectives: look for conditional collectives and "
        "uneven loop lengths (e.g. dataloaders of different length per rank).",
    ],
    "fabric": [
        "All ranks entered the collective and none completed: suspect the network fabric or "
        "GPUs (NCCL_DEBUG=INFO, IB counters, dmesg Xid errors) rather than one rank's code.",
    ],
    "oom": [
        "The straggler ran out of memory before the collective: fix the OOM (smaller batch, "
        "activation checkpointing, see the memory findings) — the hang is its consequence.",
    ],
    "data_loading": [
        "The straggler was starved by data loading (I/O errors, retries, a stuck worker): add "
        "timeouts to reads, check the storage back end, make the loader fail loudly.",
    ],
    "unknown": [
        "The watchdog evidence names no single rank: collect logs from every rank (the silent "
        "ones matter most) and Flight Recorder dumps.",
    ],
}
_HINT_CATEGORY = ((lp.OOM, "oom"), (lp.DATA_LOADING, "data_loading"))


@dataclass
class RankLogState:
    rank: int
    role: str = "silent"  #: initiator | observer | silent
    seq: int | None = None  #: SeqNum of the timed-out work
    op: str | None = None
    numel_in: int | None = None
    numel_out: int | None = None
    enqueued: int | None = None
    completed: int | None = None
    hints: Counter[str] = field(default_factory=Counter)
    first_ts_ns: int | None = None

    @property
    def idle(self) -> bool:
        return self.enqueued is not None and self.enqueued == self.completed

    @property
    def pending(self) -> bool:
        return self.enqueued is not None and self.completed is not None \
            and self.enqueued > self.completed

    def as_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "role": self.role, "seq": self.seq, "op": self.op,
                "numel_in": self.numel_in, "numel_out": self.numel_out,
                "enqueued": self.enqueued, "completed": self.completed,
                "hints": dict(self.hints)}


@dataclass
class LogAnalysis:
    findings: list[StallFinding]
    world_size: int
    states: dict[str, list[RankLogState]]
    category: str | None
    timeline: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)


def analyze_logs(parsed: lp.ParsedLogs, *, world_size: int | None = None) -> LogAnalysis:
    notes = list(parsed.notes)
    events = _attribute(parsed.events, notes)
    seen = parsed.ranks_seen | {e.rank for e in events if e.rank is not None}
    ws = max(world_size or 0, max(seen, default=-1) + 1)
    by_group: dict[str, list[lp.LogEvent]] = defaultdict(list)
    rank_hints: dict[int, Counter[str]] = defaultdict(Counter)
    for e in events:
        if e.rank is not None and e.kind in (lp.OOM, lp.DATA_LOADING, lp.FABRIC,
                                             lp.HEARTBEAT, lp.TEARDOWN, lp.EXCEPTION):
            rank_hints[e.rank][e.kind] += 1
        if e.kind in (lp.TIMEOUT, lp.COUNTERS, lp.FIRST_SIGNAL, lp.OBSERVED_SIGNAL):
            by_group[e.group or "default"].append(e)
    timeline = _timeline(events)
    states: dict[str, list[RankLogState]] = {}
    findings: list[StallFinding] = []
    categories: list[str] = []
    for group, evs in sorted(by_group.items()):
        table = _state_table(evs, rank_hints)
        states[group] = sorted(table.values(), key=lambda s: s.rank)
        finding = _triage(group, table, ws, rank_hints, timeline)
        if finding is not None:
            findings.append(finding)
            categories.append(finding.evidence["category"])
    if parsed.joined_wrapped:
        notes.append(f"glued {parsed.joined_wrapped} hard-wrapped line continuation(s)")
    if parsed.split_fused:
        notes.append(f"split {parsed.split_fused} line(s) at an embedded [rankN]: prefix "
                     "(launcher prefixes, progress bars, interleaved ranks)")
    category = categories[0] if categories else None
    return LogAnalysis(findings, ws, states, category, timeline, notes)


def _attribute(events: list[lp.LogEvent], notes: list[str]) -> list[lp.LogEvent]:
    """Fill in the global rank from the group rank where the group can only be the default."""
    out = []
    guessed = 0
    for e in events:
        if e.rank is None and e.group_rank is not None and (
                e.group is None or e.group.startswith(("0(", "id:0"))):
            e = lp.LogEvent(**{**e.__dict__, "rank": e.group_rank})
            guessed += 1
        out.append(e)
    if guessed:
        notes.append(f"{guessed} line(s) had no global rank prefix; used the default group's "
                     "rank from the [Rank r] tag")
    return out


def _state_table(evs: list[lp.LogEvent], hints: dict[int, Counter[str]]
                 ) -> dict[int, RankLogState]:
    table: dict[int, RankLogState] = {}
    for e in sorted(evs, key=lambda e: (e.ts_ns or 0, e.file, e.line)):
        if e.rank is None:
            continue
        st = table.setdefault(e.rank, RankLogState(e.rank, hints=hints.get(e.rank, Counter())))
        if st.first_ts_ns is None or (e.ts_ns is not None and e.ts_ns < st.first_ts_ns):
            st.first_ts_ns = e.ts_ns
        if e.kind == lp.TIMEOUT:
            st.seq, st.op, st.numel_in, st.numel_out = e.seq, e.op, e.numel_in, e.numel_out
            st.role = "initiator"
        elif e.kind == lp.COUNTERS:
            st.enqueued, st.completed = e.enqueued, e.completed
            if st.seq is None and e.seq is not None:
                st.seq = e.seq
        elif e.kind == lp.FIRST_SIGNAL:
            st.role = "initiator"
        elif e.kind == lp.OBSERVED_SIGNAL and st.role == "silent":
            st.role = "observer"
    return table


def _vote(values: dict[int, Any]) -> list[int] | None:
    counts = Counter(values.values())
    (_, n), *rest = counts.most_common()
    if rest and rest[0][1] == n:
        return None
    top = counts.most_common(1)[0][0]
    return sorted(r for r, v in values.items() if v != top)


def _triage(group: str, table: dict[int, RankLogState], ws: int,
            hints: dict[int, Counter[str]], timeline: list[dict[str, Any]]
            ) -> StallFinding | None:
    timed_out = {r: s for r, s in table.items() if s.seq is not None and s.op is not None}
    if not timed_out and not any(s.pending for s in table.values()):
        return None
    world = set(range(ws)) if group in ("default",) or group.startswith(("0(", "id:0")) \
        else set(table)
    silent = sorted(world - set(table))
    ev: dict[str, Any] = {
        "state_table": [s.as_dict() for s in sorted(table.values(), key=lambda s: s.rank)],
        "initiators": sorted(r for r, s in table.items() if s.role == "initiator"),
        "observers": sorted(r for r, s in table.items() if s.role == "observer"),
        "absent_from_watchdog": silent, "world_size": ws, "timeline": timeline[:40]}
    seqs = {r: s.seq for r, s in timed_out.items()}
    op_values = {r: s.op for r, s in timed_out.items()}
    common_seq = Counter(seqs.values()).most_common(1)[0][0] if seqs else None
    # 1. mismatched collective at the same SeqNum
    same = {r: s for r, s in timed_out.items() if s.seq == common_seq}
    for kind, values in (("op_type_mismatch", {r: s.op for r, s in same.items()}),
                         ("size_mismatch", {r: (s.numel_in, s.numel_out)
                                            for r, s in same.items()})):
        if len(set(values.values())) > 1:
            culprits = _vote(values) if len(values) > 2 else None
            return _finding(kind if culprits else "undecided", culprits or [], group,
                            common_seq, _majority(op_values), "mismatched_collective",
                            "high" if culprits and len(culprits) == 1 else "low",
                            {**ev, "reason": f"{kind.replace('_', ' ')} at SeqNum {common_seq}",
                             "per_rank": {str(r): values[r] for r in sorted(values)}})
    # 2. collective-count split: the timed-out SeqNums differ
    if len(set(seqs.values())) > 1:
        culprits = _vote(seqs)
        return _finding("count_split" if culprits else "undecided", culprits or [], group,
                        common_seq, _majority(op_values), "collective_count_split",
                        "medium" if culprits else "low",
                        {**ev, "reason": f"timed-out SeqNum differs across ranks: {seqs}"})
    # 3. straggler: nothing pending while the others wait, or no watchdog evidence at all
    pending = sorted(r for r, s in table.items() if s.pending)
    idle = sorted(r for r, s in table.items() if s.idle)
    if pending and idle and len(idle) < len(pending) + len(idle):
        suspects, why = idle, "last enqueued == last completed: never entered the collective"
    elif timed_out and silent and len(silent) < len(world):
        suspects, why = silent, "no watchdog line at all while the others timed out"
    else:
        suspects, why = [], ""
    if len(suspects) == 1:
        r = suspects[0]
        category = next((c for k, c in _HINT_CATEGORY if hints.get(r, Counter())[k]),
                        "straggler_outside_nccl")
        confidence = "high" if r in idle and all(table[p].pending for p in pending) else "medium"
        stuck = (common_seq if common_seq is not None
                 else (table[r].completed + 1 if table[r].completed is not None else None))
        return _finding("straggler", [r], group, stuck, _majority(op_values), category,
                        confidence, {**ev, "reason": f"rank {r}: {why}"})
    if len(suspects) > 1:
        return _finding("undecided", [], group, common_seq, _majority(op_values), "unknown",
                        "low", {**ev, "suspects": suspects,
                                "reason": f"{len(suspects)} ranks fit ({why}); none singled out"})
    # 4. everybody waiting in the same collective
    fabric = any(h[lp.FABRIC] for h in hints.values())
    return _finding("undecided", [], group, common_seq, _majority(op_values), "fabric",
                    "medium" if fabric else "low",
                    {**ev, "reason": "every rank entered the collective and none completed"
                     + (" (fabric errors logged)" if fabric else "")})


#: NCCL OpType spellings → the Flight Recorder op names, so both sources read alike
_OP_NAMES = {"ALLREDUCE": "all_reduce", "ALLGATHER": "all_gather",
             "_ALLGATHER_BASE": "all_gather", "REDUCE_SCATTER": "reduce_scatter",
             "_REDUCE_SCATTER_BASE": "reduce_scatter", "BROADCAST": "broadcast",
             "REDUCE": "reduce", "ALLTOALL": "all_to_all", "ALLTOALL_BASE": "all_to_all",
             "BARRIER": "barrier", "GATHER": "gather", "SCATTER": "scatter", "SEND": "send",
             "RECV": "recv", "COALESCED": "coalesced"}


def _majority(values: dict[int, Any]) -> str | None:
    vals = [v for v in values.values() if v]
    if not vals:
        return None
    top = Counter(vals).most_common(1)[0][0]
    return _OP_NAMES.get(top, top.lower())


def _finding(kind: str, ranks: list[int], group: str, seq: int | None, op: str | None,
             category: str, confidence: str, ev: dict[str, Any]) -> StallFinding:
    return StallFinding(kind=kind, ranks=ranks, process_group=group, seq_id=seq,  # type: ignore[arg-type]
                        op=op, source="logs", confidence=confidence,  # type: ignore[arg-type]
                        evidence={**ev, "category": category},
                        remediation=list(CATEGORY_REMEDIATION[category]))


def _timeline(events: list[lp.LogEvent]) -> list[dict[str, Any]]:
    """First occurrence per (rank, kind), time-ordered (untimed lines keep file order)."""
    seen: set[tuple[int | None, str]] = set()
    rows = []
    for e in sorted(events, key=lambda e: (e.ts_ns is None, e.ts_ns or 0, e.file, e.line)):
        if (e.rank, e.kind) in seen:
            continue
        seen.add((e.rank, e.kind))
        rows.append({"ts_ns": e.ts_ns, "rank": e.rank, "event": e.kind, "seq": e.seq,
                     "file": e.file, "line": e.line, "text": e.text[:200]})
    return rows
