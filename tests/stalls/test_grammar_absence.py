"""Culprits by absence and by reference (issue 37 item 2), on lines built from each emitter's
OWN format string, and the LogScanner table that reads them (issue 35 item 2).

Every builder writes the line as the cited source prints it (file and versions in its
docstring). What each verdict may say follows from the source: the ranks that report waiting
are victims; the rank a message names as the one waited on is pointed at; a rank is named by
its absence only when the world size is known and every arrival spoke.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from stormotel.analyzers.stalls import log_scanners
from stormotel.analyzers.stalls import logs_parser as lp
from stormotel.analyzers.stalls.log_analysis import analyze_logs
from stormotel.analyzers.stalls.log_failures import Found

from tests.stalls.helpers import run_json


def roots(tmp_path: Path, text: str, **kw: int):  # type: ignore[no-untyped-def]
    log = tmp_path / "job.log"
    log.write_text(text)
    result = analyze_logs(lp.parse_logs([str(log)]), **kw)
    return [f for f in result.findings if f.consequence_of is None]


def cli(tmp_path: Path, text: str, *args: str) -> tuple[int, list[dict[str, Any]]]:
    log = tmp_path / "job.log"
    log.write_text(text)
    code, report = run_json("--logs", str(log), *args)
    return code, [f for f in report["stall_findings"] if f["consequence_of"] is None]


# --- torch.distributed _store_based_barrier -------------------------------------------------
_KEY = "store_based_barrier_key:1"


def barrier_wait_1x(rank: int, world: int, count: int) -> str:
    """distributed_c10d.py 1.8-1.13 _store_based_barrier: logging.info("Waiting in store based
    barrier to initialize process group for rank: {}, key: {} (world_size={}, worker_count={},
    timeout={})".format(...)); the root logger's default format adds "INFO:<logger>:"."""
    return ("INFO:torch.distributed.distributed_c10d:Waiting in store based barrier to initialize "
            f"process group for rank: {rank}, key: {_KEY} (world_size={world}, "
            f"worker_count={count}, timeout=0:30:00)\n")


def barrier_timeout_1x(rank: int, world: int, count: int) -> str:
    """distributed_c10d.py 1.8-1.13: raise RuntimeError("Timed out initializing process group
    in store based barrier on rank: {}, for key: {} (world_size={}, worker_count={},
    timeout={})".format(...))."""
    return (f"[rank{rank}]: RuntimeError: Timed out initializing process group in store based "
            f"barrier on rank: {rank}, for key: {_KEY} (world_size={world}, worker_count={count}"
            ", timeout=0:30:00)\n")


def barrier_timeout_2x(rank: int, world: int, count: int, error: bool = False) -> str:
    """distributed_c10d.py 2.0+: raise DistStoreError("Timed out initializing process group in
    store based barrier on rank {}, for key: {} (world_size={}, num_workers_joined={},
    timeout={})".format(...)); 2.2+ adds " error={e}" inside the parenthesis (f-string)."""
    return (f"[rank{rank}]: torch.distributed.DistStoreError: Timed out initializing process "
            f"group in store based barrier on rank {rank}, for key: {_KEY} (world_size={world}, "
            f"num_workers_joined={count}, timeout=0:30:00" + (" error=Wait timeout)" if error
                                                                 else ")") + "\n")


def barrier_wait_22(rank: int, world: int, count: int) -> str:
    """distributed_c10d.py 2.2+: logger.debug("Waiting in store based barrier to initialize
    process group for %s seconds" "rank: %s, key: %s (world_size=%s, num_workers_joined=%s,
    timeout=%s error=%s)", …) — the two literals join without a space."""
    return ("DEBUG:torch.distributed.distributed_c10d:Waiting in store based barrier to "
            f"initialize process group for 20.0123 secondsrank: {rank}, key: {_KEY} (world_size="
            f"{world}, num_workers_joined={count}, timeout=0:30:00 error=Wait timeout)\n")


def test_seven_waiters_name_the_eighth_by_absence(tmp_path: Path) -> None:
    text = "".join(barrier_wait_1x(r, 8, 7) for r in range(1, 8)) + \
        "".join(barrier_timeout_1x(r, 8, 7) for r in range(1, 8))
    code, [root] = cli(tmp_path, text)
    assert code == 1
    assert (root["kind"], root["ranks"], root["confidence"]) == ("straggler", [0], "medium")
    assert root["evidence"]["pattern"] == "torch.c10d.store_barrier_timeout"
    assert root["evidence"]["waiting_ranks"] == list(range(1, 8))


@pytest.mark.parametrize("build", [barrier_timeout_2x, barrier_wait_22])
def test_every_torch_wording_of_the_barrier_is_read(tmp_path: Path, build: Any) -> None:
    text = "".join(build(r, 4, 3) for r in (0, 1, 3))
    [root] = roots(tmp_path, text)
    assert (root.kind, root.ranks) == ("straggler", [2])
    if build is barrier_wait_22:  # waiting lines only: the count may still move
        assert root.confidence == "low"


def test_waiters_missing_from_the_paste_are_counted_not_named(tmp_path: Path) -> None:
    # 7 of 8 arrived, but only 3 of them are in the paste: one missing among five silent
    text = "".join(barrier_timeout_2x(r, 8, 7) for r in (1, 2, 3))
    code, [root] = cli(tmp_path, text)
    assert code == 1 and (root["kind"], root["ranks"]) == ("undecided", [])
    assert root["evidence"]["missing_count"] == 1
    assert root["evidence"]["suspects"] == [0, 4, 5, 6, 7]
    assert not {1, 2, 3} & set(root["evidence"]["suspects"])


def test_more_waiters_than_the_count_names_nobody(tmp_path: Path) -> None:
    # every rank of 4 says it waits while the count says 3 arrived: two stores, or a restart
    [root] = roots(tmp_path, "".join(barrier_timeout_2x(r, 4, 3) for r in range(4)))
    assert (root.kind, root.ranks) == ("undecided", [])
    assert "two different stores" in root.evidence["reason"]


def test_a_lone_reporter_names_the_other_rank_at_low_only(tmp_path: Path) -> None:
    # one witness may be one side of two stores (a split MASTER_ADDR): never medium
    [root] = roots(tmp_path, barrier_timeout_1x(1, 2, 1))
    assert (root.kind, root.ranks, root.confidence) == ("straggler", [0], "low")


def test_more_workers_than_the_world_is_a_duplicate_launch(tmp_path: Path) -> None:
    text = "".join(barrier_wait_1x(r, 4, 8) for r in range(4)) + barrier_timeout_1x(0, 4, 8)
    code, found = cli(tmp_path, text)
    assert code == 1
    assert [(f["kind"], f["ranks"], f["evidence"]["category"]) for f in found] == [
        ("undecided", [], "duplicate_launch")]
    assert all(f["kind"] != "straggler" for f in found)


def test_a_timeout_whose_count_says_all_joined_is_never_healthy(tmp_path: Path) -> None:
    """The count in the timeout's line is read once before the raise (or on another store):
    a timeout with num_workers_joined == world_size is still a failed init — undecided (exit
    1), never healthy. Before the fix this line alone printed "Verdict: healthy", exit 0."""
    code, found = cli(tmp_path, barrier_timeout_2x(3, 8, 8, error=True))
    assert code == 1
    assert [(f["kind"], f["ranks"]) for f in found] == [("undecided", [])]


def test_a_completed_barrier_names_nobody(tmp_path: Path) -> None:
    """distributed_c10d.py 2.0+: logger.info("Rank %s: Completed store-based barrier for key:%s
    with %s nodes.", rank, store_key, world_size)."""
    text = barrier_wait_1x(1, 4, 3) + \
        ("INFO:torch.distributed.distributed_c10d:Rank 1: Completed store-based barrier for "
         f"key:{_KEY} with 4 nodes.\n")
    assert roots(tmp_path, text) == []


def test_a_barrier_of_a_smaller_group_is_only_counted(tmp_path: Path) -> None:
    # new_group(use_local_synchronization=True): world_size is the group's, members unknown
    text = "".join(barrier_timeout_2x(r, 2, 1) for r in (5,))
    [root] = roots(tmp_path, text, world_size=8)
    assert (root.kind, root.ranks) == ("undecided", [])
    assert root.evidence["missing_count"] == 1


# --- ProcessGroupNCCL broadcastUniqueNCCLID / TCPStore ----------------------------------------
def unique_id(group_rank: int, error: str, prefix: str = "", spelling: str = "retrieving") -> str:
    """ProcessGroupNCCL.cpp broadcastUniqueNCCLID (1.13+; "retreiving" before 2.1):
    c10::str("[", rank_, "] is setting up NCCL communicator and ", "retrieving ncclUniqueId from
    [0] via c10d key-value store by key '", storeKey, "', but store->get('", storeKey, "') got
    error: ") + e.what(), raised as DistBackendError."""
    return (f"{prefix}torch.distributed.DistBackendError: [{group_rank}] is setting up NCCL "
            f"communicator and {spelling} ncclUniqueId from [0] via c10d key-value store by key "
            f"'0', but store->get('0') got error: {error}\n")


def test_the_rank_waited_on_is_pointed_at_not_the_waiter(tmp_path: Path) -> None:
    text = "".join(unique_id(r, "Socket Timeout", f"[rank{r}]: ") for r in (1, 2, 3))
    code, [root] = cli(tmp_path, text)
    assert code == 1
    assert (root["kind"], root["ranks"], root["confidence"]) == ("straggler", [0], "low")
    assert root["evidence"]["pattern"] == "torch.nccl.unique_id_wait"
    assert root["evidence"]["waiting_group_ranks"] == [1, 2, 3]


def test_a_sub_group_rank_0_is_not_read_as_global_rank_0(tmp_path: Path) -> None:
    # global rank 5 is group rank 1 of a sub-group: its rank 0 is some other global rank
    text = unique_id(1, "wait timeout after 600000ms, keys: /tp_pg/0//cuda//0", "[rank5]: ")
    [root] = roots(tmp_path, text)
    assert (root.kind, root.ranks) == ("undecided", [])
    assert root.evidence["suspects"] == [0] and 5 not in root.evidence["suspects"]


def test_the_old_spelling_without_a_prefix_is_presumed_the_default_group(tmp_path: Path) -> None:
    [root] = roots(tmp_path, unique_id(1, "Connection reset by peer", spelling="retreiving"))
    assert (root.kind, root.ranks, root.confidence) == ("straggler", [0], "low")
    assert "presumed" in root.evidence["rank_from"][0]


@pytest.mark.parametrize("line", [
    # TCPStore.cpp doWait: C10D_THROW_ERROR(DistStoreError, fmt::format("wait timeout after
    # {}ms, keys: {}", …)) (2.3+)
    "[rank2]: torch.distributed.DistStoreError: wait timeout after 300000ms, keys: "
    "/default_pg//0//cuda//0",
    # socket.cpp SocketImpl::waitForInput (2.2+): C10D_WARNING(...)
    "[rank7]:[W410 21:36:52.176066491 socket.cpp:460] [c10d] waitForInput: poll for socket "
    "SocketImpl(fd=5, addr=[localhost]:39284, remote=[localhost]:47115) returned 0, likely a "
    "timeout",
    "[rank7]:[W410 21:36:52.177160212 socket.cpp:485] [c10d] waitForInput: socket timed out "
    "after 300000ms",
])
def test_a_store_wait_suspects_the_store_host_not_the_waiter(tmp_path: Path, line: str) -> None:
    code, [root] = cli(tmp_path, line + "\n")
    assert code == 1 and (root["kind"], root["ranks"]) == ("undecided", [])
    assert root["evidence"]["suspects"] == [0]


def test_a_connect_timeout_names_an_address_not_a_rank(tmp_path: Path) -> None:
    """socket.cpp SocketConnectOp::throwTimeoutError (2.0+): fmt::format("The client socket has
    timed out after {} while trying to connect to ({}, {}).", timeout, host, port); TCPStore.cpp
    (2.3+) "TCP client failed to connect/validate to host {}:{} - retrying …"."""
    text = ("[E728 15:01:59.561275187 socket.cpp:1028] [c10d] The client socket has timed out "
            "after 600000ms while trying to connect to (127.0.0.1, 48315).\n"
            "[W728 15:01:59.562622567 TCPStore.cpp:340] [c10d] TCP client failed to "
            "connect/validate to host 127.0.0.1:48315 - retrying (try=0, timeout=600000ms, "
            "delay=33924ms): The client socket has timed out after 600000ms while trying to "
            "connect to (127.0.0.1, 48315).\n")
    code, [root] = cli(tmp_path, text)
    assert code == 1 and (root["kind"], root["ranks"]) == ("undecided", [])
    assert root["evidence"]["category"] == "store_unreachable"
    assert root["evidence"]["addresses"] == ["127.0.0.1:48315"]
    assert root["evidence"]["suspects"] == [0]  # the store's host: pointed at, not named


# --- ProcessGroupGloo::monitoredBarrier, seen from a non-coordinator --------------------------
def barrier_peer(rank: int) -> str:
    """ProcessGroupGloo.cpp (1.10 .. main), rank != 0: c10::str("Rank ", rank, " successfully
    reached monitoredBarrier, but received errors while waiting", " for send/recv from rank 0.
    Please check rank 0 logs for faulty rank."), logged by logAndThrow (glog E line)."""
    return (f"[rank{rank}]:[E325 17:13:23.163175227 ProcessGroupGloo.cpp:145] Rank {rank} "
            "successfully reached monitoredBarrier, but received errors while waiting for "
            "send/recv from rank 0. Please check rank 0 logs for faulty rank.\n")


def test_a_non_coordinator_is_stall_evidence_never_healthy(tmp_path: Path) -> None:
    # round three (37r): the coordinator the line names, at low — the reporter is a witness
    code, [root] = cli(tmp_path, barrier_peer(3))
    assert code == 1 and (root["kind"], root["ranks"], root["confidence"]) == (
        "straggler", [0], "low")
    assert root["evidence"]["witnesses"] == [3]


def test_every_other_rank_reached_the_barrier_names_rank_0(tmp_path: Path) -> None:
    text = "".join(barrier_peer(r) for r in (1, 2, 3))
    [root] = roots(tmp_path, text, world_size=4)
    assert (root.kind, root.ranks, root.confidence) == ("straggler", [0], "medium")
    [root] = roots(tmp_path, "".join(barrier_peer(r) for r in (1, 3)), world_size=4)
    assert (root.kind, root.ranks) == ("undecided", []) and root.evidence["suspects"] == [0, 2]


def test_a_sub_group_barrier_does_not_name_global_rank_0(tmp_path: Path) -> None:
    # global rank 6 is the group's rank 1: the group's coordinator is not global rank 0
    text = barrier_peer(1).replace("[rank1]:", "[rank6]:")
    [root] = roots(tmp_path, text, world_size=2)
    assert (root.kind, root.ranks, root.evidence["suspects"]) == ("undecided", [], [])


def test_the_coordinators_own_line_decides(tmp_path: Path) -> None:
    text = ("[rank0]: RuntimeError: [Rank 0]: Ranks 2 failed to pass monitoredBarrier in 30000 "
            "ms\n") + barrier_peer(1) + barrier_peer(3)
    [root] = roots(tmp_path, text)
    assert (root.kind, root.ranks) == ("straggler", [2])


def test_the_paste_of_issue_37_cut_mid_word_after_a_progress_bar(tmp_path: Path) -> None:
    line = ("Map (num_proc=14):  70%|███████▌   | 652383/930514 [6:39:53<4:31:33, 17.07 "
            "examples/s][E ProcessGroupGloo.cpp:138] Rank 3 successfully reached "
            "monitoredBarrier, but received errors while waiting for send/recv from rank 0. "
            "Please check rank 0 logs for faulty r\n")
    code, [root] = cli(tmp_path, line)
    # round three (37r): deepspeed#4488's line names rank 0 as the rank to check — at low
    assert code == 1 and (root["kind"], root["ranks"], root["confidence"]) == (
        "straggler", [0], "low")


# --- one rank busy while the others time out ----------------------------------------------
def watchdog(rank: int, seq: int = 21) -> str:
    """ProcessGroupNCCL.cpp 2.1+ (WorkNCCL::checkTimeout, operator<<): "[Rank r] Watchdog caught
    collective operation timeout: WorkNCCL(SeqNum=…, OpType=…, NumelIn=…, NumelOut=…,
    Timeout(ms)=…) ran for … milliseconds before timing out."; glog prefix, torchrun prefix."""
    return (f"[rank{rank}]:[E ProcessGroupNCCL.cpp:563] [Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=BROADCAST, NumelIn=1, "
            "NumelOut=1, Timeout(ms)=1800000) ran for 1800466 milliseconds before timing out.")


def tqdm_bar(n: int, total: int = 120000) -> str:
    """tqdm/std.py format_meter, the default bar_format '{l_bar}{bar}| {n_fmt}/{total_fmt}
    [{elapsed}<{remaining}, {rate_fmt}{postfix}]' as datasets' map prints it."""
    pct = 100 * n // total
    return f"Running tokenizer on dataset:  {pct}%|████▌     | {n}/{total} [30:01<13:20, 12.3ex/s]"


def test_the_rank_with_no_timeout_beside_a_running_bar_is_the_busy_one(tmp_path: Path) -> None:
    text = tqdm_bar(80000) + "\n" + "".join(tqdm_bar(81000 + r) + watchdog(r) + "\n"
                                            for r in (1, 2, 3))
    code, found = cli(tmp_path, text, "--world-size", "4")
    assert code == 1
    assert (found[0]["kind"], found[0]["ranks"], found[0]["confidence"]) == (
        "straggler", [0], "low")
    assert found[0]["evidence"]["pattern"] == "log.busy_rank"


def test_absence_without_a_bar_or_a_world_names_nobody(tmp_path: Path) -> None:
    # vllm#8978's shape: three ranks time out, the fourth is simply not in the paste
    text = "".join(watchdog(r) + "\n" for r in (0, 1, 2))
    assert all(not f.ranks for f in roots(tmp_path, text, world_size=4))
    text = tqdm_bar(80000) + "\n" + "".join(watchdog(r) + "\n" for r in (1, 2, 3))
    # no world size stated: changed in round three (37r) — ranks 1-3 wait, rank 0 is the one
    # rank certainly absent: named at low (log.rank0_absent), the world size still asked for
    [found] = roots(tmp_path, text)
    assert (found.kind, found.ranks, found.confidence) == ("straggler", [0], "low")
    assert "world size" in found.evidence["collect_next"]
    # a gap below the highest reporter other than 0 (rank 1 silent too): nobody named
    text = tqdm_bar(80000) + "\n" + "".join(watchdog(r) + "\n" for r in (2, 3))
    assert all(not f.ranks for f in roots(tmp_path, text))


def test_a_rank_with_its_own_stall_line_is_not_the_busy_one(tmp_path: Path) -> None:
    text = tqdm_bar(80000) + "\n" + "".join(watchdog(r) + "\n" for r in (1, 2)) + \
        watchdog(3, seq=22) + "\n"
    assert all(f.evidence["pattern"] != "log.busy_rank"
               for f in roots(tmp_path, text, world_size=4))


# --- the LogScanner table ---------------------------------------------------------------------
class _Marker:
    """A stand-in kind of stall log: one line shape, one rule — nothing else is wired."""

    def __init__(self, ctx: log_scanners.ScanContext) -> None:
        self.found: list[Found] = []

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if "rank stuck at marker" in low:
            self.found.append(Found("marker", no, rank, None, seg, {}, "python.exception"))

    def finish(self, text: str) -> list[Found]:
        return self.found


def _marker_findings(events: list[Any], known: int | None) -> list[Any]:
    from stormotel.analyzers.stalls.log_finding import log_finding
    hits = [e for e in events if e.kind == "marker"]
    return [log_finding("straggler", sorted({e.rank for e in hits}), "marker", "low",
                        "python.exception", "marker", [], hits)] if hits else []


def test_a_new_kind_of_stall_log_is_its_module_and_one_row(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_scanners, "KINDS", (*log_scanners.KINDS, log_scanners.LogKind(
        "marker", _Marker, _marker_findings)))
    [root] = roots(tmp_path, "[rank2]: rank stuck at marker\n[rank1]: step 3\n")
    assert (root.kind, root.ranks) == ("straggler", [2])


def test_every_row_of_the_table_is_a_log_scanner() -> None:
    ctx = log_scanners.ScanContext(None, lambda s: None)
    names = [k.name for k in log_scanners.KINDS]
    assert len(set(names)) == len(names)
    for kind in log_scanners.KINDS:
        scanner = kind.scanner(ctx)
        scanner.feed(1, "nothing to see", "nothing to see", None)
        assert scanner.finish("nothing to see\n") == []
