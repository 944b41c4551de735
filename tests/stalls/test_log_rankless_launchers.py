"""Round 2 of the rankless rules and Open MPI's own crash report, at the CLI boundary.

Each line is built from its emitter's format string at a released tag (read in the fetched
repositories): Open MPI v4.1.6 / v5.0.9 ``opal/util/stacktrace.c`` (``HOSTFORMAT "[%s:%05d] "``,
"*** Process received signal ***", "Signal: %s (%d)"), ``help-mpi-btl-tcp.txt`` (peer hung up),
``help-errmgr-base.txt`` ("%s job %s terminated normally, but %d %s. Per user-direction, the
job has been aborted."), ``help-orterun.txt`` (non-zero exit); DeepSpeed v0.16.4
``deepspeed/launcher/launch.py`` (sigkill_handler: "Killing subprocess {pid}", "{cmd} exits with
return code = {last_return_code}" where ``cmd`` is the loop's LAST spawned command); TCPStore's
"Timed out after {} seconds waiting for clients. {}/{} clients joined." (and the "workers" form
of pytorch#111805); vLLM's pynccl ``raise RuntimeError(f"NCCL error: {error_str}")``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.stalls.helpers import root_findings as cli


def ompi_signal(pid: int, signo: int, name: str, tag: str = "", host: str = "node-3") -> str:
    """opal/util/stacktrace.c show_stackframe (HOSTFORMAT "[%s:%05d] "), with mpirun
    --tag-output's "[job,rank]<stderr>:" in front of every line when ``tag`` is given."""
    head = f"{tag}[{host}:{pid:05d}] "
    return (f"{head}*** Process received signal ***\n{head}Signal: {name} ({signo})\n"
            f"{head}Signal code: Address not mapped (1)\n{head}Failing at address: 0x47\n"
            f"{head}[ 0] /lib/x86_64-linux-gnu/libpthread.so.0(+0x10330)[0x7f8e56e3b330]\n"
            f"{head}*** End of error message ***\n")


def _undecided(code: int, roots: list[dict[str, Any]], pattern: str) -> dict[str, Any]:
    assert code == 1, roots
    assert roots and roots[0]["kind"] == "undecided" and roots[0]["ranks"] == [], roots
    assert roots[0]["confidence"] == "low" and roots[0]["evidence"]["pattern"] == pattern
    return roots[0]


def test_a_tagged_segfault_names_its_mpi_rank(tmp_path: Path) -> None:
    code, roots = cli(tmp_path, ompi_signal(17086, 11, "Segmentation fault", "[1,12]<stderr>:"))
    assert code == 1 and roots[0]["kind"] == "rank_failure" and roots[0]["ranks"] == [12], roots
    assert roots[0]["evidence"]["pattern"] == "openmpi.signal_handler"
    assert roots[0]["confidence"] in ("low", "medium")  # an unmeasured pattern is never high
    assert roots[0]["evidence"]["signal"] == "SIGSEGV"


def test_a_tagged_sigabrt_is_not_a_culprit(tmp_path: Path) -> None:
    """SIGABRT is also how a rank that only waited ends (watchdog, NCCL abort)."""
    code, roots = cli(tmp_path, ompi_signal(4242, 6, "Aborted", "[1,3]<stderr>:"))
    f = _undecided(code, roots, "openmpi.signal_handler")
    assert "SIGABRT" in f["evidence"]["reason"]


@pytest.mark.parametrize("pids", [[236649], [2773, 2774, 2775, 2776]])
def test_untagged_crash_reports_say_which_process_not_which_rank(tmp_path: Path,
                                                                 pids: list[int]) -> None:
    text = "".join(ompi_signal(p, 11, "Segmentation fault", host="good") for p in pids)
    f = _undecided(*cli(tmp_path, text), "openmpi.signal_handler")
    assert all(f"good:{p}" in f["evidence"]["reason"] for p in pids)
    assert "--tag-output" in " ".join(f["remediation"])


def test_an_mpi_peer_hangup_is_undecided(tmp_path: Path) -> None:
    text = ("An MPI communication peer process has unexpectedly disconnected.  This\n"
            "usually indicates a failure in the peer process (e.g., a crash or\n"
            "otherwise exiting without calling MPI_FINALIZE first).\n\n"
            "  Local host: node-1\n  Local PID:  7720\n  Peer host:  node-4\n")
    f = _undecided(*cli(tmp_path, text), "openmpi.peer_disconnected")
    assert f["evidence"]["category"] == "peer_lost"


def test_a_non_zero_exit_without_its_first_process_is_undecided(tmp_path: Path) -> None:
    text = ("Primary job  terminated normally, but 1 process returned\n"
            "a non-zero exit code. Per user-direction, the job has been aborted.\n"
            "mpirun.real detected that one or more processes exited with non-zero s\n")
    _undecided(*cli(tmp_path, text), "openmpi.nonzero_exit")


def test_the_first_process_block_still_names_the_rank(tmp_path: Path) -> None:
    text = ("Primary job  terminated normally, but 1 process returned\n"
            "a non-zero exit code. Per user-direction, the job has been aborted.\n"
            "mpirun detected that one or more processes exited with non-zero status, thus "
            "causing\nthe job to be terminated. The first process to do so was:\n\n"
            "  Process name: [[50371,1],3]\n  Exit code:    1\n")
    code, roots = cli(tmp_path, text)
    assert code == 1 and roots[0]["ranks"] == [3], roots
    assert roots[0]["evidence"]["pattern"] != "openmpi.nonzero_exit"


def test_mpirun_noticed_with_an_empty_node_name_names_the_rank(tmp_path: Path) -> None:
    code, roots = cli(tmp_path, "mpirun noticed that process rank 5 with PID 0 on node exited "
                                "on signal 11 (Segmentation fault).\n")
    assert code == 1 and roots[0]["kind"] == "rank_failure" and roots[0]["ranks"] == [5], roots


def test_deepspeed_launcher_never_blames_the_printed_local_rank(tmp_path: Path) -> None:
    """launch.py prints the LAST spawned command (here --local_rank=1), whichever failed."""
    text = ("[2023-07-10 04:26:05,876] [INFO] [launch.py:318:sigkill_handler] Killing subprocess "
            "94984\n[2023-07-10 04:26:05,876] [INFO] [launch.py:318:sigkill_handler] Killing "
            "subprocess 94985\n[2023-07-10 04:26:35,999] [ERROR] [launch.py:324:sigkill_handler] "
            "['/usr/bin/python3', '-u', 'train.py', '--local_rank=1'] exits with return code = "
            "-11\n")
    f = _undecided(*cli(tmp_path, text), "deepspeed.launcher_exit")
    assert "SIGSEGV" in f["evidence"]["reason"] and "LAST" in f["evidence"]["reason"]
    assert f["evidence"]["suspects"] == []


@pytest.mark.parametrize("line", [
    "torch.distributed.DistStoreError: 16/32 clients joined\n",
    "torch.distributed.DistStoreError: Timed out after 6 seconds waiting for workers. 1/2 "
    "workers joined.\n",
    "Timed out after 901 seconds waiting for clients\n",
])
def test_a_store_that_lacked_clients_is_undecided(tmp_path: Path, line: str) -> None:
    f = _undecided(*cli(tmp_path, line), "torch.store.clients_timeout")
    assert f["evidence"]["category"] == "store_unreachable"


def test_pynccl_errors_without_a_rank_are_undecided(tmp_path: Path) -> None:
    text = ("(VllmWorkerProcess pid=350) ERROR 01-29 20:00:47 multiproc_worker_utils.py:240] "
            "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for "
            "details)\n")
    f = _undecided(*cli(tmp_path, text), "nccl.error_rankless")
    assert "unhandled cuda error" in f["evidence"]["reason"]
