"""Rules written from the emitters' source (helper rs9), at the CLI (``stormotel analyze --logs``).

Every line below is SYNTHETIC: built from the emitter's format string at the tags its module's
docstring names — ``torch/multiprocessing/spawn.py`` (``ProcessContext.join``, v1.13.0 – 2.13.0),
TensorFlow's ``tpu/session_support.py`` (``GracefulShutdownHook``, v2.4.0 and v2.15.0), Ray
Train's ``_internal/utils.py`` (``check_for_failure``, ray-2.9.0 and ray-2.40.0), MPICH Hydra's
``pmiserv_cb.c`` (v3.3 – v5.0.0) — not copied
from any collected case; paths, pids, devices and sizes are invented.

- spawn's parent (log_mp_spawn): a child's own death signal or own exception names the spawn
  index as the rank at low (a presumption) when nothing shows a second node; SIGABRT, an exit
  code, a consequence or a cut traceback name a suspect; a second node or several indexes name
  nobody;
- TPU lame workers (log_rankless): a failure shown, TPU hosts named, no rank;
- Ray Train's "Worker N has failed." (log_ray_train): that world rank at low; several: suspects;
- MPICH Hydra's "BAD TERMINATION" block (log_rankless): a pid and a host, no rank.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.stalls.helpers import root_findings as _run

EXITED = "torch.mp_spawn.process_exited"
RAISED = "torch.mp_spawn.process_raised"
READING = "torch.mp_spawn.index_as_rank"
RAY = "ray.train.worker_failed"


def _by(roots: list[dict[str, Any]], pattern: str) -> list[tuple[str, list[int], str]]:
    return [(f["kind"], f["ranks"], f["confidence"]) for f in roots
            if f["evidence"].get("pattern") == pattern]


def _suspects(roots: list[dict[str, Any]]) -> list[int]:
    return sorted({r for f in roots for r in f["evidence"].get("suspects") or []})


# --- spawn's parent (synthetic, from ProcessContext.join's format strings) ----------------------
_PARENT = (
    "Traceback (most recent call last):\n"
    '  File "/srv/job/train.py", line 88, in <module>\n'
    "    mp.spawn(main_worker, nprocs=4, args=(cfg,))\n"
    '  File "/usr/lib/python3/site-packages/torch/multiprocessing/spawn.py", line 160, in join\n'
    "    raise ProcessRaisedException(msg, error_index, failed_process.pid)\n"
    "torch.multiprocessing.spawn.ProcessRaisedException: \n\n"
    "-- Process {idx} terminated with the following error:\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3/site-packages/torch/multiprocessing/spawn.py", line 69, in _wrap\n'
    "    fn(i, *args)\n"
    '  File "/srv/job/train.py", line 51, in main_worker\n'
    "    loss = model(batch)\n"
    "{exc}")
_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.15 GiB of which 1.20 GiB is free.\n")


def _exited(idx: int, how: str) -> str:
    return ("Traceback (most recent call last):\n"
            '  File "/srv/job/train.py", line 88, in <module>\n'
            "    mp.spawn(main_worker, nprocs=8)\n"
            f"torch.multiprocessing.spawn.ProcessExitedException: process {idx} terminated "
            f"with {how}\n")


def test_spawn_own_exception_reads_the_index_as_the_rank_at_low(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _PARENT.format(idx=2, exc=_OOM))
    assert code == 1
    assert _by(roots, READING) == [("rank_failure", [2], "low")]
    ev = roots[0]["evidence"]
    assert ev["category"] == "oom" and ev["process_index"] == 2
    assert "presumed" in ev["rank_from"] and "main_worker" in ev["frame"]


def test_spawn_own_death_signal_names_the_index_at_low(tmp_path: Path) -> None:
    for sig in ("SIGKILL", "SIGSEGV"):
        code, roots = _run(tmp_path, _exited(5, f"signal {sig}"))
        assert code == 1
        assert _by(roots, READING) == [("rank_failure", [5], "low")], sig


def test_spawn_sigabrt_or_an_exit_code_is_a_suspect(tmp_path: Path) -> None:
    # the 1.x wording was a bare Exception with the same message: read alike
    for text in (_exited(3, "signal SIGABRT"), _exited(3, "exit code 1"),
                 "Exception: process 3 terminated with signal SIGTERM\n"):
        code, roots = _run(tmp_path, text)
        assert code == 1
        assert _by(roots, EXITED) == [("undecided", [], "low")], text
        assert _suspects(roots) == [3]


def test_spawn_a_raised_consequence_or_a_cut_traceback_is_a_suspect(tmp_path: Path) -> None:
    for exc in ("torch.distributed.DistBackendError: [3] is setting up NCCL communicator and "
                "retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but "
                "store->get('0') got error: Connection reset by peer\n",
                "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection "
                "closed by peer [10.0.0.4]:3921\n",
                ""):  # the paste ends inside the child's traceback
        code, roots = _run(tmp_path, _PARENT.format(idx=1, exc=exc))
        assert code == 1
        assert _by(roots, RAISED) == [("undecided", [], "low")], exc
        assert _suspects(roots) == [1]


def test_spawn_index_on_one_of_several_nodes_names_nobody(tmp_path: Path) -> None:
    text = "Command Line Args: Namespace(num_gpus=8, num_machines=2, machine_rank=1)\n" + \
        _exited(4, "signal SIGKILL")
    code, roots = _run(tmp_path, text)
    assert code == 1
    assert _by(roots, EXITED) == [("undecided", [], "low")]
    assert not _suspects(roots)
    assert "LOCAL" in roots[0]["evidence"]["reason"]


def test_spawn_index_with_a_world_above_one_node_names_nobody(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _exited(4, "signal SIGKILL"), "--world-size", "16")
    assert code == 1
    assert _by(roots, EXITED) == [("undecided", [], "low")]


def test_spawn_two_parents_naming_different_processes_name_nobody(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _exited(1, "signal SIGKILL") + _exited(6, "signal SIGSEGV"))
    assert code == 1
    assert _by(roots, EXITED) == [("undecided", [], "low")]
    assert roots[0]["evidence"]["process_indexes"] == [1, 6]


def test_spawn_children_stopped_by_the_parent_are_not_named(tmp_path: Path) -> None:
    # 2.4+: join() logs the survivors it stops AFTER finding the failed child (victims, by pid)
    code, roots = _run(tmp_path, (
        "W1129 10:00:01.000000 4711 torch/multiprocessing/spawn.py:169] Terminating process "
        "4712 via signal SIGTERM\n"
        "W1129 10:00:01.000000 4711 torch/multiprocessing/spawn.py:169] Terminating process "
        "4714 via signal SIGTERM\n") + _exited(2, "signal SIGKILL"))
    assert code == 1
    assert _by(roots, READING) == [("rank_failure", [2], "low")]


# --- TensorFlow TPU's shutdown hook (synthetic, session_support.py's logging.info) ---------------
def test_tpu_lame_workers_name_hosts_not_ranks(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, (
        "I1129 10:00:00.000000 140 session_support.py:391] ShutdownHook: lame workers found: "
        "HeartbeatManager(/job:worker/replica:0/task:3/device:CPU:0,"
        "/job:worker/replica:0/task:5/device:CPU:0)\n"
        "I1129 10:00:00.100000 140 session_support.py:403] ShutdownHook: saving checkpoint to "
        "gs://bucket/model/model.ckpt\n"))
    assert code == 1
    assert _by(roots, "tf.tpu.lame_workers") == [("undecided", [], "low")]
    reason = roots[0]["evidence"]["reason"]
    assert "/job:worker/task:3, /job:worker/task:5" in reason and "not a rank" in reason
    assert not _suspects(roots)


# --- Ray Train's failure check (synthetic, check_for_failure's logger.info) ----------------------
_RAY = "2026-11-29 10:00:00,000\tINFO utils.py:46 -- Worker {rank} has failed.\n"
_RESTART = ("2026-11-29 10:00:00,001\tWARNING backend_executor.py:663 -- Failure identified "
            "during training. Restarting all workers and continuing training from latest "
            "checkpoint.\n")


def test_ray_train_worker_failed_names_the_world_rank_at_low(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _RAY.format(rank=6) + _RESTART)
    assert code == 1
    assert _by(roots, RAY) == [("rank_failure", [6], "low")]


def test_ray_train_different_workers_across_restarts_are_suspects(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _RAY.format(rank=6) + _RESTART + _RAY.format(rank=2))
    assert code == 1
    assert _by(roots, RAY) == [("undecided", [], "low")]
    assert _suspects(roots) == [2, 6]


# --- MPICH Hydra's BAD TERMINATION block (synthetic, pmiserv_cb.c's HYDU_dump_noprefix calls) ----
def test_mpich_bad_termination_names_a_pid_not_a_rank(tmp_path: Path) -> None:
    rule = "=" * 83
    code, roots = _run(tmp_path, (
        f"\n{rule}\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        "=   PID 30417 RUNNING AT node-b07\n=   EXIT CODE: 9\n"
        "=   CLEANING UP REMAINING PROCESSES\n=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n"
        f"{rule}\n"))
    assert code == 1
    assert _by(roots, "mpich.hydra.bad_termination") == [("undecided", [], "low")]
    assert not _suspects(roots)
