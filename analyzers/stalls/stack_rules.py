"""What the ranks' stack snapshots prove together: who the others wait for, at any world size.

Every snapshot the tracker leaves is a rank that made no progress for longer than its rhythm
allows, so snapshots of the same moment are a hang — never "healthy". Three rules, in order:

1. **Outside communication** — ranks whose training thread is in no collective while every
   other snapshotted rank waits inside one are the ones waited for (``straggler``), at any
   world size ≥ 2: no majority is needed, a rank waiting in a collective cannot be the one the
   others wait for unless they wait elsewhere. Not when it may be in an async work's
   ``wait()`` (no Python frame): beside a point-to-point wait, or at a later step than every
   waiting rank — undecided.
2. **Different collectives** — every rank waits, but not in the same collective (op or call
   site). The rank *ahead in the program* skipped one; what proves "ahead", strongest first:
   the tracker's marks (the rank entered a mark of its step without the marks every earlier
   step entered before it — ``marks``), its step (a later step than its peers' — ``step``),
   the line within the same function at the same step (``line_order``, loops can fool it:
   ``low``). Nothing decides: ``undecided`` naming where each rank is — also when, with no
   marks, the ranks behind wait in a rooted collective (:data:`ROOTED`) the ranks ahead may
   have left.
3. **All at one place** — every snapshotted rank waits in the same collective at the same
   place: the cause is below Python or in a rank without a snapshot: ``undecided`` with the
   places, the unseen ranks as suspects.

Confidence is ``medium`` at most (:mod:`~stormotel.analyzers.stalls.calibration` caps
unmeasured patterns), ``low`` when ranks of the world have no snapshot or the proof is weak.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stormotel.analyzers.report import Confidence, StallFinding, StallKind
from stormotel.analyzers.timeline import MAX_WORLD_SIZE

if TYPE_CHECKING:
    from stormotel.analyzers.stalls.stacks import Snapshot, StackGroup

PATTERN_OUTSIDE = "stormotel.stacks.odd_group"
PATTERN_SKIP_MARKS = "stormotel.stacks.skipped_mark"
PATTERN_AHEAD_STEP = "stormotel.stacks.later_step"
PATTERN_AHEAD_STEP_UNMARKED = "stormotel.stacks.later_step_unmarked"
PATTERN_LINE_ORDER = "stormotel.stacks.later_line"
PATTERN_SAME_PLACE = "stormotel.stacks.all_waiting"
PATTERN_SPLIT = "stormotel.stacks.split_undecided"
PATTERN_ENDED = "stormotel.stacks.ended_unstopped"
PATTERN_P2P = "stormotel.stacks.p2p_undecided"
PATTERN_OUTSIDE_AHEAD = "stormotel.stacks.outside_ahead_undecided"
#: collectives with a root: a non-root only sends to it (gather, reduce) or only receives from
#: it (broadcast, scatter), so it can finish its part and leave while the root still waits
ROOTED = frozenset({"broadcast", "reduce", "gather", "scatter", "broadcast_object_list",
                    "gather_object", "scatter_object_list"})
#: point-to-point calls: a rank waiting in one waits for one peer, and the job uses the
#: asynchronous works (``isend``/``irecv``) whose ``Work.wait()`` has no Python frame
P2P = frozenset({"send", "recv", "isend", "irecv", "batch_isend_irecv"})

#: the name a place inside backward() gets as its collective (``stacks.Snapshot.in_backward``),
#: and what it means: an inferred wait, never a seen one
BACKWARD = "backward"
BACKWARD_NOTE = "DDP/FSDP's gradient all_reduce runs and waits inside it, below Python"

ADVICE = {
    "data_loading": "a data-loader worker that stopped delivering: its dataset, storage or "
                    "worker count",
    "storage": "a write that does not return: the checkpoint storage",
    "outside_communication": "code that never reached the collective: a wait, a loop, a "
                             "swallowed exception",
    "gil_held": "a Python thread holding the GIL: a regex, a C extension, a tight loop"}


def judge(groups: list[StackGroup], snaps: dict[int, Snapshot], world_size: int | None,
          notes: list[str]) -> list[StallFinding]:
    """The stall findings the snapshots support (see the module docstring); [] only when no
    rank has a usable snapshot."""
    if not groups:
        return []
    world = world_size or _header_world(snaps) or (max(snaps) + 1)
    unseen = [r for r in range(min(world, MAX_WORLD_SIZE)) if r not in snaps][:64]
    waiting = [g for g in groups if g.collective]
    outside = [g for g in groups if not g.collective]
    if waiting and outside:
        return [_outside(groups, waiting, outside, snaps, world, unseen)]
    if outside and not waiting and unseen:
        # stuck in their own code while no rank was seen waiting: the others' snapshots may
        # not have fired yet (a longer rhythm) — the rank is named, at low
        return [_outside(groups, [], outside, snaps, world, unseen)]
    # groups differing only below the user's frame (gloo's internals) are one place
    if len({g.where for g in groups}) >= 2 and not outside:
        return [_split(groups, snaps, world, unseen, notes)]
    return [_same_place(groups, snaps, world, unseen)]


def _header_world(snaps: dict[int, Snapshot]) -> int | None:
    for s in snaps.values():
        v = s.header.get("world_size")
        if isinstance(v, str) and v.isascii() and v.isdigit() and len(v) < 8:
            v = int(v)
        if type(v) is int and 0 < v <= MAX_WORLD_SIZE:
            return v
    return None


def _base_evidence(pattern: str, groups: list[StackGroup], snaps: dict[int, Snapshot],
                   world: int, unseen: list[int], about: list[int]) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "pattern": pattern, "reason": "; ".join(g.describe() for g in groups),
        "stack_groups": [g.as_dict() for g in groups],
        "frames": {str(r): [f.where() for f in snaps[r].main_frames[:12]] for r in about[:8]},
        "snapshot_ns": {str(r): snaps[r].time_ns for r in about[:8]},
        "spoke": {"ranks": len(snaps), "of": world},
        "files": [snaps[r].path for r in about[:8]]}
    if unseen:
        ev["unseen_ranks"] = unseen
    return ev


def _outside(groups: list[StackGroup], waiting: list[StackGroup], outside: list[StackGroup],
             snaps: dict[int, Snapshot], world: int, unseen: list[int]) -> StallFinding:
    culprits = sorted(r for g in outside for r in g.ranks)
    if any(g.collective in P2P for g in waiting) and any(
            snaps[r].main_frames and not snaps[r].main_frames[0].library for r in culprits):
        # beside a point-to-point wait, a rank whose innermost frame is its own line may be in
        # a work's wait() (one inside a library call, a read or a lock, is not)
        return _p2p_undecided(groups, waiting, culprits, snaps, world, unseen)
    ahead = _outside_ahead(waiting, culprits, snaps)
    if ahead:
        return _outside_ahead_undecided(groups, snaps, world, unseen, ahead)
    n_waiting = sum(len(g.ranks) for g in waiting)
    # alone outside while every rank of the world is seen and at least as many wait: medium;
    # ranks without a snapshot may be elsewhere too, and more outside than waiting is no
    # longer "the one the others wait for"
    inferred = sorted(r for g in waiting if g.inferred for r in g.ranks)
    # a wait seen only as backward() (DDP's gradient all_reduce, or a slow kernel) is inferred
    confidence: Confidence = "medium" if n_waiting >= len(culprits) and n_waiting and \
        not unseen and not inferred else "low"
    ev = _base_evidence(PATTERN_OUTSIDE, [*waiting, *outside], snaps, world, unseen, culprits)
    ev["category"] = category_of(snaps[culprits[0]])
    ev["waiting_ranks"] = sorted(r for g in waiting for r in g.ranks)[:64]
    ev["proof"] = ("their training thread is in no collective while every other snapshotted "
                   "rank waits inside one" + (
                       f" (rank(s) {inferred[:8]} in {BACKWARD}(): {BACKWARD_NOTE})"
                       if inferred else "")) if waiting else (
        "their training thread is in no collective, made no progress for over two deadlines, "
        f"and rank(s) {unseen[:8]} left no snapshot to say where they wait")
    op = waiting[0].collective if waiting else None
    return StallFinding(
        kind="straggler", ranks=culprits, process_group=None, seq_id=None, op=op,
        source="stacks", confidence=confidence, evidence=ev,
        remediation=[f"Look at {outside[0].where} on rank(s) {culprits[:8]}: the other ranks "
                     f"wait in {op or 'a collective'} for it ({ADVICE[ev['category']]})."])


def _p2p_undecided(groups: list[StackGroup], waiting: list[StackGroup], outside: list[int],
                   snaps: dict[int, Snapshot], world: int, unseen: list[int]) -> StallFinding:
    """Ranks "in no collective" beside a rank waiting in a point-to-point call: undecided.

    Why (round four, ``wrong_peer3``): ``req = dist.isend(...); dist.recv(...); req.wait()``
    — the work's ``wait()`` is a C++ method, so a rank blocked in it shows only its own line,
    like a rank stuck in its own code; and a ``send``/``recv`` waits for one peer, not for the
    group. "The others wait for it" named a rank waiting for its isend to be received at
    ``medium``. Which rank has the wrong peer (or the missing call) needs the calls' peers.
    Only when a rank outside has its own line innermost: one inside a library call (a read, a
    lock, the DataLoader: a pipeline stage stuck in its own work) is still named."""
    p2p = sorted(r for g in waiting if g.collective in P2P for r in g.ranks)
    suspects = sorted({*outside, *p2p})[:64]
    ev = _base_evidence(PATTERN_P2P, groups, snaps, world, unseen, suspects)
    ev.update({"category": "p2p_unposted", "suspects": suspects,
               "proof": f"rank(s) {p2p[:8]} wait in a point-to-point call (send/recv wait for "
                        f"one peer); rank(s) {outside[:8]} are in no collective by their Python "
                        "frames, but an isend/irecv's Work.wait() (C++, no Python frame) looks "
                        "the same: who holds the wrong peer or the missing call is undecided"})
    return _undecided(ev, "Ranks wait in point-to-point calls: " + ev["reason"] + ". Check "
                      "each send/recv/isend/irecv's peer (src/dst) at those lines; a Flight "
                      "Recorder dump (--flight-recorder) holds every call's peer.")


def _outside_ahead(waiting: list[StackGroup], outside: list[int], snaps: dict[int, Snapshot]
                   ) -> str:
    """The proof that a rank "in no collective" is past every waiting rank's step, or "".

    Why (round five, ``async_uneven3``): ``works = [all_reduce(g, async_op=True) ...]; for w in
    works: w.wait()`` — ranks 0 and 2 wait in step 12 in a work's ``wait()`` (C++: the snapshot
    ends at their own line, as round four's ``isend`` did), while rank 1, one batch short, left
    its loop after step 11 and waits in ``barrier()``. "The others wait for it" named 0 and 2.
    A rank stuck in its own code before a collective is at the waiters' step or behind it (they
    wait for it to arrive); one at a LATER step finished every collective of the waiters' step
    and went on: the waiters wait in a call it has passed or will never make (they added one,
    or it skipped one), or it waits in a work's ``wait()`` — undecided."""
    w_raw = [snaps[r].progress.get("step") for g in waiting for r in g.ranks]
    o_raw = {r: snaps[r].progress.get("step") for r in outside}
    w_steps = [v for v in w_raw if type(v) is int]
    o_steps = {r: v for r, v in o_raw.items() if type(v) is int}
    if not w_steps or len(w_steps) < len(w_raw) or len(o_steps) < len(o_raw):
        return ""
    top = max(w_steps)
    later = sorted(r for r, v in o_steps.items() if v > top)
    if not later:
        return ""
    waiters = sorted(r for g in waiting for r in g.ranks)
    return (f"the tracker's step marker: rank(s) {later[:8]}, in no collective by their Python "
            f"frames, are in step {o_steps[later[0]]}, past the step(s) "
            f"{sorted(set(w_steps))[:4]} of rank(s) {waiters[:8]} waiting in a collective: they "
            "left every collective of that step, so the waiters are in one they passed or never "
            "make; and an async work's wait() (all_reduce(..., async_op=True).wait(), C++, no "
            "Python frame) looks like their own line")


def _outside_ahead_undecided(groups: list[StackGroup], snaps: dict[int, Snapshot], world: int,
                             unseen: list[int], proof: str) -> StallFinding:
    suspects = sorted(snaps)[:64]
    ev = _base_evidence(PATTERN_OUTSIDE_AHEAD, groups, snaps, world, unseen, suspects)
    ev.update({"category": "mismatched_collective", "suspects": suspects, "proof": proof})
    return _undecided(ev, "Ranks are at different places: " + ev["reason"] + ". Look for a "
                      "collective one side makes and the other does not (uneven data, a "
                      "condition on rank) and for async works' wait() at the lines shown; wrap "
                      "collectives in tracker.mark() or collect a Flight Recorder dump.")


def _undecided(ev: dict[str, Any], fix: str) -> StallFinding:
    """An undecided snapshot finding (no rank named, ``low``) with its evidence and fix."""
    return StallFinding(kind="undecided", ranks=[], process_group=None, seq_id=None, op=None,
                        source="stacks", confidence="low", evidence=ev, remediation=[fix])


def _split(groups: list[StackGroup], snaps: dict[int, Snapshot], world: int,
           unseen: list[int], notes: list[str]) -> StallFinding:
    """Every rank in a collective, not all in the same one: who is ahead skipped one."""
    ops = sorted({g.collective or "" for g in groups})
    ahead, pattern, proof = _ahead(groups, snaps)
    ranks_all = sorted(snaps)
    kind: StallKind = "op_type_mismatch" if len(ops) > 1 else "straggler"
    if not ahead:
        ev = _base_evidence(PATTERN_SPLIT, groups, snaps, world, unseen, ranks_all)
        ev.update({"category": "mismatched_collective", "suspects": ranks_all[:64],
                   "proof": proof or "the ranks wait in different collectives; neither the "
                            "tracker's marks, the steps nor the call sites say which rank is "
                            "ahead"})
        notes.append("stack snapshots: ranks wait in different collectives; which one skipped "
                     "is undecided" + ("" if proof else
                                       " (wrap collectives in tracker.mark() to decide it)"))
        return _undecided(ev, "The ranks wait in different collectives: " + ev["reason"]
                          + ". Find the branch that lets one rank skip or add a collective (a "
                          "condition on rank or data, an early exit).")
    behind = [r for r in ranks_all if r not in ahead]
    ev = _base_evidence(pattern, groups, snaps, world, unseen, ranks_all)
    ev.update({"category": "mismatched_collective", "waiting_ranks": behind[:64],
               "proof": proof})
    confidence: Confidence = "low" if unseen or pattern in (
        PATTERN_LINE_ORDER, PATTERN_AHEAD_STEP_UNMARKED) or any(g.inferred for g in groups) \
        else "medium"
    g_ahead = next(g for g in groups if ahead[0] in g.ranks)
    g_behind = next((g for g in groups if behind and behind[0] in g.ranks), None)
    waited = g_behind.collective if g_behind else None
    return StallFinding(
        kind=kind, ranks=ahead, process_group=None, seq_id=None, op=waited,
        source="stacks", confidence=confidence, evidence=ev,
        remediation=[f"Rank(s) {ahead[:8]} went on to {g_ahead.where} without the "
                     f"{waited} rank(s) {behind[:8]} wait in ({proof}): find the branch that "
                     "skips it on those ranks (a condition on rank or data, an early exit, "
                     "a `continue`)."])


def _ahead(groups: list[StackGroup], snaps: dict[int, Snapshot]
           ) -> tuple[list[int], str, str]:
    """The ranks ahead in the program, the pattern that proves it and the proof in words."""
    skipped: dict[int, list[str]] = {}
    for r, s in snaps.items():
        missing = _skipped_marks(s.progress)
        if missing:
            skipped[r] = missing
    if skipped and len(skipped) < len(snaps):
        r0 = min(skipped)
        step = snaps[r0].progress.get("step")
        return (sorted(skipped), PATTERN_SKIP_MARKS,
                f"the tracker's marks: rank {r0} entered "
                f"{snaps[r0].progress['marks'][-1]!r} in step {step} without "
                f"{skipped[r0][:3]}, which every earlier step entered before it")
    steps = {r: s.progress.get("step") for r, s in snaps.items()}
    if all(type(v) is int for v in steps.values()) and len(set(steps.values())) > 1:
        top = max(v for v in steps.values() if v is not None)
        later = sorted(r for r, v in steps.items() if v == top)
        others = sorted({v for v in steps.values() if type(v) is int and v != top})
        if len(later) < len(snaps):
            # Ahead is not "skipped": the ranks behind may wait in a collective they added
            # (a barrier under `if rank == 0:`). Their marks tell: a collective their previous
            # step never entered is an extra one (or a periodic one the others skipped:
            # undecided); one every step enters was skipped by the ranks ahead (medium);
            # no marks cannot tell them apart (low).
            behind = sorted(r for r in snaps if r not in later)
            extra = {r: m for r in behind if (m := _extra_mark(snaps[r].progress))}
            if extra:
                r0 = min(extra)
                return ([], PATTERN_SPLIT,
                        f"the tracker's marks: rank(s) {sorted(extra)[:8]} wait in {extra[r0]!r}"
                        f", which their previous step never entered, in step {steps[r0]}, while"
                        f" rank(s) {later[:8]} went on to step {top}: either the first added a "
                        "collective or the others skipped one")
            passed = _passed_through(later, behind, snaps, top)
            if passed:
                return ([], PATTERN_SPLIT, passed)
            regular = all(_regular_mark(snaps[r].progress) for r in behind)
            rooted = sorted({g.collective for g in groups if g.collective in ROOTED
                             and any(r in behind for r in g.ranks)})
            if rooted and not regular:
                # round five: bcast_obj_rank0_2 (rank 0 added a broadcast_object_list),
                # gather_node_dst4 (every rank in gather, non-roots sent and left): both named
                # the ranks ahead
                return ([], PATTERN_SPLIT,
                        f"the tracker's step marker: rank(s) {later[:8]} are in step {top}, "
                        f"rank(s) {behind[:8]} wait in {rooted[0]}, a collective with a root: a "
                        "non-root finishes its part and leaves while the root waits, so the "
                        "ranks ahead may have called it and left; no marks say whether it is a "
                        "collective they skipped or one the others added")
            return (later, PATTERN_AHEAD_STEP if regular else PATTERN_AHEAD_STEP_UNMARKED,
                    f"the tracker's step marker: rank(s) {later[:8]} are in step {top}, the "
                    f"others in step(s) {others[:4]}" + (
                        ", waiting in a collective every step enters" if regular else
                        " (no marks say whether the others' collective is one every step "
                        "makes or one they added)"))
    same_step = len({v for v in steps.values()}) == 1
    users = {r: s.user_frame() for r, s in snaps.items()}
    if same_step and all(users.values()) and len(groups) == 2:
        funcs = {(u.file, u.function) for u in users.values() if u}
        if len(funcs) == 1:
            lines = {r: u.line for r, u in users.items() if u}
            top_line = max(lines.values())
            later = sorted(r for r, n in lines.items() if n == top_line)
            if len(later) < len(snaps):
                known = next(iter(steps.values()))
                when = f"in the same step ({known})" if known is not None else \
                    "step unknown (no tracker progress trailer)"
                return (later, PATTERN_LINE_ORDER,
                        f"the call sites: rank(s) {later[:8]} wait at line {top_line} of the "
                        f"same function the others wait in at an earlier line, {when} (a loop "
                        "inside the step could reverse this)")
    return [], PATTERN_SPLIT, ""


def _passed_through(later: list[int], behind: list[int], snaps: dict[int, Snapshot],
                    top: int) -> str:
    """The proof that the ranks ahead did NOT skip the collective the others wait in, or "".
    Every rank behind is in the step just before ``top`` and waits in a mark; every rank ahead
    entered that mark in that very step (its previous step) at least as often: it called the
    collective and left it, while its peers still wait in it — the ranks disagree on that call
    (a root/src, sizes, a group) or its transport, and the step alone cannot say who (round
    three's ``wrong_src3``: the bystander that received the broadcast was named, medium)."""
    waits: dict[int, str] = {}
    for r in behind:
        p = snaps[r].progress
        marks = p.get("marks")
        if p.get("step") != top - 1 or not isinstance(marks, list) or not marks:
            return ""
        waits[r] = str(marks[-1])
    for r in later:
        prev = snaps[r].progress.get("previous_step_marks")
        if not isinstance(prev, list):
            return ""
        for b in behind:
            mark = waits[b]
            if prev.count(mark) < snaps[b].progress["marks"].count(mark):
                return ""
    r0 = min(waits)
    return (f"the tracker's marks: rank(s) {later[:8]} entered {waits[r0]!r} in step {top - 1} "
            f"and went on to step {top}, while rank(s) {behind[:8]} still wait in it: nobody "
            "skipped it — the ranks disagree on that call (its root/src, sizes or group) or "
            "its transport failed")


def _extra_mark(progress: dict[str, Any]) -> str | None:
    """The mark the rank waits in when its previous step never entered it (an added
    collective, or a periodic one), else None."""
    marks, prev = progress.get("marks"), progress.get("previous_step_marks")
    if not marks or prev is None or marks[-1] in prev:
        return None
    return str(marks[-1])


def _regular_mark(progress: dict[str, Any]) -> bool:
    """The rank waits in a mark its previous step entered too."""
    marks, prev = progress.get("marks"), progress.get("previous_step_marks")
    return isinstance(marks, list) and isinstance(prev, list) and bool(marks) and \
        marks[-1] in prev


def _skipped_marks(progress: dict[str, Any]) -> list[str]:
    """The marks this rank skipped in its current step: those the previous step entered
    before the current step's last mark and this step did not (marks must be in order)."""
    marks, prev = progress.get("marks"), progress.get("previous_step_marks")
    if not marks or not prev or marks == prev[:len(marks)]:
        return []
    last = marks[-1]
    if last not in prev:
        return []
    before = prev[:prev.index(last)]
    return [m for m in before if m not in marks]


def _same_place(groups: list[StackGroup], snaps: dict[int, Snapshot], world: int,
                unseen: list[int]) -> StallFinding:
    """One place for every snapshotted rank: undecided, the ranks without a snapshot suspect."""
    g = groups[0]
    ev = _base_evidence(PATTERN_SAME_PLACE, groups, snaps, world, unseen, sorted(snaps))
    ev["category"] = "no_odd_rank"
    ev["proof"] = "every snapshotted rank made no progress, all at the same place"
    if unseen:
        ev["suspects"] = unseen
    where = g.describe()
    fix = (f"Rank(s) {unseen[:8]} left no snapshot: look at their logs (did they die, or is "
           "their tracker off?)" if unseen else
           "Every rank waits at the same place: the cause is below Python (network, NCCL/gloo, "
           "a peer of another process group). Collect Flight Recorder dumps "
           "(TORCH_FR_BUFFER_SIZE) and NCCL_DEBUG=INFO logs")
    return StallFinding(
        kind="undecided", ranks=[], process_group=None, seq_id=None, op=g.collective,
        source="stacks", confidence="low", evidence=ev,
        remediation=[f"{fix}; every snapshotted rank: {where}."])


def category_of(snap: Snapshot) -> str:
    """What kind of place a rank outside communication is stuck in (the fix differs)."""
    files = " ".join(f.file for f in snap.main_frames)
    if "torch/utils/data" in files:
        return "data_loading"
    if "torch/serialization" in files or any(f.function in ("save", "write", "flush", "fsync")
                                             for f in snap.main_frames[:3]):
        return "storage"
    return "outside_communication"


def ended_finding(ended: list[int], world_size: int | None, notes: list[str]) -> StallFinding:
    """No snapshot of a hang, but ranks whose process ended without its tracker's stop
    (:func:`~stormotel.analyzers.stalls.stacks.ended_unstopped`): killed, aborted, or gone
    through ``os._exit`` after an exception. The job did not end well — never healthy — yet
    the files cannot say which rank went first (a rank that raises takes its peers down with
    it within milliseconds): undecided, those ranks the suspects, the logs asked for."""
    who = ended[:64]
    notes.append(f"stack snapshots: rank(s) {who[:16]} ended without their tracker's stop "
                 "(killed, aborted, or an exception in a forked worker): read their logs")
    ev: dict[str, Any] = {
        "pattern": PATTERN_ENDED, "category": "ended_without_stop", "suspects": who,
        "reason": f"rank(s) {who[:16]} left an armed stack-snapshot timer that never fired and "
                  "was never cancelled: each process ended without the tracker's stop",
        "proof": "every stop of the tracker (stop_tracking, SIGTERM, the exit handler after an "
                 "uncaught exception) removes the armed file; a process killed (SIGKILL, the "
                 "OOM killer), aborted (C++ terminate) or leaving by os._exit leaves it"}
    if world_size:
        ev["spoke"] = {"ranks": len(who), "of": world_size}
    return StallFinding(
        kind="undecided", ranks=[], process_group=None, seq_id=None, op=None,
        source="stacks", confidence="low", evidence=ev,
        remediation=[f"Rank(s) {who[:8]} ended without stopping: read their logs and the "
                     "launcher's exit codes (a traceback, 'Killed', an OOM-killer line, a "
                     "signal) — `stormotel analyze ARCHIVE --logs LOG_DIR` reads them with the "
                     "archive."])
