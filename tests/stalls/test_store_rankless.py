"""The store's own lines with no culprit named (log_store_rankless): never healthy, never a rank.

Lines built from each emitter's format (TCPStore.cpp's C10D_WARNING, ProcessGroupNCCL's
heartbeat monitor, socket.cpp's listen error, broadcastUniqueNCCLID's error head,
_store_based_barrier's timeout), in the shapes users paste them: with torch's ``[rankN]:``
prefix and glog header, bare, cut by a title. Before this module such logs read exit 0 or 3
(fresh3's dev half: sglang#20859, sglang#28396, CogVLM#104, LLaMA-Factory#700,
Tune-A-Video#90)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stormotel import exitcodes
from tests.stalls.helpers import analyze_log_text

GLOG = "[rank{r}]:[W318 10:00:41.915284135 TCPStore.cpp:125] "
NCCL = ("[rank{r}]:[W318 10:00:41.929037914 ProcessGroupNCCL.cpp:1771] "
        "[PG ID 0 PG GUID 0 Rank {r}] ")
LOST = GLOG + ("[c10d] recvValue failed on SocketImpl(fd=135, addr=[node-1]:48750, "
               "remote=[node-0]:20000): {why}")
DUMP = NCCL + ('Failed to check the "should dump" flag on TCPStore, (maybe TCPStore server has '
               "shut down too early), with error: {why}")
WHY = ("Connection reset by peer", "failed to recv, got 0 bytes",
       "Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server "
       "shutdown or crash?")


def _roots(tmp_path: Path, text: str) -> tuple[int, list[dict[str, Any]]]:
    code, report = analyze_log_text(tmp_path, "job.log", text)
    return code, [f for f in report.get("stall_findings") or [] if f["consequence_of"] is None]


def _only_undecided(code: int, roots: list[dict[str, Any]], pattern: str) -> dict[str, Any]:
    assert code == exitcodes.FINDINGS
    [f] = roots
    assert (f["kind"], f["ranks"], f["confidence"]) == ("undecided", [], "low"), f
    assert f["evidence"]["pattern"] == pattern
    return f


@pytest.mark.parametrize("why", WHY)
def test_a_lost_store_without_a_shutdown_is_undecided_with_rank_0_a_suspect(
        tmp_path: Path, why: str) -> None:
    text = "".join(line.format(r=r, why=why) + "\n" for r in (8, 12) for line in (LOST, DUMP))
    f = _only_undecided(*_roots(tmp_path, text), "torch.store.connection_lost")
    assert f["evidence"]["suspects"] == [0] and f["evidence"]["reported_by"] == [8, 12]
    assert f["evidence"]["category"] == "store_unreachable"


def test_the_heartbeat_monitors_failed_poll_alone_stays_on_the_normal_path(
        tmp_path: Path) -> None:
    """"Failed to check the "should dump" flag" is printed after a normal completion when rank
    0's store exits first (the inventory's c10d.normal_path): alone it is no stall evidence."""
    code, report = analyze_log_text(tmp_path, "job.log", DUMP.format(r=3, why=WHY[2]) + "\n")
    assert code in (exitcodes.OK, exitcodes.SOURCE_FAILURE)
    assert not report.get("stall_findings")


def test_the_same_lines_after_the_jobs_own_shutdown_are_teardown_noise(tmp_path: Path) -> None:
    """destroy_process_group's abort lines (LOG(INFO), the normal path) next to them: the run
    ended and rank 0's store went first — no finding, as before this module."""
    text = "".join(line.format(r=r, why=WHY[2]) + "\n" for r in (1, 3) for line in (
        NCCL + "Launching ProcessGroupNCCL abort asynchronously.",
        NCCL + "ProcessGroupNCCL aborts successfully.", LOST, DUMP))
    code, roots = _roots(tmp_path, text)
    assert code == exitcodes.OK and roots == []


@pytest.mark.parametrize("text", [
    "[E socket.cpp:435] [c10d] The server socket has failed to listen on any local network "
    "address.\n",
    "RuntimeError: The server socket has failed to listen on any local network address. The "
    "server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n",
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
    "network address. port: 56065, useIpv6: false, code: -98, name: EADDRINUSE, message: "
    "address already in use\n"])
def test_a_store_that_cannot_listen_is_a_launch_failure_of_no_rank(tmp_path: Path,
                                                                    text: str) -> None:
    f = _only_undecided(*_roots(tmp_path, text), "torch.store.listen_failed")
    assert f["evidence"]["suspects"] == []


def test_the_cut_head_of_the_nccl_id_error_suspects_rank_0_and_names_nobody(
        tmp_path: Path) -> None:
    f = _only_undecided(*_roots(tmp_path, "RuntimeError: [3] is setting up NCCL communicator\n"),
                        "torch.nccl.unique_id_head")
    assert f["evidence"]["suspects"] == [0] and f["evidence"]["reported_by"] == [3]


def test_the_whole_nccl_id_error_is_still_read_by_the_store_wait_rule(tmp_path: Path) -> None:
    code, roots = _roots(tmp_path, (
        "[rank3]: torch.distributed.DistBackendError: [3] is setting up NCCL communicator and "
        "retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but "
        "store->get('0') got error: Socket Timeout\n"))
    assert code == exitcodes.FINDINGS
    assert roots[0]["evidence"]["pattern"] == "torch.nccl.unique_id_wait"


@pytest.mark.parametrize("text", [
    'this leads to "Timed out initializing process group in store based barrier" errors\n',
    "timed out initializing process group in store based barrier on rank\n"])
def test_the_barrier_timeout_without_rank_or_counts_is_undecided(tmp_path: Path,
                                                                 text: str) -> None:
    _only_undecided(*_roots(tmp_path, text), "torch.c10d.store_barrier_rankless")


def test_the_full_barrier_timeout_still_names_the_missing_rank(tmp_path: Path) -> None:
    code, roots = _roots(tmp_path, (
        "RuntimeError: Timed out initializing process group in store based barrier on rank: 0, "
        "for key: store_based_barrier_key:1 (world_size=2, worker_count=1, timeout=0:10:00)\n"))
    assert code == exitcodes.FINDINGS
    assert roots[0]["ranks"] == [1] and roots[0]["confidence"] == "low"


def test_other_evidence_decides_and_the_lost_store_only_adds_nothing(tmp_path: Path) -> None:
    """A fallback: a rank's own watchdog timeout is the answer, not the lost store."""
    text = (NCCL.format(r=1) + "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
            "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 "
            "milliseconds before timing out.\n" + LOST.format(r=1, why=WHY[0]) + "\n")
    code, roots = _roots(tmp_path, text)
    assert code == exitcodes.FINDINGS
    assert all(f["evidence"]["pattern"] != "torch.store.connection_lost" for f in roots)


def test_the_most_specific_line_answers_when_a_log_holds_several(tmp_path: Path) -> None:
    text = (LOST.format(r=2, why=WHY[0]) + "\nRuntimeError: [2] is setting up NCCL "
            "communicator\n")
    _only_undecided(*_roots(tmp_path, text), "torch.nccl.unique_id_head")


def test_a_log_without_the_lines_is_still_no_evidence(tmp_path: Path) -> None:
    code, _ = _roots(tmp_path, "epoch 3 step 100 loss 0.25\n")
    assert code == exitcodes.SOURCE_FAILURE
