"""The launchers' messages the inventory left unhandled (torchelastic 2.13, Horovod, Open MPI,
PRRTE, srun), read through the CLI as their emitters print them: each line is built from the
format string at the tag named (git show <tag>:<path> in the emitter's mirror), and a real
occurrence is kept verbatim with its source where one exists.

What a verdict may say: a rank named by its own failure is a suspect (never a culprit on that
line alone); a line that names no rank (a launcher daemon, a pid, a count) names no culprit —
``undecided`` at ``low`` with what to collect; never exit 0 or 3 on any of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from stormotel.analyzers.stalls import inventory as inv
from stormotel.analyzers.stalls.inventory_families import family_of

from tests.stalls.helpers import root_findings as cli


def suspects(f: dict[str, Any]) -> list[int]:
    return sorted(f["evidence"].get("suspects") or [])


# --- PRRTE (Open MPI 5) wraps proc-aborted before "signal" -----------------------------------
# help-prun.txt [prun:proc-aborted-strsignal], PRRTE v3.0.13 / v4.0.0:
#   "%s noticed that process rank %lu with PID %lu on node %s exited on\nsignal %d (%s)."
# Real: https://github.com/NVIDIA/nccl-tests/issues/295 (Open MPI 5.0.6; rank 1's libfabric
# assertion, SIGABRT: a crash of its own, but SIGABRT is also how a waiting rank ends).
NCCL_TESTS_295 = (
    "[neutron-nvidia:820212] [28] /home/marvell/alok/nccl-tests/build/all_reduce_perf(+0x6985)"
    "[0x564478bcb985]\n"
    "[neutron-nvidia:820212] *** End of error message ***\n"
    "--------------------------------------------------------------------------\n"
    "prterun noticed that process rank 1 with PID 820212 on node neutron-nvidia exited on\n"
    "signal 6 (Aborted).\n")
# Real: hpc-community.unige.ch thread on SEIS_FILO (2025-04, Yggdrasil; the binary compiled on
# a newer CPU than the node's: SIGILL, rank 2's own fault), stored public page.
UNIGE_SIGILL = """\
--------------------------------------------------------------------------
prterun noticed that process rank 2 with PID 1617008 on node cpu155 exited on
signal 4 (Illegal instruction).
--------------------------------------------------------------------------
"""


def test_prrte_wrapped_signal_of_its_own_names_the_rank(tmp_path: Path) -> None:
    code, [f] = cli(tmp_path, UNIGE_SIGILL)
    assert code == 1 and (f["kind"], f["ranks"]) == ("rank_failure", [2])
    assert f["evidence"]["signal"] == "SIGILL"


def test_prrte_wrapped_sigabrt_is_a_suspect_only(tmp_path: Path) -> None:
    code, [f] = cli(tmp_path, NCCL_TESTS_295)
    assert code == 1 and f["ranks"] == [] and f["confidence"] == "low"
    assert suspects(f) == [1]


def test_prrte_format_string_both_forms(tmp_path: Path) -> None:
    for tail in ("signal 9 (Killed).", "signal 9."):
        d = tmp_path / tail.replace(" ", "_")
        d.mkdir()
        code, [f] = cli(d, "prterun noticed that process rank 5 with PID 4242 on node node-1 "
                           f"exited on\n{tail}\n")
        assert code == 1 and (f["kind"], f["ranks"]) == ("rank_failure", [5])


# --- [mpi-abort]: printed by the aborting process (ompi/mpi/c/abort.c) ------------------------
# Real (Open MPI 4.x form, exabayes run with mpirun -np 16; the program aborted on rank 0 after
# failing to create its file), stored public notes, verbatim:
EXABAYES = (
    "--------------------------------------------------------------------------\n"
    "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD \n"  # its trailing space
    "with errorcode -1.\n\n"
    "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.\n"
    "You may or may not see output from other processes, depending on\n"
    "exactly when Open MPI kills them.\n"
    "--------------------------------------------------------------------------\n")


def test_mpi_abort_on_the_world_is_a_suspect(tmp_path: Path) -> None:
    code, [f] = cli(tmp_path, EXABAYES)
    assert code == 1 and f["ranks"] == [] and f["confidence"] == "low"
    assert suspects(f) == [0]


def test_mpi_abort_5x_reads_the_world_rank_from_proc(tmp_path: Path) -> None:
    """5.0.10 help-mpi-api.txt: "MPI_ABORT was invoked on rank %d in communicator %s\\n  Proc:
    %s\\n  Errorcode: %d" — %d is the rank in that communicator, Proc the caller's name."""
    text = ("MPI_ABORT was invoked on rank 1 in communicator MPI COMMUNICATOR 4 SPLIT FROM 0\n"
            "  Proc: [[27715,1],6]\n  Errorcode: 3\n")
    code, [f] = cli(tmp_path, text)
    assert code == 1 and f["ranks"] == [] and suspects(f) == [6]  # not 1: a sub-comm rank


def test_mpi_abort_of_a_sub_communicator_without_proc_names_nobody(tmp_path: Path) -> None:
    text = ("MPI_ABORT was invoked on rank 1 in communicator MPI COMMUNICATOR 4 SPLIT FROM 0\n"
            "with errorcode 3.\n")
    code, [f] = cli(tmp_path, text)
    assert code == 1 and (f["kind"], f["ranks"], suspects(f)) == ("undecided", [], [])
    assert f["evidence"]["pattern"] == "openmpi.mpi_abort"


# --- [orterun|prun:proc-comm-failed]: a launcher daemon, never a rank -------------------------
def test_a_lost_daemon_names_no_rank(tmp_path: Path) -> None:
    """help-orterun.txt (v4.1.6): "A critical communication path was lost to:\\n\\n  My name:
    %s\\n  Process name: %s\\n  Node:         %s"; errmgr_default_hnp.c sets the state only
    for a daemon ([[job,0],d]) — d is a node's daemon, not MPI rank d."""
    text = ("--------------------------------------------------------------------------\n"
            "A critical communication path was lost to:\n\n  My name:      [[4242,0],0]\n"
            "  Process name: [[4242,0],3]\n  Node:         node-3\n"
            "--------------------------------------------------------------------------\n")
    code, [f] = cli(tmp_path, text)
    assert code == 1 and (f["kind"], f["ranks"], suspects(f)) == ("undecided", [], [])
    assert f["evidence"]["pattern"] == "openmpi.node_lost"


# --- srun (src/api/step_launch.c) ---------------------------------------------------------------
def test_srun_launch_failures_are_suspects(tmp_path: Path) -> None:
    """_launch_handler: error("task %u launch failed: %s", task_id, slurm_strerror(rc)) for each
    task of the node that refused the launch."""
    text = "".join(f"srun: error: task {t} launch failed: Slurmd could not execve program\n"
                   for t in (4, 5))
    code, [f] = cli(tmp_path, text)
    assert code == 1 and f["ranks"] == [] and f["confidence"] == "low"
    assert suspects(f) == [4, 5]


# Real: an Arm DDT offline run, 8 MPI ranks on 2 nodes (a public README, "DDT offline test case
# from NERSC documentation"): every task of the step failed to launch, the same reason — the
# step's setup, no rank's; verbatim, with its trailing spaces.
DDT = ("Arm Forge 22.1.3 - Arm DDT" + " " * 54 + "\n" + " " * 83 + "\n"
       + "srun: error: task 0 launch failed: Error configuring interconnect" + " " * 18 + "\n"
       + "".join(f"srun: error: task {t} launch failed: Error configuring interconnect"
                 + " " * 15 + "\n" for t in (2, 4, 6, 1, 3, 5))
       + "srun: error: task 7 launch failed: Error configuring interconnect  \n")


def test_srun_every_task_failing_alike_names_no_culprit(tmp_path: Path) -> None:
    code, [f] = cli(tmp_path, DDT)
    assert code == 1 and (f["kind"], f["ranks"], f["confidence"]) == ("undecided", [], "low")
    assert suspects(f) == list(range(8))
    assert f["evidence"]["reason"].count("srun could not start") == 1  # one reason, said once


def test_srun_launch_timeout_names_no_task(tmp_path: Path) -> None:
    """slurm_step_launch_wait_start: error("timeout waiting for task launch, started %d of %d
    tasks", …) after 600 s."""
    code, [f] = cli(tmp_path, "srun: error: timeout waiting for task launch, started 6 of 8 "
                              "tasks\n")
    assert code == 1 and (f["kind"], f["ranks"], suspects(f)) == ("undecided", [], [])
    assert "6 of 8 tasks started" in f["evidence"]["reason"]


# --- torchelastic 2.13: a wedged worker, named by pid --------------------------------------------
@pytest.mark.parametrize("line", [
    "[default] Worker pid=41234 entered uninterruptible sleep (D-state); will mark UNHEALTHY if "
    "it remains for 300.0s.",
    "[default] Worker pid=41234 stuck in uninterruptible sleep (D-state) for 301.2s (>= 300.0s); "
    "marking worker group UNHEALTHY and disabling restarts.",
    "Process 41234 did not exit after Signals.SIGKILL within 30s; abandoning and continuing "
    "teardown. Worker may be in uninterruptible kernel sleep (e.g. wedged on GPU/NIC); host may "
    "need to be recycled."])
def test_a_wedged_worker_is_a_stall_that_names_no_rank(tmp_path: Path, line: str) -> None:
    """local_elastic_agent.py / multiprocessing/api.py (2.13): "[%s]" is the worker group's
    role and the worker is a pid — no rank is in the line."""
    code, found = cli(tmp_path, "[2026-11-28 23:40:00,123] torch.distributed.elastic: [ERROR] "
                      + line + "\n")
    assert code == 1 and [(f["kind"], f["ranks"], f["confidence"]) for f in found] == [
        ("undecided", [], "low")]
    ev = found[0]["evidence"]
    assert ev["pattern"] == "torchelastic.worker_wedged" and "pid 41234" in ev["reason"]
    assert not ev.get("suspects")


# --- Horovod: the report's "Will shutdown" line -------------------------------------------------
HOROVOD = (
    "[1,0]<stderr>:[2026-11-28 23:40:00.123456: E /tmp/pip/horovod/common/stall_inspector.cc:107]"
    " One or more tensors were submitted to be reduced, gathered or broadcasted by subset of "
    "ranks and are waiting for remainder of ranks for more than 60 seconds. This may indicate "
    "that different ranks are trying to submit different tensors or that only subset of ranks "
    "is submitting tensors, which will cause deadlock. \n"
    "[1,0]<stderr>:Missing ranks:\n"
    "[1,0]<stderr>:5!: [DistributedAdamOptimizer_Allreduce/HorovodAllreduce_grads_7_0]\n")
WILL = ('[1,0]<stderr>:One or more rank (marked by "!") is stalled for longer than 120 seconds. '
        "Will shutdown.\n")


def test_horovod_will_shutdown_is_read_into_the_finding(tmp_path: Path) -> None:
    """stall_inspector.cc (0.28.1): the line closes the report when a rank is marked "!"."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    code, [f] = cli(tmp_path / "a", HOROVOD + WILL)
    code2, [g] = cli(tmp_path / "b", HOROVOD)
    assert code == code2 == 1 and f["ranks"] == g["ranks"] == [5]
    assert f["confidence"] == g["confidence"]
    assert f["evidence"]["shutdown_after_s"] == 120 and "shutdown_after_s" not in g["evidence"]


# --- the inventory's written criteria ---------------------------------------------------------
def test_unreachable_and_normal_path_messages_are_out_of_the_share_by_criterion() -> None:
    for emitter, text in (("openmpi", "A process exceeded memory limits:\n\n  Process name: %s"),
                          ("prrte", "%s failed to receive scheduled heartbeat communications from "
                                    "a remote\nprocess:")):
        fam = family_of(emitter, "error", text)
        assert (fam.id, fam.relevance) == ("mpi.unreachable", "unreachable")
    fam = family_of("slurm-srun", "error", "Task %d reported exit for a second time.")
    assert (fam.id, fam.relevance) == ("srun.normal_path", "info")
    fam = family_of("prrte", "error", "%s (%s) %s\n\nUsage: %s [OPTION]...\n\nnon-zero status")
    assert fam.relevance == "config"
    # an error of a launcher family that proves a stall is still counted
    assert family_of("prrte", "error", "A critical communication path was lost to:").relevance \
        == "stall"


def test_a_line_that_names_no_rank_is_not_handled_when_a_culprit_is_named(tmp_path: Path) -> None:
    """role ``unnamed``: handled only by a finding that names no culprit."""
    e = {"emitter": "slurm-srun", "file": "src/api/step_launch.c", "call": "error",
         "level": "error", "tags": ["slurm-24-05-4-1"],
         "template": "timeout waiting for task launch, started %d of %d tasks"}
    j = inv.judge(e, tmp_path)
    assert j.handled and j.family.role == "unnamed", j.reason
    from stormotel.analyzers.report import StallFinding
    from stormotel.analyzers.stalls.inventory import _role_check
    blamed = StallFinding(kind="straggler", ranks=[3], process_group=None, seq_id=None, op=None,
                          source="logs", confidence="low", evidence={})
    assert _role_check(j.family, [blamed], []) == "names a culprit the line does not give"
