"""Rebuild process groups from what the entries say, not from ``pg_config``.

``pg_config`` cannot be trusted as a membership table: on gloo (torch 2.13) it is keyed by an
empty name and overwritten by each new group (so it holds ``ranks: []`` or the last group's
ranks), which is why torch's own analyzer crashes on raw gloo dumps. Every entry, however,
carries its group's global ``(name, desc)`` pair, so a group's members are the ranks that hold
entries (or ``pg_status`` counters) for it. The default group is the whole world, including
ranks whose dump is missing; a sub-group's members are only known from the ranks we can see,
which the analysis states.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from stormotel.analyzers.stalls.fr_types import DumpSet, FrEntry, GroupKey, PgStatus, group_label

DEFAULT_GROUP_DESC = "default_pg"


@dataclass
class GroupView:
    """One process group as seen across all dumps."""

    key: GroupKey
    #: Ranks whose dump holds entries or counters for this group.
    holders: set[int] = field(default_factory=set)
    #: Ranks that should take part (holders, plus the whole world for the default group).
    expected: set[int] = field(default_factory=set)
    #: Collective (non-p2p) entries per rank, in sequence order.
    entries: dict[int, list[FrEntry]] = field(default_factory=dict)
    status: dict[int, PgStatus] = field(default_factory=dict)
    p2p_entries: int = 0
    #: Point-to-point entries (send/recv) per rank, in record order.
    p2p: dict[int, list[FrEntry]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return group_label(self.key)

    @property
    def is_default(self) -> bool:
        return self.key[1] == DEFAULT_GROUP_DESC or (self.key[0] == "0" and not self.key[1])

    @property
    def size(self) -> int:
        return len(self.expected)


def rebuild_groups(ds: DumpSet) -> tuple[list[GroupView], list[str]]:
    """Groups (default group first, then by name) and notes on what could not be trusted."""
    groups: dict[GroupKey, GroupView] = {}
    notes: list[str] = []
    for rank, dump in ds.dumps.items():
        pg_ids = dump.group_of_pg_id()
        for e in dump.entries:
            g = groups.setdefault(e.group, GroupView(e.group))
            g.holders.add(rank)
            if e.is_p2p:
                g.p2p_entries += 1
                g.p2p.setdefault(rank, []).append(e)
            else:
                g.entries.setdefault(rank, []).append(e)
        for pg_id, st in dump.pg_status.items():
            key = pg_ids.get(pg_id)
            if key is not None:  # a pg_id with no entries cannot be named: not usable
                groups[key].status[rank] = st
    configured = _configured_members(ds)
    for g in groups.values():
        for lst in g.entries.values():
            lst.sort(key=lambda e: (e.seq_id, e.record_id))
        g.expected = set(g.holders) | configured.get(g.key[0], set())
        if g.is_default:
            g.expected |= set(range(ds.world_size))
    if configured:
        notes.append("sub-group members also taken from pg_config rank lists (NCCL), so a "
                     "member with an empty or missing dump still counts")
    if any("" in d.pg_config for d in ds.dumps.values()):
        notes.append("pg_config is keyed by an empty name (gloo): group membership was rebuilt "
                     "from the entries' process_group instead")
    partial = sorted(g.label for g in groups.values() if not g.is_default)
    if ds.missing_ranks and partial:
        notes.append(f"sub-group membership ({', '.join(partial)}) is known only from the "
                     f"visible ranks; unseen rank(s) {ds.missing_ranks} may belong to them too")
    ordered = sorted(groups.values(), key=lambda g: (not g.is_default, g.key))
    return ordered, notes


def _configured_members(ds: DumpSet) -> dict[str, set[int]]:
    """``pg_config`` rank lists (JSON strings like ``"[0, 1]"``) by group name, where usable.

    gloo leaves one entry keyed by ``""`` with ``ranks: '[]'``: nothing usable. NCCL writes one
    entry per group name with its global ranks; a list that disagrees across dumps is dropped.
    """
    seen: dict[str, set[int]] = {}
    conflict: set[str] = set()
    for d in ds.dumps.values():
        for name, cfg in d.pg_config.items():
            if not name or not isinstance(cfg, dict):
                continue
            raw = cfg.get("ranks")
            try:
                parsed: object = json.loads(raw) if isinstance(raw, str) else raw
                # anything but a collection names no ranks (skipped below)
                ranks = {int(r) for r in (parsed if isinstance(parsed, Iterable) else ())}
            except (ValueError, TypeError):
                continue
            if not ranks or any(r < 0 or r >= ds.world_size for r in ranks):
                continue
            if name in seen and seen[name] != ranks:
                conflict.add(name)
            seen.setdefault(name, ranks)
    return {k: v for k, v in seen.items() if k not in conflict}
