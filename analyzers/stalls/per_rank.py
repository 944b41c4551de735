"""One view per rank from every stall source: where it is, what each source says of it, and the
findings that name it.

Each source contributes through one entry of :data:`RANK_SOURCES` — a name and a function from
the report's ``extra["stalls"]`` (what :mod:`~stormotel.analyzers.stalls.cli_support` stored
for that source) to ``{rank: {...what this source says of the rank...}}``. A new evidence
source (NCCL RAS's live status, an on-demand Flight Recorder dump) plugs in by storing its
per-rank view under its own key in ``extra["stalls"]`` and appending one entry here; the
summary, the JSON (``extra["stalls"]["per_rank"]``) and the HTML show it with no other change.

Why joined per rank and not per finding: a Flight Recorder dump that can only say "undecided"
and a snapshot that shows the rank in its own code describe the same rank; the reader needs
both side by side, each source's contribution stated, and no source hiding another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stormotel.analyzers.report import Report, StallFinding
from stormotel.analyzers.textlines import capped

RankView = dict[int, dict[str, Any]]
RankSource = Callable[[dict[str, Any]], RankView]

#: ranks the summary lists (every rank a finding names comes first)
MAX_RANK_LINES = 16


def _from_stacks(stalls: dict[str, Any]) -> RankView:
    places = (stalls.get("stacks") or {}).get("places") or {}
    return {int(r): dict(p) for r, p in places.items() if str(r).isdigit()}


def _group_rows(source: str, key: str, fields: tuple[str, ...]) -> RankSource:
    """A source stored as ``{group: [row per rank]}`` under ``stalls[source][key]``: each rank's
    ``fields`` per group (the Flight Recorder's rank states and the logs' state tables are the
    same shape with different columns)."""

    def view(stalls: dict[str, Any]) -> RankView:
        out: RankView = {}
        tables = (stalls.get(source) or {}).get(key) or {}
        for group, rows in tables.items():
            for row in rows if isinstance(rows, list) else []:
                if isinstance(row, dict) and type(row.get("rank")) is int:
                    out.setdefault(row["rank"], {}).setdefault("groups", {})[str(group)] = {
                        k: row.get(k) for k in fields}
        return out

    return view


_from_flight_recorder = _group_rows(
    "flight_recorder", "rank_states", ("last_seq", "last_op", "last_completed", "pending"))
_from_logs = _group_rows("logs", "state_tables", ("role", "seq", "op", "completed"))


#: (source name, its per-rank view): append here to join a new source
RANK_SOURCES: list[tuple[str, RankSource]] = [
    ("stacks", _from_stacks),
    ("flight_recorder", _from_flight_recorder),
    ("logs", _from_logs),
]


def join_ranks(stalls: dict[str, Any], findings: list[StallFinding]) -> dict[str, Any]:
    """``{rank: {"sources": {name: view}, "findings": [...]}}`` (string keys, for the JSON)."""
    joined: dict[int, dict[str, Any]] = {}
    for name, source in RANK_SOURCES:
        try:
            view = source(stalls)
        except (TypeError, ValueError, AttributeError):
            continue  # a source's odd shape never hides the others
        for rank, said in view.items():
            joined.setdefault(rank, {"sources": {}, "findings": []})["sources"][name] = said
    for i, f in enumerate(findings):
        named = set(f.ranks) | {r for r in f.evidence.get("suspects") or ()
                                if type(r) is int}
        for rank in named:
            role = "culprit" if rank in f.ranks else "suspect"
            joined.setdefault(rank, {"sources": {}, "findings": []})["findings"].append(
                {"index": i, "kind": f.kind, "role": role, "source": f.source,
                 "confidence": f.confidence})
    return {str(r): joined[r] for r in sorted(joined)}


def place_text(place: dict[str, Any]) -> str:
    """``in all_reduce, at train (hang.py:69), step 15, marks [...]`` from a stacks place."""
    parts = []
    if place.get("collective"):
        parts.append(f"inside {place['collective']}" + (
            f" ({place['collective_inferred']})" if place.get("collective_inferred") else ""))
    else:
        parts.append("in its own code (no collective)")
    if place.get("function"):
        parts.append(f"at {place['function']} ({place.get('file')}:{place.get('line')})")
    if place.get("step") is not None:
        parts.append(f"step {place['step']}")
    if place.get("marks"):
        parts.append(f"marks this step {list(place['marks'])[-3:]}")
    if place.get("pending"):
        parts.append("its tracker never ran again (GIL held or killed)")
    return ", ".join(parts)


def render_places(report: Report) -> list[str]:
    """The summary's "Where each rank is" lines: per rank, its main thread's place (from the
    snapshots), what the other sources say, and the findings that name it."""
    per_rank = (report.extra.get("stalls") or {}).get("per_rank") or {}
    if not per_rank or not report.stall_findings:
        return []
    named = [r for r, v in per_rank.items() if v.get("findings")]
    order = named + [r for r in per_rank if r not in named]

    def line(rank: str) -> str:
        view = per_rank[rank]
        sources = view.get("sources") or {}
        bits = []
        if "stacks" in sources:
            bits.append("main thread " + place_text(sources["stacks"]))
        for name, said in sources.items():
            if name == "stacks":
                continue
            groups = said.get("groups") if isinstance(said, dict) else None
            if groups:
                g, st = next(iter(groups.items()))
                bits.append(f"{name}: group {g} " + ", ".join(
                    f"{k}={v}" for k, v in st.items() if v is not None))
            elif said:
                bits.append(f"{name}: {said}")
        found = [f"[{f['index']}] {f['kind']} {f['role']} ({f['confidence']}, {f['source']})"
                 for f in view.get("findings") or []][:3]
        if found:
            bits.append("named by " + "; ".join(found))
        return f"  rank {rank}: " + ("; ".join(bits) or "no per-rank evidence")

    return ["Where each rank is (per source):",
            *capped(order, MAX_RANK_LINES, line,
                    lambda n: f"  ... {n} more rank(s) in the JSON report (extra.stalls.per_rank)")]
