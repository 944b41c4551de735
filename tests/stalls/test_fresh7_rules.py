"""f8's rules from fresh7's dev half, at the CLI (``stormotel analyze --logs``).

- a cut "mpirun noticed that process rank N with PID P" (log_mpirun): the rank at low;
- the XLA / TSL coordination service's barrier timeout (log_xla_coord): the tasks that never
  reached it, ``not_joined`` — never "the first task at the barrier", never a majority whose
  size is known, never a list the print cap may have cut;
- MindSpore msrun's "Time out nodes are [...]" (log_msrun): one id, that rank at low;
  several, suspects;
- Ascend HCCL's EI0002 / EI0006 (log_hccl): a group rank, nobody named — undecided, not "no
  evidence".

The lines are the emitters' own formats (the modules' docstrings say where each was read);
the dev cases they come from are in tests/stalls/data/fresh7.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.stalls.helpers import analyze_log_text

#: horovod#2300's title: the proc-aborted head, its "on node … exited on signal" cut away
MPIRUN_CUT = "mpirun noticed that process rank 1 with PID 0\n"
#: the same head completed by its next line (the help text wrapped) — read as before
MPIRUN_WRAPPED = ("mpirun noticed that process rank 3 with PID 4242 on node gpu7 exited on\n"
                  "signal 9 (Killed).\n")
#: levanter#432's form: names, no count
XLA_NAMES = (
    "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
    "multihost_broadcast_sync0. Timed out task names:\n"
    "/job:jax_worker/replica:0/task:3\n"
    "/job:jax_worker/replica:0/task:0\n"
    "\n"
    "Additional GRPC error information from remote target unknown_target_for_coordination_"
    "leader while calling /tensorflow.CoordinationService/Barrier:\n")
#: the gRPC JSON echo of the same error, newlines escaped, alone on its line
XLA_JSON = (':{"created":"@1706211255.371885374","grpc_message":"Barrier timed out. Barrier_id: '
            'multihost_broadcast_sync0. Timed out task names:\\n/job:jax_worker/replica:0/task:'
            '3\\n/job:jax_worker/replica:0/task:0\\n","grpc_status":4}\n')


def _xla_counted(reached: int, total: int, first: int, tasks: list[int]) -> str:
    """xla/tsl's current form, with the count line and the first task at the barrier."""
    return ("jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Id: "
            "0_async_write_complete.0.1. This usually happens because a task triggered the "
            "barrier too early or too slowly. Please look at the task logs (both timed out and "
            "first task) to debug further.\n"
            f"# of tasks that reached the barrier: {reached}/{total}.\n"
            f"The first task at the barrier: /job:jax_worker/replica:0/task:{first}. Some timed "
            "out task names:\n"
            + "".join(f"/job:jax_worker/replica:0/task:{t}\n" for t in tasks)
            + "\n\nRPC: /tensorflow.CoordinationService/Barrier\n")


#: MindAct#1983's msrun lines
MSRUN = ("[WARNING] ME(162078:281473590168608,MainProcess):2025-03-10-09:40:12.444.000 "
         "[mindspore/parallel/cluster/process_entity/_api.py:318] There's worker exits with "
         "exception, kill all other workers.\n"
         "[ERROR] ME(162078:281473590168608,MainProcess):2025-03-10-09:40:38.722.000 "
         "[mindspore/parallel/cluster/process_entity/_api.py:431] Time out nodes are {ids}\n")
#: vllm-ascend#3413's EI0002, after the waiter's ERROR line
HCCL = ("[ERROR] 2025-10-11-15:09:34 (PID:2969, Device:0, RankID:101) ERR00100 PTA call acl api "
        "failed.\n"
        "EI0002: [PID: 2969] 2025-10-11-15:09:34.713.335 The wait execution of the Notify "
        "register times out. Reason: The Notify register has not received the Notify record "
        "from remote rank: [24]. base information: [streamID:[109], taskID[38], taskType[Notify "
        "Wait]]. group information: [group:[group_name_1654], user define information"
        "[Unspecified], rankSize[32], rankId[25 24]]\n")
HCCL_SOCKET = ("[rank1]: EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times "
               "out. Reason: Remote Rank did not send the data in time. Please check the reason "
               "for the rank being stuck\n")
#: a watchdog timeout that names its own rank: a rule that decides, beside the HCCL lines
WATCHDOG = ("[rank3]:[E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600008 milliseconds before timing out.\n")


def _run(tmp_path: Path, text: str) -> tuple[int, list[dict[str, Any]]]:
    code, report = analyze_log_text(tmp_path, "job.log", text)
    return code, [f for f in report.get("stall_findings", []) if f["consequence_of"] is None]


def _named(roots: list[dict[str, Any]], pattern: str) -> list[tuple[str, list[int], str]]:
    return [(f["kind"], f["ranks"], f["confidence"]) for f in roots
            if f["evidence"].get("pattern") == pattern]


# --- a cut mpirun line ---------------------------------------------------------------------------
def test_a_cut_mpirun_line_names_its_rank_at_low_only(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, MPIRUN_CUT)
    assert code == 1
    assert _named(roots, "openmpi.proc_aborted_cut") == [("rank_failure", [1], "low")]


def test_a_wrapped_mpirun_line_is_read_whole_not_as_cut(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, MPIRUN_WRAPPED)
    assert code == 1
    assert not _named(roots, "openmpi.proc_aborted_cut")
    assert [(f["ranks"], f["evidence"]["pattern"]) for f in roots
            if f["kind"] == "rank_failure"] == [([3], "openmpi.proc_aborted")]


def test_a_cut_mpirun_line_followed_by_other_text_is_still_read(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, MPIRUN_CUT + "some later output\n")
    assert code == 1
    assert _named(roots, "openmpi.proc_aborted_cut") == [("rank_failure", [1], "low")]


# --- the coordination service's barrier timeout --------------------------------------------------
def test_barrier_timeout_names_the_tasks_that_never_arrived(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, XLA_NAMES + XLA_JSON)
    assert code == 1
    # the JSON echo is the same barrier: one finding
    assert _named(roots, "xla.coordination.barrier_timeout") == [("not_joined", [0, 3], "low")]


def test_barrier_timeout_in_one_escaped_segment_alone(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, XLA_JSON)
    assert code == 1
    assert _named(roots, "xla.coordination.barrier_timeout") == [("not_joined", [0, 3], "low")]


def test_a_counted_minority_is_named_at_medium_and_the_first_task_never(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _xla_counted(14, 16, 13, [6, 2]))
    assert code == 1
    assert _named(roots, "xla.coordination.barrier_timeout") == [("not_joined", [2, 6],
                                                                   "medium")]


def test_a_counted_majority_missing_names_nobody(tmp_path: Path) -> None:
    """Half the tasks missing: the few that arrived may have called the barrier too early."""
    code, roots = _run(tmp_path, _xla_counted(8, 16, 13, [6, 0, 4, 5, 2, 3, 7, 1]))
    assert code == 1
    assert _named(roots, "xla.coordination.barrier_timeout") == [("undecided", [], "low")]


def test_a_list_cut_by_the_print_cap_names_nobody(tmp_path: Path) -> None:
    """xla/tsl's newest cap prints two names; the count says five are missing."""
    code, roots = _run(tmp_path, _xla_counted(59, 64, 0, [17, 40]))
    assert code == 1
    found = [f for f in roots
             if f["evidence"].get("pattern") == "xla.coordination.barrier_timeout"]
    assert [(f["kind"], f["ranks"]) for f in found] == [("undecided", [])]
    assert found[0]["evidence"]["suspects"] == [17, 40]


def test_the_oldest_barrier_timeout_names_nobody_but_is_a_stall(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, "XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. "
                                 "Barrier_id: PjRT_Client_Connect\n")
    assert code == 1
    assert _named(roots, "xla.coordination.barrier_timeout") == [("undecided", [], "low")]


# --- msrun ---------------------------------------------------------------------------------------
def test_msrun_one_timed_out_node_is_named_at_low(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, MSRUN.format(ids="['3']"))
    assert code == 1
    assert _named(roots, "mindspore.msrun.time_out_nodes") == [("rank_failure", [3], "low")]


def test_msrun_several_timed_out_nodes_are_suspects(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, MSRUN.format(ids="['3', '1']"))
    assert code == 1
    found = [f for f in roots
             if f["evidence"].get("pattern") == "mindspore.msrun.time_out_nodes"]
    assert [(f["kind"], f["ranks"]) for f in found] == [("undecided", [])]
    assert found[0]["evidence"]["suspects"] == [1, 3]


def test_msrun_no_timed_out_node_is_a_failure_naming_nobody(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, MSRUN.format(ids="[]"))
    assert code == 1
    assert _named(roots, "mindspore.msrun.time_out_nodes") == [("undecided", [], "low")]


# --- HCCL ----------------------------------------------------------------------------------------
def test_hccl_notify_wait_names_nobody_and_keeps_the_group_rank(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, HCCL)
    assert code == 1
    found = [f for f in roots if f["evidence"].get("pattern") == "hccl.notify_wait_timeout"]
    assert [(f["kind"], f["ranks"], f["confidence"]) for f in found] == [("undecided", [], "low")]
    reason = found[0]["evidence"]["reason"]
    assert "global rank(s) [101]" in reason and "group_name_1654" in reason
    assert "its rank 24" in reason
    assert found[0]["evidence"]["witnesses"] == [101]


def test_hccl_socket_timeout_is_a_stall_not_no_evidence(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, HCCL_SOCKET)
    assert code == 1
    assert _named(roots, "hccl.socket_timeout") == [("undecided", [], "low")]


def test_hccl_is_a_fallback_a_rank_naming_rule_decides(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, HCCL + WATCHDOG)
    assert code == 1
    assert not [f for f in roots if f["evidence"].get("pattern", "").startswith("hccl.")]


def test_a_task_name_outside_the_names_list_is_not_read_as_missing(tmp_path: Path) -> None:
    """The oldest form names nobody; a task name printed after it (another line of the log)
    is not a pending task."""
    code, roots = _run(tmp_path, "XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. "
                                 "Barrier_id: PjRT_Client_Connect\n"
                                 "/job:jax_worker/replica:0/task:5\n")
    assert code == 1
    assert _named(roots, "xla.coordination.barrier_timeout") == [("undecided", [], "low")]
