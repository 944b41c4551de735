"""Stall findings as text: the "Stalls" section and the verdict's stall part of the summary.

Rendering lives here, beside the stall analysis, so the summary imports a renderer and nothing
of the command line.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from stormotel.analyzers.families import format_ranks
from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.textlines import capped


def render_stalls(findings: list[StallFinding]) -> list[str]:
    """The "Stalls" section of the text summary: culprits first, consequences indented."""
    if not findings:
        return ["Stalls: none"]
    lines = [f"Stalls ({len(findings)}):"]
    # the size and its source from the same finding: the first finding may come from evidence
    # that states no world (stack snapshots ahead of the logs' findings)
    stated = next((f for f in findings if f.evidence.get("world_size_source")), None)
    if stated is not None:  # imported here: the log readers' patterns are compiled on import,
        # and a summary without stall findings (every memory-only run) needs none of them
        from stormotel.analyzers.stalls.log_world import world_note

        lines.append("  " + world_note(stated.evidence.get("world_size"),
                                       stated.evidence["world_size_source"]))
    for i, f in enumerate(findings):
        who = ("ranks " + format_ranks(f.ranks)) if f.ranks else "no single rank"
        where = f" — group {f.process_group}" if f.process_group else ""
        seq = f" seq {f.seq_id}" if f.seq_id is not None else ""
        op = f" {f.op}" if f.op else ""
        head = f"  [{i}] {f.kind}: {who}{where}{seq}{op} ({f.confidence}, {f.source})"
        if f.consequence_of is not None:
            head = f"  [{i}] consequence of [{f.consequence_of}]: {f.kind}: {who}{where}{seq}"
        lines.append(head)
        reason = f.evidence.get("reason")
        if reason:
            lines.append(f"        {reason}")
        cat = f.evidence.get("category")
        if cat:
            lines.append(f"        category: {cat}")
        if f.evidence.get("proof"):
            lines.append(f"        proved by: {f.evidence['proof']}")
        if f.kind == "rank_failure":
            for r, d in list((f.evidence.get("per_rank") or {}).items())[:4]:
                lines.append(f"        rank {r} at {d.get('line')}: {str(d.get('text'))[:160]}")
        if f.evidence.get("suspects"):
            lines.append(f"        suspects: ranks {format_ranks(f.evidence['suspects'])}")
        if f.evidence.get("unseen_ranks"):
            lines.append(f"        unseen (no dump): ranks {f.evidence['unseen_ranks']}")
        if f.remediation and f.consequence_of is None:
            lines.append(f"        fix: {f.remediation[0]}")
        table = f.evidence.get("state_table")
        if table and f.consequence_of is None:
            lines.extend(_state_table_lines(table))
    return lines


MAX_TABLE_RANKS = 16


def _state_table_lines(table: list[dict[str, Any]]) -> list[str]:
    """The per-rank watchdog state (log findings), outliers first so a big job stays short."""
    common = Counter((r["role"], r["seq"], r["enqueued"], r["completed"]) for r in table)
    typical = common.most_common(1)[0][0] if common else None
    rows = sorted(table, key=lambda r: ((r["role"], r["seq"], r["enqueued"],
                                         r["completed"]) == typical, r["rank"]))
    return ["        rank  role       seq   op              enqueued  completed",
            *capped(rows, MAX_TABLE_RANKS,
                    lambda r: (f"        {r['rank']:<5} {r['role']:<10} {_s(r['seq']):<5} "
                               f"{_s(r['op']):<15} {_s(r['enqueued']):<9} {_s(r['completed'])}"),
                    lambda n: f"        ... {n} more ranks like the last ones "
                              "(JSON report has all)")]


def _s(v: object) -> str:
    return "-" if v is None else str(v)
