"""Waits on the job's key-value store at set-up: the rank waited on, never the waiter.

- ``ProcessGroupNCCL::broadcastUniqueNCCLID`` (1.13 → main): every group rank but 0 gets the
  NCCL id that the group's rank 0 puts in the store; on failure it raises "[r] is setting up
  NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key 'k',
  but store->get('k') got error: …". ``r`` and ``0`` are GROUP ranks. The rank pointed at is
  the group's rank 0 (crashed, busy — a login prompt, preprocessing — or its store failed).
  Its global rank is known when a reporter's group rank equals its own global rank (a
  new_group's ranks are sorted, so group ranks 0..r are then global 0..r) or the store key
  names ``default_pg``; otherwise it stays a group rank (``undecided``). Named at ``low``: a
  broken network between the nodes reads the same, and no rank is then at fault. A lone
  send/recv has its own two-rank communicator keyed ``"low:high"`` (``getKeySendRecv``; its p2p
  rank 0 is ``rank_ <= peer``): the id is the LOWER rank's to publish, whatever "[0]" the
  message prints — that rank is the one pointed at (the "src/dst" of the p2p by reference).
- TCPStore waits (``wait timeout after …ms, keys: …``, socket.cpp's ``waitForInput`` warnings,
  "Socket Timeout"): the reporter waited for a key another process should have set; the
  store is served by rank 0's process (or node 0's agent) — rank 0 is a suspect, no more.
- Connect timeouts ("The client socket has timed out after … while trying to connect to
  (host, port)"): an address, not a rank — a wrong MASTER_ADDR/PORT, a firewall, or the
  store's host not started: ``undecided``, nobody named.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_absent_zero, log_busy
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner, log_finding

KIND = "init_wait"
UNIQUE_ID = "torch.nccl.unique_id_wait"
WAIT = "torch.store.wait_timeout"
CONNECT = "torch.store.connect_timeout"

REMEDIATION = {
    UNIQUE_ID: ["The waiting ranks never got the NCCL id from the group's rank 0: read that "
                "rank's own log first (an exception, an OOM, a prompt such as `wandb login`, "
                "long preprocessing before init). If it was healthy, check that every node "
                "reaches MASTER_ADDR:MASTER_PORT (NCCL_SOCKET_IFNAME, firewalls)."],
    WAIT: ["A rank waited on the store for a key another process never set: read rank 0's "
           "log (it serves the store and publishes the ids) and every rank's last lines."],
    CONNECT: ["The store at that address never answered: check MASTER_ADDR/MASTER_PORT (a "
              "port hard-coded in the script, a port taken by another job), that the host is "
              "reachable from every node, and that rank 0 / node 0's launcher started."],
}


class Scanner(LineScanner):
    """One line each; an ncclUniqueId line is not read again as a plain store wait."""

    kind, patterns = KIND, (UNIQUE_ID, WAIT, CONNECT)

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        g = m.groupdict()
        detail: dict[str, object] = {"reporter": rank}
        if pid == UNIQUE_ID:
            detail |= {"group_rank": gr.parse_rank(g["rank"]),
                       "root": gr.parse_rank(g["root"]), "key": g.get("key"),
                       "error": (g.get("err") or "").strip()[:200]}
        elif pid == CONNECT:
            detail |= {"address": f"{g.get('host') or g.get('host2') or g.get('host3')}:"
                                  f"{g.get('port') or g.get('port2') or g.get('port3')}"}
        return rank, detail


#: the store key of a lone send/recv's communicator: "low:high" (getKeySendRecv, 1.13 → main)
_P2P_KEY = re.compile(r"(\d{1,7}):(\d{1,7})")


def root_global(e: Any) -> tuple[int | None, str]:
    """The global rank of the group rank an ncclUniqueId wait names, and how it was read."""
    d = e.detail
    root, group_rank, reporter = d.get("root"), d.get("group_rank"), d.get("reporter")
    if root is None:
        return None, "no rank in the line"
    pair = _P2P_KEY.fullmatch(str(d.get("key") or ""))
    if pair:
        # a lone send/recv has its own two-rank communicator, keyed "low:high": the id is set
        # by its p2p rank 0, the LOWER group rank of the pair, whatever "[0]" the message says
        low, high = int(pair.group(1)), int(pair.group(2))
        if group_rank != high or low >= high:
            return None, f"send/recv pair '{low}:{high}' waited on by group rank {group_rank}"
        if reporter in (None, group_rank):
            return low, (f"the send/recv pair '{low}:{high}': the lower rank publishes the id "
                         "(the reporter's group rank is its global rank, or no prefix shows "
                         "another)")
        return None, f"send/recv pair '{low}:{high}' of a sub-group (group rank {group_rank} " \
            f"is global rank {reporter})"
    if "default_pg" in f"{d.get('key')} {d.get('error')}":
        return int(root), "the store key names default_pg"
    if root == 0 and group_rank is not None and group_rank >= 1 and reporter == group_rank:
        return 0, "the reporter's group rank is its global rank (sorted members: group ranks " \
            "0..r are global 0..r)"
    if root == 0 and reporter is None:
        return 0, "presumed the default group: no launcher prefix shows the reporter's " \
            "global rank"
    return None, f"group rank {group_rank} is global rank {reporter}: a sub-group"


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    evs = [e for e in events if e.kind == KIND and e.detail and e.pattern in (
        UNIQUE_ID, WAIT, CONNECT)]
    ids = [e for e in evs if e.pattern == UNIQUE_ID]
    if ids:
        return [_unique_id(ids)]
    waits = [e for e in evs if e.pattern == WAIT]
    waiting = sorted({e.rank for e in evs if e.rank is not None})
    if waits and log_absent_zero.reporters(events, known) is not None:
        return []  # ranks 1..k waited and rank 0 is silent: log_absent_zero names rank 0
    if waits:
        files = {e.file for e in waits}
        bar = any(e.kind == log_busy.KIND and e.file in files and e.rank in (None, 0)
                  for e in events)
        decide = ("what decides it: the error under the waiter's traceback names the key it "
                  "waited for (an NCCL id key is set by the group's rank 0), and rank 0's log "
                  "at that time" + (" — a progress bar with no rank on it ran in the same "
                                    "stream: if it is rank 0's, rank 0 was still busy when "
                                    "the wait ran out" if bar else "")
                  + "; with the world size stated, rank 0 is then the straggler only if "
                  "every other rank waited too")
        return [log_finding(
            "undecided", [], "store_wait", "low", WAIT,
            f"rank(s) {waiting or '?'} timed out waiting on the job's key-value store for a "
            "key no other process set; the store is served by rank 0's process (or node 0's "
            "agent), so rank 0 is the first suspect — the line itself names nobody; "
            + decide, REMEDIATION[WAIT], waits, suspects=[0], collect_next=[0],
            waiting_ranks=waiting, decides=decide)]
    connects = [e for e in evs if e.pattern == CONNECT]
    if connects:
        addrs = sorted({str(e.detail.get("address")) for e in connects
                        if e.detail.get("address") and "None" not in str(e.detail["address"])})
        return [log_finding(
            "undecided", [], "store_unreachable", "low", CONNECT,
            f"rank(s) {waiting or '?'} could not reach the store at {addrs or 'its address'}: "
            "an address, not a rank — a wrong MASTER_ADDR/PORT, a firewall, or the store's host "
            "not started", REMEDIATION[CONNECT], connects, waiting_ranks=waiting,
            addresses=addrs, suspects=[0] if 0 not in waiting else [])]
    return []


def _unique_id(ids: list[Any]) -> StallFinding:
    reporters = sorted({int(e.detail["group_rank"]) for e in ids
                        if e.detail.get("group_rank") is not None})
    read = [root_global(e) for e in ids]
    roots = {r for r, _ in read}
    group_roots = sorted({_group_root(e) for e in ids if e.detail.get("root") is not None})
    base: dict[str, Any] = {"waiting_group_ranks": reporters, "waited_on_group_rank":
                            group_roots, "errors": sorted({str(e.detail.get("error"))
                                                           for e in ids})[:4]}
    if len(roots) == 1 and None not in roots:
        (root,) = roots
        assert root is not None
        return log_finding(
            "straggler", [root], "not_at_init", "low", UNIQUE_ID,
            f"group rank(s) {reporters} waited for the NCCL id that rank {root} (the "
            f"communicator's rank 0, global {root}) should have put in the store: rank {root} "
            "never got there "
            "— crashed, busy before init, or its store/network failed (then no rank is at "
            "fault: read its log)", REMEDIATION[UNIQUE_ID], ids,
            rank_from=sorted({how for r, how in read if r == root}), **base)
    return log_finding(
        "undecided", [], "not_at_init", "low", UNIQUE_ID,
        f"group rank(s) {reporters} waited for the NCCL id of their group's rank "
        f"{group_roots or '?'}, but the lines do not show which global rank that is (a "
        "sub-group, or no launcher prefix): collect the group's rank list and that rank's log",
        REMEDIATION[UNIQUE_ID], ids, suspects=group_roots, **base)


def _group_root(e: Any) -> int:
    """The group rank that publishes the id: the lower rank of a send/recv pair's key, else the
    group's rank 0 the message names."""
    pair = _P2P_KEY.fullmatch(str(e.detail.get("key") or ""))
    return int(pair.group(1)) if pair else int(e.detail["root"])
