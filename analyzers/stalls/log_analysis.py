"""Triage worker logs the way an experienced engineer does, as code.

The procedure, in the order applied (docs/stalls.md has an example of each):

1. find the earliest failure of its own on ANY rank (OOM, CUDA/NCCL error, exception, signal)
   and order it against the first watchdog timeout: if it comes first it is the root cause
   (``rank_failure``) and every timeout is its consequence (``consequence_of``);
2. read what PyTorch already concluded (desync report, DETAIL fingerprints);
3. per process group (one label per group, whatever the PyTorch version's spelling), build the
   state of EVERY rank, not a sample — initiator vs observer, enqueued vs completed, the
   timed-out SeqNum/op/size — and split the ranks into a minority and a majority:


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
  is blamed (``undecided``), and category ``fabric`` only when the whole world is known to be
  in the collective; otherwise ``unknown`` with what to collect next;

4. every finding keeps the raw lines it stands on (re-verify against them).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import (
    log_cut_traceback,
    log_elastic,
    log_ncclwarn,
    log_pg_error,
    log_scanners,
)
from stormotel.analyzers.stalls import log_verdicts as lv
from stormotel.analyzers.stalls import log_witness as lw
from stormotel.analyzers.stalls import logs_parser as lp
from stormotel.analyzers.stalls.log_world import (
    DEFAULT_GROUP,
    UNTAGGED_GROUP,
    WATCHDOG_KINDS,
    World,
    normalise_groups,
    outside_world_note,
    world_from_evidence,
    world_note,
)
from stormotel.analyzers.stalls.paste import notes as paste_notes
from stormotel.analyzers.stalls.vote import minority_vote

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
    "several_groups": [
        "The watchdog lines carry no process-group tag and one rank timed out at several "
        "SeqNums, so they come from several groups and cannot be compared across ranks: "
        "use PyTorch >= 2.3 (tagged lines) or Flight Recorder dumps.",
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
    seqs: set[int] = field(default_factory=set)  #: every timed-out SeqNum this rank logged
    torn_down: bool = False  #: its watchdog fired and took the process down

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
    events = normalise_groups(_attribute(parsed.events, notes), notes)
    seen = parsed.ranks_seen | {e.rank for e in events if e.rank is not None}
    for e in events:  # ranks PyTorch itself names in desync reports and fingerprints
        if e.kind in (lp.DESYNC_REPORT, lp.WITNESS) and e.detail:
            seen.update(int(r) for r in e.detail["culprits"])
        elif e.kind == lp.FINGERPRINT and e.detail:
            seen.add(int(e.detail["of_rank"]))
    world = world_from_evidence(events, seen, world_size)
    notes.append(world_note(world.size, world.source))
    outside: StallFinding | None = None
    if world.beyond:
        outside = _outside_world(world)
        notes.append(outside_world_note(world))
        parsed.skipped["rank_outside_world"] += len(world.beyond)
        beyond = set(world.beyond)
        events = [e for e in events if e.rank is None or e.rank not in beyond]
        seen -= beyond
    by_group: dict[str, list[lp.LogEvent]] = defaultdict(list)
    rank_hints: dict[int, Counter[str]] = defaultdict(Counter)
    for e in events:
        if e.rank is not None and e.kind in (lp.OOM, lp.DATA_LOADING, lp.FABRIC,
                                             lp.HEARTBEAT, lp.TEARDOWN, lp.EXCEPTION):
            rank_hints[e.rank][e.kind] += 1
        if e.kind in WATCHDOG_KINDS:
            by_group[e.group or DEFAULT_GROUP].append(e)
    timeline = _timeline(events)
    states: dict[str, list[RankLogState]] = {}
    watchdog: list[StallFinding] = []
    interleaved = any(len(rs) > 1 for rs in parsed.ranks_by_file.values())
    # printed the watchdog timeout at the same ProcessGroupNCCL.cpp:N, line unread: never "silent"
    cut_waiters = log_pg_error.timeout_line_unread(events, lp.TIMEOUT)
    known = world.size if world.explicit else None
    for group, evs in sorted(by_group.items()):
        table = _state_table(evs, rank_hints)
        states[group] = sorted(table.values(), key=lambda s: s.rank)
        finding = _triage(group, table, world, seen, rank_hints, timeline, cut_waiters)
        if finding is not None:
            watchdog.append(finding)
    waits = [e for e in events if e.kind in (lp.TIMEOUT, lp.COUNTERS)]
    first_timeout = min((e.ts_ns for e in waits if e.ts_ns is not None), default=None)
    timed_out = {e.rank for e in waits if e.rank is not None}
    events = events + log_ncclwarn.own_failures(events, known, lp.RANK_ERROR)
    own_errors, same_everywhere = lw.every_rank_failed(events, seen)
    failures = log_cut_traceback.cap_unfinished(
        lv.rank_failure_findings(own_errors, first_timeout, timed_out), events, timed_out)
    concluded = lv.desync_findings(events) + lw.witness_findings(events) + \
        lv.fingerprint_findings(events, CATEGORY_REMEDIATION["mismatched_collective"]) + \
        [f for kind in log_scanners.KINDS if kind.findings is not None and not kind.fallback
         for f in kind.findings(events, known)] + \
        lw.coll_findings(events, interleaved, known) + lw.detail_findings(events) + \
        log_elastic.abort_split_findings(events)
    fallback = same_everywhere + lw.fallback_findings(events, known, world.size)
    if not (failures or concluded or watchdog or fallback):
        fallback = lw.unexplained_findings(events) + [
            f for kind in log_scanners.KINDS if kind.findings is not None and kind.fallback
            for f in kind.findings(events, known)]
    if outside is not None:
        fallback = [*fallback, outside]
    findings = _link(failures, concluded, watchdog, fallback)
    for f in findings:
        f.evidence.setdefault("world_size", world.size)
        f.evidence["world_size_source"] = world.source
        if outside is not None and f.confidence == "high":
            f.confidence = "medium"  # the input contradicts itself: never high
    for reason, n in parsed.skipped.items():
        notes.append(f"skipped: {n} × {reason}")
    if parsed.joined_wrapped:
        notes.append(f"glued {parsed.joined_wrapped} hard-wrapped line continuation(s)")
    if parsed.split_fused:
        notes.append(f"split {parsed.split_fused} line(s) at an embedded [rankN]: prefix "
                     "(launcher prefixes, progress bars, interleaved ranks)")
    notes.extend(paste_notes(parsed.normalised))
    roots = [f for f in findings if f.consequence_of is None]
    category = roots[0].evidence.get("category") if roots else None
    return LogAnalysis(findings, world.size, states, category, timeline, notes)


def _outside_world(world: World) -> StallFinding:
    """The input names ranks its own stated world does not have: said as a finding."""
    return StallFinding(
        kind="undecided", ranks=[], process_group=None, seq_id=None, op=None, source="logs",
        confidence="low",
        evidence={"category": "input", "reason": "ranks_outside_world",
                  "ranks_outside_world": list(world.beyond[:100]),
                  "world_size": world.size, "world_size_source": world.source},
        remediation=["Give only this job's logs (one run id), or the right --world-size: "
                     f"rank(s) {', '.join(map(str, world.beyond[:10]))} cannot be ranks of a "
                     f"world of {world.size}."])


def _link(failures: list[StallFinding], concluded: list[StallFinding],
          watchdog: list[StallFinding], fallback: list[StallFinding] | None = None
          ) -> list[StallFinding]:
    """Order roots first and point every explained finding at the root that explains it.

    ``fallback`` findings (stall evidence that names nobody) are roots only when nothing else
    is; otherwise they are listed as consequences of the first root."""
    parent: dict[int, StallFinding] = {}  # id(finding) -> the finding that explains it
    # an undecided conclusion never leads a decided one: decided ones go first
    concluded = sorted(concluded, key=lambda f: f.kind == "undecided")
    root_failure = next((f for f in failures if f.evidence["precedes_timeouts"]), None)
    failing = set(root_failure.ranks) if root_failure else set()
    for f in failures:
        if f is root_failure or root_failure is None:
            continue
        first, lead = f.evidence["first_error_ns"], root_failure.evidence["first_error_ns"]
        if f.evidence["precedes_timeouts"] and (first is None or lead is None or first <= lead):
            continue  # another kind of failure at the same time (or untimed): a root as well
        parent[id(f)] = root_failure
    head = concluded[0] if concluded else None
    for f in concluded:
        if root_failure is not None and (set(f.ranks) <= failing or not f.ranks):
            parent[id(f)] = root_failure
    for f in watchdog:
        explains = root_failure if root_failure is not None else head
        if explains is None:
            continue
        culprits = set(explains.ranks)
        silent = set(f.evidence.get("never_entered", [])) | set(f.evidence.get(
            "absent_from_watchdog", []))
        if f.kind == "undecided" or set(f.ranks) <= culprits or (set(f.ranks) <= silent
                                                                  and culprits & silent):
            parent[id(f)] = explains
    for f in failures:
        if f.evidence["precedes_timeouts"] is False and id(f) not in parent and watchdog:
            parent[id(f)] = watchdog[0]
    everything = [*failures, *concluded, *watchdog]
    first_root = next((f for f in everything if id(f) not in parent), None)
    for f in fallback or []:
        if first_root is not None:
            parent[id(f)] = first_root
        everything.append(f)
    roots = [f for f in everything if id(f) not in parent]
    ordered = [f for f in roots if f.kind != "undecided"] + \
        [f for f in roots if f.kind == "undecided"]
    ordered += [f for f in everything if id(f) in parent]
    index = {id(f): i for i, f in enumerate(ordered)}
    out = []
    for f in ordered:
        p = parent.get(id(f))
        out.append(f if p is None or id(p) not in index else
                   StallFinding(**{**f.__dict__, "consequence_of": index[id(p)]}))
    return out


def _attribute(events: list[lp.LogEvent], notes: list[str]) -> list[lp.LogEvent]:
    """Fill in the global rank from the group rank where the group can only be the default."""
    out = []
    guessed = 0
    for e in events:
        if e.rank is None and e.group_rank is not None and (
                e.group is None or e.group in ("0", "id:0") or e.group.startswith(("0:", "id:0("))):
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
            if st.seq is not None and e.seq != st.seq:
                st.seqs.add(st.seq)
            st.seq, st.op, st.numel_in, st.numel_out = e.seq, e.op, e.numel_in, e.numel_out
            if e.seq is not None:
                st.seqs.add(e.seq)
            st.role = "initiator"
        elif e.kind == lp.COUNTERS:
            st.enqueued, st.completed = e.enqueued, e.completed
            if st.seq is None and e.seq is not None:
                st.seq = e.seq
        elif e.kind == lp.FIRST_SIGNAL:
            st.role = "initiator"
        elif e.kind == lp.TEARDOWN:
            st.torn_down = True
        elif e.kind == lp.OBSERVED_SIGNAL and st.role == "silent":
            st.role = "observer"
    return table


def _vote(values: dict[int, Any]) -> list[int] | None:
    """The minority: ranks whose value differs from a strict majority (None on a tie)."""
    vote = minority_vote(values)
    return None if vote is None else vote[0]


#: ops whose per-rank sizes legitimately differ (roots, uneven all-to-all, point-to-point)
_UNEVEN_OPS = {"ALLTOALL", "ALLTOALL_BASE", "GATHER", "SCATTER", "SEND", "RECV", "COALESCED",
               "ALLTOALLV"}


def _confidence(minority: int, majority: int, spoke: int, world: World) -> str:
    """How much of the world spoke, and how lopsided the split is.

    Never above low while the ranks not seen (at least ``world.size - spoke``: the world may be
    a lower bound) could outvote the majority that spoke: with 3 of 8 ranks shown, 2 against 1
    is no majority of the job (fresh4's PFT-SR#13 named the one at medium)."""
    unseen = max(0, world.size - spoke)
    if majority <= minority + unseen:
        return "low"
    whole = world.explicit and spoke >= world.size
    if minority * 2 <= majority and (whole or spoke >= 4):
        return "high" if minority == 1 else "medium"
    return "medium" if minority < majority else "low"


@dataclass
class _Verdict:
    """What every finding of one group's triage shares (its context and evidence)."""

    group: str
    common_seq: int | None
    op: str | None
    ev: dict[str, Any]

    def found(self, kind: str, ranks: list[int], category: str, confidence: str, reason: str,
              rule: str = "", pattern: str = "torch.nccl.watchdog_timeout",
              **more: Any) -> StallFinding:
        return _finding(kind, ranks, self.group, self.common_seq, self.op, category, confidence,
                        {**self.ev, "reason": reason, "pattern": pattern, "rule": rule, **more})


def _triage(group: str, table: dict[int, RankLogState], world: World, seen: set[int],
            hints: dict[int, Counter[str]], timeline: list[dict[str, Any]],
            cut_waiters: frozenset[int] | set[int] = frozenset()) -> StallFinding | None:
    waiting = {r: s for r, s in table.items() if s.pending or s.op is not None
               or (s.torn_down and not s.idle and s.role != "observer")}
    if not waiting:
        return None
    is_default = group == DEFAULT_GROUP
    members = set(table)
    if is_default:
        members |= set(range(world.size)) if world.explicit else set(seen)
    stuck_seq = Counter(s.seq for s in waiting.values() if s.seq is not None).most_common(1)
    common_seq = stuck_seq[0][0] if stuck_seq else None
    never_entered = sorted(r for r, s in table.items() if r not in waiting and (
        (s.idle and (common_seq is None or (s.completed or 0) < common_seq))
        or (s.role == "observer" and s.enqueued is None)))
    silent = sorted((members & seen) - set(table))  # logged something, but no watchdog line
    # ... unless its line at the watchdog-timeout statement's own ProcessGroupNCCL.cpp:N is in
    # the evidence, cut before its message (fresh5's accelerate#2375; log_pg_error): it printed
    # the watchdog timeout too. A line at any other call site proves nothing: still silent
    unread = [r for r in silent if r in cut_waiters]
    silent = [r for r in silent if r not in cut_waiters]
    unseen = sorted(set(range(world.size)) - seen) if is_default else []
    op_values = {r: s.op for r, s in waiting.items()}
    ev: dict[str, Any] = {
        "state_table": [s.as_dict() for s in sorted(table.values(), key=lambda s: s.rank)],
        "initiators": sorted(r for r, s in table.items() if s.role == "initiator"),
        "observers": sorted(r for r, s in table.items() if s.role == "observer"),
        "never_entered": never_entered, "absent_from_watchdog": silent,
        **({"watchdog_timeout_line_unread": unread} if unread else {}),
        "unseen_ranks": unseen, "world_size": world.size,
        "spoke": {"ranks": len(table), "of": world.size if world.explicit else None},
        "timeline": timeline[:40]}
    v = _Verdict(group, common_seq, _majority(op_values), ev)
    # 0. untagged lines from several groups cannot be compared across ranks
    if any(len(s.seqs) > 1 for s in table.values()):
        return v.found("undecided", [], "several_groups", "low",
                       "one rank timed out at several SeqNums"
                       + (" in untagged lines" if group == UNTAGGED_GROUP else "")
                       + ": they come from several process groups and cannot be compared "
                       "across ranks", rule="several_groups")
    # 1. never entered vs waiting (enqueued == completed below the stuck SeqNum, observers)
    if never_entered:
        return v.found("straggler", never_entered, _category(never_entered, hints),
                       _confidence(len(never_entered), len(waiting), len(table), world),
                       f"rank(s) {never_entered} never entered the collective (last enqueued "
                       f"== last completed below SeqNum {common_seq}, or only observed the dump "
                       f"signal) while {len(waiting)} rank(s) wait in it",
                       rule="never_entered", pattern="torch.nccl.timeout_counters")
    return _mismatch(v, waiting, table, world) or _unaccounted(
        v, waiting, silent, members, unseen, hints, world, is_default)


def _mismatch(v: _Verdict, waiting: dict[int, RankLogState], table: dict[int, RankLogState],
              world: World) -> StallFinding | None:
    """Rules 2 and 3: the waiting ranks disagree on the SeqNum, or on the op or size at it."""
    common_seq = v.common_seq
    # 2. the timed-out SeqNums differ. The watchdog walks a group's work list in enqueue order
    # (erasing completed works) and every work's clock starts at enqueue, so the SeqNum it
    # reports is the rank's OLDEST work not completed: every lower SeqNum completed on that rank
    # (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp: workCleanupLoop / watchdogHandler over
    # workMetaList_, WorkNCCL::checkTimeout from workStartTime_; 1.13 → main). Ranks behind (lower
    # SeqNum) are stuck in a collective the others completed — named while a minority. Ranks
    # ahead completed what the others wait in (a broadcast root, a reduce's sender, or a
    # different op at that SeqNum can finish alone); they wait in a later collective for the
    # ranks behind, and the split cannot say why those are stuck: never named.
    seqs = {r: s.seq for r, s in waiting.items() if s.seq is not None}
    if len(set(seqs.values())) > 1:
        culprits = _vote(seqs)
        reason = f"timed-out SeqNum differs across ranks: {_compact(seqs)}"
        if not culprits or len(seqs) < 3:
            return v.found("undecided", [], "collective_count_split", "low",
                           reason + " — no majority; collect every rank's watchdog lines",
                           rule="seq_split", suspects=sorted(seqs))
        top = Counter(seqs.values()).most_common(1)[0][0]
        behind = [r for r in culprits if seqs[r] < top]
        ahead = [r for r in culprits if seqs[r] > top]
        if not behind:
            return v.found("undecided", [], "collective_count_split", "low",
                           reason + f" — rank(s) {_compact_list(ahead)} are AHEAD: every work "
                           f"below their SeqNum completed on them, including SeqNum {top} the "
                           "others wait in; they wait for the others, and the others' wait is not "
                           "explained by them (a broadcast root or a different op at that SeqNum "
                           "completes alone) — collect Flight Recorder dumps of every rank (the op "
                           f"each ran at SeqNum {top}) and the logs of ranks not shown",
                           rule="seq_split_ahead", suspects=sorted(seqs),
                           ahead_ranks=ahead, collect_next=sorted(seqs))
        majority = len(seqs) - len(culprits)
        return v.found("count_split", behind, "collective_count_split",
                       _confidence(len(behind), majority, len(table), world),
                       reason + f" — rank(s) {_compact_list(behind)} are stuck in a collective "
                       "the others completed", rule="seq_split", ahead_ranks=ahead)
    # 3. same SeqNum, different op or size
    same = {r: s for r, s in waiting.items() if s.seq == common_seq and s.op is not None}
    # sizes compare only where both were read: a line cut before its NumelIn/NumelOut (a
    # paste cut at the terminal's width, open-r1#160) is an unknown size, not a different one
    sized = {r: s for r, s in same.items() if s.op not in _UNEVEN_OPS
             and s.numel_in is not None and s.numel_out is not None}
    for kind, values in (("op_type_mismatch", {r: s.op for r, s in same.items()}),
                         ("size_mismatch", {r: (s.numel_in, s.numel_out)
                                            for r, s in sized.items()})):
        if len(set(values.values())) > 1:
            culprits = _vote(values) if len(values) > 2 else None
            words = kind.replace("_", " ")
            if not culprits:
                return v.found("undecided", [], "mismatched_collective", "low",
                               f"{words} at SeqNum {common_seq} with no majority "
                               f"({_compact(values)}); collect the other ranks' lines",
                               rule=kind, suspects=sorted(values),
                               per_rank={str(r): values[r] for r in sorted(values)})
            return v.found(kind, culprits, "mismatched_collective",
                           _confidence(len(culprits), len(values) - len(culprits), len(table),
                                       world),
                           f"{words} at SeqNum {common_seq}: {_compact(values)}",
                           rule=kind, per_rank={str(r): values[r] for r in sorted(values)})
    return None


def _unaccounted(v: _Verdict, waiting: dict[int, RankLogState], silent: list[int],
                 members: set[int], unseen: list[int], hints: dict[int, Counter[str]],
                 world: World, is_default: bool) -> StallFinding:
    """Rules 4 and 5: ranks that logged no watchdog line, or everybody waiting together."""
    # 4. members of the group that logged no watchdog line at all
    # (only when the ranks seen waiting outnumber every rank not accounted for: one timeout
    # and one quiet rank out of eight says nothing — arctictraining#219, skyrl#757)
    if silent and len(silent) < len(members) and len(waiting) > len(silent) + len(unseen):
        culprits = silent
        return v.found("straggler", culprits, _category(culprits, hints),
                       "medium" if len(culprits) * 2 <= len(waiting) else "low",
                       f"rank(s) {culprits} logged other lines but no watchdog line while "
                       f"{len(waiting)} rank(s) timed out", rule="silent_rank")
    # a rank of a known world that printed nothing at all is named as a suspect, not a
    # culprit: a pasted excerpt is cut anywhere (vllm#8978: three ranks at SeqNum 1, the
    # fourth simply not in the paste)
    # 5. everybody waiting in the same collective
    whole = world.explicit and set(range(world.size)) <= set(waiting) if is_default else False
    fabric_logged = any(h[lp.FABRIC] for h in hints.values())
    if whole:
        return v.found("undecided", [], "fabric", "medium" if fabric_logged else "low",
                       "every rank of the world entered the collective and none completed"
                       + (" (fabric errors logged)" if fabric_logged else ""),
                       rule="all_waiting")
    missing = unseen or None
    return v.found("undecided", [], "unknown", "low",
                   f"{len(waiting)} rank(s) wait in the same collective; the logs do not show "
                   "the whole group" + (f" (no lines at all from ranks {_compact_list(unseen)})"
                                        if unseen else "")
                   + " — collect every rank's log and Flight Recorder dumps",
                   rule="all_waiting", collect_next=missing, suspects=unseen[:64])


def _category(ranks: list[int], hints: dict[int, Counter[str]]) -> str:
    for kind, category in _HINT_CATEGORY:
        if any(hints.get(r, Counter())[kind] for r in ranks):
            return category
    return "straggler_outside_nccl"


def _compact(values: dict[int, Any]) -> str:
    groups: dict[Any, list[int]] = defaultdict(list)
    for r, v in sorted(values.items()):
        groups[v].append(r)
    return "; ".join(f"{_compact_list(rs)}: {v}" for v, rs in groups.items())


def _compact_list(ranks: list[int]) -> str:
    if len(ranks) <= 8:
        return str(ranks)
    return f"[{ranks[0]}..{ranks[-1]}] ({len(ranks)} ranks)"


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
