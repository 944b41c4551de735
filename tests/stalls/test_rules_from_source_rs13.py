"""Rules written from the emitters' source (helper rs13), at the CLI (``stormotel analyze --logs``).

Every line below is SYNTHETIC: built from the emitter's format string at the versions its
module's docstring names, not copied from any collected case; hosts, ports, pods and ranks are
invented.

- Paddle's wait for its peers' endpoints (log_paddle_endpoints; ``wait_server_ready`` in the
  paddlepaddle 2.6.2 wheel, ``collective.py``'s PADDLE_TRAINER_ENDPOINTS in 2.6.2 / 3.0.0): the
  last not-ready list, mapped through the endpoints list, names the trainers that never joined;
  without the list nobody.
"""

from __future__ import annotations

from pathlib import Path

from tests.stalls.helpers import analyze_log_text, run_json
from tests.stalls.helpers import root_findings as _run
from tests.stalls.test_rules_from_source_rs9 import _by, _suspects

# --- Paddle (synthetic, from private_helper_function.wait_server_ready and collective.py) -------
NOT_READY = "paddle.wait_server_ready.not_ready"
_EPS = [f"10.2.0.{h}:{6170 + p}" for h in (11, 12, 13, 14) for p in range(2)]  # 4 nodes × 2


def _wait(missing: list[str], times: int) -> str:
    return ("server not ready, wait 3 sec to retry...\n"
            f"not ready endpoints:{missing!r}\n") * times


def _launch_env() -> str:
    # Container.__str__ with its " \nenv {…}" (2.6): container 0 of the first node
    env = {"PADDLE_GLOBAL_SIZE": "8", "PADDLE_LOCAL_SIZE": "2", "PADDLE_GLOBAL_RANK": "0",
           "PADDLE_CURRENT_ENDPOINT": _EPS[0], "PADDLE_TRAINER_ID": "0",
           "PADDLE_TRAINER_ENDPOINTS": ",".join(_EPS)}
    return ("LAUNCH INFO 2026-11-30 03:00:01,100 Run Pod: wzkvbc, replicas 2, status ready\n"
            "Container rank 0 status ready cmd ['python', '-u', 'train.py'] code -1 log "
            f"log/workerlog.0 \nenv {env!r}\n")


def test_paddle_not_ready_endpoints_with_the_list_are_the_trainers_that_never_joined(
        tmp_path: Path) -> None:
    for text, ids in (
            # the launcher's env print, then trainer 0's wait: node .13's trainers never came up
            (_launch_env() + _wait([_EPS[1], _EPS[4], _EPS[5]], 1) + _wait(_EPS[4:6], 5),
             [4, 5]),
            # the legacy launcher's endpoints.log pasted before the wait
            ("PADDLE_TRAINER_ENDPOINTS: \n" + "\n".join(_EPS) + "\n" + _wait([_EPS[7]], 3), [7])):
        code, roots = _run(tmp_path, text)
        assert code == 1, text  # was "no evidence"
        assert _by(roots, NOT_READY) == [("not_joined", ids, "low")], text
        assert "PADDLE_TRAINER_ENDPOINTS" in roots[0]["evidence"]["rank_from"]


def test_paddle_the_list_in_another_file_maps_the_wait(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "launch.log").write_text(_launch_env())
    (logs / "workerlog.0").write_text(_wait([_EPS[6]], 4))
    code, report = run_json("--logs", str(logs))
    assert code == 1
    roots = [f for f in report["stall_findings"] if f["consequence_of"] is None]
    assert _by(roots, NOT_READY) == [("not_joined", [6], "low")]


def test_paddle_not_ready_without_the_list_names_nobody(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _wait(_EPS[4:6], 6))
    assert code == 1
    assert _by(roots, NOT_READY) == [("undecided", [], "low")]
    assert _suspects(roots) == []
    assert "10.2.0.13:6170" in roots[0]["evidence"]["reason"]
    assert "PADDLE_TRAINER_ENDPOINTS" in roots[0]["evidence"]["collect_next"]


def test_paddle_a_single_print_a_majority_or_an_unknown_endpoint_are_suspects_only(
        tmp_path: Path) -> None:
    for text, ids in (
            (_launch_env() + _wait(_EPS[4:6], 1), [4, 5]),  # one print: start-up in progress
            (_launch_env() + _wait(_EPS[1:], 4), [1, 2, 3, 4, 5, 6, 7]),  # every peer missing
            # a parameter server's endpoint is not a trainer's
            (_launch_env() + _wait([_EPS[3], "10.2.0.99:6000"], 4), [3])):
        code, roots = _run(tmp_path, text)
        assert code == 1, text
        assert _by(roots, NOT_READY) == [("undecided", [], "low")], text
        assert _suspects(roots) == ids, text
        assert not any(f["kind"] in ("not_joined", "rank_failure") for f in roots), text


def test_paddle_a_wait_before_an_error_leaves_the_answer_to_the_error(tmp_path: Path) -> None:
    # the wait ended, the job failed later on rank 2's own error: a fallback kind is not read
    text = (_launch_env() + _wait(_EPS[4:6], 3)
            + "[rank2]: Traceback (most recent call last):\n"
              '[rank2]:   File "train.py", line 40, in <module>\n'
              "[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    code, roots = _run(tmp_path, text)
    assert code == 1
    assert _by(roots, NOT_READY) == []


# --- Megatron's rerun state machine (synthetic, from rerun_state_machine.validate_result's
# logger lines in the megatron-core 0.10.0 / 0.12.0 / 0.14.0 wheels) -----------------------------
VERDICT, UNEXPECTED = "megatron.rerun.verdict", "megatron.rerun.unexpected"
_MSG = ("found NaN in local grad norm for bucket #0 in backward pass before data-parallel "
        "communication collective")
_LOG = "[2026-11-30 03:10:11.120] [ERROR] [rerun_state_machine.py:{}] "


def _initial(rank: int | None) -> str:
    if rank is None:  # 0.10 – 0.12
        return (_LOG.format(570) + "Unexpected result nan at /opt/megatron/megatron/core/"
                "distributed/param_and_grad_buffer.py line 171, invokation #1 at iteration #4410 "
                f"(message='{_MSG}')\n")
    return (_LOG.format(566) + f"Unexpected result nan on rank {rank} at iteration #4410 "
            f"invokation #1 (message='{_MSG}')\n")


def _verdict(rank: int, what: str) -> str:
    return _LOG.format(548) + f"Rank {rank}, node gpu-b07, device {rank % 8}: {what}!\n"


def test_megatron_rerun_device_verdict_names_that_rank_at_low(tmp_path: Path) -> None:
    first = ("[WARNING] First rerun: unexpected result is not reproducible within the tolerance "
             "(0.5 != nan)\n")
    for text, rank in ((_initial(None) + first + _verdict(13, "Possible transient error"), 13),
                       (_initial(21) + _verdict(21, "Possible persistent error"), 21)):
        code, roots = _run(tmp_path, text)
        assert code == 1, text  # was "no evidence"
        assert _by(roots, VERDICT) == [("rank_failure", [rank], "low")], text
        assert roots[0]["evidence"]["category"] == "device"
    code, roots = _run(tmp_path, _verdict(21, "Possible persistent error"))
    assert "before the resume" in roots[0]["evidence"]["reason"]


def test_megatron_rerun_correct_result_clears_the_device(tmp_path: Path) -> None:
    # reproduced on another GPU: the machine's own conclusion is that it is NOT the GPU's fault
    text = _initial(6) + _verdict(6, f"Correct result (but possible Application error) ({_MSG})")
    code, roots = _run(tmp_path, text)
    assert code == 1
    assert _by(roots, VERDICT) == [("undecided", [], "low")]
    assert _suspects(roots) == [6]
    assert not any(f["kind"] == "rank_failure" for f in roots)
    assert "NOT the device" in roots[0]["evidence"]["reason"]


def test_megatron_rerun_initial_run_only_or_several_ranks_name_no_culprit(tmp_path: Path) -> None:
    for text, pattern, suspects in (
            (_initial(None), UNEXPECTED, []),  # 0.10 – 0.12: no rank in the line
            (_initial(9), UNEXPECTED, [9]),  # 0.14: the rank, no verdict yet
            (_verdict(2, "Possible transient error") + _verdict(5, "Possible transient error"),
             VERDICT, [2, 5])):
        code, roots = _run(tmp_path, text)
        assert code == 1, text
        assert _by(roots, pattern) == [("undecided", [], "low")], text
        assert _suspects(roots) == suspects, text
        assert not any(f["kind"] == "rank_failure" for f in roots), text


# --- Kubernetes events and the operators' condition (synthetic, from kubectl's event rows and the
# kubelet's / scheduler's / node controller's event reasons and training-operator's message) ----
EVENT, OPERATOR = "k8s.event.pod_stopped", "k8s.operator.job_failed"
_EV_HEAD = "LAST SEEN   TYPE      REASON             OBJECT                 MESSAGE\n"


def _ev(reason: str, obj: str, message: str, kind: str = "Warning") -> str:
    return f"4m12s       {kind:<9} {reason:<18} {obj:<22} {message}\n"


_PODS = (_ev("Scheduled", "pod/llm-master-0", "Successfully assigned team-a/llm-master-0 to gpu-1",
             "Normal")
         + _ev("Scheduled", "pod/llm-worker-0", "Successfully assigned team-a/llm-worker-0 to "
               "gpu-2", "Normal"))


def test_k8s_events_name_the_stopped_pytorchjob_pod_as_a_suspect(tmp_path: Path) -> None:
    for text, want in (
            (_EV_HEAD + _PODS + _ev("Evicted", "pod/llm-worker-2", "The node was low on "
                                    "resource: memory. Threshold quantity: 100Mi, available: "
                                    "92Mi. Container pytorch was using 61Gi, request is 8Gi, "
                                    "has larger consumption of memory. "), [3]),
            (_EV_HEAD + _PODS + _ev("Preempted", "pod/llm-worker-0", "Preempted by pod "
                                    "5e1c2d40-0d7e-4bb0-9a57-1f4b2a0c6d11 on node gpu-2",
                                    "Normal"), [1]),
            # describe's Events table under the pod's block: the pod is the block's
            ("Name:             llm-master-0\nNamespace:        team-a\nEvents:\n"
             "  Type     Reason        Age   From               Message\n"
             "  ----     ------        ----  ----               -------\n"
             "  Warning  NodeNotReady  3m    node-controller    Node is not ready\n", [0])):
        code, roots = _run(tmp_path, text)
        assert code == 1, text  # was "no evidence"
        assert _by(roots, EVENT) == [("undecided", [], "low")], text
        assert _suspects(roots) == want, text
        assert not any(f["kind"] == "rank_failure" for f in roots), text


def test_k8s_events_without_a_pod_rank_or_an_operator_count_name_nobody(tmp_path: Path) -> None:
    for text, pattern in (
            # node-problem-detector's kill: a node and a pid, no pod
            (_EV_HEAD + _ev("OOMKilling", "node/gpu-7", "Memory cgroup out of memory: Killed "
                            "process 40121 (python) total-vm:81234567kB, anon-rss:6123456kB"),
             EVENT),
            # a JobSet pod: no master-0 / worker-i name
            (_EV_HEAD + _ev("BackOff", "pod/pretrain-w-0-3-x7k2p", "Back-off restarting failed "
                            "container trainer in pod pretrain-w-0-3-x7k2p_team-a(1f2e)"), EVENT),
            ("  Warning  Failed  PyTorchJob team-a/llm is failed because 1 Worker replica(s) "
             "failed.\n", OPERATOR),
            ("MPIJob bench is failed because 2 Worker replica(s) failed.\n", OPERATOR)):
        code, roots = _run(tmp_path, text)
        assert code == 1, text
        assert _by(roots, pattern) == [("undecided", [], "low")], text
        assert _suspects(roots) == [], text


def test_k8s_events_leave_the_answer_to_the_pods_own_termination(tmp_path: Path) -> None:
    # the describe block's OOMKilled state names the rank; the BackOff event under it repeats it
    text = ("Name:             llm-worker-1\nNamespace:        team-a\nStatus:           Failed\n"
            "Containers:\n  pytorch:\n    State:          Terminated\n"
            "      Reason:       OOMKilled\n      Exit Code:    137\n    Environment:\n"
            "      RANK:  2\nEvents:\n  Type     Reason   Age   From     Message\n"
            "  ----     ------   ----  ----     -------\n"
            "  Warning  BackOff  2m    kubelet  Back-off restarting failed container pytorch in "
            "pod llm-worker-1_team-a(9a8b)\n")
    code, roots = _run(tmp_path, text)
    assert (code, _by(roots, "k8s.describe_pod.terminated"), _by(roots, EVENT)) == (
        1, [("rank_failure", [2], "low")], [])


# --- Ray Train v2's WorkerGroupError (synthetic, from exceptions.py and poll.py's
# get_error_string in the ray-2.46.0 and ray-2.58.0 wheels) -------------------------------------
RAY_V2 = "ray.train.v2.worker_group_error"
_FIT = ("Traceback (most recent call last):\n"
        '  File "/srv/job/train.py", line 77, in <module>\n'
        "    result = trainer.fit()\n"
        "ray.train.WorkerGroupError: Training failed due to worker errors:\n")


def test_ray_v2_one_rank_with_its_own_error_is_that_rank_at_low(tmp_path: Path) -> None:
    for text in (
            # 2.46: "[Rank N]" then the error
            _FIT + "[Rank 5]\nValueError: expected a tensor of 4 dimensions, got 3\n",
            # 2.58: grouped, "Error Snippet"
            _FIT + "[Rank 5 Error Snippet]:\nRuntimeError: CUDA error: an illegal memory access "
                   "was encountered\n"):
        code, roots = _run(tmp_path, text)
        assert code == 1, text  # was "no evidence"
        assert _by(roots, RAY_V2) == [("rank_failure", [5], "low")], text
        assert "world rank" in roots[0]["evidence"]["rank_from"]


def test_ray_v2_a_timeout_or_several_ranks_are_suspects(tmp_path: Path) -> None:
    for text, ranks in (
            (_FIT + "[Rank 2]\nTimeoutError: the all_gather of step 412 did not finish "
                    "within 1800 s\n", [2]),
            (_FIT + "[Rank 0,3 Error Snippet]:\nRuntimeError: shape mismatch in layer 4\n"
                    "[Rank 1 Error Snippet]:\nKeyError: 'labels'\n", [0, 1, 3])):
        code, roots = _run(tmp_path, text)
        assert code == 1, text
        assert _by(roots, RAY_V2) == [("undecided", [], "low")], text
        assert _suspects(roots) == ranks, text
        assert not any(f["kind"] == "rank_failure" for f in roots), text


def test_ray_v2_a_traceback_whose_exception_is_a_wait_is_no_culprit(tmp_path: Path) -> None:
    # the block's error is UserExceptionWithTraceback's str: traceback.format_exc() (thread_
    # runner's construct_user_exception_with_traceback), the wait in its LAST line — the old
    # rule read only "Traceback (most recent call last):" and named rank 2 at low
    text = (_FIT + "[Rank 2]\nTraceback (most recent call last):\n"
            '  File "/srv/job/train.py", line 40, in train_func\n'
            "    dist.all_reduce(grad)\n"
            "torch.distributed.DistBackendError: Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=812, OpType=ALLREDUCE) ran for 1800021 milliseconds\n")
    code, roots = _run(tmp_path, text)
    assert code == 1
    assert _by(roots, RAY_V2) == [("undecided", [], "low")]
    assert _suspects(roots) == [2]
    # its own error, in the same shape, is still that rank — the exception line shown
    own = text.replace("torch.distributed.DistBackendError: Watchdog caught collective operation "
                       "timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE) ran for 1800021 "
                       "milliseconds", "ValueError: expected a tensor of 4 dimensions, got 3")
    code, roots = _run(tmp_path, own)
    assert _by(roots, RAY_V2) == [("rank_failure", [2], "low")]
    assert "ValueError: expected a tensor" in roots[0]["evidence"]["reason"]


def test_ray_v2_a_block_cut_before_its_error_is_no_culprit(tmp_path: Path) -> None:
    # the log ends after "[Rank 3]": whether its error was its own or a wait is unknown
    code, roots = _run(tmp_path, _FIT + "[Rank 3]\n")
    assert code == 1
    assert _by(roots, RAY_V2) == [("undecided", [], "low")]  # was rank_failure [3] at low
    assert _suspects(roots) == [3]
    assert "not in the logs" in roots[0]["evidence"]["reason"]


def test_ray_v2_rank_lines_without_the_error_head_are_not_read(tmp_path: Path) -> None:
    code, report = analyze_log_text(tmp_path, "job.log", "[Rank 4]\nsome progress line\n")
    assert code == 3  # no evidence, as before
    assert not [f for f in report["stall_findings"]
                if f["evidence"].get("pattern") == RAY_V2]


def test_ray_train_failed_error_alone_names_nobody(tmp_path: Path) -> None:
    # synthetic, from TrainingFailedError._RESTORE_MSG (base_trainer.py, ray-2.9.0 / 2.40.0)
    text = ("ray.train.base_trainer.TrainingFailedError: The Ray Train run failed. Please inspect "
            "the previous error messages for a cause. After fixing the issue (assuming that the "
            "error is not caused by your own application logic, but rather an error such as "
            "OOM), you can restart the run from scratch or continue this run.\n")
    code, roots = _run(tmp_path, text)
    assert code == 1  # was "no evidence"
    assert _by(roots, "ray.train.training_failed") == [("undecided", [], "low")]
    assert _suspects(roots) == []
