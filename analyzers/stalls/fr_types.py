"""Record types for Flight Recorder dumps, independent of the pickle/JSON form they came in.

A dump is a few thousand entries per rank (the ring buffer), hundreds of thousands per job, so
an entry is a ``msgspec.Struct`` the loader converts a dump's entry dicts into in one C-level
pass (typed, so a wrong type declines the fast path); everything the analysis compares (op,
group, sequence id, sizes, dtypes) is normalised here once, so the matching code never deals
with format versions or stringified JSON values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import msgspec

#: The ``process_group`` (name, desc) pair: names are global across ranks (the process-local
#: ``pg_id`` is not), so this is the key groups are matched by.
GroupKey = tuple[str, str]


#: Field name → the key a dump's entry dict spells it with, where they differ.
DUMP_KEYS = {"group": "process_group", "seq_id": "collective_seq_id",
             "time_started_ns": "time_discovered_started_ns",
             "time_completed_ns": "time_discovered_completed_ns"}


class FrEntry(msgspec.Struct, kw_only=True, gc=False, rename=DUMP_KEYS):
    """One recorded collective (or p2p op) on one rank.

    A Struct, not a dataclass: ``msgspec.convert`` builds and type-checks half a million of
    them from the unpickled dicts in C (a dataclass needs a Python ``__init__`` call each), and
    ``gc=False`` keeps them out of every later collection (they hold only scalars and tuples,
    so they cannot be part of a cycle). Defaults are what an absent key means; ``rank``,
    ``backend`` and ``op`` are not in a dump's entry and are set by the loader."""

    rank: int = 0
    record_id: int
    pg_id: int = -1
    group: GroupKey
    seq_id: int  #: ``collective_seq_id`` (``p2p_seq_id`` for p2p entries)
    is_p2p: bool = False
    backend: str = ""  #: ``nccl``, ``gloo``, ... (the part of ``profiling_name`` before ``:``)
    op: str = ""  #: ``all_reduce``, ``all_gather``, ``send``, ... (after ``:``, without peers)
    profiling_name: str
    input_sizes: tuple[tuple[int, ...], ...] = ()
    output_sizes: tuple[tuple[int, ...], ...] = ()
    input_dtypes: tuple[str, ...] = ()
    output_dtypes: tuple[str, ...] = ()
    state: str = ""  #: ``scheduled`` / ``started`` / ``completed`` (stays ``scheduled`` on gloo)
    retired: bool = False
    time_created_ns: int = 0
    time_started_ns: int | None = None  #: None when unset (JSON writes 0)
    time_completed_ns: int | None = None
    timeout_ms: int | None = None

    @property
    def input_numel(self) -> int:
        return sum(math.prod(s) for s in self.input_sizes)

    @property
    def output_numel(self) -> int:
        return sum(math.prod(s) for s in self.output_sizes)

    @property
    def completed(self) -> bool:
        return self.state == "completed" or self.time_completed_ns is not None

    def describe(self) -> dict[str, object]:
        """The evidence form of the entry (JSON-ready)."""
        return {"op": self.op, "seq_id": self.seq_id, "group": group_label(self.group),
                "input_sizes": [list(s) for s in self.input_sizes],
                "output_sizes": [list(s) for s in self.output_sizes],
                "input_dtypes": list(self.input_dtypes),
                "output_dtypes": list(self.output_dtypes), "state": self.state,
                "retired": self.retired, "time_created_ns": self.time_created_ns}


@dataclass(frozen=True)
class PgStatus:
    """``pg_status`` counters of one process group on one rank (-1 when never)."""

    last_enqueued: int
    last_started: int
    last_completed: int


@dataclass
class RankDump:
    """Everything one rank's dump says, normalised."""

    rank: int
    path: str
    form: str  #: ``pickle`` or ``json``
    version: str
    entries: list[FrEntry]
    #: keyed by the process-local ``pg_id`` (as in the dump)
    pg_status: dict[int, PgStatus] = field(default_factory=dict)
    #: raw ``pg_config`` (untrusted: on gloo it is keyed by "" and overwritten per group)
    pg_config: dict[str, dict[str, object]] = field(default_factory=dict)
    skipped_entries: int = 0

    def group_of_pg_id(self) -> dict[int, GroupKey]:
        return {e.pg_id: e.group for e in self.entries}


@dataclass
class DumpSet:
    """A folder of per-rank dumps, plus which ranks we know exist but could not see."""

    dumps: dict[int, RankDump]
    world_size: int
    missing_ranks: list[int]
    notes: list[str] = field(default_factory=list)
    skipped_files: dict[str, str] = field(default_factory=dict)  #: path -> reason
    #: ranks whose dump file exists but recorded nothing (empty file, or no entries): a rank
    #: stuck holding the GIL, or killed while dumping — evidence, not a reading error
    empty_ranks: list[int] = field(default_factory=list)

    @property
    def ranks(self) -> list[int]:
        return sorted(self.dumps)


def group_label(group: GroupKey) -> str:
    """``name:desc`` like torch's analyzer (``name`` alone when there is no description)."""
    name, desc = group
    return f"{name}:{desc}" if desc and desc != "undefined" else name
