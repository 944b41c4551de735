"""Rules written from the emitters' source (helper rs10), at the CLI (``stormotel analyze --logs``).

Every line below is SYNTHETIC: built from the emitter's format string at the versions its
module's docstring names — MosaicML Composer's ``composer/cli/launcher.py`` (0.12.0, 0.17.0,
0.25.0), TensorFlow's ``distributed_runtime/master_session.cc`` (``RunManyGraphs::WhenDone``) —
not copied from any collected case; paths, pids and sizes are invented.

- Composer's launcher (log_composer): the rank its poll found crashed first, with its own death
  signal or an own error in its STDERR block, is named at low; SIGABRT, a code with no block or
  a consequence names a suspect; different ranks (one launcher per node) or blocks alone name
  nobody;
- TensorFlow's "From /job:J/replica:R/task:I:" (log_rankless): a task, never a rank — undecided
  at low with the task and its error in the reason;
- Ray Train's "Started distributed worker processes" pid → world_rank list (log_ray_pids, from
  ``ray/train/_internal/backend_executor.py`` and ``ray/exceptions.py`` at ray-2.9.0 / 2.40.0)
  joined with a dead worker's pid: that world rank at low; an intended exit, a pid off the map
  or an ambiguous pid name none; two ranks are suspects.
"""

from __future__ import annotations

from pathlib import Path

from tests.stalls.helpers import analyze_log_text
from tests.stalls.helpers import root_findings as _run
from tests.stalls.test_rules_from_source_rs9 import _by, _suspects

CRASHED = "composer.launcher.rank_crashed"
EXIT = "composer.launcher.exit_status"


# --- Composer's launcher (synthetic, from launcher.py's log.error / print format strings) -------
# logging.basicConfig()'s default format: LEVEL:logger:message
def _crashed(rank: int, code: int) -> str:
    return f"ERROR:composer.cli.launcher:Rank {rank} crashed with exit code {code}.\n"


_WAIT = ("Waiting up to 30 seconds for all training processes to terminate. Press Ctrl-C to "
         "exit immediately.\n")


def _block(rank: int, code: int, stderr: str) -> str:
    return (f"Global rank {rank} (PID {48200 + rank}) exited with code {code}\n"
            f"----------Begin global rank {rank} STDOUT----------\n"
            "[batch=120/4000]: loss/train/total: 2.3071\n"
            f"----------End global rank {rank} STDOUT----------\n"
            f"----------Begin global rank {rank} STDERR----------\n"
            f"{stderr}\n"
            f"----------End global rank {rank} STDERR----------\n")


def _status(rank: int, code: int) -> str:
    return (f"ERROR:composer.cli.launcher:Global rank {rank} (PID {48200 + rank}) exited with "
            f"code {code}\n")


_TB = ("Traceback (most recent call last):\n"
       '  File "/srv/job/train.py", line 51, in <module>\n'
       "    trainer.fit()\n"
       '  File "/usr/lib/python3/site-packages/composer/trainer/trainer.py", line 2030, in fit\n'
       "    self._train_loop()\n"
       "{exc}")
_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.15 GiB of which 1.20 GiB is free.")
_CLOSED = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
           "ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, "
           "NCCL version 2.20.5\nncclRemoteError: A call failed possibly due to a network error "
           "or a remote process exiting prematurely.")


def test_composer_crashed_rank_with_its_own_error_in_its_block_is_named_at_low(
        tmp_path: Path) -> None:
    # rank 1 was SIGTERMed by the launcher after rank 2 crashed: logged, but never a block
    code, roots = _run(tmp_path, _crashed(2, 1) + _WAIT + _block(2, 1, _TB.format(exc=_OOM))
                       + _status(1, -15))
    assert code == 1
    assert _by(roots, CRASHED) == [("rank_failure", [2], "low")]
    ev = roots[0]["evidence"]
    assert ev["category"] == "oom" and ev["exit_code"] == 1 and "global rank" in ev["rank_from"]


def test_composer_crashed_rank_killed_by_its_own_signal_is_named_at_low(tmp_path: Path) -> None:
    # -9: no block is printed (the launcher skips SIGKILL/SIGTERM ends as its own kills)
    for rc, sig in ((-9, "SIGKILL"), (-11, "SIGSEGV")):
        code, roots = _run(tmp_path, _crashed(5, rc) + _WAIT + _status(0, -15))
        assert code == 1
        assert _by(roots, CRASHED) == [("rank_failure", [5], "low")], rc
        assert roots[0]["evidence"]["signal"] == sig


def test_composer_sigabrt_a_bare_code_or_a_consequence_is_a_suspect(tmp_path: Path) -> None:
    for text in (_crashed(3, -6) + _WAIT,  # how a watchdog timeout ends a process
                 _crashed(0, 1) + _WAIT,  # local rank 0: its output is never captured
                 _crashed(3, 1) + _WAIT + _block(3, 1, _TB.format(exc=_CLOSED))):
        code, roots = _run(tmp_path, text)
        assert code == 1
        assert not any(f["kind"] == "rank_failure" for f in roots), text
        assert _by(roots, CRASHED) == [("undecided", [], "low")], text
        assert _suspects(roots) == [3 if "Rank 3" in text else 0]


def test_composer_launchers_of_two_nodes_naming_different_ranks_name_nobody(
        tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _crashed(2, -9) + _WAIT + _crashed(11, 1) + _WAIT)
    assert code == 1
    assert not any(f["kind"] == "rank_failure" for f in roots)
    assert _by(roots, CRASHED) == [("undecided", [], "low")]
    assert _suspects(roots) == [2, 11]


def test_composer_blocks_without_the_crashed_line_are_suspects(tmp_path: Path) -> None:
    # blocks come in rank order after the cleanup: they never say which rank failed first
    code, roots = _run(tmp_path, _block(1, 1, _TB.format(exc=_CLOSED))
                       + _block(4, 1, _TB.format(exc=_OOM)))
    assert code == 1
    assert not any(f["kind"] == "rank_failure" for f in roots)
    assert _by(roots, EXIT) == [("undecided", [], "low")]
    assert _suspects(roots) == [1, 4]


# --- TensorFlow's master: a task's step error (synthetic, master_session.cc's "From " prefix) ---
TF_TASK = "tf.distributed.task_error"


def _tf(task: int, message: str) -> str:
    return ("Traceback (most recent call last):\n"
            '  File "/srv/job/train.py", line 88, in <module>\n'
            "    estimator.train(input_fn, max_steps=100000)\n"
            "tensorflow.python.framework.errors_impl.{cls}: From "
            f"/job:worker/replica:0/task:{task}:\n{message}\n")


def test_tf_task_error_names_the_task_not_a_rank(tmp_path: Path) -> None:
    text = _tf(3, "OOM when allocating tensor with shape[64,1024,1024] and type float on "
               "/job:worker/replica:0/task:3/device:GPU:0 by allocator GPU_0_bfc").format(
        cls="ResourceExhaustedError")
    code, roots = _run(tmp_path, text)
    assert code == 1
    assert not any(f["kind"] == "rank_failure" for f in roots)
    assert _by(roots, TF_TASK) == [("undecided", [], "low")]
    reason = roots[0]["evidence"]["reason"]
    assert "task /job:worker/task:3" in reason and "OOM when allocating" in reason
    assert "not a rank" in reason and not _suspects(roots)


def test_tf_task_error_on_the_same_line_and_a_peer_consequence_name_nobody(
        tmp_path: Path) -> None:
    # a pasted one-line form: the message right after the prefix
    text = ("tensorflow.python.framework.errors_impl.UnavailableError: From "
            "/job:worker/replica:0/task:1: Socket closed\n")
    code, roots = _run(tmp_path, text)
    assert code == 1
    assert _by(roots, TF_TASK) == [("undecided", [], "low")]
    assert "task /job:worker/task:1" in roots[0]["evidence"]["reason"]
    assert "Socket closed" in roots[0]["evidence"]["reason"]
    # a device name is not the prefix: nothing read from it (no evidence, exit 3)
    (tmp_path / "b").mkdir()
    code, report = analyze_log_text(
        tmp_path / "b", "job.log", "Placed Variable on /job:worker/replica:0/task:1/device:GPU:0\n")
    assert code == 3 and TF_TASK not in str(report)


# --- Ray Train's pid -> world rank map joined with a dead worker's pid (synthetic, from
# --- backend_executor.py's workers_info, exceptions.py's ActorDiedError, the raylet's message) --
RAY_MAP = "ray.train.worker_processes"
_STARTED = ("(TrainTrainable pid=5100) 2026-11-29 10:00:00,000\tINFO backend_executor.py:447 -- "
            "Started distributed worker processes: \n")


def _map_240(pids: list[int]) -> str:  # ray 2.40: node_id first
    return _STARTED + "".join(
        f"(TrainTrainable pid=5100) - (node_id=9f2c{i // 2}, ip=10.0.0.{4 + i // 2}, "
        f"pid={p}) world_rank={i}, local_rank={i % 2}, node_rank={i // 2}\n"
        for i, p in enumerate(pids))


def _map_29(pids: list[int]) -> str:  # ray 2.9: no node_id
    return _STARTED + "".join(
        f"- (ip=10.0.0.{4 + i // 2}, pid={p}) world_rank={i}, local_rank={i % 2}, "
        f"node_rank={i // 2}\n" for i, p in enumerate(pids))


def _actor_died(pid: int, ip: str, exit_type: str) -> str:
    return ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this "
            "task.\n\tclass_name: RayTrainWorker\n\tactor_id: 3c1d2e0f5a6b7c8d9e0f1a2b01000000\n"
            f"\tpid: {pid}\n\tnamespace: 6f2e1c3a-0b4d\n\tip: {ip}\n"
            "The actor is dead because its worker process has died. Worker exit type: "
            f"{exit_type} Worker exit detail: Worker unexpectedly exits with a connection error "
            "code 2. End of file.\n")


def test_ray_dead_actor_pid_joined_with_the_map_names_its_world_rank_at_low(
        tmp_path: Path) -> None:
    for started in (_map_240([5210, 5211, 6120, 6121]), _map_29([5210, 5211, 6120, 6121])):
        code, roots = _run(tmp_path, started + _actor_died(6121, "10.0.0.5", "SYSTEM_ERROR"))
        assert code == 1
        assert _by(roots, RAY_MAP) == [("rank_failure", [3], "low")], started
        assert roots[0]["evidence"]["pid"] == 6121


def test_ray_raylet_worker_pid_joined_with_the_map_names_its_world_rank(tmp_path: Path) -> None:
    raylet = ("(raylet) A worker died or was killed while executing a task by an unexpected "
              "system error. To troubleshoot the problem, check the logs for the dead worker. "
              "RayTask ID: ffffffffffffffff3c1d Worker ID: 8a7b Node ID: 9f2c0 Worker IP "
              "address: 10.0.0.4 Worker port: 10002 Worker PID: 5211 Worker exit type: "
              "SYSTEM_ERROR Worker exit detail: The leased worker has unrecoverable failure.\n")
    code, roots = _run(tmp_path, _map_240([5210, 5211, 6120, 6121]) + raylet)
    assert code == 1
    assert _by(roots, RAY_MAP) == [("rank_failure", [1], "low")]


def test_ray_intended_exit_or_a_pid_off_the_map_names_no_rank(tmp_path: Path) -> None:
    # the executor's own shutdown of a survivor is an INTENDED exit: not a death
    for text in (_map_240([5210, 5211]) + _actor_died(5211, "10.0.0.4", "INTENDED_USER_EXIT"),
                 _map_240([5210, 5211]) + _actor_died(7777, "10.0.0.9", "SYSTEM_ERROR"),
                 # same pid on two hosts, the death on neither map host: not joined
                 _map_29([5210, 5210]) + _actor_died(5210, "10.0.0.9", "SYSTEM_ERROR")):
        code, roots = _run(tmp_path, text)
        assert code == 1  # a death is still shown (log_serving's rankless reading)
        assert not any(f["kind"] == "rank_failure" for f in roots), text
        assert _by(roots, RAY_MAP) == [], text


def test_ray_two_dead_ranks_are_suspects(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _map_240([5210, 5211, 6120, 6121])
                       + _actor_died(6121, "10.0.0.5", "SYSTEM_ERROR")
                       + _actor_died(5210, "10.0.0.4", "NODE_OUT_OF_MEMORY"))
    assert code == 1
    assert _by(roots, RAY_MAP) == [("undecided", [], "low")]
    assert _suspects(roots) == [0, 3]


# --- Lightning / Fabric's DDP process observer (synthetic, subprocess_script.py's message with
# --- lightning_utilities' rank_prefixed_message prefix) ----------------------------------------
LIGHTNING = "lightning.child_terminated"


def _child(local: int, code: int) -> str:
    return (f"[rank: {local}] Child process with PID {48210 + local} terminated with code "
            f"{code}. Forcefully terminating all other processes to avoid zombies 🧟\n")


def test_lightning_child_own_signal_names_the_local_rank_on_one_node_at_low(
        tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _child(2, -9))
    assert code == 1
    assert _by(roots, LIGHTNING) == [("rank_failure", [2], "low")]
    assert "presumed" in roots[0]["evidence"]["rank_from"]


def test_lightning_child_exit_code_or_a_second_node_names_nobody(tmp_path: Path) -> None:
    for text, suspects in ((_child(3, 1), [3]), (_child(3, -6), [3]),
                           ("Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/16\n"
                            "num_nodes 2\n" + _child(3, -9), [])):
        code, roots = _run(tmp_path, text)
        assert code == 1
        assert not any(f["kind"] == "rank_failure" for f in roots), text
        assert _by(roots, LIGHTNING) == [("undecided", [], "low")], text
        assert _suspects(roots) == suspects, text
