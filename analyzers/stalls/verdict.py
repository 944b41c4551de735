"""One verdict from every source of the same job: logs, Flight Recorder dumps (and telemetry).

Each source is analysed on its own; this joins their findings into one list where the story
leads. A rank's own failure read from its log (``rank_failure`` that precedes the timeouts)
explains what the Flight Recorder sees as that rank being behind, silent or missing: those
findings become its consequences. Roots come first; ``consequence_of`` indices are re-based.
"""

from __future__ import annotations

import dataclasses

from analyzers.report import StallFinding


def join_sources(findings: list[StallFinding]) -> list[StallFinding]:
    """Link other sources' findings to a log ``rank_failure`` they are explained by."""
    failures = [i for i, f in enumerate(findings) if f.kind == "rank_failure"
                and f.consequence_of is None and f.evidence.get("precedes_timeouts")]
    if not failures:
        return findings
    failing = {r for i in failures for r in findings[i].ranks}
    parent: dict[int, int] = {}
    for i, f in enumerate(findings):
        if f.consequence_of is not None or f.kind == "rank_failure" or f.source == "logs":
            continue
        blamed = set(f.evidence.get("behind_ranks") or f.ranks or f.evidence.get("suspects")
                     or ())
        if blamed and blamed <= failing:
            parent[i] = next(j for j in failures if blamed & set(findings[j].ranks))
    if not parent:
        return findings
    order = [i for i, f in enumerate(findings) if f.consequence_of is None and i not in parent]
    order += [i for i in range(len(findings)) if i not in order]
    new_index = {old: new for new, old in enumerate(order)}
    out = []
    for old in order:
        f = findings[old]
        link = parent.get(old, f.consequence_of)
        f = dataclasses.replace(f, consequence_of=None if link is None else new_index[link])
        if old in parent:
            f.evidence = {**f.evidence, "explained_by": "a rank_failure in the logs "
                          f"(rank(s) {sorted(failing)})"}
        out.append(f)
    return out
