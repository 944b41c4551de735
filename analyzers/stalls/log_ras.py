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

What it proves: per communicator, how many operations each rank launched — a count split; and
which ranks did not answer at all (missing: dead or hung). Ranks are *communicator* ranks. One
snapshot of a busy job can show a transient split (collectives outpace the query), so the
analysis names the minority only as a stall's suspects-with-a-verdict, never at ``high``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_failures import strip_prefix

RAS_SPLIT = "ras_report"


@dataclass
class RasBlock:
    """One communicator's section of a RAS report."""

    line: int
    comm: str  #: ``#g-c (hash)``
    op: str = "collective"  #: the operation the counts are of (2.26+: per op type)
    counts: dict[int, int] = field(default_factory=dict)  #: rank -> operations launched
    groups: list[tuple[int, int]] = field(default_factory=list)  #: (n ranks, count), printed
    missing: list[int] = field(default_factory=list)
    text: str = ""
    pattern: str = "nccl.ras.count_group"

    def as_detail(self) -> dict[str, Any]:
        return {"comm": self.comm, "op": self.op, "counts": dict(self.counts),
                "groups": list(self.groups), "missing": list(self.missing)}


class RasScanner:
    """Stateful scan over a file's lines (launcher prefixes are stripped here): :attr:`blocks`."""

    def __init__(self) -> None:
        self.blocks: list[RasBlock] = []
        self._block: RasBlock | None = None
        self._count: int | None = None  #: the count of the group whose members follow

    def feed(self, no: int, line: str, low: str) -> None:
        if self._block is None and "mismatch" not in low and "incomplete" not in low \
                and "different" not in low:
            return
        line = strip_prefix(line)
        head = gr.BY_ID["nccl.ras.mismatch_head"].regex.search(line)
        if head and head.group("group") is not None:
            self.close()
            self._block = RasBlock(no, f"#{head.group('group')}-{head.group('comm')} "
                                       f"({head.group('hash')})", text=line.strip()[:300])
            return
        block = self._block
        if block is None:
            return
        if head and head.group("op"):
            if block.counts or block.missing:  # 2.26+: one block per op type
                self.close()
                block = self._block = RasBlock(no, block.comm, text=line.strip()[:300])
            block.op = head.group("op")
            self._count = None
            return
        for pid in ("nccl.ras.count_group", "nccl.ras.rank_count", "nccl.ras.rank_member",
                    "nccl.ras.missing"):
            m = gr.BY_ID[pid].regex.search(line)
            if not m:
                continue
            if pid == "nccl.ras.count_group":
                self._count = int(m.group("count") or 0)
                n = gr.parse_rank(m.group("n"))
                if n is not None:
                    block.groups.append((n, self._count))
            elif pid == "nccl.ras.rank_count":
                rank = gr.parse_rank(m.group("rank"))
                if rank is not None:
                    block.counts[rank] = int(m.group("count") or 0)
                    block.groups.append((1, block.counts[rank]))
            elif pid == "nccl.ras.rank_member":
                rank = gr.parse_rank(m.group("rank"))
                if rank is not None and self._count is not None:
                    block.counts[rank] = self._count
            else:
                block.missing.extend(gr.parse_rank_list(m.group("ranks")))
                block.pattern = "nccl.ras.missing"
            return
        if not line.strip() or line.lstrip().startswith(("Missing", "Communicator", "Rank")):
            return
        self.close()

    def close(self) -> None:
        block, self._block, self._count = self._block, None, None
        if block is not None and (block.groups or block.missing):
            self.blocks.append(block)
