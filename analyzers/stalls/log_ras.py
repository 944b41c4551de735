"""NCCL RAS reports (``ncclras`` / ``echo verbose status | nc localhost 28028``), read as splits.

A RAS status report (NCCL 2.24+, ``src/ras/client_support.cc``) groups the ranks of each
communicator by a property and prints the groups, most frequent first:

```
#0-0 (27a079b828ff1a75) MISMATCH
  Communicator ranks have different collective operation counts     (2.26+: "different AllReduce")
  26 ranks have launched up to operation 6650
  6 ranks have launched up to operation 6649
  Rank 0 -- GPU 0 managed by process 483072 on node 172.16.64.210      (members of an outlier group)
  Rank 21 has launched up to operation 6649 -- GPU 5 managed by …       (a one-rank group)
#0-0 (cf264af53edbe986) INCOMPLETE
  Missing communicator data from 1 rank
  The missing rank: 21
```

What it proves: per communicator, how many operations each rank *launched* (a host-side count,
incremented when the rank calls NCCL — not when the operation completes); and which ranks did
not answer at all. Ranks are *communicator* ranks. One snapshot of a busy job can show a
transient split (collectives outpace the query, NCCL's own guide says so), so nothing here is
ever ``high``. What each side of a split proves:

- the ranks **behind** (fewer launched) have not called the operation the others launched:
  the others wait for them. When they are a minority they are named (``straggler``);
- the ranks **ahead** launched an operation the rest did not. When the ranks behind are most
  of the communicator, two readings fit the same counts — the few ahead took a code path the
  others do not (a conditional collective), or the many behind are blocked before it together
  (a host-side wait on the previous operation, another communicator) — and one snapshot
  cannot tell them apart: ``undecided``, both sides listed, with what to collect;
- **missing** ranks (INCOMPLETE: no data at all) are processes whose RAS thread did not answer
  — that thread runs beside the training thread, so a process stuck in Python still answers:
  dead, stopped or unreachable. Named while a minority of the communicator; a missing majority
  more likely means the querying node was cut off.

RAS lists the ranks of a group one by one only when the group is an outlier (1 rank, or at
most 10 ranks and 25 % of the communicator; ``-v``: under 50 %), so an unlisted side can only
be counted, never named.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_failures import strip_prefix

RAS_SPLIT = "ras_report"


def comm_of(head: re.Match[str]) -> str:
    """The communicator a RAS section heads, as every RAS reader spells it (``#group-comm
    (hash)``) from a ``nccl.ras.mismatch_head`` match that has its group."""
    return f"#{head.group('group')}-{head.group('comm')} ({head.group('hash')})"


@dataclass
class RasBlock:
    """One communicator's section of a RAS report."""

    line: int
    comm: str  #: ``#g-c (hash)``
    op: str = "collective"  #: the operation the counts are of (2.26+: per op type)
    counts: dict[int, int] = field(default_factory=dict)  #: rank -> operations launched
    groups: list[tuple[int, int]] = field(default_factory=list)  #: (n ranks, count), printed
    missing: list[int] = field(default_factory=list)
    missing_n: int = 0  #: "Missing communicator data from N ranks" (listed or not)
    text: str = ""
    pattern: str = "nccl.ras.count_group"
    #: the heading "Communicator ranks have different (collective|%s) operation counts" was
    #: printed: rasClientRunComms prints it only when some rank's count differs from the
    #: first's, so it proves a count split even when the report is cut before the groups
    split_head: bool = False

    def as_detail(self) -> dict[str, Any]:
        return {"comm": self.comm, "op": self.op, "counts": dict(self.counts),
                "groups": list(self.groups), "missing": list(self.missing),
                "missing_n": max(self.missing_n, len(self.missing)),
                "cut": self.split_head and not (self.groups or self.missing or self.missing_n)}


class RasScanner:
    """Stateful scan over a file's lines (launcher prefixes are stripped here): :attr:`blocks`."""

    def __init__(self) -> None:
        self.blocks: list[RasBlock] = []
        self._block: RasBlock | None = None
        self._count: int | None = None  #: the count of the group whose members follow
        #: what the "Rank r -- GPU …" lines under the current heading are: members of a count
        #: group, missing ranks (2.26+), or ranks of a status group (not counts)
        self._section: str | None = None

    def feed(self, no: int, line: str, low: str) -> None:
        if self._block is None and "mismatch" not in low and "incomplete" not in low \
                and "different" not in low and "missing communicator" not in low:
            return
        line = strip_prefix(line)
        head = gr.BY_ID["nccl.ras.mismatch_head"].regex.search(line)
        if head and head.group("group") is not None:
            self.close()
            self._block = RasBlock(no, comm_of(head), text=line.strip()[:300])
            return
        block = self._block
        if block is None:
            return
        if head and head.group("op"):
            if block.counts or block.missing or block.groups:  # 2.26+: one block per op type
                self.close()
                block = self._block = RasBlock(no, block.comm, text=line.strip()[:300])
            block.op = head.group("op")
            block.split_head = True
            self._count, self._section = None, "count"
            return
        for pid in ("nccl.ras.count_group", "nccl.ras.rank_count", "nccl.ras.status_group",
                    "nccl.ras.rank_member", "nccl.ras.missing"):
            m = gr.BY_ID[pid].regex.search(line)
            if not m:
                continue
            if pid == "nccl.ras.count_group":
                self._count, self._section = int(m.group("count") or 0), "count"
                n = gr.parse_rank(m.group("n"))
                if n is not None:
                    block.groups.append((n, self._count))
            elif pid == "nccl.ras.rank_count":
                rank = gr.parse_rank(m.group("rank"))
                self._section = "count"
                if rank is not None:
                    block.counts[rank] = int(m.group("count") or 0)
                    block.groups.append((1, block.counts[rank]))
            elif pid == "nccl.ras.status_group":
                self._section, self._count = "status", None
            elif pid == "nccl.ras.rank_member":
                rank = gr.parse_rank(m.group("rank"))
                if rank is None:
                    pass
                elif self._section == "missing":
                    block.missing.append(rank)  # 2.26+: one line per missing rank
                elif self._section == "count" and self._count is not None:
                    block.counts[rank] = self._count
            else:
                if m.group("n"):
                    block.missing_n = int(m.group("n"))
                    self._section = "missing"
                else:
                    block.missing.extend(gr.parse_rank_list(m.group("ranks")))
                block.pattern = "nccl.ras.missing"
            return
        if not line.strip() or line.lstrip().startswith(("Missing", "Communicator", "Rank")):
            return
        self.close()

    def close(self) -> None:
        block, self._block, self._count, self._section = self._block, None, None, None
        if block is not None and (block.groups or block.missing or block.missing_n
                                  or block.split_head):
            self.blocks.append(block)


def blocks_from_json(text: str, line: int = 1) -> list[RasBlock]:
    """The JSON form (``ncclras -f json``, NCCL 2.28.7+, ``rasDumpCommsToJSON``): every rank of
    every communicator with its ``collective_counts`` per operation type, and the
    ``missing_ranks`` with ``status.unresponsive`` (no answer at all — the text form's
    INCOMPLETE; a rank that answered but not for this communicator is NOCOMM, not missing).
    Every rank is listed, so every side of a split can be named. Anything that does not parse
    as that shape gives no block."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start or '"communicators"' not in text:
        return []
    try:
        doc = json.loads(text[start:end + 1])
    except (ValueError, RecursionError):
        return []
    comms = doc.get("communicators") if isinstance(doc, dict) else None
    if not isinstance(comms, list):
        return []
    out: list[RasBlock] = []
    for i, c in enumerate(comms[:4096]):
        if not isinstance(c, dict):
            continue
        name = f"#json-{i} ({str(c.get('hash', '?'))[:20]})"
        per_op: dict[str, dict[int, int]] = {}
        for r in c.get("ranks") or []:
            counts = r.get("collective_counts") if isinstance(r, dict) else None
            rank = gr.parse_rank(str(r.get("rank"))) if isinstance(r, dict) else None
            if rank is None or not isinstance(counts, dict):
                continue
            for op, n in counts.items():
                if isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**63:
                    per_op.setdefault(str(op)[:40], {})[rank] = n
        for op, counts in per_op.items():
            if len(set(counts.values())) > 1:
                freq: dict[int, int] = {}
                for n in counts.values():
                    freq[n] = freq.get(n, 0) + 1
                out.append(RasBlock(line, name, op=op, counts=dict(counts),
                                    groups=sorted(((k, v) for v, k in freq.items()),
                                                  reverse=True), text=f"{name} {op}"))
        missing = sorted({rank for m in c.get("missing_ranks") or [] if isinstance(m, dict)
                          and isinstance(m.get("status"), dict) and m["status"].get("unresponsive")
                          and (rank := gr.parse_rank(str(m.get("rank")))) is not None})
        if missing:
            out.append(RasBlock(line, name, missing=missing, missing_n=len(missing),
                                text=f"{name} missing", pattern="nccl.ras.missing"))
    return out
