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
  at low with the task and its error in the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.stalls.helpers import analyze_log_text
from tests.stalls.helpers import root_findings as _run

CRASHED = "composer.launcher.rank_crashed"
EXIT = "composer.launcher.exit_status"


def _by(roots: list[dict[str, Any]], pattern: str) -> list[tuple[str, list[int], str]]:
    return [(f["kind"], f["ranks"], f["confidence"]) for f in roots
            if f["evidence"].get("pattern") == pattern]


def _suspects(roots: list[dict[str, Any]]) -> list[int]:
    return sorted({r for f in roots for r in f["evidence"].get("suspects") or []})


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
