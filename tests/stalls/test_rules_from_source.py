"""Rules written from the emitters' source (helper rs), at the CLI (``stormotel analyze --logs``).

Every line below is SYNTHETIC: built from the emitter's format string at the tags its module's
docstring names (Slurm's ``_task_finish`` and task/cgroup, xla/tsl's ``CheckHeartbeatTimeout``
and ``AwaitAndLogIfStuck``, kubectl's ``printPod`` with the training-operator's pod names,
torch's allocator) — not copied from any collected case; hosts, ids and sizes are invented.

- srun's per-task exit lines (log_srun_exit): an OOM or an own death signal names the task at
  low; an exit code, SIGABRT, several tasks on a line name suspects; tasks killed after srun
  stopped the step are victims; with a per-node launcher in the output the task is a node;
- slurmstepd's cgroup OOM count and XLA's rendezvous warning: a failure shown, nobody named;
- the coordination service's heartbeat timeout (log_xla_health): one JAX process at low;
  several, a capped list, or a task that printed the notice itself: suspects;
- a kubectl pod table (log_pod_table): one PyTorchJob pod OOMKilled = its RANK at low; all
  Error, or names that map to no rank: nobody;
- an OOM naming a device without a rank (log_device_oom): undecided, never rank = device.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.stalls.helpers import analyze_log_text
from tests.stalls.helpers import root_findings as _run


def _by(roots: list[dict[str, Any]], pattern: str) -> list[tuple[str, list[int], str]]:
    return [(f["kind"], f["ranks"], f["confidence"]) for f in roots
            if f["evidence"].get("pattern") == pattern]


def _suspects(roots: list[dict[str, Any]], pattern: str) -> list[int]:
    return sorted({r for f in roots if f["evidence"].get("pattern") == pattern
                   for r in f["evidence"].get("suspects") or []})


def _nobody_named(tmp_path: Path, text: str, pattern: str) -> list[dict[str, Any]]:
    """The root findings of ``text``, which must show a stall or failure (exit 1: never
    healthy, never "no evidence") whose ``pattern`` finding names nobody, at low."""
    code, roots = _run(tmp_path, text)
    assert code == 1
    assert _by(roots, pattern) == [("undecided", [], "low")]
    return roots


def _culprit(tmp_path: Path, text: str, pattern: str, ranks: list[int]) -> list[dict[str, Any]]:
    """The root findings of ``text``, whose ``pattern`` finding names ``ranks`` as a
    rank_failure at low (exit 1)."""
    code, roots = _run(tmp_path, text)
    assert code == 1
    assert _by(roots, pattern) == [("rank_failure", ranks, "low")]
    return roots


SRUN = "slurm.srun.task_exit"
HEARTBEAT = "xla.coordination.heartbeat_timeout"
POD = "k8s.pod_status"


# --- srun's task lines (synthetic, "%s: %s %s: …" of _task_finish) ------------------------------
def test_srun_out_of_memory_names_its_task_at_low_and_its_victims_are_not_blamed(
        tmp_path: Path) -> None:
    roots = _culprit(tmp_path, (
        "srun: error: gpu-a-07: task 3: Out Of Memory\n"
        "srun: Terminating StepId=81234.0\n"
        "slurmstepd: error: *** STEP 81234.0 ON gpu-a-01 CANCELLED AT 2026-11-29T10:00:01 ***\n"
        "srun: error: gpu-a-01: tasks 0-2,4-7: Killed\n"), SRUN, [3])
    assert roots[0]["evidence"]["category"] == "oom"


def test_srun_an_own_death_signal_first_names_the_task(tmp_path: Path) -> None:
    _culprit(tmp_path, "srun: error: n-12: task 6: Segmentation fault (core dumped)\n"
                       "srun: error: n-03: task 1: Aborted (core dumped)\n", SRUN, [6])


def test_srun_an_exit_code_is_a_suspect_not_a_culprit(tmp_path: Path) -> None:
    roots = _nobody_named(tmp_path, "srun: error: n-02: task 5: Exited with exit code 1\n"
                                    "srun: Terminating StepId=99.0\n"
                                    "srun: error: n-01: tasks 0-4,6-7: Killed\n", SRUN)
    assert _suspects(roots, SRUN) == [5]  # the killed ones after srun's stop are victims


def test_srun_sigabrt_or_several_tasks_on_one_line_name_nobody(tmp_path: Path) -> None:
    for text, suspects in (("srun: error: n-01: task 2: Aborted\n", [2]),
                           ("srun: error: n-01: tasks 0-3: Out Of Memory\n", [0, 1, 2, 3])):
        roots = _nobody_named(tmp_path, text, SRUN)
        assert _suspects(roots, SRUN) == suspects


def test_srun_a_killed_task_after_another_failure_is_not_a_culprit(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, "srun: error: n-02: task 4: Exited with exit code 1\n"
                                 "srun: error: n-01: task 0: Killed\n")
    assert code == 1
    assert not [f for f in roots if f["kind"] == "rank_failure"]
    assert _suspects(roots, SRUN) == [0, 4]


def test_srun_tasks_of_per_node_launchers_are_nodes_not_ranks(tmp_path: Path) -> None:
    roots = _nobody_named(tmp_path, (
        "W1129 10:00:00.000000 123 torch/distributed/run.py:793] Setting OMP_NUM_THREADS\n"
        "[default0]:step 10 loss 2.31\n"
        "srun: error: gpu-b-02: task 1: Out Of Memory\n"), SRUN)
    assert "NODE" in roots[0]["evidence"]["reason"]
    assert not _suspects(roots, SRUN)


def test_slurmstepd_oom_kill_count_names_nobody_in_both_forms(tmp_path: Path) -> None:
    for line in (
            "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4242.0 cgroup. Some of "
            "your processes may have been killed by the cgroup out-of-memory handler.\n",
            "slurmstepd: error: Detected 2 oom_kill events in StepId=4242.batch. Some of the "
            "step tasks have been OOM Killed.\n"):
        roots = _nobody_named(tmp_path, line, "slurm.stepd.oom_kill")
        assert "4242." in roots[0]["evidence"]["reason"]


def test_srun_oom_beside_a_ranks_own_traceback_keeps_the_traceback(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, (
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 "
        "has a total capacity of 79.15 GiB of which 1.00 GiB is free.\n"
        "srun: error: gpu-a-07: task 3: Out Of Memory\n"))
    assert code == 1
    assert [f["ranks"] for f in roots if f["kind"] == "rank_failure"] == [[3]]


# --- the coordination service's heartbeat timeout (synthetic, xla/tsl's StrCat) -----------------
_UNHEALTHY = (
    "F1129 10:00:00.075587  157988 client.h:77] Terminating process because the JAX distributed "
    "service detected fatal errors. absl::Status: UNAVAILABLE: The following tasks are unhealthy "
    "(stopped sending heartbeats):\n{names}The tasks have crashed. Check the task logs for an "
    "earlier error, or scheduler events (e.g. preemption, eviction) to debug further.\n\n"
    "RPC: /tensorflow.CoordinationService/PollForError\n")


def _names(*tasks: int, job: str = "jax_worker") -> str:
    return "".join(f"/job:{job}/replica:0/task:{t}\n" for t in tasks)


def test_heartbeat_one_task_lost_is_that_jax_process_at_low(tmp_path: Path) -> None:
    _culprit(tmp_path, _UNHEALTHY.format(names=_names(5)), HEARTBEAT, [5])


def test_heartbeat_per_task_line_of_the_older_service(tmp_path: Path) -> None:
    _culprit(tmp_path, (
        "E1129 10:00:00.1 coordination_service.cc:512] /job:jax_worker/replica:0/task:2 has been "
        "set to ERROR in coordination service: UNAVAILABLE: Task /job:jax_worker/replica:0/task:2 "
        "heartbeat timeout. This indicates that the remote task has failed, got preempted, or "
        "crashed unexpectedly.\n"), HEARTBEAT, [2])


def test_heartbeat_several_or_capped_or_other_job_name_nobody(tmp_path: Path) -> None:
    for names in (_names(1, 6), _names(1, 2, 3), _names(4, job="worker")):
        _nobody_named(tmp_path, _UNHEALTHY.format(names=names), HEARTBEAT)


def test_heartbeat_notice_printed_by_the_named_task_itself_is_a_false_positive(
        tmp_path: Path) -> None:
    # the named process printed the notice: it was alive when the service declared it dead
    text = "".join(f"[rank5]: {line}\n"
                   for line in _UNHEALTHY.format(names=_names(5)).splitlines() if line)
    roots = _nobody_named(tmp_path, text, HEARTBEAT)
    assert "alive" in roots[0]["evidence"]["reason"]


def test_xla_rendezvous_stuck_names_a_thread_never_a_rank(tmp_path: Path) -> None:
    roots = _nobody_named(tmp_path, (
        "E1129 10:00:00.000000 1 rendezvous.cc:31] [id=0] This thread has been waiting for "
        "`acquire clique for rank 3 of 8` for 20 seconds and may be stuck. Expected 8 threads to "
        "join the rendezvous, but not all of them arrived on time.\n"), "xla.rendezvous.stuck")
    assert not _suspects(roots, "xla.rendezvous.stuck")


# --- kubectl pod tables (synthetic rows in printPod's columns) ----------------------------------
_HEAD = "NAME                  READY   STATUS      RESTARTS      AGE\n"


def test_one_pytorchjob_pod_oomkilled_names_its_rank_at_low(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, "$ kubectl get pods\n" + _HEAD +
                       "ft-master-0           1/1     Running     0             41m\n"
                       "ft-worker-0           1/1     Running     0             41m\n"
                       "ft-worker-1           0/1     OOMKilled   0             41m\n"
                       "ft-worker-2           1/1     Running     0             41m\n")
    assert code == 1
    # worker-1 is RANK 2: the training-operator adds one to a Worker's index when a Master exists
    assert _by(roots, POD) == [("rank_failure", [2], "low")]


def test_every_pod_in_error_names_nobody(tmp_path: Path) -> None:
    roots = _nobody_named(tmp_path, _HEAD +
                          "ft-master-0           0/1     Error       0             41m\n"
                          "ft-worker-0           0/1     Error       2 (5m ago)    41m\n", POD)
    assert _suspects(roots, POD) == [0, 1]


def test_pods_of_other_operators_or_without_a_master_map_to_no_rank(tmp_path: Path) -> None:
    for rows in ("train-node-0-0-x7k2p     1/1     Running     0          3m\n"
                 "train-node-0-1-q9z1m     0/1     OOMKilled   0          3m\n",
                 "ft-worker-0           1/1     Running     0             41m\n"
                 "ft-worker-1           0/1     OOMKilled   0             41m\n"):
        roots = _nobody_named(tmp_path, _HEAD + rows, POD)
        assert not _suspects(roots, POD)


def test_a_table_of_running_pods_is_no_evidence(tmp_path: Path) -> None:
    code, _ = analyze_log_text(tmp_path, "job.log",
                               _HEAD + "ft-master-0           1/1     Running     0         41m\n")
    assert code == 3


# --- an OOM naming a device (synthetic, the allocator's TORCH_CHECK text) -----------------------
def test_an_oom_naming_a_device_without_a_rank_is_undecided_not_healthy(tmp_path: Path) -> None:
    for line in (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a "
            "total capacity of 79.15 GiB of which 3.12 MiB is free.\n",
            "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 3; 79.15 GiB total "
            "capacity; 77.00 GiB already allocated)\n"):
        roots = _nobody_named(tmp_path, line, "torch.cuda.oom_device")
        assert roots[0]["ranks"] == [] and roots[0]["evidence"]["cuda_devices"] == [3]


def test_an_oom_with_its_rank_prefix_is_that_ranks_not_the_devices(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to "
                                 "allocate 20.00 MiB. GPU 3 has a total capacity of 79.15 GiB of "
                                 "which 3.12 MiB is free.\n")
    assert code == 1
    assert [(f["kind"], f["ranks"]) for f in roots] == [("rank_failure", [5])]
