"""NCCL RAS reports judged side by side: what each count split or missing list proves
(:mod:`.log_ras` reads them). Beside the reader, not in :mod:`.log_witness`, so the scanner
table (:mod:`.log_scanners`) reaches this rule without importing the log parser, and a live
query (:mod:`.nccl_ras`) is judged by the same rules as a pasted report."""

from __future__ import annotations

from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls.log_ras import RAS_SPLIT

RAS_REMEDIATION = [
    "NCCL RAS saw these ranks behind (fewer operations launched) or not answering: repeat "
    "the query — a split that does not move is a stall — and get these ranks' stacks."]


def _ras_finding(kind: str, ranks: list[int], category: str, confidence: str, pattern: str,
                 reason: str, *, op: str | None = None, **ev: Any) -> StallFinding:
    return StallFinding(kind=kind, ranks=ranks, process_group=None,  # type: ignore[arg-type]
                        seq_id=None, op=op, source="logs",
                        confidence=confidence,  # type: ignore[arg-type]
                        evidence={"category": category, "pattern": pattern, "reason": reason,
                                  **ev},
                        remediation=list(RAS_REMEDIATION))


def ras_findings(events: list[Any], world_size: int | None = None
                 ) -> list[StallFinding]:
    """RAS splits, read side by side (what each side proves: :mod:`.log_ras`); ``medium`` only
    where the communicator is the whole known world (its ranks are then the global ranks) and
    the named side is a clear minority, else ``low``; ``undecided`` where the counts alone
    cannot say which side is wrong."""
    sizes: dict[str, int] = {}
    for e in events:  # a communicator's size, from its count groups (those that answered)
        if e.kind == RAS_SPLIT and e.detail and e.detail["groups"]:
            d = e.detail
            sizes[d["comm"]] = max(sizes.get(d["comm"], 0), sum(n for n, _ in d["groups"]))
    out = []
    for e in events:
        if e.kind != RAS_SPLIT or not e.detail:
            continue
        d = e.detail
        where = {"line": f"{e.file}:{e.line}", "communicator": d["comm"], "op": d["op"],
                 "groups": [list(g) for g in d["groups"]]}
        if d["missing"] or d.get("missing_n"):
            out.append(_ras_missing(d, where, sizes.get(d["comm"]), world_size))
            continue
        if d["groups"]:
            out.append(_ras_counts(d, where, world_size))
        elif d.get("cut"):
            out.append(_ras_finding(
                "undecided", [], "collective_count_split", "low", "nccl.ras.mismatch_head",
                f"NCCL RAS: the ranks of communicator {d['comm']} launched different numbers of "
                f"{d['op']} operations (its heading says so), but the report stops before the "
                "groups: which ranks are behind is not in this log — query again (`ncclras`, "
                "`-v` lists more ranks) and keep the whole report", suspects=[],
                ranks_are="communicator ranks", **where))
    return out


def _ras_missing(d: dict[str, Any], where: dict[str, Any], answered: int | None,
                 world_size: int | None) -> StallFinding:
    missing = sorted(set(d["missing"]))
    n = max(int(d.get("missing_n") or 0), len(missing))
    total = answered + n if answered else world_size
    if len(missing) < n or (total and n * 2 >= total):
        return _ras_finding(
            "undecided", [], "unknown", "low", "nccl.ras.missing",
            f"NCCL RAS got no data from {n} rank(s) of communicator {d['comm']}"
            + (f" (of {total})" if total else "") + (
                " and lists none of them (RAS lists only an outlier count): query again with "
                "`ncclras -v`" if len(missing) < n else
                " — most of the communicator: the querying node may be cut off from the "
                "others; query from another node") + ", and collect the silent processes' "
            "state (are they alive? dmesg, py-spy dump)", suspects=missing[:64],
            collect_next=missing[:64] or None, ranks_are="communicator ranks", **where)
    whole = bool(total) and total == world_size
    return _ras_finding(
        "straggler", missing, "ras_missing",
        "medium" if whole and n * 4 <= (total or 0) else "low", "nccl.ras.missing",
        f"NCCL RAS got no data from rank(s) {missing} of communicator {d['comm']}: their "
        "processes did not answer (RAS's thread runs beside the training thread, so a process "
        "stuck in Python still answers: dead, stopped or unreachable)",
        ranks_are="communicator ranks", spoke={"ranks": (total or 0) - n, "of": total},
        **where)


def _ras_counts(d: dict[str, Any], where: dict[str, Any], world_size: int | None
                ) -> StallFinding:
    groups = d["groups"]
    total = sum(n for n, _ in groups)
    top = max(c for _, c in groups)
    n_behind = sum(n for n, c in groups if c < top)
    n_ahead = total - n_behind
    counts = d["counts"]
    behind = sorted(r for r, c in counts.items() if c < top)
    ahead = sorted(r for r, c in counts.items() if c == top)
    spoke = {"ranks": total, "of": world_size}
    what = f"{d['op']} operations"
    if n_behind < n_ahead and len(behind) == n_behind:
        lopsided = n_behind * 4 <= total and total == world_size
        return _ras_finding(
            "straggler", behind, "straggler_outside_nccl", "medium" if lopsided else "low",
            "nccl.ras.count_group",
            f"NCCL RAS: {n_ahead} of {total} ranks of communicator {d['comm']} launched up to "
            f"{what[:-1]} {top}; rank(s) {behind} launched fewer "
            f"({sorted({counts[r] for r in behind})}) — they have not called the operation the "
            "others wait in (a split that stays across queries is a stall)",
            ranks_are="communicator ranks", behind=behind, spoke=spoke, **where)
    if n_behind < n_ahead:
        reason = (f"NCCL RAS: {n_behind} of {total} ranks of communicator {d['comm']} launched "
                  f"fewer {what} than the others, and the report does not list them rank by "
                  "rank (RAS lists only outlier groups): query again with `ncclras -v`")
    elif n_ahead < n_behind:
        reason = (f"NCCL RAS: only {n_ahead} of {total} ranks of communicator {d['comm']} "
                  f"launched {what[:-1]} {top}" + (f" (ranks {ahead})" if ahead else "")
                  + f"; the other {n_behind} have not. Two readings fit the same counts: the "
                  "few ahead took a code path the others do not (a conditional collective), or "
                  "the many behind are blocked before it together (a host-side wait on the "
                  "previous operation, another communicator) — one snapshot cannot tell them "
                  "apart. Repeat the query (a split that moves is no stall) and get the Python "
                  "stacks of the ranks ahead and of a few ranks behind")
    else:
        reason = (f"NCCL RAS: communicator {d['comm']} is split evenly ({groups}) between ranks "
                  f"that launched {what[:-1]} {top} and ranks that did not: no side is a "
                  "minority — collect both sides' stacks and Flight Recorder dumps")
    return _ras_finding("undecided", [], "collective_count_split", "low", "nccl.ras.count_group",
                    reason, suspects=(ahead if n_ahead < n_behind else behind)[:64],
                    ahead=ahead, behind=behind, ranks_are="communicator ranks", spoke=spoke,
                    **where)
