"""The MPI launchers' and Paddle's launcher's last words, built from their own format strings.

Open MPI ``orte/tools/orterun/help-orterun.txt`` (1.x-4.x) and PRRTE ``help-prun.txt``
(Open MPI 5's ``prterun``); Paddle ``launch_utils.watch_local_trainers``. What each proves is
in :mod:`stormotel.analyzers.stalls.log_mpirun`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.stalls.test_grammar import analyze, cli

DASHES = "-" * 74 + "\n"


def proc_aborted(tool: str, rank: int, sig: int, name: str) -> str:
    """[orterun:proc-aborted-strsignal] / [prun:proc-aborted-strsignal]: "%s noticed that
    process rank %lu with PID %lu on node %s exited on signal %d (%s)."."""
    return (DASHES + f"{tool} noticed that process rank {rank} with PID 0 on node gpu0304 "
            f"exited on signal {sig} ({name}).\n" + DASHES)


def non_zero_exit(tool: str, name: str, code: int) -> str:
    """[orterun:non-zero-exit] / [prun:non-zero-exit], after the "Primary job terminated
    normally, but 1 process returned\\na non-zero exit code." banner."""
    return ("-" * 55 + "\nPrimary job  terminated normally, but 1 process returned\n"
            "a non-zero exit code. Per user-direction, the job has been aborted.\n" + "-" * 55
            + "\n" + DASHES + f"{tool} detected that one or more processes exited with non-zero "
            "status, thus causing\nthe job to be terminated. The first process to do so was:\n\n"
            f"  Process name: {name}\n  Exit code:    {code}\n" + DASHES)


def exit_no_sync(tool: str, rank: int) -> str:
    """[orterun:proc-exit-no-sync]: "%s has exited due to process rank %lu with PID %lu on\\n
    node %s exiting improperly. There are three reasons this could occur:" (wrapped)."""
    return (DASHES + f"{tool} has exited due to process rank {rank} with PID 4242 on\n"
            "node n17 exiting improperly. There are three reasons this could occur:\n\n"
            "1. this process did not call \"init\" before exiting, but others in\n" + DASHES)


def paddle_abort(n: int, ranks: list[int]) -> str:
    """launch_utils.py: "ABORT!!! Out of all {} trainers, the trainer process with rank={} was
    aborted. Please check its log." (``error_rank`` is a Python list)."""
    return (f"ERROR 2023-01-02 10:11:12,123 launch_utils.py:343] ABORT!!! Out of all {n} "
            f"trainers, the trainer process with rank={ranks} was aborted. Please check its "
            "log.\n")


@pytest.mark.parametrize(("tool", "sig", "name"), [
    ("mpirun", 9, "Killed"), ("prterun", 11, "Segmentation fault"), ("mpiexec", 7, "Bus error")])
def test_a_death_signal_names_the_mpi_rank(tmp_path: Path, tool: str, sig: int,
                                           name: str) -> None:
    code, [root] = cli(tmp_path, proc_aborted(tool, 13, sig, name))
    assert code == 1 and (root["kind"], root["ranks"]) == ("rank_failure", [13])
    assert root["evidence"]["pattern"] == "openmpi.proc_aborted"
    assert root["confidence"] in ("low", "medium")


@pytest.mark.parametrize(("sig", "name"), [(6, "Aborted"), (15, "Terminated")])
def test_sigabrt_or_sigterm_is_a_suspect_only(tmp_path: Path, sig: int, name: str) -> None:
    """SIGABRT is how a ProcessGroupNCCL watchdog timeout ends a rank that was only waiting."""
    _, [root] = analyze(tmp_path, proc_aborted("prterun", 7, sig, name))
    assert (root.kind, root.ranks) == ("undecided", [])
    assert root.evidence["suspects"] == [7]


@pytest.mark.parametrize("name", ["[[29973,1],3]", "[prterun-gpu0304-81234@1,3]"])
def test_first_nonzero_exit_names_the_vpid(tmp_path: Path, name: str) -> None:
    _, [root] = analyze(tmp_path, non_zero_exit("mpirun", name, 1))
    assert (root.kind, root.ranks) == ("rank_failure", [3])
    assert root.evidence["pattern"] == "openmpi.first_nonzero_exit"
    assert root.evidence["category"] == "exception"


def test_exit_without_finalize_is_a_suspect(tmp_path: Path) -> None:
    _, [root] = analyze(tmp_path, exit_no_sync("mpirun", 2))
    assert (root.kind, root.evidence["suspects"]) == ("undecided", [2])
    assert "MPI_Finalize" in root.evidence["reason"]


def test_mpirun_over_per_node_torchrun_names_no_worker(tmp_path: Path) -> None:
    """mpirun starting one torchrun per node: its ranks are nodes, not workers."""
    text = ("/usr/bin/torchrun --nproc_per_node 8 train.py\n"
            + proc_aborted("mpirun", 1, 9, "Killed"))
    _, [root] = analyze(tmp_path, text)
    assert root.kind == "undecided" and "per-node launcher" in root.evidence["reason"]


def test_paddle_one_trainer_names_it_and_the_world(tmp_path: Path) -> None:
    result, [root] = analyze(tmp_path, paddle_abort(8, [3]))
    assert (root.kind, root.ranks) == ("rank_failure", [3])
    assert result.world_size == 8


def test_paddle_several_trainers_at_one_poll_name_nobody(tmp_path: Path) -> None:
    _, [root] = analyze(tmp_path, paddle_abort(2, [0, 1]))
    assert (root.kind, root.ranks, root.evidence["suspects"]) == ("undecided", [], [0, 1])


def test_a_cut_block_or_a_huge_rank_is_ignored(tmp_path: Path) -> None:
    """A non-zero-exit head whose process name never comes, and a rank above the bound."""
    text = ("mpirun detected that one or more processes exited with non-zero status, thus "
            "causing\nthe job to be terminated. The first process to do so was:\n"
            + "unrelated\n" * 12 + "  Exit code:    1\n"
            + "mpirun noticed that process rank 99999999 with PID 0 on node x exited on "
              "signal 9 (Killed).\n")
    result, roots = analyze(tmp_path, text)
    # no rank is read from either line; the head alone still shows a failed job, so the answer
    # is undecided (log_rankless: openmpi.nonzero_exit), never "healthy"
    assert all(f.ranks == [] and f.kind == "undecided" for f in result.findings)
    assert [r.evidence["pattern"] for r in roots] == ["openmpi.nonzero_exit"]
