"""Findings from a rank's own errors and from what PyTorch itself concluded.

- ``rank_failure``: each rank's earliest own error (see :mod:`log_failures`), one finding per
  category, ordered in time against the first watchdog timeout of any rank. A failure that
  precedes the timeouts is a root cause and the timeouts are its consequences; one that comes
  after them is itself a consequence (an OOM while tearing down after a timeout is not why the
  job hung).
- desync reports name the lagging/dead/mismatched ranks directly (``straggler``, category
  ``desync_report``);
- DETAIL fingerprints are voted on: the ranks whose fingerprint differs from the majority are
  the culprits; two ranks that disagree, or a tie, are ``undecided`` with both sides as
  suspects (nothing says which side is wrong).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import logs_parser as lp
from stormotel.analyzers.stalls.vote import minority_vote

FAILURE_ORDER = ("oom", "cuda_error", "nccl_error", "storage", "data", "exception", "signal")

REMEDIATION: dict[str, list[str]] = {
    "oom": ["The rank ran out of memory (GPU; host memory for \"can't allocate memory\"); the "
            "others then waited for it in the next collective. Fix the OOM (smaller "
            "micro-batch, activation checkpointing, PYTORCH_CUDA_ALLOC_CONF="
            "expandable_segments:True; see the memory findings) — the timeouts are its echo."],
    "cuda_error": ["The rank hit a CUDA error of its own (illegal memory access, device-side "
                   "assert, ECC): rerun with CUDA_LAUNCH_BLOCKING=1 on that rank, check dmesg "
                   "for Xid errors on its GPU."],
    "nccl_error": ["NCCL failed on this rank itself (not a peer): check NCCL_DEBUG=WARN output "
                   "of that rank and its GPU/NIC."],
    "exception": ["The rank raised a Python exception while its peers went on into the next "
                  "collective: fix the exception at the frame shown; peers' timeouts follow."],
    "storage": ["The rank failed on storage (disk full, I/O error) — typically while saving a "
                "checkpoint — and the others waited for it."],
    "data": ["The rank failed in data loading while the others waited: make the loader fail "
             "loudly and check that rank's shard."],
    "signal": ["The launcher saw the rank killed by a signal: SIGKILL (-9) is usually the host "
               "OOM killer (check dmesg / cgroup memory), SIGSEGV/SIGBUS a native crash."],
    "desync_report": ["PyTorch's desync report named these ranks: find out why they did not "
                      "reach the collective (py-spy dump at the next hang, their own logs)."],
}


def rank_failure_findings(events: list[lp.LogEvent], first_timeout_ns: int | None,
                          timed_out_ranks: set[int]) -> list[StallFinding]:
    """One finding per failure category, earliest first (``consequence_of`` set by the caller)."""
    first: dict[int, lp.LogEvent] = {}
    for e in sorted((e for e in events if e.kind == lp.RANK_ERROR and e.rank is not None
                     and not (e.detail or {}).get("ambiguous")),
                    key=lambda e: (e.ts_ns is None, e.ts_ns or 0, e.file, e.line)):
        assert e.rank is not None and e.detail is not None
        seen = first.get(e.rank)
        if seen is None or _better(e, seen):
            first[e.rank] = e
    by_cat: dict[str, list[lp.LogEvent]] = defaultdict(list)
    for e in first.values():
        assert e.detail is not None
        by_cat[str(e.detail["category"])].append(e)
    out = []
    for cat, evs in by_cat.items():
        evs.sort(key=lambda e: (e.ts_ns is None, e.ts_ns or 0))
        ranks = sorted({e.rank for e in evs if e.rank is not None})
        ts = [e.ts_ns for e in evs if e.ts_ns is not None]
        earliest = min(ts) if ts else None
        order, precedes, confidence = _order(earliest, first_timeout_ns, ranks,
                                             timed_out_ranks, evs)
        if confidence == "high" and all((e.detail or {}).get("launcher_only") for e in evs):
            confidence = "medium"  # an exit code without the rank's own traceback
        if all((e.detail or {}).get("weak_rank") for e in evs):
            confidence = "low"  # the rank inferred from NCCL's device map, not stated
        per_rank = {str(e.rank): {k: v for k, v in (e.detail or {}).items() if k != "category"}
                    | {"line": f"{e.file}:{e.line}", "text": e.text[:240], "ts_ns": e.ts_ns}
                    for e in evs}
        ev: dict[str, Any] = {"category": cat, "pattern": evs[0].pattern or "python.exception",
                              "order": order, "precedes_timeouts": precedes,
                              "first_error_ns": earliest,
                              "first_timeout_ns": first_timeout_ns, "per_rank": per_rank,
                              "reason": _reason(cat, evs, order)}
        lead = evs[0].detail or {}
        for key in ("requested_bytes", "frame", "exception", "signal", "exit_code", "error",
                    "rank_from", "process"):
            if key in lead:
                ev[key] = lead[key]
        out.append(StallFinding(kind="rank_failure", ranks=ranks, process_group=None,
                                seq_id=None, op=None, source="logs",
                                confidence=confidence,  # type: ignore[arg-type]
                                evidence=ev, remediation=list(REMEDIATION[cat])))
    out.sort(key=lambda f: (f.evidence["first_error_ns"] is None,
                            f.evidence["first_error_ns"] or 0,
                            FAILURE_ORDER.index(f.evidence["category"])))
    return out


def _better(new: lp.LogEvent, old: lp.LogEvent) -> bool:
    """Same rank, two errors: the earlier wins; at the same time the more specific one."""
    if new.ts_ns is not None and old.ts_ns is not None and new.ts_ns != old.ts_ns:
        return new.ts_ns < old.ts_ns
    rank_new = FAILURE_ORDER.index(str((new.detail or {})["category"]))
    rank_old = FAILURE_ORDER.index(str((old.detail or {})["category"]))
    return rank_new < rank_old


def _order(earliest: int | None, first_timeout: int | None, ranks: list[int],
           timed_out: set[int], evs: list[lp.LogEvent]) -> tuple[str, bool | None, str]:
    """(how it is ordered, whether it precedes the timeouts — None: unknown, confidence)."""
    launcher = any((e.detail or {}).get("launcher_root_cause") for e in evs)
    if first_timeout is None:
        return ("no watchdog timeout in the logs", True,
                "high" if launcher or len(ranks) <= 2 else "medium")
    if earliest is not None:
        if earliest < first_timeout:
            lead = (first_timeout - earliest) / 1e9
            return f"{lead:.1f} s before the first watchdog timeout", True, "high"
        return "after the first watchdog timeout", False, "low"
    if set(ranks) & timed_out:
        return "order unknown (untimed, and the rank also timed out)", None, "low"
    return ("order unknown (untimed); the failing rank has no watchdog timeout of its own",
            True, "medium")


def _reason(cat: str, evs: list[lp.LogEvent], order: str) -> str:
    who = ", ".join(str(e.rank) for e in evs)
    d = evs[0].detail or {}
    what = {"oom": "out of memory" + (f" (tried to allocate {d['requested_bytes']} B)"
                                          if "requested_bytes" in d else ""),
            "signal": f"killed by {d.get('signal') or 'a signal'} (exit code {d.get('exit_code')})",
            }.get(cat) or str(d.get("error") or d.get("exception") or cat)
    where = f" in {d['frame']}" if d.get("frame") else ""
    return f"rank {who}: {what}{where}; {order}"


# --- PyTorch's own conclusions ---------------------------------------------------------------
def desync_findings(events: list[lp.LogEvent]) -> list[StallFinding]:
    reports = [e for e in events if e.kind == lp.DESYNC_REPORT and e.detail]
    if not reports:
        return []
    per_report: dict[tuple[str, object], set[int]] = defaultdict(set)
    for e in reports:  # one report may list several ranks, one line each
        per_report[(e.file, (e.detail or {}).get("head"))].update((e.detail or {})["culprits"])
    votes = Counter(tuple(sorted(c)) for c in per_report.values())
    (culprits, _), *others = votes.most_common()
    confidence = "high" if not others else "medium"
    ev = {"category": "desync_report", "pattern": "torch.nccl.desync_report",
          "reason": "PyTorch's desync report: the lagging/dead/"
          f"mismatched ranks that caused the desync are {list(culprits)} — "
          f"{(reports[0].detail or {}).get('why', '')}",
          "reports": [{"line": f"{e.file}:{e.line}", "text": e.text} for e in reports[:8]],
          "disagreeing_reports": [list(c) for c, _ in others]}
    return [StallFinding(kind="straggler", ranks=list(culprits), process_group=None,
                         seq_id=None, op=None, source="logs",
                         confidence=confidence,  # type: ignore[arg-type]
                         evidence=ev, remediation=list(REMEDIATION["desync_report"]))]


_ASPECTS = (("OpType", "op_type_mismatch"), ("TensorShape", "size_mismatch"),
            ("TensorDtypes", "dtype_mismatch"))


def fingerprint_findings(events: list[lp.LogEvent], remediation: list[str]
                         ) -> list[StallFinding]:
    prints: dict[int, dict[str, str]] = {}
    lines = []
    for e in events:
        if e.kind != lp.FINGERPRINT or not e.detail:
            continue
        prints.setdefault(int(e.detail["of_rank"]), dict(e.detail["fingerprint"]))
        lines.append(f"{e.file}:{e.line}")
    if len(prints) < 2:
        return []
    values = {r: tuple(fp.get(k) for k, _ in _ASPECTS) for r, fp in prints.items()}
    if len(set(values.values())) == 1:
        return []
    differing = [kind for i, (_, kind) in enumerate(_ASPECTS)
                 if len({v[i] for v in values.values() if v[i] is not None}) > 1]
    kind = differing[0] if differing else "op_type_mismatch"
    vote = minority_vote(values)
    per_rank = {str(r): prints[r] for r in sorted(prints)}
    ev: dict[str, Any] = {"category": "mismatched_collective", "per_rank": per_rank,
                          "pattern": "torch.detail.fingerprint_mismatch",
                          "lines": lines[:16], "differs_in": differing,
                          "spoke": {"ranks": len(prints)}}
    seq = next((fp.get("SequenceNumber") for fp in prints.values()), None)
    op = next((fp.get("OpType") for fp in prints.values()), None)
    if len(prints) == 2 or vote is None:
        ev["suspects"] = sorted(prints)
        ev["reason"] = (f"TORCH_DISTRIBUTED_DEBUG=DETAIL: {len(prints)} ranks disagree on "
                        f"{', '.join(differing) or 'the collective'} with no majority — "
                        "nothing says which side is wrong; collect the fingerprints of the "
                        "other ranks of the group")
        return [StallFinding(kind="undecided", ranks=[], process_group=None,
                             seq_id=_seq(seq), op=op, source="logs", confidence="low",
                             evidence=ev, remediation=list(remediation))]
    culprits = vote[0]
    ev["reason"] = (f"TORCH_DISTRIBUTED_DEBUG=DETAIL fingerprints: {len(culprits)} of "
                    f"{len(prints)} ranks run a different collective ({', '.join(differing)})")
    return [StallFinding(kind=kind, ranks=culprits, process_group=None,  # type: ignore[arg-type]
                         seq_id=_seq(seq), op=op, source="logs",
                         confidence="high" if len(culprits) == 1 else "medium",
                         evidence=ev, remediation=list(remediation))]


def _seq(text: str | None) -> int | None:
    return int(text) if text and text.isascii() and text.isdigit() and len(text) <= 18 else None
