"""Match collectives across ranks per process group and sequence id; name the culprit.

For every group the analysis (1) compares, sequence id by sequence id, what each rank issued —
op type, sizes under each collective's numel rule, dtypes — and stops at the first mismatch,
like torch's analyzer, because pairing after a desync is guesswork; (2) compares how far each
rank got (last sequence id issued, ``pg_status`` counters) to find the straggler or a split in
the number of collectives issued; (3) checks that every member took part at all.

Unlike torch's analyzer, no rank is assumed innocent: culprits are the minority by a majority
vote over all visible ranks (rank 0 included), and a tie is ``undecided`` rather than a guess.
Symptoms that follow from an earlier finding in the same group (ranks that hang one collective
later because of a size mismatch) are reported with ``consequence_of`` pointing at it.
Missing dumps are named, and the ranks present still decide what they can.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from stormotel.analyzers.report import Confidence, StallFinding, StallKind
from stormotel.analyzers.stalls.calibration import PATTERN_KEY
from stormotel.analyzers.stalls.fr_groups import GroupView, rebuild_groups
from stormotel.analyzers.stalls.fr_outside import outside_finding
from stormotel.analyzers.stalls.fr_p2p import p2p_findings
from stormotel.analyzers.stalls.fr_types import DumpSet, FrEntry, group_label
from stormotel.analyzers.stalls.fr_window import (
    CLOCK_SLACK_NS,
    Windows,
    build_windows,
    latest_created,
    outside_communication,
)
from stormotel.analyzers.stalls.vote import minority_vote

#: profiling names that are the same collective under another API name
_OP_ALIASES = {
    "_allgather_base": "all_gather", "_all_gather_base": "all_gather",
    "all_gather_into_tensor": "all_gather", "all_gather_single": "all_gather",
    "_reduce_scatter_base": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_single": "reduce_scatter", "allreduce": "all_reduce",
    "allgather": "all_gather", "reducescatter": "reduce_scatter", "_broadcast_oop": "broadcast",
    "_reduce_oop": "reduce", "all_to_all_single": "all_to_all",
}
_GATHER_LIKE = {"all_gather", "all_gather_into_tensor_coalesced", "ALLGATHER_coalesced"}
_SCATTER_LIKE = {"reduce_scatter", "reduce_scatter_tensor_coalesced", "REDUCE_SCATTER_coalesced"}
_SAME_IN_OUT = {"all_reduce", "allreduce_coalesced", "broadcast", "reduce"}

REMEDIATION: dict[str, list[str]] = {
    "straggler": [
        "Look at what the straggler was doing outside the collective library when the others "
        "timed out (data loading, host I/O, a Python exception swallowed by a rank-specific "
        "branch): its last collective completed and it never issued the next one.",
        "Check rank-dependent control flow around the collective (early exits, uneven "
        "dataloader lengths, `if rank == ...` branches).",
    ],
    "not_joined": [
        "Make every member of the process group issue the collective; a rank that never "
        "entered it blocks the whole group until the timeout.",
    ],
    "size_mismatch": [
        "Make the tensor shapes agree across ranks for this collective (uneven last batch, "
        "rank-dependent padding, a parameter that differs per rank); for all_gather the output "
        "must be input x group size, for reduce_scatter the input must be output x group size.",
        "Set TORCH_DISTRIBUTED_DEBUG=DETAIL in a reproduction to make the collective check "
        "shapes eagerly.",
    ],
    "op_type_mismatch": [
        "Ranks issued different collectives at the same sequence number: look for "
        "rank-dependent code paths that call a different collective (or skip one and call the "
        "next).",
    ],
    "dtype_mismatch": [
        "Cast to one dtype before the collective (mixed precision settings that differ per "
        "rank are the usual cause).",
    ],
    "count_split": [
        "Ranks issued different numbers of collectives on this group: compare the code paths "
        "per rank (conditional collectives, uneven iteration counts, a skipped barrier).",
    ],
    "silent": [
        "These ranks recorded nothing (empty dump: stuck holding the GIL, or killed while "
        "dumping) or left no dump at all: get their Python stacks (py-spy dump) and their logs "
        "(OOM, signals) — check the host for OOM kills first.",
    ],
    "window": [
        "These ranks' Flight Recorder rings no longer reach back to the moment the others "
        "entered the collective: collect dumps taken when the job hangs (not later), or raise "
        "TORCH_NCCL_TRACE_BUFFER_SIZE (TORCH_FR_BUFFER_SIZE) so the ring holds more than one "
        "iteration's collectives; a dump of active entries only (only_active) shows nothing "
        "that completed: take a full dump.",
    ],
    "undecided": [
        "The evidence does not single out one rank: collect the missing dumps / logs, or "
        "re-run with TORCH_DISTRIBUTED_DEBUG=DETAIL.",
    ],
}


@dataclass
class RankState:
    """Where one rank stands in one group (the per-rank state table)."""

    rank: int
    last_seq: int
    last_enqueued: int | None
    last_completed: int | None
    pending: bool
    last_op: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "last_seq": self.last_seq,
                "last_enqueued": self.last_enqueued, "last_completed": self.last_completed,
                "pending": self.pending, "last_op": self.last_op}


@dataclass
class FrAnalysis:
    """Findings plus what they were derived from (state tables, unseen ranks, notes)."""

    findings: list[StallFinding]
    world_size: int
    seen_ranks: list[int]
    missing_ranks: list[int]
    states: dict[str, list[RankState]] = field(default_factory=dict)
    first_divergence: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def analyze_dumps(ds: DumpSet) -> FrAnalysis:
    groups, notes = rebuild_groups(ds)
    notes = [*ds.notes, *notes]
    result = FrAnalysis([], ds.world_size, ds.ranks, list(ds.missing_ranks), notes=notes)
    windows = build_windows(ds, groups)
    outside = outside_communication(ds, groups, windows)
    folded: set[int] = set()
    if outside_finding(ds, windows, outside) is not None:
        folded = {o.rank for o in outside}
    if windows.buffer_size:
        notes.append(f"ring buffers dropped older entries (ring size {windows.buffer_size} "
                     "inferred from the dumps): ranks are compared only where their windows "
                     "overlap")
    first: tuple[int, dict[str, Any]] | None = None
    for g in groups:
        states = _states(g)
        result.states[g.label] = states
        group_findings = [f for f in _analyze_group(g, states, ds, windows)
                          if not (folded and f.evidence.get("folds_into_world")
                                  and set(f.evidence.get("silent", f.ranks)) <= folded)]
        for f in group_findings:
            f.evidence.pop("folds_into_world", None)
            f.evidence.pop("silent", None)
        p2p, p2p_notes = p2p_findings(g, set(ds.missing_ranks) | set(ds.empty_ranks),
                                       set(ds.missing_ranks))
        notes.extend(p2p_notes)
        for f in p2p:
            _weigh_waiting_peers(f, windows)
        for f in p2p:  # the same silent rank already named for this group: not a new culprit
            same = next((i for i, g_f in enumerate(group_findings)
                         if f.ranks and set(f.ranks) <= set(g_f.ranks)), None)
            f.consequence_of = same
            group_findings.append(f)
        base = len(result.findings)
        for f in group_findings:
            if f.consequence_of is not None:
                f.consequence_of += base
        result.findings.extend(group_findings)
    # a rank idle outside communication that a group already names is better told there
    # (which collective, or which send/recv, the others wait in)
    named = {r for f in result.findings if f.consequence_of is None
             and f.kind in ("straggler", "not_joined") for r in f.ranks}
    world = outside_finding(ds, windows, [o for o in outside if not (
        o.category == "outside_communication" and o.rank in named)])
    if world is not None:
        _add_world(result.findings, world)
    _link_across_groups(result.findings, ds, windows)
    result.findings = _roots_named_first(result.findings)
    for f in result.findings:
        f.evidence.setdefault(PATTERN_KEY, _pattern(f))
        t = f.evidence.get("time_created_ns")
        if f.consequence_of is None and isinstance(t, int) and (first is None or t < first[0]):
            first = (t, {"process_group": f.process_group, "seq_id": f.seq_id, "kind": f.kind,
                         "ranks": f.ranks})
    if first is not None:
        result.first_divergence = first[1]
        for f in result.findings:
            if (f.consequence_of is None and f.seq_id == first[1]["seq_id"]
                    and f.process_group == first[1]["process_group"]):
                f.evidence["first_divergence"] = True
    return result


def _weigh_waiting_peers(f: StallFinding, windows: Windows) -> None:
    """A stage that never posted its send/recv while it waits in another collective may just
    not have reached it: that blame is weak (``low``) until what it waits for is known."""
    if f.kind != "straggler" or not f.ranks:
        return
    elsewhere = {}
    for r in f.ranks:
        w = windows.by_rank.get(r)
        b = w.blocked_on if w is not None else None
        if b is None or (b.is_p2p and group_label(b.group) == f.process_group):
            return
        elsewhere[str(r)] = f"{group_label(b.group)} seq {b.seq_id} {b.op}"
    f.confidence = "low"
    f.evidence["waits_elsewhere"] = elsewhere
    f.evidence["reason"] += (f"; but rank(s) {f.ranks} wait inside another collective "
                             f"({', '.join(elsewhere.values())}): they may not have reached "
                             "this send/recv")


_MISMATCH_KINDS = {"size_mismatch", "op_type_mismatch", "dtype_mismatch"}


def _add_world(findings: list[StallFinding], world: StallFinding) -> None:
    """Put the world-level finding first — after the roots with positive evidence of a
    mismatch, which a rank gone silent does not explain."""
    at = 0 if not any(f.kind in _MISMATCH_KINDS and f.consequence_of is None
                      for f in findings) else len(findings)
    for f in findings:
        if f.consequence_of is not None and f.consequence_of >= at:
            f.consequence_of += 1
    findings.insert(at, world)


def _roots_named_first(findings: list[StallFinding]) -> list[StallFinding]:
    """Roots that name ranks before roots that name none (``undecided``), and those before
    blames known to be weak (a stage that never posted a send/recv while it waits elsewhere),
    each in order; ``consequence_of`` re-based. The first root is the answer a reader takes
    away: better "undecided" than a rank that is itself only waiting."""
    def rank(f: StallFinding) -> int:
        return 2 if f.evidence.get("waits_elsewhere") else 0 if f.ranks else 1

    order = sorted((i for i, f in enumerate(findings) if f.consequence_of is None),
                   key=lambda i: rank(findings[i]))
    order += [i for i, f in enumerate(findings) if f.consequence_of is not None]
    if order == list(range(len(findings))):
        return findings
    new = {old: n for n, old in enumerate(order)}
    out = []
    for old in order:
        f = findings[old]
        if f.consequence_of is not None:
            f.consequence_of = new[f.consequence_of]
        out.append(f)
    return out


def _pattern(f: StallFinding) -> str:
    """The evidence pattern a finding stands on (``fr.<id>``; calibration caps it)."""
    ev = f.evidence
    if f.op == "send/recv":
        return "fr.p2p.cycle" if f.kind == "undecided" else "fr.p2p.unposted"
    if f.kind in _MISMATCH_KINDS:
        rule = "numel_rule" if ev.get("numel_rule") else f.kind.removesuffix("_mismatch")
        return f"fr.mismatch.{rule}"
    if f.kind == "not_joined":
        return "fr.not_joined.window_covers"
    if f.kind == "count_split":
        return "fr.progress.count_split"
    if f.kind == "straggler":
        if ev.get("category") in ("empty_dump", "no_dump"):
            return f"fr.group.silent.{ev['category']}"
        if ev.get("pair"):
            return "fr.progress.behind_pair"
        if ev.get("window_misses_moment"):
            return "fr.progress.behind_unwitnessed"
        return "fr.progress.behind"
    if ev.get("window_misses"):
        return "fr.not_joined.window_misses"
    if ev.get("mismatch"):
        return f"fr.undecided.{ev['mismatch']}"
    return "fr.undecided.unseen" if ev.get("suspects") else "fr.undecided"


#: findings that describe ranks waiting for someone (and so can be another finding's echo)
_WAITING_KINDS = {"straggler", "not_joined", "count_split", "undecided"}


def _ended_before(ranks: list[int], t_ns: int | None, windows: Windows) -> list[int]:
    """Those of ``ranks`` whose newest entry is older than ``t_ns`` (beyond clock slack)."""
    out = []
    for r in ranks:
        w = windows.by_rank.get(r)
        if w and w.newest_ns is not None and t_ns is not None \
                and w.newest_ns + CLOCK_SLACK_NS < t_ns:
            out.append(r)
    return out


def _link_across_groups(findings: list[StallFinding], ds: DumpSet, windows: Windows) -> None:
    """Across nested groups, keep the smallest set of root findings that explains every wait.

    A rank can be "behind" in group A only because it is stuck in group B: waiting there (its
    latest entry is B's stuck collective) or being B's culprit. Finding *i* explains finding
    *j* (another group) when every rank *j* blames is explained that way by *i*. Roots are
    picked greedily — the finding that explains the most others first (ties: the earlier
    collective, then the smaller culprit set) — and everything a root explains becomes its
    consequence, so one rank stalled in a tensor-parallel group is one root even when the
    data-parallel, pipeline and default groups all wait for it. Where completion is recorded,
    a rank blamed elsewhere that itself waits (its oldest pending entry) for the cause's
    culprits, directly or through other waiting ranks, is explained too — unless the culprits
    wait for it in turn (a cycle decides nothing).
    """
    latest = {r: max(d.entries, key=lambda e: e.record_id)
              for r, d in ds.dumps.items() if d.entries}
    open_ = [i for i, f in enumerate(findings) if f.consequence_of is None]
    explains: dict[int, list[int]] = {
        i: [j for j in open_ if j != i
            and _explains(findings[i], findings[j], latest, windows)]
        for i in open_ if findings[i].ranks}
    linked: set[int] = set()
    while True:
        candidates = [(len([j for j in js if j not in linked]), i) for i, js in explains.items()
                      if i not in linked]
        candidates = [(n, i) for n, i in candidates if n]
        if not candidates:
            return
        _, root = max(candidates, key=lambda c: (
            c[0], -(findings[c[1]].evidence.get("time_created_ns") or 0),
            -len(findings[c[1]].ranks)))
        for j in explains[root]:
            if j in linked or j == root:
                continue
            f = findings[j]
            f.consequence_of = root
            linked.add(j)
            if f.confidence == "high":
                f.confidence = "medium"
            f.evidence["secondary"] = (
                f"rank(s) {f.evidence.get('behind_ranks') or f.ranks} wait here because of "
                f"finding [{root}] in group {findings[root].process_group} "
                f"({findings[root].kind}, culprit(s) {findings[root].ranks}): a consequence, "
                "not a new culprit")
        explains.pop(root)
        linked.add(root)  # a root stays a root; it cannot be re-linked below another


def _explains(cause: StallFinding, effect: StallFinding, latest: dict[int, FrEntry],
              windows: Windows) -> bool:
    if effect.kind not in _WAITING_KINDS or effect.process_group == cause.process_group \
            or effect.process_group is None:  # the world-level finding is a root by itself
        return False
    blamed = effect.evidence.get("behind_ranks") or effect.ranks
    if effect.kind == "undecided" and not effect.evidence.get("behind_ranks"):
        return False  # a tie with nobody behind: nothing another group could explain
    if not blamed:
        return False
    for r in blamed:
        if r in cause.ranks:
            continue
        e = latest.get(r)
        if (e is not None and cause.process_group == group_label(e.group)
                and cause.seq_id == e.seq_id
                and r in cause.evidence.get("waiting_ranks", ())):
            continue
        if effect.kind != "not_joined" and _waits_for(r, cause, windows):
            continue
        return False
    return True


def _waits_for(rank: int, cause: StallFinding, windows: Windows) -> bool:
    """``rank`` waits for ``cause``'s culprits (through the wait-for relation) — and, unless
    the cause stands on positive evidence (a member proven never to have joined, or ranks
    stuck outside communication), not the reverse: in a cycle nobody is explained."""
    culprits = frozenset(cause.ranks)
    if not culprits or rank not in windows.waiting_on(culprits):
        return False
    if cause.kind == "not_joined" or cause.process_group is None:
        return True
    return rank not in windows.waited_for_by(culprits)


def _states(g: GroupView) -> list[RankState]:
    out = []
    for r in sorted(g.holders):
        ents = g.entries.get(r, [])
        st = g.status.get(r)
        last_seq = max([e.seq_id for e in ents] + ([st.last_enqueued] if st else [0]))
        last = ents[-1] if ents else None
        pending = bool(st and st.last_completed < st.last_enqueued) or bool(
            last and not last.retired and not last.completed)
        out.append(RankState(r, last_seq, st.last_enqueued if st else None,
                             st.last_completed if st else None, pending,
                             last.op if last else None))
    return out


def _analyze_group(g: GroupView, states: list[RankState], ds: DumpSet,
                   windows: Windows) -> list[StallFinding]:
    findings: list[StallFinding] = []
    unseen = sorted(g.expected & set(ds.missing_ranks))
    blank = sorted(g.expected & set(ds.empty_ranks))
    base_ev: dict[str, Any] = {"group_size": g.size, "unseen_ranks": unseen,
                               "rank_states": [s.as_dict() for s in states]}
    absent = sorted((g.expected - g.holders) - set(ds.missing_ranks) - set(ds.empty_ranks))
    entered = latest_created(g)
    proven = [r for r in absent if windows.covers(r, entered)
              and not windows.by_rank[r].blocked_before(entered)]
    misses = [r for r in absent if not windows.covers(r, entered)]
    blocked = [r for r in absent if r not in proven and r not in misses]
    if misses:
        base_ev["window_misses"] = misses
    if blocked:
        base_ev["blocked_elsewhere"] = blocked
    if not g.entries:
        # send/recv only: fr_p2p matches them by peer; a stage that has not reached its
        # send yet holds no entry either, so absence here is no evidence of not joining
        return findings
    mismatch = _first_mismatch(g)
    if mismatch is not None:
        mismatch.evidence = {**base_ev, **mismatch.evidence}
        findings.append(mismatch)
    split = _progress_split(g, states, base_ev, unseen, windows)
    if split is not None:
        if mismatch is not None and split.seq_id is not None and mismatch.seq_id is not None \
                and split.seq_id > mismatch.seq_id:
            split.consequence_of = 0
            split.confidence = "medium"
            split.evidence.pop("outside_collective", None)
            split.evidence["reason"] = split.evidence["reason"].split(";")[0]
            split.evidence["secondary"] = (
                f"ranks drifted apart after the {mismatch.kind} at seq {mismatch.seq_id}: this "
                "hang is its consequence, not a new culprit")
        findings.append(split)
    if proven:
        findings.append(_not_joined(g, proven, entered, base_ev, windows))
    silent = sorted(set(unseen) | set(blank))
    if not findings and silent and states:
        findings.append(_silent_finding(g, states, base_ev, unseen, blank))
        return findings
    waiting = [s.rank for s in states if s.pending]
    if not findings and misses and waiting:
        findings.append(StallFinding(
            kind="undecided", ranks=[], process_group=g.label, seq_id=None, op=None,
            source="flight_recorder", confidence="low",
            evidence={**base_ev, "waiting_ranks": waiting, "suspects": misses,
                      "entered_at_ns": entered,
                      "reason": f"rank(s) {misses} hold no entry for this group, but their "
                      "rings start after the others' newest entry on it: absence there "
                      "proves nothing"},
            remediation=list(REMEDIATION["window"])))
    return findings


def _silent_finding(g: GroupView, states: list[RankState], base_ev: dict[str, Any],
                    unseen: list[int], blank: list[int]) -> StallFinding:
    """Ranks without a dump (or with an empty one) in a group whose recorded ranks agree: the
    silent minority is what the group waits for; else undecided."""
    silent = sorted(set(unseen) | set(blank))
    top = max(s.last_seq for s in states)
    waiting = [s.rank for s in states if s.pending]
    spoke = len(g.expected) - len(silent)
    if len(silent) < spoke:
        # silent (empty or missing dump) vs recorded: every rank that recorded agrees,
        # so the silent minority is what the group waits for
        confidence: Confidence = ("medium" if not unseen and spoke >= 2 * len(silent)
                                  else "low")
        what = " and ".join(x for x in (
            f"empty dump(s) from {blank}" if blank else "",
            f"no dump from {unseen}" if unseen else "") if x)
        return StallFinding(
            kind="straggler", ranks=silent, process_group=g.label, seq_id=top + 1
            if waiting else top, op=None, source="flight_recorder", confidence=confidence,
            evidence={**base_ev, "waiting_ranks": waiting, "behind_ranks": silent,
                      "empty_dump_ranks": blank, "category": "empty_dump" if blank and
                      not unseen else "no_dump", "folds_into_world": True,
                      "spoke": {"ranks": spoke, "of": len(g.expected)},
                      "reason": f"{what}; the {spoke} rank(s) that recorded all agree up "
                      f"to seq {top}" + (f" and {len(waiting)} wait there" if waiting
                                         else "")},
            remediation=list(REMEDIATION["silent"]))
    return StallFinding(
        kind="undecided", ranks=[], process_group=g.label, seq_id=top, op=None,
        source="flight_recorder", confidence="low",
        evidence={**base_ev, "waiting_ranks": waiting, "suspects": unseen,
                  **({"folds_into_world": True, "silent": blank} if not unseen else {}),
                  "reason": f"every visible rank agrees up to seq {top}; whether the "
                  f"silent rank(s) {silent} joined it cannot be told from these dumps"},
        remediation=list(REMEDIATION["undecided"]))


def _not_joined(g: GroupView, ranks: list[int], entered: int | None, base_ev: dict[str, Any],
                windows: Windows) -> StallFinding:
    return StallFinding(
        kind="not_joined", ranks=ranks, process_group=g.label, seq_id=None, op=None,
        source="flight_recorder", confidence="high",
        evidence={**base_ev, "entered_at_ns": entered, "windows": windows.describe(ranks),
                  "reason": "these ranks' dumps hold no entry for this group while the other "
                  "members issued collectives on it, and their rings reach back to that moment "
                  "(nothing dropped, or an older entry held) while they were not waiting in "
                  "another collective"},
        remediation=list(REMEDIATION["not_joined"]))


def _op(e: FrEntry) -> str:
    return _OP_ALIASES.get(e.op, e.op)


def _size_key(e: FrEntry) -> tuple[Any, ...]:
    op = _op(e)
    if op == "gather":
        return (e.input_sizes,)
    if op == "scatter":
        return (e.output_sizes,)
    if op == "all_to_all":
        return ()
    return (e.input_sizes, e.output_sizes)


def _dtype_key(e: FrEntry) -> tuple[frozenset[str], frozenset[str]]:
    op = _op(e)
    ins = frozenset() if op in ("scatter", "broadcast") or not e.input_sizes else frozenset(
        e.input_dtypes)
    outs = frozenset() if op == "gather" or not e.output_sizes else frozenset(e.output_dtypes)
    return ins, outs


def numel_violation(e: FrEntry, group_size: int) -> str | None:
    """The collective's own size rule, checked on one rank (None when it holds)."""
    op = _op(e)
    if not e.input_sizes or not e.output_sizes:
        return None
    if op in _GATHER_LIKE and e.output_numel != e.input_numel * group_size:
        return (f"output numel {e.output_numel} != input numel {e.input_numel} x group size "
                f"{group_size}")
    if op in _SCATTER_LIKE and e.input_numel != e.output_numel * group_size:
        return (f"input numel {e.input_numel} != output numel {e.output_numel} x group size "
                f"{group_size}")
    if op in _SAME_IN_OUT and e.input_sizes != e.output_sizes:
        return f"input sizes {list(e.input_sizes)} != output sizes {list(e.output_sizes)}"
    return None


def _first_mismatch(g: GroupView) -> StallFinding | None:
    if not g.entries:
        return None
    # ring buffers may start at different points: only compare what every rank still holds
    lo = max((lst[0].seq_id for lst in g.entries.values() if lst), default=0)
    by_seq: dict[int, dict[int, FrEntry]] = {}
    for r, lst in g.entries.items():
        for e in lst:
            if e.seq_id >= lo:
                by_seq.setdefault(e.seq_id, {})[r] = e
    for seq in sorted(by_seq):
        at = by_seq[seq]
        found = _compare(g, seq, at)
        if found is not None:
            return found
    return None


def _compare(g: GroupView, seq: int, at: dict[int, FrEntry]) -> StallFinding | None:
    checks: list[tuple[StallKind, dict[int, Any]]] = [
        ("op_type_mismatch", {r: _op(e) for r, e in at.items()}),
        ("size_mismatch", {r: _size_key(e) for r, e in at.items()}),
        ("size_mismatch", {r: numel_violation(e, g.size) for r, e in at.items()}),
        ("dtype_mismatch", {r: _dtype_key(e) for r, e in at.items()}),
    ]
    for kind, values in checks:
        if len(set(values.values())) <= 1:
            continue
        vote = minority_vote(values) if len(values) > 2 else None
        per_rank = {str(r): at[r].describe() for r in sorted(at)}
        created = min(e.time_created_ns for e in at.values() if e.time_created_ns) \
            if any(e.time_created_ns for e in at.values()) else None
        ev: dict[str, Any] = {"per_rank": per_rank, "time_created_ns": created}
        rule = {str(r): v for r, v in values.items() if isinstance(v, str)}
        if rule:
            ev["numel_rule"] = rule
        if vote is None:
            return StallFinding(
                kind="undecided", ranks=[], process_group=g.label, seq_id=seq,
                op=Counter(_op(e) for e in at.values()).most_common(1)[0][0],
                source="flight_recorder", confidence="low",
                evidence={**ev, "mismatch": kind,
                          "reason": f"{kind} at seq {seq} with no majority to compare against"},
                remediation=list(REMEDIATION[kind]) + REMEDIATION["undecided"])
        culprits, _ = vote
        majority_op = next(_op(at[r]) for r in at if r not in culprits)
        missing_ranks = sorted(g.expected - set(at))
        ev["reason"] = (f"rank(s) {culprits} differ from the {len(at) - len(culprits)} other "
                        f"rank(s) at seq {seq} ({kind.replace('_', ' ')})")
        if missing_ranks:
            ev["not_compared"] = missing_ranks
        confidence: Confidence = "high" if len(culprits) == 1 and len(at) >= 3 else "medium"
        return StallFinding(kind=kind, ranks=culprits, process_group=g.label, seq_id=seq,
                            op=majority_op, source="flight_recorder", confidence=confidence,
                            evidence=ev, remediation=list(REMEDIATION[kind]))
    return None


def _progress_split(g: GroupView, states: list[RankState], base_ev: dict[str, Any],
                    unseen: list[int], windows: Windows) -> StallFinding | None:
    last = {s.rank: s.last_seq for s in states if s.rank in g.entries or s.last_enqueued}
    if len(set(last.values())) <= 1:
        return None
    low = min(last.values())
    behind = sorted(r for r, v in last.items() if v == low)
    ahead = sorted(r for r in last if r not in behind)
    stuck_seq = low + 1
    waiting_at = {r: e for r in ahead for e in g.entries.get(r, []) if e.seq_id == stuck_seq}
    op = Counter(_op(e) for e in waiting_at.values()).most_common(1)[0][0] \
        if waiting_at else None
    created = min((e.time_created_ns for e in waiting_at.values() if e.time_created_ns),
                  default=None)
    ev: dict[str, Any] = {**base_ev, "last_seq": {str(r): v for r, v in sorted(last.items())},
                          "waiting_ranks": ahead, "behind_ranks": behind,
                          "time_created_ns": created}
    states_by_rank = {s.rank: s for s in states}
    pair = len(behind) == len(ahead) == 1
    if len(behind) < len(ahead) or pair:
        idle = [r for r in behind if not states_by_rank[r].pending]
        ev["reason"] = (f"rank(s) {behind} stopped at seq {low} while rank(s) {ahead} went on "
                        f"to seq {stuck_seq}" + (f" ({op})" if op else ""))
        if idle:
            ev["outside_collective"] = idle
            ev["reason"] += ("; nothing pending on the straggler: it was stuck outside the "
                             "collective library")
        spread = len(set(last[r] for r in ahead))
        confidence: Confidence = ("high" if len(behind) == 1 and spread == 1 and not unseen
                                  else "medium")
        early = _ended_before(behind, created, windows)
        if early:  # the dump may predate the moment: nothing says it would not have entered
            ev["window_misses_moment"] = early
            ev["reason"] += (f"; rank(s) {early}' newest entry is older than the moment the "
                             f"others entered seq {stuck_seq}: a dump taken later would show "
                             "whether it entered")
            confidence = "medium"
        if pair:  # behind "everyone else" is one rank: no majority to confirm it
            confidence = "medium"
            ev["pair"] = (f"a two-rank group: rank {ahead[0]} may instead have issued an extra "
                          "collective; other groups' findings decide (see consequence_of)")
        return StallFinding(kind="straggler", ranks=behind, process_group=g.label,
                            seq_id=stuck_seq, op=op, source="flight_recorder",
                            confidence=confidence, evidence=ev,
                            remediation=list(REMEDIATION["straggler"]))
    top = max(last.values())
    leaders = sorted(r for r, v in last.items() if v == top)
    rest = [r for r in last if r not in leaders]
    ev["reason"] = (f"ranks issued different numbers of collectives on {g.label}: "
                    f"{ev['last_seq']}")
    if len(leaders) < len(rest):
        return StallFinding(kind="count_split", ranks=leaders, process_group=g.label,
                            seq_id=low + 1, op=op, source="flight_recorder", confidence="low",
                            evidence=ev, remediation=list(REMEDIATION["count_split"]))
    return StallFinding(kind="undecided", ranks=[], process_group=g.label, seq_id=low + 1,
                        op=op, source="flight_recorder", confidence="low",
                        evidence={**ev, "mismatch": "count_split"},
                        remediation=list(REMEDIATION["count_split"]) + REMEDIATION["undecided"])
