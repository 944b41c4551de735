"""Findings from lines where one rank reports on others, and from splits across ranks.

A witness is not a culprit: ``[Rank 0]: Ranks 4, 5, 6, 7 failed to pass monitoredBarrier``
printed by rank 0 names ranks 4-7. A split (op A vs op B at one NCCL opCount, operation
counts per rank in an NCCL RAS report) names the minority by a vote, with a confidence that
says how much of the group spoke. Each finding names its catalogue pattern
(``evidence["pattern"]``, :mod:`.grammar`).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections import Counter, defaultdict
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import logs_parser as lp
from stormotel.analyzers.stalls.log_ras_verdicts import RAS_REMEDIATION
from stormotel.analyzers.stalls.vote import minority_vote

REMEDIATION: dict[str, list[str]] = {
    "witnessed": [
        "Another rank's report names these ranks as the ones that never arrived: get their "
        "Python stacks (py-spy dump) at the next hang and read their own logs — the reporter "
        "only waited for them."],
    "barrier_timeout": [
        "monitored_barrier ran out of time before it had probed every rank: rerun it with "
        "wait_all_ranks=True so it names every rank that did not arrive."],
    "nccl_coll_split": [
        "Ranks launched different NCCL collectives (or sizes) at the same opCount: find the "
        "rank-dependent code path before it; TORCH_DISTRIBUTED_DEBUG=DETAIL fails fast there."],
    "nccl_coll_behind": [
        "These ranks never launched the collective the others launched (their last NCCL "
        "opCount is lower): they are stuck outside NCCL — get their Python stacks."],
    "nccl_all_launched": [
        "Every rank that spoke launched the same last collective: nobody is behind in NCCL. "
        "The hang is inside the collective (fabric, GPU, another communicator): collect "
        "Flight Recorder dumps (TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT=1) and "
        "an NCCL RAS status (ncclras) while it hangs."],
    "ras": RAS_REMEDIATION,
    "collect": [
        "The logs given show a failure but not who caused it: collect every rank's log "
        "(NCCL_DEBUG=INFO, TORCH_NCCL_DESYNC_DEBUG=1) and Flight Recorder dumps."],
}


def _finding(kind: str, ranks: list[int], category: str, confidence: str, pattern: str,
             reason: str, remediation: str, *, op: str | None = None, seq: int | None = None,
             group: str | None = None, **ev: Any) -> StallFinding:
    return StallFinding(kind=kind, ranks=ranks, process_group=group,  # type: ignore[arg-type]
                        seq_id=seq, op=op, source="logs",
                        confidence=confidence,  # type: ignore[arg-type]
                        evidence={"category": category, "pattern": pattern, "reason": reason,
                                  **ev},
                        remediation=list(REMEDIATION[remediation]))


# --- a rank reports on others ------------------------------------------------------------
def witness_findings(events: list[lp.LogEvent]) -> list[StallFinding]:
    """monitoredBarrier failures and desync "never joined" lines: the named ranks."""
    by_pattern: dict[str, Counter[tuple[int, ...]]] = defaultdict(Counter)
    lines: dict[str, list[lp.LogEvent]] = defaultdict(list)
    for e in events:
        if e.kind == lp.WITNESS and e.detail and e.detail.get("culprits") and e.pattern:
            by_pattern[e.pattern][tuple(e.detail["culprits"])] += 1
            lines[e.pattern].append(e)
    out = []
    for pid, votes in by_pattern.items():
        (culprits, _), *others = votes.most_common()
        evs = lines[pid]
        witnesses = sorted({int(w) for e in evs if e.detail
                            and (w := e.detail.get("witness")) is not None})
        complete = pid != "torch.gloo.monitored_barrier_rank"
        confidence = "high" if complete and not others else "medium"
        what = ("did not reach monitored_barrier in time" if "monitored" in pid
                else "never joined any collective (PyTorch's desync report)")
        reason = (f"rank(s) {witnesses or '?'} reported that rank(s) {list(culprits)} {what}"
                  + ("" if complete else " — the first rank that failed; ranks after it were "
                     "not probed"))
        out.append(_finding(
            "straggler", list(culprits), "witnessed", confidence, pid, reason, "witnessed",
            witnesses=witnesses, disagreeing_reports=[list(c) for c, _ in others],
            lines=[{"line": f"{e.file}:{e.line}", "text": e.text[:240]} for e in evs[:8]]))
    timeouts = [e for e in events if e.kind == lp.BARRIER_TIMEOUT and e.detail
                and e.pattern == "torch.gloo.monitored_barrier_timeout"]
    processed = {(e.file, e.line): e.detail.get("processed") for e in events
                 if e.kind == lp.BARRIER_TIMEOUT and e.detail
                 and e.pattern == "torch.gloo.monitored_barrier_processed"}
    for e in timeouts:
        if e.detail:
            done = list(e.detail.get("processed") or processed.get((e.file, e.line + 1))
                        or [])
            nxt = (max(done) + 1) if done else 1
            out.append(_finding(
                "undecided", [], "barrier_timeout", "low", "torch.gloo.monitored_barrier_timeout",
                f"rank {e.detail.get('witness')} ran out of time in monitored_barrier after "
                f"ranks {done or 'none'} answered; rank {nxt} was being waited for, later ranks "
                "were not probed", "barrier_timeout", suspects=[nxt], collect_next=[nxt],
                lines=[{"line": f"{e.file}:{e.line}", "text": e.text[:240]}]))
            break
    return out


# --- NCCL_DEBUG_SUBSYS=COLL: op and count at one opCount -----------------------------------
_P2P = {"Send", "Recv"}


def coll_findings(events: list[lp.LogEvent], interleaved: bool,
                  world_size: int | None = None) -> list[StallFinding]:
    """Per communicator: the ranks whose collective at one opCount differs, or that are behind."""
    init: dict[tuple[str | None, str], dict[str, Any]] = {}
    for e in events:
        if e.kind == lp.NCCL_INIT and e.detail:
            init[(_proc(e), str(e.detail["comm"]))] = e.detail
    groups: dict[str, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    comms_of: dict[tuple[str, int], set[str]] = defaultdict(set)
    size: dict[str, int] = {}
    src: dict[str, str] = {}
    for e in events:
        if e.kind != lp.NCCL_COLL or not e.detail or e.detail["op"] in _P2P:
            continue
        d = e.detail
        meta = init.get((_proc(e), str(d["comm"])))
        rank = e.rank
        if meta is not None:
            key = str(meta["comm_id"])
            if rank is None:
                rank = meta["comm_rank"]
                src[key] = "communicator ranks (from the NCCL init lines)"
        else:
            key = f"nranks={d['nranks']}"
        if rank is None:
            continue
        size[key] = int(d["nranks"])
        comms_of[(key, rank)].add(str(d["comm"]))
        groups[key][rank].append({**d, "line": f"{e.file}:{e.line}", "text": e.text[:240]})
    out = []
    for key, per_rank in groups.items():
        if key.startswith("nranks=") and (len(per_rank) > size[key] or any(
                len(comms_of[(key, r)]) > 1 for r in per_rank)):
            continue  # several communicators of one size, no init lines to tell them apart
        f = _coll_group(key, per_rank, size[key], interleaved, "nccl.coll")
        if f is not None:
            f.evidence["ranks_are"] = src.get(key, "global ranks (launcher prefix or file)")
            if key in src and size[key] != world_size and f.confidence != "low":
                # communicator ranks are global ranks only for the world's communicator
                f = dataclasses.replace(f, confidence="low")
            out.append(f)
    return out


def _proc(e: lp.LogEvent) -> str | None:
    hp = (e.detail or {}).get("host_pid")
    if hp:
        return ":".join(str(hp).split(":")[:2])
    m = lp.NCCL_HOST_PID.search(e.text)
    return ":".join(m.group(0).split(":")[:2]) if m else e.file


def detail_findings(events: list[lp.LogEvent]) -> list[StallFinding]:
    """DETAIL's per-collective INFO trace: each rank's last SequenceNumber and fingerprint."""
    per_rank: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e.kind != lp.DETAIL_TRACE or not e.detail or e.detail.get("of_rank") is None:
            continue
        d = e.detail
        per_rank[int(d["of_rank"])].append({
            "opcount": d["seq"], "op": d["op"], "count": d["shape"], "dtype": d["dtype"],
            "line": f"{e.file}:{e.line}", "text": e.text[:240]})
    if len(per_rank) < 2:
        return []
    for rows in per_rank.values():  # several groups' traces interleave: not comparable
        if any(b["opcount"] < a["opcount"] for a, b in itertools.pairwise(rows)):
            return []
    f = _coll_group("TORCH_DISTRIBUTED_DEBUG=DETAIL trace", per_rank, None, False,
                    "torch.detail.running_collective")
    return [f] if f is not None else []


def _coll_group(key: str, per_rank: dict[int, list[dict[str, Any]]], nranks: int | None,
                interleaved: bool, pattern: str) -> StallFinding | None:
    """The split of one group's per-rank collective records (NCCL opCounts or DETAIL
    SequenceNumbers): op/size at one number, then who is behind."""
    spoke = len(per_rank)
    whole = nranks is not None and spoke >= nranks
    hexa = pattern == "nccl.coll"

    def num(v: int) -> str:
        return _coll_number(hexa, v)

    ev: dict[str, Any] = {"communicator": key, "spoke": {"ranks": spoke, "of": nranks},
                          "last": {str(r): _brief(v[-1]) for r, v in sorted(per_rank.items())}}
    # 1. the same opCount, a different collective
    mismatch = _coll_mismatch(per_rank, whole, pattern, ev)
    if mismatch is not None:
        return mismatch
    # 2. the last opCount each rank launched
    last = {r: rows[-1]["opcount"] for r, rows in per_rank.items()}
    top = max(last.values())
    op = next(rows[-1]["op"] for rows in per_rank.values() if rows[-1]["opcount"] == top)
    missing = sorted(set(range(nranks)) - set(per_rank)) if nranks and nranks <= 4096 else []
    if len(set(last.values())) > 1:
        behind_vote = minority_vote(last)
        if behind_vote is None or spoke < 3:
            return _finding("undecided", [], "collective_count_split", "low", pattern,
                            "ranks' last collective differs with no majority "
                            f"({ {r: num(v) for r, v in sorted(last.items())} })",
                            "nccl_coll_behind", suspects=sorted(last), **ev)
        culprits, value = behind_vote
        ahead = [r for r in culprits if last[r] > value]
        if ahead:
            # a minority that launched MORE: an extra collective of theirs, or the majority
            # blocked on the host before the next launch (COLL lines are printed at enqueue,
            # asynchronously) — the same counts fit both, as in a RAS count split
            return _finding("undecided", [], "collective_count_split", "low", pattern,
                            f"rank(s) {ahead} launched up to "
                            f"{sorted({num(last[r]) for r in ahead})} while "
                            f"{spoke - len(culprits)} rank(s) stopped at {num(value)}: an extra "
                            "collective on the few, or the many blocked before their next launch "
                            "— collect the stacks of the ranks ahead and of a few behind",
                            "nccl_coll_behind", seq=value, op=op, suspects=sorted(culprits),
                            ahead_ranks=ahead, **ev)
        conf = "medium" if whole and len(culprits) * 2 <= spoke - len(culprits) else "low"
        return _finding(
            "straggler", culprits, "straggler_outside_nccl", conf, pattern,
            f"rank(s) {culprits} last launched "
            f"{sorted({num(last[r]) for r in culprits})} while {spoke - len(culprits)} rank(s) "
            f"reached {num(value)} — they never launched the collective the others wait in",
            "nccl_coll_behind", seq=value, op=op, **ev)
    if missing and nranks and interleaved and len(missing) * 2 < nranks:
        return _finding("straggler", missing, "straggler_outside_nccl", "low", pattern,
                        f"{spoke} of {nranks} ranks of the communicator launched "
                        f"{num(top)} ({op}); rank(s) {missing} logged no collective in the same "
                        "stream", "nccl_coll_behind", seq=top, op=op, **ev)
    return _finding("undecided", [], "fabric" if whole else "unknown", "low", pattern,
                    f"{spoke} of {nranks or '?'} ranks launched the same last collective "
                    f"({num(top)}, {op}); nobody is behind"
                    + ("" if whole else f" — collect the lines of ranks {missing[:16]}"),
                    "nccl_all_launched", seq=top, op=op, collect_next=missing[:64] or None,
                    **ev)


def _coll_number(hexa: bool, v: int) -> str:
    return f"NCCL opCount {v:#x}" if hexa else f"SequenceNumber {v}"


def _coll_mismatch(per_rank: dict[int, list[dict[str, Any]]], whole: bool, pattern: str,
                   ev: dict[str, Any]) -> StallFinding | None:
    """Rule 1 of a group's collective records: ranks launched different collectives (op, size
    or dtype) at the same opCount / SequenceNumber; the minority is named."""
    hexa = pattern == "nccl.coll"

    def num(v: int) -> str:
        return _coll_number(hexa, v)

    at: dict[int, dict[int, tuple[str, int, int]]] = defaultdict(dict)
    for r, rows in per_rank.items():
        for row in rows:
            at[row["opcount"]].setdefault(r, (row["op"], row["count"], row["dtype"]))
    for opcount in sorted(at):
        vals = at[opcount]
        if len(vals) < 2 or len(set(vals.values())) == 1:
            continue
        kind = ("op_type_mismatch" if len({v[0] for v in vals.values()}) > 1 else
                "size_mismatch" if len({v[1] for v in vals.values()}) > 1 else "dtype_mismatch")
        vote = minority_vote(vals) if len(vals) > 2 else None
        per = {str(r): {"op": v[0], "count": v[1], "datatype": v[2]} for r, v in
               sorted(vals.items())}
        if vote is None:
            return _finding("undecided", [], "mismatched_collective", "low", pattern,
                            f"ranks launched different collectives at {num(opcount)} with no "
                            "majority; collect the other ranks' lines",
                            "nccl_coll_split", seq=opcount, suspects=sorted(vals),
                            per_rank=per, **ev)
        culprits = vote[0]
        majority = len(vals) - len(culprits)
        conf = ("medium" if whole and len(culprits) * 2 <= majority else "low")
        return _finding(kind, culprits, "mismatched_collective", conf, pattern,
                        f"at {num(opcount)}, {len(culprits)} of {len(vals)} ranks "
                        f"launched {sorted({v for r, v in vals.items() if r in culprits})} while "
                        f"the others launched {vote[1]}", "nccl_coll_split", seq=opcount,
                        op=vote[1][0], per_rank=per, **ev)
    return None


def _brief(row: dict[str, Any]) -> dict[str, Any]:
    return {"opcount": hex(row["opcount"]), "op": row["op"], "count": row["count"],
            "datatype": row["dtype"], "line": row["line"]}


# --- evidence of a stall that names nobody ----------------------------------------------
#: event kinds that show a stall (or a failed collective) on their own
STALL_KINDS = frozenset({lp.TIMEOUT, lp.COUNTERS, lp.FIRST_SIGNAL, lp.OBSERVED_SIGNAL,
                         lp.HEARTBEAT, lp.TEARDOWN, lp.FINGERPRINT, lp.DESYNC_REPORT,
                         lp.WITNESS, lp.BARRIER_TIMEOUT, lp.GLOO_WAIT, lp.NCCL_COLL, lp.RAS,
                         lp.ELASTIC_FAILED, lp.FABRIC, lp.WATCHDOG_BARE,
                         lp.DETAIL_TRACE, lp.NCCL_WARN, lp.INIT_WAIT, lp.HOROVOD,
                         lp.FR_TRACE, lp.HOROVOD_SHUTDOWN})


def unexplained_findings(events: list[lp.LogEvent]) -> list[StallFinding]:
    """``undecided`` for stall evidence that no rule could read into a verdict (a heartbeat
    monitor, a lone fingerprint cut by the paste, an untagged sub-group timeout, NCCL WARNs):
    a stall was shown, so the answer is never "healthy"."""
    stall = [e for e in events if e.kind in STALL_KINDS]
    if not stall:
        return []
    kinds = Counter(e.kind for e in stall)
    ranks = sorted({e.rank for e in stall if e.rank is not None})
    first = stall[0]
    return [_finding(
        "undecided", [], "unknown", "low", first.pattern or f"log.{first.kind}",
        f"the logs show a stall ({', '.join(f'{n} × {k}' for k, n in kinds.most_common(6))}) "
        f"from rank(s) {ranks or '?'} but not which rank caused it — collect every rank's log "
        "(TORCH_NCCL_DESYNC_DEBUG=1, NCCL_DEBUG=INFO), Flight Recorder dumps "
        "(TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT=1) and py-spy stacks",
        "collect", suspects=ranks,
        lines=[{"line": f"{e.file}:{e.line}", "text": e.text[:240]} for e in stall[:8]])]


#: exit codes a worker dies of by its own fault (not the ones a waiting victim ends with)
_SIGNALS = {-9: "SIGKILL", -11: "SIGSEGV", -7: "SIGBUS", -4: "SIGILL", -8: "SIGFPE"}
_OWN_DEATH = frozenset(_SIGNALS)


def _why_ambiguous(e: lp.LogEvent) -> str:
    d = e.detail or {}
    if d.get("why"):
        return str(d["why"])
    if e.pattern == "torchelastic.failures":
        return ("torchelastic's table lists further failed ranks (after the first observed one: "
                "consequences as often as culprits)")
    if d.get("tied_with"):
        return (f"torchelastic lists rank {e.rank} as the first failure, but ranks "
                f"{d['tied_with']} failed in the same second: first only by polling order")
    if d.get("rank_from"):
        return (f"rank {e.rank} failed ({d.get('category')}), read from a {d['rank_from']}")
    return (f"the launcher saw rank {e.rank} end with {d.get('signal')} first: that is how a "
            "watchdog timeout (SIGABRT) or the launcher's own stop (SIGTERM) ends a rank that "
            "was only waiting")


def every_rank_failed(events: list[lp.LogEvent], seen: set[int]
                      ) -> tuple[list[lp.LogEvent], list[StallFinding]]:
    """The same own error on every rank that printed anything is a code or configuration error
    of the job, not one rank's fault: those errors are taken out of the rank_failure rule and
    reported ``undecided`` (pytorch#121209-like: all ranks exit with one exception)."""
    errors = [e for e in events if e.kind == lp.RANK_ERROR and e.rank is not None and e.detail
              and not e.detail.get("ambiguous")]
    ranks = {e.rank for e in errors}
    if len(ranks) < 2 or not seen or not seen <= ranks:
        return events, []
    signature = {(str(e.detail.get("category")), str(e.detail.get("exception") or ""),
                  str(e.detail.get("error") or e.detail.get("message") or "")[:80])
                 for e in errors if e.detail}
    if len(signature) != 1:
        return events, []
    (cat, exc, msg), = signature
    finding = _finding(
        "undecided", [], "every_rank", "low", errors[0].pattern or "python.exception",
        f"every rank that printed anything ({sorted(r for r in ranks if r is not None)}) "
        f"failed the same way ({cat}: {exc or ''} {msg}".rstrip() + "): a code or "
        "configuration error of the whole job, not one rank's fault", "collect",
        suspects=sorted(r for r in ranks if r is not None),
        lines=[{"line": f"{e.file}:{e.line}", "text": e.text[:240]} for e in errors[:8]])
    return [e for e in events if e not in errors], [finding]


def fallback_findings(events: list[lp.LogEvent], known: int | None = None,
                      lower: int = 0) -> list[StallFinding]:
    """``undecided`` (never healthy) for stall evidence that names no culprit by itself:
    torchelastic failures of local ranks, gloo timeouts, launcher signals a victim dies of.
    ``known``: the world size when evidence states it (decides whether a local rank is a
    global one); ``lower``: the world's lower bound from every rank the logs mention."""
    out = []
    failed = [e for e in events if e.kind == lp.ELASTIC_FAILED and e.detail]
    gloo = [e for e in events if e.kind == lp.GLOO_WAIT]
    ambiguous = [e for e in events if e.kind == lp.RANK_ERROR and e.detail
                 and e.detail.get("ambiguous")]
    if ambiguous:
        ranks = sorted({e.rank for e in ambiguous if e.rank is not None})
        out.append(_finding(
            "undecided", [], "unknown", "low", ambiguous[0].pattern or "torchelastic.root_cause",
            "; ".join(sorted({_why_ambiguous(e) for e in ambiguous}))
            + f" — collect rank(s) {ranks}' own log and every rank's watchdog lines",
            "collect", suspects=ranks, collect_next=ranks,
            lines=[{"line": f"{e.file}:{e.line}", "text": e.text[:240]} for e in ambiguous[:8]]))
    out += _killed_findings(events, failed, known, lower) or \
        _exited_findings(events, failed, known, lower)
    if gloo:
        waiting = sorted({e.rank for e in gloo if e.rank is not None})
        out.append(_finding(
            "undecided", [], "unknown", "low", "torch.gloo.timeout",
            f"rank(s) {waiting or '?'} timed out waiting in a gloo operation (the peer is named "
            "by address only) — collect every rank's log, or use monitored_barrier("
            "wait_all_ranks=True) to have rank 0 name the ranks that did not arrive",
            "collect", suspects=waiting,
            lines=[{"line": f"{e.file}:{e.line}", "text": e.text[:240]} for e in gloo[:8]]))
    return out



def _killed_findings(events: list[lp.LogEvent], failed: list[lp.LogEvent], known: int | None,
                     lower: int) -> list[StallFinding]:
    """The node's only failed worker, dead of its own signal: its global rank where the logs
    prove the node, presumed where nothing shows a second one, else undecided."""
    out: list[StallFinding] = []
    killed = sorted({(int(e.detail["local_rank"]), int(e.detail["exit_code"])) for e in failed
                     if e.detail and e.detail.get("local_rank") is not None
                     and e.detail.get("exit_code") in _OWN_DEATH})
    if failed and len(killed) == 1 and len(failed) == 1:
        (local, code), = killed
        rank, how = node_rank_of(local, events, known)
        lines = [{"line": f"{e.file}:{e.line}", "text": e.text[:240]} for e in failed[:4]]
        why = (f"torchelastic: local rank {local} was killed by {_SIGNALS.get(code)} (exit code "
               f"{code}), the only worker that failed")
        remedy = ["SIGKILL is usually the host's OOM killer (check dmesg / cgroup memory of that "
                  "node); SIGSEGV/SIGBUS a native crash."]
        if rank is not None:
            out.append(StallFinding(
                kind="rank_failure", ranks=[rank], process_group=None, seq_id=None, op=None,
                source="logs", confidence="low",
                evidence={"category": "signal", "pattern": "torchelastic.worker_failed",
                          "exit_code": code, "signal": _SIGNALS.get(code), "local_rank": local,
                          "rank_from": how, "precedes_timeouts": True,
                          "first_error_ns": failed[0].ts_ns,
                          "reason": f"{why}; global rank {rank}: {how}", "lines": lines},
                remediation=remedy))
        elif (second := _second_node(events, known, lower)) is None:  # presumed one node, low
            out.append(StallFinding(
                kind="rank_failure", ranks=[local], process_group=None, seq_id=None, op=None,
                source="logs", confidence="low",
                evidence={"category": "signal", "pattern": "torchelastic.worker_failed_one_node",
                          "exit_code": code, "signal": _SIGNALS.get(code), "local_rank": local,
                          "rank_from": "presumed one node: nothing in the logs shows another",
                          "precedes_timeouts": True, "first_error_ns": failed[0].ts_ns,
                          "collect_next": "the node's rank (torchrun --node_rank, or the "
                          "launcher's 'Root Cause' summary) if the job ran on several nodes",
                          "reason": f"{why}; read as global rank {local} because nothing in the "
                          "logs shows a second node (on node k of a multi-node job it is k x "
                          f"nproc_per_node + {local})", "lines": lines},
                remediation=remedy))
        else:
            workers = _local_workers(events)
            host = _host_of(failed[0].text)
            why += f" on host {host}" if host else ""
            cands = (list(range(local, known, workers)) if known and workers and
                     known % workers == 0 and known > workers else None)
            out.append(_finding(
                "undecided", [], "signal", "low", "torchelastic.worker_failed",
                f"{why} — but a local rank is not a global rank: " + (
                    f"this node's agent shows {workers} workers of {known} (the paste may show "
                    f"fewer): with {workers} per node it is one of global ranks {cands}"
                    if cands else f"the logs show a second node ({second})")
                + "; collect that node's rank (torchrun --node_rank / the agent's 'Rendezvous "
                "complete' lines: group_rank, global_ranks) or the launcher's 'Root Cause' "
                "summary, which names the global rank", "collect",
                local_rank=local, exit_code=code, signal=_SIGNALS.get(code), host=host,
                candidates=cands or [], lines=lines))
    return out


def _exited_findings(events: list[lp.LogEvent], failed: list[lp.LogEvent], known: int | None,
                     lower: int) -> list[StallFinding]:
    """The node's failures that are not one death by signal: one exit > 0 with nobody seen
    waiting is presumed as a death is; anything else names local ranks only (undecided)."""
    out: list[StallFinding] = []
    exited = [e for e in failed if e.detail and e.detail.get("local_rank") is not None
              and int(e.detail.get("exit_code") or 0) > 0]
    if len(failed) == 1 and len(exited) == 1 and not any(e.kind in _WAITED for e in events) \
            and _second_node(events, known, lower) is None:
        # the node's first failure exited non-zero on its own (a Python exception: an OOM, a
        # bug) and nothing shows anyone waiting (a timeout's exception would be a victim's)
        # nor a second node: presumed one node, as for a death by signal
        own = exited[0].detail or {}
        local, code = int(own["local_rank"]), int(own["exit_code"])
        rank, how = node_rank_of(local, events, known)
        out.append(StallFinding(
            kind="rank_failure", ranks=[local if rank is None else rank], process_group=None,
            seq_id=None, op=None, source="logs", confidence="low",
            evidence={"category": "exception", "pattern": "torchelastic.worker_failed_one_node"
                      if rank is None else "torchelastic.worker_failed", "exit_code": code,
                      "local_rank": local, "precedes_timeouts": True,
                      "rank_from": how if rank is not None else
                      "presumed one node: nothing in the logs shows another",
                      "first_error_ns": exited[0].ts_ns,
                      "reason": f"torchelastic: local rank {local} was the node's first failure "
                      f"(exit code {code}: an exception of its own; no rank in the logs timed "
                      "out waiting)" + (f"; global rank {rank}: {how}" if rank is not None else
                                        f"; read as global rank {local} because nothing in the "
                                        "logs shows a second node"),
                      "lines": [{"line": f"{e.file}:{e.line}", "text": e.text[:240]}
                                for e in failed[:4]]},
            remediation=["Read that rank's own traceback (its worker log or the launcher's "
                         "'Root Cause' summary): the exception there is the cause."]))
    elif failed:
        locals_ = sorted({int(e.detail["local_rank"]) for e in failed if e.detail
                          and e.detail.get("local_rank") is not None})
        out.append(_finding(
            "undecided", [], "unknown", "low", "torchelastic.worker_failed",
            f"torchelastic saw local rank(s) {locals_} fail (exit codes "
            f"{sorted({str(e.detail.get('exit_code')) for e in failed if e.detail})}); a local "
            "rank "
            "is not a global rank — collect that node's worker logs and the launcher's "
            "'Root Cause' summary", "collect",
            lines=[{"line": f"{e.file}:{e.line}", "text": e.text[:240]} for e in failed[:8]]))
    return out


def _local_workers(events: list[lp.LogEvent]) -> int:
    """How many workers one agent ran, at least: the pids it stopped ("Sending process P
    closing signal") and the pids it saw fail."""
    pids = {e.detail.get("pid") for e in events if e.detail and e.kind in (
        lp.ELASTIC_CLOSING, lp.ELASTIC_FAILED)}
    return len(pids - {None})


#: evidence that some rank was waiting: a non-signal failure may then be a victim's exception
_WAITED = frozenset({lp.TIMEOUT, lp.COUNTERS, lp.GLOO_WAIT, lp.HEARTBEAT, lp.TEARDOWN,
                     lp.WATCHDOG_BARE, lp.HOROVOD_SHUTDOWN, lp.BARRIER_TIMEOUT})
#: the most GPUs one node commonly holds: a rank above it in the logs means a second node
_NODE_GPUS = 8


def _second_node(events: list[lp.LogEvent], known: int | None, lower: int) -> str | None:
    """What in the logs shows the job ran on more than one node (None: nothing does).

    The agent's node count or group rank, a stated world larger than the workers this agent
    ran (or than one node commonly holds), a global rank above the node's share, or lines of
    two hosts — any of these and a local rank is not presumed global."""
    layout = [e.detail for e in events if e.kind == lp.ELASTIC_LAYOUT and e.detail]
    if any(int(d.get("nodes") or 1) > 1 for d in layout):
        return "the agent's node count is above 1"
    workers = _local_workers(events)
    if known is not None and known > max(workers, 1) and (workers >= 2 or known > _NODE_GPUS):
        return f"the world ({known}) is larger than this node's workers ({workers})"
    highest = max([e.rank for e in events if e.rank is not None] + [lower - 1])
    if highest >= max(workers, _NODE_GPUS):
        return f"rank {highest} appears in the logs"
    hosts = {h for e in events if (h := _host_of(e.text))}
    if len(hosts) > 1:
        return f"lines of {len(hosts)} hosts"
    return None


def node_rank_of(local: int, events: list[lp.LogEvent], known: int | None
                 ) -> tuple[int | None, str]:
    """The global rank of a torchelastic LOCAL rank, only where the logs prove it.

    torchelastic gives each worker ``global_rank = the node's offset + local_rank``
    (agent/server/api.py ``_assign_worker_ranks``): the offset is 0 only on the first node, so
    the local rank is the global one only when the job is known to be one node — the agent's
    rendezvous result says ``group_world_size=1`` or maps ``local_ranks`` to ``global_ranks``;
    the launch config says ``max_nodes : 1``, or ``nproc_per_node`` equals the known world
    size; or this agent ran at least as many workers as the known world size. Otherwise
    ``(None, why)``: a wrong global rank is worse than none."""
    layout = [e.detail for e in events if e.kind == lp.ELASTIC_LAYOUT and e.detail]
    nodes = {d["nodes"] for d in layout if "nodes" in d}
    locals_ = [d["local_ranks"] for d in layout if "local_ranks" in d]
    globals_ = [d["global_ranks"] for d in layout if "global_ranks" in d]
    if len(locals_) == 1 and len(globals_) == 1 and len(locals_[0]) == len(globals_[0]) \
            and local in locals_[0]:
        return globals_[0][locals_[0].index(local)], "the agent's rendezvous result maps " \
            "local_ranks to global_ranks"
    if nodes == {1}:
        return local, "one node (the agent's group_world_size=1 / max_nodes 1)"
    nproc = {d["nproc"] for d in layout if "nproc" in d}
    if known and nproc == {known}:
        return local, f"one node (nproc_per_node {known} == the world size)"
    workers = _local_workers(events)
    if known and workers >= known:
        return local, f"one node (this agent ran {workers} workers, the whole world of {known})"
    return None, "the node is not known"


#: a pdsh / ``srun --label`` / mpirun host label in front of the agent's line: ``node-3: …``,
#: ``node-3 [stderr]: …`` (log levels and logger names are not hosts)
_HOST_LABEL = re.compile(r"^\s*(?P<host>[A-Za-z][\w.-]{0,62})(?::\s| \[std(?:err|out)\]:)")
_NOT_HOSTS = frozenset({"error", "warning", "info", "debug", "critical", "traceback"})


def _host_of(text: str) -> str | None:
    m = _HOST_LABEL.match(text)
    if not m or m.group("host").lower() in _NOT_HOSTS or "torch" in m.group("host"):
        return None
    return m.group("host")
