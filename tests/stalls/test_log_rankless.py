"""Lines that show a stall or failure but name no culprit (analyzers/stalls/log_rankless.py),
at the CLI boundary: exit 1 with ``undecided`` — never "healthy" (0) or "no evidence" (3) —
and never the reporter as a culprit. Each line is built from its emitter's format string (the
source is named in each builder), not copied from a case.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from stormotel.analyzers.stalls import log_scanners
from stormotel.analyzers.stalls import logs_parser as lp
from stormotel.analyzers.stalls.log_analysis import analyze_logs

from tests.stalls.helpers import run_json


def cli(tmp_path: Path, text: str, *args: str) -> tuple[int, list[dict[str, Any]]]:
    log = tmp_path / "job.log"
    log.write_text(text)
    code, report = run_json("--logs", str(log), *args)
    return code, [f for f in report["stall_findings"] if f["consequence_of"] is None]


def ops_failed(rank: int | None) -> str:
    """ProcessGroupNCCL.cpp WorkNCCL::handleException: LOG(ERROR) << logPrefix() << "Some NCCL
    operations have failed or timed out. Due to the asynchronous nature of CUDA kernels,
    subsequent GPU operations might run on corrupted/incomplete data." (logPrefix "[Rank r] "
    from 2.2; glog's "[E<mmdd> <time> ProcessGroupNCCL.cpp:<line>] " and torchrun's [rankN]:)."""
    head = f"[rank{rank}]:[E220 01:25:08.728702337 ProcessGroupNCCL.cpp:681] [Rank {rank}] " \
        if rank is not None else "[E ProcessGroupNCCL.cpp:341] "
    return (head + "Some NCCL operations have failed or timed out. Due to the asynchronous "
            "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete "
            "data.\n")


def comm_aborted(rank: int) -> str:
    """NCCLUtils.hpp NCCLComm::checkForNcclError: "NCCL communicator was aborted on rank "
    rank_ ". " commFailureMsg (rank_: the communicator's; commFailureMsg empty when no reason
    was recorded — with a watchdog timeout as the reason the watchdog rules read the line)."""
    return f"RuntimeError: NCCL communicator was aborted on rank {rank}. \n"


def agent_signal(sig: str) -> str:
    """torch/distributed/elastic/agent/server/api.py SimpleElasticAgent.run: log.warning(
    f"Received {e.sigval} death signal, shutting down workers") (sigval a Signals member:
    "Signals.SIGTERM") and later logger.warning("Received %s death signal, …", e.sigval)."""
    return (f"W0409 07:28:49.530000 1359 torch/distributed/elastic/agent/server/api.py:719] "
            f"Received {sig} death signal, shutting down workers\n"
            "W0409 07:28:49.531000 1359 torch/distributed/elastic/multiprocessing/api.py:897] "
            "Sending process 1365 closing signal SIGTERM\n")


def rendezvous(error: str) -> str:
    """torch/distributed/elastic/rendezvous/api.py: class RendezvousTimeoutError(
    RendezvousError) (and Connection/Closed/State), raised out of torchrun's launch_agent."""
    return ("Traceback (most recent call last):\n  File \"/usr/bin/torchrun\", line 8, in "
            f"<module>\n    sys.exit(main())\ntorch.distributed.elastic.rendezvous.api.{error}: \n")


def nccl_check(prefix: str = "") -> str:
    """NCCLUtils.hpp C10D_NCCL_CHECK: "NCCL error in: " __FILE__ ":" __LINE__ ", "
    ncclGetErrorWithVersion(result) "\\n" getNcclErrorDetailStr(result) (the detail starts with
    the error's name, e.g. "ncclInternalError: Internal check failed.")."""
    return (f"{prefix}torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/"
            "distributed/c10d/ProcessGroupNCCL.cpp:1333, internal error - please report this "
            "issue to the NCCL developers, NCCL version 2.18.1\n"
            f"{prefix}ncclInternalError: Internal check failed.\n")


def _one_undecided(code: int, roots: list[dict[str, Any]], pattern: str) -> dict[str, Any]:
    assert code == 1, roots
    assert roots and roots[0]["kind"] == "undecided" and roots[0]["ranks"] == [], roots
    assert roots[0]["confidence"] == "low"
    assert roots[0]["evidence"]["pattern"] == pattern
    assert roots[0]["remediation"], "it says what to collect next"
    return roots[0]


@pytest.mark.parametrize("rank", [2, None])
def test_watchdog_teardown_alone_is_undecided_and_never_blames_its_reporter(
        tmp_path: Path, rank: int | None) -> None:
    code, roots = cli(tmp_path, ops_failed(rank) * 2)
    f = _one_undecided(code, roots, "torch.nccl.ops_failed")
    assert f["evidence"]["suspects"] == []
    assert f["evidence"]["reported_by"] == ([rank] if rank is not None else [])


def test_an_aborted_communicator_is_undecided(tmp_path: Path) -> None:
    code, roots = cli(tmp_path, comm_aborted(0))
    f = _one_undecided(code, roots, "torch.nccl.comm_aborted")
    assert f["evidence"]["suspects"] == [] and f["evidence"]["reported_by"] == [0]


@pytest.mark.parametrize("sig", ["Signals.SIGTERM", "15", "1"])
def test_the_agent_stopped_by_a_signal_is_undecided_not_healthy(tmp_path: Path,
                                                                sig: str) -> None:
    code, roots = cli(tmp_path, agent_signal(sig))
    f = _one_undecided(code, roots, "torchelastic.agent_signal")
    assert f["evidence"]["category"] == "signal"
    assert ("SIGHUP" if sig == "1" else "SIGTERM") in f["evidence"]["reason"]


@pytest.mark.parametrize("error", ["RendezvousTimeoutError", "RendezvousConnectionError",
                                   "RendezvousClosedError"])
def test_a_rendezvous_that_never_completed_is_undecided(tmp_path: Path, error: str) -> None:
    code, roots = cli(tmp_path, rendezvous(error))
    f = _one_undecided(code, roots, "torchelastic.rendezvous_error")
    assert error in f["evidence"]["reason"]


def test_an_nccl_error_without_a_rank_is_undecided(tmp_path: Path) -> None:
    code, roots = cli(tmp_path, nccl_check())
    f = _one_undecided(code, roots, "nccl.error_rankless")
    assert f["evidence"]["category"] == "nccl_error"


def test_an_nccl_error_with_a_rank_stays_that_ranks_own_failure(tmp_path: Path) -> None:
    code, roots = cli(tmp_path, nccl_check("[rank3]: ") + ops_failed(1) + ops_failed(2))
    assert code == 1
    assert roots[0]["kind"] == "rank_failure" and roots[0]["ranks"] == [3], roots
    assert all(f["evidence"]["pattern"] not in ("nccl.error_rankless", "torch.nccl.ops_failed")
               for f in roots)


def test_other_evidence_decides_and_the_rankless_rule_stays_silent(tmp_path: Path) -> None:
    """A rank's own CUDA error before its peers' teardown lines: that rank, not undecided."""
    text = ("[rank1]:[E ProcessGroupNCCL.cpp:1414] [PG 2 Rank 1] Process group watchdog thread "
            "terminated with exception: CUDA error: an illegal memory access was encountered\n"
            + ops_failed(0) + ops_failed(2) + agent_signal("15"))
    code, roots = cli(tmp_path, text)
    assert code == 1 and roots[0]["kind"] == "rank_failure" and roots[0]["ranks"] == [1], roots
    assert not [f for f in roots if f["evidence"]["pattern"].startswith(("torchelastic.agent",
                                                                          "torch.nccl.ops"))]


@pytest.mark.parametrize("line,address", [
    # socket.cpp 2.0: "… has timed out after {} while trying to connect to {}." (addr host:port)
    ("[E socket.cpp:860] [c10d] The client socket has timed out after 60s while trying to "
     "connect to 192.0.0.1:1234\n", "192.0.0.1:1234"),
    # socket.cpp 1.11-1.13: recordError("The client socket has timed out while trying to
    # connect to {}.", addr)
    ("[E socket.cpp:793] [c10d] The client socket has timed out while trying to connect to "
     "node-0:29500.\n", "node-0:29500"),
    # socket.cpp 2.1+: "… after {} while trying to connect to ({}, {})."
    ("[E socket.cpp:1023] [c10d] The client socket has timed out after 600s while trying to "
     "connect to (node-0, 29500).\n", "node-0:29500"),
])
def test_store_connect_timeouts_of_every_socket_cpp_form_name_the_address(
        tmp_path: Path, line: str, address: str) -> None:
    code, roots = cli(tmp_path, line)
    assert code == 1 and roots[0]["kind"] == "undecided" and roots[0]["ranks"] == []
    assert roots[0]["evidence"]["pattern"] == "torch.store.connect_timeout"
    assert address in str(roots[0]["evidence"]), roots[0]["evidence"]


def test_without_the_row_these_logs_were_healthy_or_no_evidence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: with the rankless row taken out of the scanner table the same lines give no
    finding at all (what the CLI printed as exit 0 / 3 before)."""
    log = tmp_path / "job.log"
    for text in (ops_failed(None), agent_signal("15"), rendezvous("RendezvousTimeoutError"),
                 nccl_check(), comm_aborted(0)):
        log.write_text(text)
        assert [f.kind for f in analyze_logs(lp.parse_logs([str(log)])).findings] == \
            ["undecided"]
    monkeypatch.setattr(log_scanners, "KINDS",
                        tuple(k for k in log_scanners.KINDS if k.name != "rankless"))
    for text in (ops_failed(None), agent_signal("15"), rendezvous("RendezvousTimeoutError"),
                 nccl_check(), comm_aborted(0)):
        log.write_text(text)
        assert analyze_logs(lp.parse_logs([str(log)])).findings == []
