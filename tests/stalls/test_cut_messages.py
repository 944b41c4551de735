"""Stall messages as they reach a user's paste: cut before their rank list, cut mid-word,
redacted — at the CLI, each is a stall shown (``undecided`` at ``low``, exit 1), never
"healthy" (exit 0) nor "no evidence" (exit 3); none names the reporter as the culprit.

The messages are their emitters' own (Horovod ``common/stall_inspector.cc``; PyTorch
``ProcessGroupNCCL.cpp`` ``WorkNCCL::checkTimeout``, ``socket.cpp`` ``waitForInput`` and the
client connect, ``TCPStore.cpp``), shaped the way fresh3/fresh4's real pastes carried them
(horovod-1890, verl-2995, kohya-ss-2899, pytorch-76913, mm-eureka-v0-16).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.stalls.helpers import analyze_log_text

HOROVOD_HEAD = (
    "[1,0]<stderr>:[2024-05-02 10:00:00.000000: W horovod/common/stall_inspector.cc:105] One or "
    "more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and "
    "are waiting for remainder of ranks for more than 60 seconds. This may indicate that diff")

CUT = {
    # the stall warning glued behind a tqdm bar, the paste cut before "Stalled ranks:"
    "horovod-head": "Train Epoch #1:   0%|          | 0/626 [00:00<?, ?it/s]" + HOROVOD_HEAD,
    # the watchdog line cut mid-word, behind a Ray actor prefix
    "watchdog-cut": "(WorkerDict pid=833, ip=10.0.0.3) [rank62]:[E809 14:59:33.656957424 "
                    "ProcessGroupNCCL.cpp:629] [Rank 62] Watchdog caught collective oper",
    "poll-failed": "[rank2]:[W1014 03:47:39.789025589 socket.cpp:428] [c10d] While waitForInput,"
                   " poolFD failed with (errno: 0 - Success).",
    "connect-reset": "    return TCPStore(\nRuntimeError: Connection reset by peer",
    "connect-reset-2.1": "torch.distributed.DistNetworkError: Connection reset by peer",
    "redacted-address": "torch.distributed.DistNetworkError: The client socket has timed out "
                        "after 600000ms while trying to connect to (PRIVATE_IP, PORT).",
}


def _stalls(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report.get("stall_findings") or [] if f["consequence_of"] is None]


@pytest.mark.parametrize("name", sorted(CUT))
def test_cut_message_is_a_stall_shown_not_healthy(tmp_path: Path, name: str) -> None:
    code, report = analyze_log_text(tmp_path, "worker.log", CUT[name] + "\n")
    assert code == 1, (name, code)
    found = _stalls(report)
    assert [f["kind"] for f in found] == ["undecided"]
    assert found[0]["confidence"] == "low" and found[0]["ranks"] == []


def test_horovod_head_cut_yields_to_a_whole_report(tmp_path: Path) -> None:
    """A cut warning earlier in the file does not hide a whole report after it."""
    whole = [HOROVOD_HEAD.removeprefix("[1,0]<stderr>:").replace("diff", "different ranks."),
             "Missing ranks:", "2: [HorovodAllreduce_grad_0, HorovodAllreduce_grad_1]"]
    code, report = analyze_log_text(tmp_path, "worker.log",
                                    CUT["horovod-head"] + "\n" + "\n".join(whole) + "\n")
    assert code == 1
    assert [(f["kind"], f["ranks"]) for f in _stalls(report)] == [("straggler", [2])]


def test_connection_reset_outside_the_store_is_no_finding(tmp_path: Path) -> None:
    """A download retried after a reset (pip, the hub) in a run that finished: no stall."""
    text = ("WARNING: Retrying (Retry(total=4)) after connection broken by "
            "'ProtocolError('Connection aborted.', ConnectionResetError(104, 'Connection reset "
            "by peer'))'\nrequests.exceptions.ConnectionError: Connection reset by peer\n"
            "[rank0]: epoch 3 done\n[rank1]: epoch 3 done\n")
    code, report = analyze_log_text(tmp_path, "worker.log", text)
    assert code in (0, 3) and _stalls(report) == []


def test_report_rank_line_without_its_warning_names_a_suspect_only(tmp_path: Path) -> None:
    """One line of the report quoted alone (the corpus's horovod-2107): the rank it lists had
    not submitted those tensors; whether it lags or the others do needs the rest."""
    line = ("3: [global_tensor_horovod_sum_have_data/HorovodAllreduce_globals_horovod_have_more_"
            "data_placeholder_0, global_tensor_horovod_sum_have_error/HorovodAllreduce_globals_"
            "horovod_have_error_placeholder_0]")
    code, report = analyze_log_text(tmp_path, "worker.log", line + "\n")
    assert code == 1
    [f] = _stalls(report)
    assert (f["kind"], f["confidence"], f["ranks"]) == ("undecided", "low", [])
    assert f["evidence"]["suspects"] == [3]


def test_list_lines_without_horovod_op_names_are_no_report(tmp_path: Path) -> None:
    """``N: [ … ]`` lines that are not Horovod's (srun labels over a list print) say nothing."""
    text = "".join(f"{r}: [1, 2, 3] horovod_sum done\n" for r in range(4))
    code, report = analyze_log_text(tmp_path, "worker.log", text)
    assert code in (0, 3) and _stalls(report) == []


def test_a_traceback_no_rule_reads_is_no_evidence_never_healthy(tmp_path: Path) -> None:
    """fresh3's ray-36317 kept only a Ray traceback cut before its RuntimeError's text: no
    stall message is left, so "no evidence" (exit 3) — it read "healthy" (exit 0) before."""
    text = ("Traceback (most recent call last):\n"
            '  File "barrier_pygloo.py", line 32, in <module>\n'
            "    ray.get([actor.wait.remote() for actor_id, actor in enumerate(comm_actors)])\n"
            "ray.exceptions.RayTaskError(RuntimeError): ray::CommActor.wait() (pid=49178, "
            "ip=192.168.1.8, actor_id=df76b2062367d9f4a1b1d66a01000000, repr=<barrier_pygloo.Co\n")
    code, report = analyze_log_text(tmp_path, "worker.log", text)
    assert code == 3 and _stalls(report) == []
