"""Which process group a log line speaks of, and how big the world is — from evidence only.

PyTorch names one process group several ways across versions and even within one timeout:
``[PG ID 0 PG GUID 0(default_pg) Rank 1]`` (2.5+), ``[PG 0 Rank 1]`` / ``[PG 0 (default_pg)
Rank 1]`` (2.3/2.4) and a bare ``[Rank 1]`` (2.2, and the "Watchdog caught" line of every later
version). Tagged groups are labelled like the Flight Recorder's ``<name>:<desc>`` (``5:tp``), so
both sources name a group alike; all spellings of the default group become
:data:`DEFAULT_GROUP`; an untagged timeout
takes the group of the same rank's tagged line at the same SeqNum; untagged lines are only
called the default group when nothing in the logs names another group.

The world size is never guessed: it comes from ``--world-size``, a launcher/ProcessGroup line
that states it, the NumelOut/NumelIn ratio of an all-gather on the default group, or — said as
such, and only a lower bound — the highest rank seen plus one.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass

from stormotel.analyzers.stalls import logs_parser as lp

DEFAULT_GROUP = "0:default_pg"  #: the label the Flight Recorder analysis uses too
UNTAGGED_GROUP = "untagged"
#: the events that say a rank's watchdog spoke (teardown: it fired and is taking the process down)
WATCHDOG_KINDS = (lp.TIMEOUT, lp.COUNTERS, lp.FIRST_SIGNAL, lp.OBSERVED_SIGNAL, lp.TEARDOWN)
_ALL_GATHER = ("ALLGATHER", "_ALLGATHER_BASE", "ALLGATHER_INTO_TENSOR_COALESCED")


def canonical_group(group: str | None) -> str | None:
    """One label per group: every spelling of the default group is :data:`DEFAULT_GROUP`."""
    if group is None:
        return None
    if group.startswith("id:"):
        ident, _, rest = group[3:].partition("(")
        name = rest.rstrip(")")
        if ident == "0" or name == "default_pg":
            return DEFAULT_GROUP
        return group
    guid, _, name = group.partition(":")
    if guid == "0" or name == "default_pg":
        return DEFAULT_GROUP
    return group


def normalise_groups(events: list[lp.LogEvent], notes: list[str]) -> list[lp.LogEvent]:
    """Canonical group labels; untagged watchdog lines adopt their tagged sibling's group."""
    out = [dataclasses.replace(e, group=canonical_group(e.group)) for e in events]
    by_rank_seq: dict[tuple[int | None, int], str] = {}
    by_seq: dict[int, set[str]] = {}
    for e in out:
        if e.group is not None and e.seq is not None:
            by_rank_seq.setdefault((e.rank, e.seq), e.group)
            by_seq.setdefault(e.seq, set()).add(e.group)
    named = {e.group for e in out if e.group is not None}
    only_default = named <= {DEFAULT_GROUP}
    adopted = defaulted = 0
    fixed = []
    for e in out:
        if e.group is None and e.kind in WATCHDOG_KINDS:
            sibling = by_rank_seq.get((e.rank, e.seq)) if e.seq is not None else None
            if sibling is None and e.seq is not None and len(by_seq.get(e.seq, ())) == 1:
                sibling = next(iter(by_seq[e.seq]))  # the one group that reached this SeqNum
            if sibling is not None:
                e = dataclasses.replace(e, group=sibling)
                adopted += 1
            elif only_default:
                e = dataclasses.replace(e, group=DEFAULT_GROUP)
                defaulted += 1
            else:
                e = dataclasses.replace(e, group=UNTAGGED_GROUP)
        fixed.append(e)
    if adopted:
        notes.append(f"{adopted} untagged watchdog line(s) matched to their group by SeqNum")
    if defaulted and named:
        notes.append(f"{defaulted} untagged watchdog line(s) read as the default group (no "
                     "other group is named in the logs)")
    return fixed


@dataclass(frozen=True)
class World:
    size: int
    source: str  #: where the size came from, said in the report
    explicit: bool  #: stated by evidence (not only inferred from the highest rank seen)
    #: ranks the evidence names at or above a stated size: a finding about the input (another
    #: job's log in the set, or a wrong statement), never a reason to enlarge the world
    beyond: tuple[int, ...] = ()


def world_note(size: object, source: str) -> str:
    """How the report states the world size: a size of 0 means no rank number was seen at all,
    which is "unknown", never a job of zero ranks."""
    if not size:
        return "world size unknown: no rank number in the evidence (--world-size N states it)"
    return f"world size {size}: from {source}"


def world_from_evidence(events: list[lp.LogEvent], ranks_seen: set[int],
                        flag: int | None) -> World:
    """The world and where its size came from, said truthfully: ``--world-size``, else a line
    stating it, else an all-gather's ratio, else the highest rank seen. A stated size is kept
    even when the evidence names a rank beyond it; those ranks are listed in ``beyond`` (a
    finding about the input), and the report never claims a larger world from a statement."""
    highest = max(ranks_seen, default=-1) + 1

    def stated_world(size: int, source: str) -> World:
        return World(size, source, True, tuple(sorted(r for r in ranks_seen if r >= size)))

    if flag:
        return stated_world(flag, "--world-size")
    stated = Counter(int(e.detail["world_size"]) for e in events
                     if e.kind == lp.WORLD_HINT and e.detail)
    if stated:
        size = stated.most_common(1)[0][0]
        if size >= 1:
            return stated_world(size, "a launcher/ProcessGroup line stating the world size")
    ratios = Counter(e.numel_out // e.numel_in for e in events
                     if e.kind == lp.TIMEOUT and e.group == DEFAULT_GROUP and e.op in _ALL_GATHER
                     and e.numel_in and e.numel_out and e.numel_out % e.numel_in == 0)
    if ratios:
        size = ratios.most_common(1)[0][0]
        if size >= highest:
            return World(size, "NumelOut/NumelIn of an all-gather on the default group", True)
    return World(max(highest, 0), "highest rank seen + 1 (a lower bound)", False)


def outside_world_note(world: World) -> str:
    ranks = ", ".join(map(str, world.beyond[:10])) + (" …" if len(world.beyond) > 10 else "")
    return (f"the logs name rank(s) {ranks} outside the world of {world.size} rank(s) stated "
            f"by {world.source}: a finding about the input (another job's log among these "
            "files, or a wrong world size); their lines are not judged with this world's, "
            "and no conclusion is drawn at high confidence")
