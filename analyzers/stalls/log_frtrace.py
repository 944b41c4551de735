"""torch's Flight Recorder analyzer (``fr_trace`` / ``torchfrtrace``), its printed report read back.

Users paste what ``python -m torch.distributed.flight_recorder.fr_trace`` printed rather than the
dumps. Its blocks (``components/utils.py`` ``error_analysis``, ``types.py`` ``EntryState.log``;
2.5-2.6 wrote "collective %s at entry %s", 2.4 one ``print`` line per block)::

    Not all ranks joining collective, sequence number: 5
    group info: 0:default_pg
    collective: nccl:all_reduce
    missing ranks: {2}
    …
    expected ranks: {0, 1, 2, 3}            (2.5-2.6: the count only)

    Collective sequence number: 7 has errors
    …
    error msg: Culprit rank 1; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: …

What each block proves, from the analyzer's own algorithm:

- "missing ranks" are the members whose dump holds no entry for a collective the others
  recorded. A rank that is missing from one group's block while it is *present* in another
  block's collective holds an entry there — it waits in that collective (a tensor-parallel
  partner of the straggler, missing from the data-parallel group) — so it is a victim; the
  culprits are the ranks missing everywhere they are expected. A missing majority is more
  likely rings that dropped the entry than most of the job stuck: undecided.
- "Culprit rank r" is every rank whose entry differs from the FIRST rank's: fr_trace assumes
  that rank right (its source says so), so when most of the group is listed the reference
  rank is the odd one. The smaller side of that vote is named; a tie names nobody.
  ``COLLECTIVE_STATE_MISMATCH`` (one rank's entry completed, another's not) is timing, not a
  culprit.
- "Missing dump files from ranks {…}" names ranks without a dump: suspects only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_failures import strip_prefix

FR_TRACE = "fr_trace_report"
_JOIN_HEAD = re.compile(r"Not all ranks joining collective(?:,? sequence number:? (?P<seq>\d+)"
                        r"| (?P<seq2>\d+) at entry \d+| for group (?P<group>\S+) collective "
                        r"(?P<op>\S+))?")
_ERR_HEAD = re.compile(r"Collective (?:sequence number: (?P<seq>\d+) has errors|(?P<seq2>\d+) at "
                       r"entry \d+ errors)")
_FIELD = re.compile(r"^\s*(group info|collective|missing ranks|Missing ranks are|expected ranks|"
                    r"world size)\s*:?\s+(?P<value>.+?)\s*$")
_SET = re.compile(r"\{([\d,\s]{0,8000})\}")
_MISSING_INLINE = re.compile(r"Missing ranks are (\{[\d,\s]{0,8000}\})")
_MISMATCH_KIND = {"COLLECTIVE_TYPE_MISMATCH": "op_type_mismatch",
                  "SIZE_OR_SYNTAX_MISMATCH": "size_mismatch",
                  "COLLECTIVE_DTYPE_MISMATCH": "dtype_mismatch"}
#: lines a block may run past its head without a field before it is closed (stack traces)
_SPAN = 200

REMEDIATION = {
    "not_joined": ["torch's Flight Recorder analyzer found no entry of this collective in these "
                   "ranks' dumps while the others recorded it: get their Python stacks (py-spy "
                   "dump) at the next hang; if the ring wrapped (TORCH_NCCL_TRACE_BUFFER_SIZE too "
                   "small), collect larger dumps and run `stormotel analyze --flight-recorder`."],
    "mismatch": ["Ranks ran a different collective (type, size or dtype) at the same sequence "
                 "number: find the rank-dependent code path before it "
                 "(TORCH_DISTRIBUTED_DEBUG=DETAIL fails fast there)."],
    "collect": ["Give `stormotel analyze --flight-recorder` the dumps themselves (every rank's): "
                "the printed report cannot say which side of this block is wrong."],
}


@dataclass
class FrBlock:
    line: int
    kind: str  #: not_joined | errors | missing_dumps
    text: str
    seq: int | None = None
    group: str | None = None
    op: str | None = None
    missing: list[int] | None = None
    expected: list[int] | None = None
    expected_n: int | None = None
    culprits: dict[int, str] = field(default_factory=dict)  #: rank -> error type

    def as_detail(self) -> dict[str, Any]:
        return {"block": self.kind, "seq": self.seq, "group": self.group, "op": self.op,
                "missing": self.missing, "expected": self.expected,
                "expected_n": self.expected_n, "culprits": dict(self.culprits)}


def _set(text: str) -> list[int] | None:
    m = _SET.search(text)
    return gr.parse_rank_list(m.group(1)) if m else None


class FrTraceScanner:
    """Stateful scan over one file's lines: :attr:`blocks` of fr_trace's report."""

    def __init__(self) -> None:
        self.blocks: list[FrBlock] = []
        self._open: FrBlock | None = None
        self._last = 0

    def feed(self, no: int, line: str, low: str) -> None:
        if self._open is None and "not all ranks joining" not in low and "collective" not in \
                low and "missed fr dumps" not in low and "missing dump files" not in low:
            return
        text = strip_prefix(line)
        dumps = gr.BY_ID["torch.fr_trace.missing_dumps"].regex.search(text)
        if dumps:
            ranks = gr.parse_rank_list((dumps.group("ranks") or dumps.group("ranks2") or "")
                                       .strip("{}()"))
            self.blocks.append(FrBlock(no, "missing_dumps", text[:300], missing=ranks))
            return
        head = _JOIN_HEAD.search(text) if "not all ranks joining" in low else None
        err = _ERR_HEAD.search(text) if head is None and "collective" in low else None
        if head or err:
            self.close()
            m = head or err
            assert m is not None
            seq = m.group("seq") or m.group("seq2")
            block = FrBlock(no, "not_joined" if head else "errors", text[:300],
                            seq=int(seq) if seq and len(seq) <= 18 else None)
            if head and head.group("group"):
                block.group, block.op = head.group("group"), head.group("op")
                inline = _MISSING_INLINE.search(text)
                if inline:
                    block.missing = _set(inline.group(1))
            self._open, self._last = block, no
            return
        if self._open is None:
            return
        block = self._open
        for m in gr.BY_ID["torch.fr_trace.culprit"].regex.finditer(text):
            rank = gr.parse_rank(m.group("rank"))
            if rank is not None:
                block.culprits[rank] = m.group("type")
                self._last = no
        f = _FIELD.match(text)
        if f:
            name, value = f.group(1).lower(), f.group("value")
            if name == "group info":
                block.group = value[:200]
            elif name == "collective":
                block.op = value[:100]
            elif name in ("missing ranks", "missing ranks are"):
                block.missing = _set(value)
            elif name == "expected ranks":
                block.expected = _set(value)
                if block.expected is None and _count(value) is not None:
                    block.expected_n = _count(value)
            elif name == "world size" and _count(value) is not None:
                block.expected_n = _count(value)
            self._last = no
        elif no - self._last > _SPAN:
            self.close()

    def close(self) -> None:
        block, self._open = self._open, None
        if block is not None and (block.missing is not None or block.culprits):
            self.blocks.append(block)


def _members(b: dict[str, Any]) -> set[int] | None:
    if b.get("expected"):
        return set(b["expected"])
    n = b.get("expected_n")
    group = str(b.get("group") or "")
    if n and (group.endswith("default_pg") or group in ("0", "0:default_pg")):
        return set(range(n))  # the default group's members are the whole world
    return None


def frtrace_findings(events: list[Any]) -> list[StallFinding]:
    """Findings from the fr_trace blocks pasted in the logs (module docstring)."""
    blocks = [(e, e.detail) for e in events if e.kind == FR_TRACE and e.detail]
    if not blocks:
        return []
    lines = [{"line": f"{e.file}:{e.line}", "text": e.text[:240]} for e, _ in blocks[:8]]
    no_dump = sorted({r for _, b in blocks if b["block"] == "missing_dumps"
                      for r in b["missing"] or []})
    base: dict[str, Any] = {"lines": lines, "no_dump_ranks": no_dump,
                            "blocks": [b for _, b in blocks[:16]]}
    errors = [b for _, b in blocks if b["block"] == "errors"]
    for b in errors:
        f = _error_finding(b, base)
        if f is not None:
            return [f]
    joins = [b for _, b in blocks if b["block"] == "not_joined" and b["missing"]]
    if joins:
        return [_join_finding(joins, base)]
    suspects = no_dump or sorted({r for b in errors for r in b["culprits"]})
    return [_undecided(base, "torch.fr_trace.culprit" if errors else
                       "torch.fr_trace.missing_dumps",
                       "torch's Flight Recorder analyzer reported " + (
                           "only collective-state differences (timing, not a culprit)"
                           if errors else f"dumps missing from ranks {no_dump}")
                       + " — collect every rank's dump", suspects)]


def _undecided(base: dict[str, Any], pattern: str, reason: str, suspects: list[int]
               ) -> StallFinding:
    return StallFinding(kind="undecided", ranks=[], process_group=None, seq_id=None, op=None,
                        source="logs", confidence="low",
                        evidence={**base, "category": "unknown", "pattern": pattern,
                                  "reason": reason, "suspects": suspects[:64],
                                  "collect_next": suspects[:64] or None},
                        remediation=list(REMEDIATION["collect"]))


def _error_finding(b: dict[str, Any], base: dict[str, Any]) -> StallFinding | None:
    listed = {int(r): t for r, t in b["culprits"].items() if t in _MISMATCH_KIND}
    if not listed:
        return None
    members = _members(b)
    ev = {**base, "category": "mismatched_collective", "pattern": "torch.fr_trace.culprit",
          "fr_trace_culprits": sorted(listed), "group": b.get("group")}
    kind = _MISMATCH_KIND[sorted(listed.values())[0]]
    where = f"collective #{b.get('seq')} ({b.get('op') or '?'}) of group {b.get('group') or '?'}"
    if members is None or not set(listed) <= members:
        small = members is None and len(listed) == 1
        if not small:
            return _undecided(ev, "torch.fr_trace.culprit",
                              f"fr_trace lists ranks {sorted(listed)} as differing from its "
                              f"reference rank at {where}, and the group's members are not "
                              "printed — collect the dumps", sorted(listed))
        members = set()
    rest = members - set(listed)
    if members and len(rest) < len(listed) and rest:
        culprits, why = sorted(rest), (
            f"fr_trace compares every rank with its first rank and lists {len(listed)} of "
            f"{len(members)} as differing at {where}: the reference side is the odd one")
    elif not members or len(listed) < len(rest):
        culprits, why = sorted(listed), (
            f"fr_trace: rank(s) {sorted(listed)} ran a different collective at {where} "
            f"({', '.join(sorted(set(listed.values())))})")
    else:
        return _undecided(ev, "torch.fr_trace.culprit",
                          f"fr_trace lists half of the group as differing at {where}: no "
                          "majority", sorted(members))
    whole = bool(members) and len(culprits) * 2 < len(members) - len(culprits)
    ev["reason"] = why
    return StallFinding(kind=kind, ranks=culprits, process_group=b.get("group"),  # type: ignore[arg-type]
                        seq_id=b.get("seq"), op=b.get("op"), source="logs",
                        confidence="medium" if whole else "low", evidence=ev,
                        remediation=list(REMEDIATION["mismatch"]))


def _join_finding(joins: list[dict[str, Any]], base: dict[str, Any]) -> StallFinding:
    present: set[int] = set()
    for b in joins:
        members = _members(b)
        if members is not None:
            present |= members - set(b["missing"])
    union = sorted({r for b in joins for r in b["missing"]})
    culprits = sorted(set(union) - present)
    per_group: dict[str, set[tuple[int, ...]]] = {}
    for b in joins:
        per_group.setdefault(str(b.get("group")), set()).add(tuple(b["missing"]))
    ev = {**base, "category": "straggler_outside_nccl", "pattern": "torch.fr_trace.not_joined",
          "fr_trace_missing": union, "waiting_elsewhere": sorted(set(union) & present)}
    majority = [b for b in joins if (m := _members(b)) and len(b["missing"]) * 2 > len(m)]
    disagree = len({tuple(b["missing"]) for b in joins}) > 1
    if not culprits or majority or any(len(v) > 1 for v in per_group.values()) or (
            disagree and not present):
        return _undecided(ev, "torch.fr_trace.not_joined",
                          "fr_trace found collectives some ranks' dumps do not hold ("
                          + "; ".join(f"{b.get('group')} #{b.get('seq')}: missing {b['missing']}"
                                      for b in joins[:4])
                          + ") but they do not single out one set of ranks (a missing majority, "
                          "several blocks that disagree, or members not printed) — the rings "
                          "may simply have dropped the entries; collect the dumps", union)
    first = joins[0]
    members = _members(first)
    lopsided = members is not None and len(culprits) * 4 <= len(members)
    ev["reason"] = (f"fr_trace found no entry of {first.get('op') or 'the collective'} "
                    f"#{first.get('seq')} (group {first.get('group') or '?'}) in rank(s) "
                    f"{culprits}' dump(s) while the other members recorded it"
                    + (f"; ranks {ev['waiting_elsewhere']} are missing from one group but wait "
                       "in another block's collective (victims)" if ev["waiting_elsewhere"]
                       else ""))
    return StallFinding(kind="straggler", ranks=culprits, process_group=first.get("group"),
                        seq_id=first.get("seq"), op=first.get("op"), source="logs",
                        confidence="medium" if lopsided else "low", evidence=ev,
                        remediation=list(REMEDIATION["not_joined"]))


def _count(value: str) -> int | None:
    """A rank count of up to seven ASCII digits (``str.isdigit`` is also true of '²', which
    ``int`` refuses), else None."""
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 7 else None
