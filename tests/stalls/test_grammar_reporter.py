"""c10d / torchelastic lines that show a stall through their reporter only (log_c10d_reporter),
on lines written as the torch wheels' strings print them (the inventory read them at 1.13.0 –
2.13.0). What a verdict may say: the reporter is a witness; a rank the line names as the one
waited on is pointed at (low); nothing is ever above ``low``; and the lines never change a
verdict that other evidence decides."""

from __future__ import annotations

from pathlib import Path

import pytest
from stormotel.analyzers.stalls import inventory as inv
from stormotel.analyzers.stalls import logs_parser as lp
from stormotel.analyzers.stalls.log_analysis import analyze_logs

from tests.stalls.helpers import root_findings as cli

PREFIX = "[rank{r}]:[E1128 23:40:00.123456789 ProcessGroupNCCL.cpp:1] "


@pytest.mark.parametrize("line", [
    "[PG ID 0 PG GUID 0(default_pg) Rank {r}] Exception (either an error or timeout) detected "
    "by watchdog at work: 1234, last enqueued NCCL work",
    "[PG ID 0 PG GUID 0 Rank {r}] ProcessGroupNCCL's watchdog detected an exception from the "
    "local rank. This is most likely caused by incorrect usages of collectives",
    "[PG ID 0 PG GUID 0 Rank {r}] Tensors must be CUDA and dense on rank {r}. This means that "
    "rank has aborted its NCCL communicators previously and is not in a healthy state.",
    "[PG ID 0 PG GUID 0 Rank {r}] Received a global dump signal from rank 6, and will start "
    "to dump the debug info thru stack trace",
])
def test_a_reporter_only_line_is_a_stall_that_never_blames_its_reporter(
        tmp_path: Path, line: str) -> None:
    code, found = cli(tmp_path, PREFIX.format(r=3) + line.format(r=3) + "\n")
    assert code == 1  # a stall shown: never healthy (0), never "no evidence" (3)
    assert [(f["kind"], f["ranks"], f["confidence"]) for f in found] == [("undecided", [], "low")]
    assert 3 not in found[0]["evidence"]["suspects"]
    assert 6 not in found[0]["evidence"]["suspects"]  # the dump initiator is a victim
    assert 3 in found[0]["evidence"]["witnesses"]


def test_ranks_named_by_reference_are_pointed_at_low(tmp_path: Path) -> None:
    """StoreCollectives.cpp (2.4+): "barrier failed -- missing ranks: " + "i, " per rank +
    e.what(); ProcessGroupGloo's tail "Please check rank 0 logs for faulty rank.". Changed in
    round three (issue 37 item 2, 37r): the ranks waited on are named at low, not suspects."""
    code, found = cli(tmp_path, PREFIX.format(r=1) + "RuntimeError: barrier failed -- missing "
                      "ranks: 2, 5, wait timeout after 30000ms, keys: /foo/last_members\n")
    assert code == 1 and (found[0]["kind"], found[0]["ranks"], found[0]["confidence"]) == (
        "straggler", [2, 5], "low")
    assert found[0]["evidence"]["pattern"] == "torch.store_collectives.missing"
    assert found[0]["evidence"]["witnesses"] == [1]
    # the error's tail is also a store wait: never read as rank 0's absence
    assert all(0 not in f["ranks"] for f in found)
    # two reports that disagree: only the ranks both list are named
    two = "".join(PREFIX.format(r=r) + f"RuntimeError: barrier failed -- missing ranks: {m}, "
                  "wait timeout after 30000ms, keys: /foo/last_members\n"
                  for r, m in ((1, "2, 5"), (3, "5")))
    code, found = cli(tmp_path, two)
    assert (found[0]["kind"], found[0]["ranks"]) == ("straggler", [5])
    code, found = cli(tmp_path, PREFIX.format(r=4) + "for send/recv from rank 0. Please check "
                      "rank 0 logs for faulty rank.\n")
    assert (found[0]["kind"], found[0]["ranks"], found[0]["confidence"]) == (
        "straggler", [0], "low")


def test_other_evidence_decides_and_these_lines_add_nothing(tmp_path: Path) -> None:
    timeout = ("[rank{r}]:[E1128 23:40:00.123 ProcessGroupNCCL.cpp:1] [Rank {r}] Watchdog caught "
               "collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=8, "
               "NumelOut=8, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n")
    base = "".join(timeout.format(r=r) for r in (0, 1, 2))
    extra = "".join(PREFIX.format(r=r) + f"[Rank {r}] Exception (either an error or timeout) "
                    "detected by watchdog at work: 9, last enqueued NCCL work: 9\n"
                    for r in (0, 1, 2))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "job.log").write_text(base)
    (tmp_path / "b" / "job.log").write_text(base + extra)
    a = analyze_logs(lp.parse_logs([str(tmp_path / "a" / "job.log")]))
    b = analyze_logs(lp.parse_logs([str(tmp_path / "b" / "job.log")]))
    assert [(f.kind, f.ranks, f.confidence) for f in a.findings] == \
        [(f.kind, f.ranks, f.confidence) for f in b.findings]


def test_a_store_server_that_cannot_start_is_its_own_suspect(tmp_path: Path) -> None:
    """TCPStoreLibUvBackend.cpp (2.2+): "UV Store bind failed. useIpv6:{} code:{} name:{}
    message:{}" — the store server on the reporter could not start."""
    code, found = cli(tmp_path, PREFIX.format(r=0) + "UV Store bind failed. useIpv6:0 code:-98 "
                      "name:EADDRINUSE message:address already in use\n")
    assert code == 1 and found[0]["evidence"]["suspects"] == [0]
    assert found[0]["confidence"] == "low" and found[0]["ranks"] == []


def test_a_normal_shutdown_is_not_a_stall(tmp_path: Path) -> None:
    """LOG(INFO)/LOG(WARNING) lines of a job that completed (a real record: Slurm COMPLETED,
    exit 0, with these after the last checkpoint): destroy_process_group's abort lines while
    shutdown() called abort(), and the heartbeat monitor's store poll failing once rank 0's
    store is gone; then the launchers' normal-exit lines. No stall event, no finding."""
    text = "".join(PREFIX.format(r=r) + line.format(r=r) + "\n" for r in (1, 3) for line in (
        "[PG ID 0 PG GUID 0(default_pg) Rank {r}] Launching ProcessGroupNCCL abort "
        "asynchronously.",
        "[PG ID 0 PG GUID 0(default_pg) Rank {r}] ProcessGroupNCCL aborts successfully.",
        '[PG ID 0 PG GUID 0(default_pg) Rank {r}] Failed to check the "should dump" flag on '
        "TCPStore, (maybe TCPStore server has shut down too early), with error: Failed to "
        "recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or "
        "crash?"))
    # the launchers' own lines of a normal exit: torchelastic's agent (2.13 agent/server/api.py
    # _invoke_run / _exit_barrier, printed after every worker returned 0) and srun's duplicate
    # exit report (src/srun/task_state.c prints it in the TS_NORMAL_EXIT branch too)
    agent = "[2026-11-28 23:50:00,123] torch.distributed.elastic.agent.server.api: [INFO] "
    text += (agent + "[default] worker group successfully finished. Waiting 300 seconds for "
             "other agents to finish.\n"
             + agent + "Local worker group finished (WorkerState.SUCCEEDED). Waiting 300 seconds "
             "for other agents to finish\n"
             + agent + "Done waiting for other agents. Elapsed: 0.0012969970703125 seconds\n"
             "srun: error: Task 3 reported exit for a second time.\n")
    log = tmp_path / "job.log"
    log.write_text(text)
    parsed = lp.parse_logs([str(log)])
    assert not [e for e in parsed.events if e.kind in ("c10d_reporter", "c10d_reference")]
    assert not [e for e in parsed.events if e.kind not in inv.CONTEXT], parsed.events
    assert analyze_logs(parsed).findings == []
