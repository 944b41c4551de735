"""Rules written from the emitters' source (helper rs12), at the CLI (``stormotel analyze --logs``).

Every line below is SYNTHETIC: built from the emitter's format string at the versions its
module's docstring names, not copied from any collected case; ranks, hosts, paths and devices
are invented.

- Megatron's non-finite checks (log_megatron_nan): megatron-core's
  ``distributed/param_and_grad_buffer.py`` assert (0.6 – 0.9 wheels), ``rerun_state_machine.py``'s
  RuntimeError (0.12 – 0.14 wheels) and ``pretrain_gpt.py``'s loss assert: one rank names that
  (global) rank at low; several ranks are suspects, nobody named;
- ``kubectl describe pod`` (log_pod_describe; ``pkg/describe`` at kubectl v0.24.0 / v0.31.0):
  one pod OOMKilled with its RANK names that rank at low; an exit code or Evicted is a suspect;
  no process rank (JobSet, MPIJob, torchrun inside) names nobody;
- the JAX distributed client's "Terminating process because …" and the agent's "Failed to send
  RPC to coordination service" (log_rankless; ``xla/pjrt/distributed/client.h``,
  ``coordination_service_error_util.cc``): a victim, nobody named — where the status after it
  holds a heartbeat notice, that notice's own rule answers;
- Paddle's launcher on several nodes (log_paddle_launch; ``Container.__str__``'s environment in
  the 2.6.2 wheel, 3.0.0 with FLAGS_print_launcher_env): the printed PADDLE_TRAINER_ID is the
  global rank, a suspect on any number of nodes; without it a local index names nobody.
"""

from __future__ import annotations

from pathlib import Path

from tests.stalls.helpers import analyze_log_text
from tests.stalls.helpers import root_findings as _run
from tests.stalls.test_rules_from_source_rs9 import _by, _suspects

MEGATRON = "megatron.nan_check"


# --- Megatron (synthetic, from start_grad_sync's assert and validate_result's RuntimeError) -----
def _assert_grad(rank: int, *, prefix: str = "", host: str = "node-a7") -> str:
    body = (
        "Traceback (most recent call last):\n"
        '  File "/opt/megatron/pretrain_gpt.py", line 301, in <module>\n'
        "    pretrain(datasets_provider, model_provider, ModelType.encoder_or_decoder, step)\n"
        '  File "/opt/megatron/megatron/core/distributed/param_and_grad_buffer.py", line 115, '
        "in start_grad_sync\n"
        "    assert not norm.isnan(), (\n"
        f"AssertionError: Rank {rank}: found NaN in local grad norm in backward pass before "
        f"data-parallel communication collective. Device: {rank % 8}, node: {host}\n")
    return "".join(prefix + line + "\n" for line in body.splitlines())


def _assert_loss(rank: int) -> str:
    return ("Traceback (most recent call last):\n"
            '  File "/opt/megatron/pretrain_gpt.py", line 182, in loss_func\n'
            "    assert not loss[0].isnan(), (\n"
            f"AssertionError: Rank {rank}: found NaN in local forward loss calculation. "
            f"Device: {rank % 8}, node: node-b2\n")


def _rerun(rank: int, message: str, *, result: str = "tensor(nan, device='cuda:3')") -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/opt/megatron/megatron/core/rerun_state_machine.py", line 505, in '
        "validate_result\n"
        "    raise RuntimeError(full_message)\n"
        f"RuntimeError: Rank {rank}, node node-c4, device 3, iteration 1207: Unexpected result "
        f"{result} (message='{message}')\n")


_GRAD = ("found Inf in local grad norm for bucket #2 in backward pass before data-parallel "
         "communication collective")


def test_megatron_rerun_error_without_a_prefix_makes_the_rank_a_suspect(tmp_path: Path) -> None:
    # a suspect, not a culprit: the check cannot tell the rank's own cause from one every rank
    # shares (held out: named as a culprit, the rule was wrong on both fresh12 cases it read)
    for text, rank in ((_rerun(11, _GRAD), 11),
                       (_rerun(6, "found NaN in local forward loss calculation",
                               result="nan"), 6),
                       (_assert_loss(21), 21)):
        code, roots = _run(tmp_path, text)
        assert code == 1, text
        assert _by(roots, MEGATRON) == [("undecided", [], "low")], text
        assert _suspects(roots) == [rank], text
        assert "global" in roots[0]["evidence"]["rank_from"]


def test_megatron_assert_under_a_rank_prefix_agrees_with_the_exception_rule(
        tmp_path: Path) -> None:
    code, report = analyze_log_text(tmp_path, "train.log", _assert_grad(5, prefix="[rank5]: "))
    assert code == 1
    mine = [f for f in report["stall_findings"] if f["evidence"].get("pattern") == MEGATRON]
    assert [(f["kind"], f["ranks"], f["confidence"]) for f in mine] == [
        ("undecided", [], "low")]
    assert mine[0]["evidence"]["suspects"] == [5]
    # nothing in the report names another rank as the first to fail
    assert {r for f in report["stall_findings"] if f["kind"] == "rank_failure"
            for r in f["ranks"]} == {5}


def test_megatron_several_ranks_are_suspects_not_a_culprit(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _rerun(2, _GRAD) + _rerun(3, _GRAD) + _assert_loss(7))
    assert code == 1
    assert not any(f["kind"] == "rank_failure" and f["evidence"].get("pattern") == MEGATRON
                   for f in roots)
    assert _by(roots, MEGATRON) == [("undecided", [], "low")]
    assert _suspects(roots) == [2, 3, 7]


def test_megatron_other_lines_with_the_same_words_are_not_read(tmp_path: Path) -> None:
    # the rerun machine's initial-run log line names no rank; an "Unexpected result" elsewhere
    # (no "Rank R, node H, device D, iteration I:" head) is not Megatron's
    text = ("ERROR Unexpected result nan at /opt/megatron/pretrain_gpt.py line 180, invokation #1 "
            "at iteration #52 (message='found NaN in local forward loss calculation')\n"
            "Rank 3 got an Unexpected result from the tokenizer (message='bad')\n")
    code, report = analyze_log_text(tmp_path, "train.log", text)
    assert not [f for f in report["stall_findings"]
                if f["evidence"].get("pattern") == MEGATRON]
    assert code != 0


# --- kubectl describe pod (synthetic, from describePod / describeStatus / describeContainerEnvVars
# at kubernetes/kubectl v0.24.0 and v0.31.0) ------------------------------------------------------
K8S = "k8s.describe_pod.terminated"


def _describe(name: str, reason: str | None, code: int, *, env: dict[str, str] | None = None,
              last: tuple[str, int] | None = None, pod_reason: str | None = None) -> str:
    state = "    State:          Terminated\n"
    if reason:
        state += f"      Reason:       {reason}\n"
    state += (f"      Exit Code:    {code}\n"
              "      Started:      Mon, 30 Nov 2026 01:02:03 +0000\n"
              "      Finished:     Mon, 30 Nov 2026 02:41:17 +0000\n")
    if code == 0 and reason is None:
        state = "    State:          Running\n      Started:      Mon, 30 Nov 2026 01:02:03 +0000\n"
    if last is not None:
        state += (f"    Last State:     Terminated\n      Reason:       {last[0]}\n"
                  f"      Exit Code:    {last[1]}\n")
    text = (f"Name:             {name}\nNamespace:        team-a\nPriority:         0\n"
            "Node:             gpu-17/10.4.0.17\n"
            f"Status:           {'Failed' if code or pod_reason else 'Running'}\n")
    if pod_reason:
        text += (f"Reason:           {pod_reason}\n"
                 "Message:          The node was low on resource: memory.\n")
    text += ("Containers:\n  pytorch:\n    Container ID:   containerd://5f1e\n"
             "    Image:          registry.local/train:7\n" + state
             + "    Ready:          False\n    Restart Count:  1\n")
    if env:
        text += "    Environment:\n" + "".join(f"      {k}:  {v}\n" for k, v in env.items())
    return text + ("Events:\n  Type     Reason   Age   From     Message\n"
                   "  ----     ------   ----  ----     -------\n"
                   "  Warning  BackOff  2m    kubelet  Back-off restarting failed container "
                   "pytorch in pod x\n\n")


def test_describe_one_pod_oomkilled_with_its_rank_is_that_rank_at_low(tmp_path: Path) -> None:
    for text, rank in (
            (_describe("llama-worker-2", "OOMKilled", 137, env={"RANK": "3", "WORLD_SIZE": "4"}),
             3),
            # the restarted container's Last State, named by its PyTorchJob master / worker
            (_describe("ft-master-0", None, 0)
             + _describe("ft-worker-1", "Error", 1, last=("OOMKilled", 137)), 2)):
        code, roots = _run(tmp_path, text)
        assert code == 1, text
        assert _by(roots, K8S) == [("rank_failure", [rank], "low")], text


def test_describe_exit_code_or_eviction_is_a_suspect_only(tmp_path: Path) -> None:
    for text in (_describe("llama-worker-2", "Error", 137, env={"RANK": "3"}),
                 _describe("llama-worker-2", None, 0, env={"RANK": "3"}, pod_reason="Evicted")):
        code, roots = _run(tmp_path, text)
        assert code == 1, text
        assert not any(f["kind"] == "rank_failure" for f in roots), text
        assert _suspects(roots) == [3], text


def test_describe_pods_without_a_process_rank_name_nobody(tmp_path: Path) -> None:
    for text in (
            # torchrun inside the pod: RANK is the node's
            _describe("llama-worker-0", "OOMKilled", 137,
                      env={"PET_NPROC_PER_NODE": "8", "RANK": "0"}),
            # JobSet / MPIJob names, no RANK
            _describe("pretrain-workers-0-3-x7k2p", "OOMKilled", 137),
            _describe("mpi-bench-worker-1", "OOMKilled", 137)):
        code, roots = _run(tmp_path, text)
        assert code == 1, text
        assert not any(f["kind"] == "rank_failure" for f in roots), text
        assert _by(roots, K8S) == [("undecided", [], "low")], text
        assert _suspects(roots) == [], text
        assert "describe" in roots[0]["evidence"]["reason"]


def test_describe_completed_and_running_pods_are_no_evidence(tmp_path: Path) -> None:
    text = (_describe("ft-master-0", None, 0)
            + _describe("ft-worker-0", "Completed", 0, env={"RANK": "1"}))
    code, report = analyze_log_text(tmp_path, "describe.txt", text)
    assert code == 3
    assert not [f for f in report["stall_findings"] if f["evidence"].get("pattern") == K8S]


# --- the JAX distributed client and the coordination service agent (synthetic, from client.h's
# missed_heartbeat_callback and TrimCoordinationErrorMessage) -----------------------------------
JAX_FATAL, TSL_RPC = "jax.distributed.fatal_error", "tsl.coordination.rpc_failed"
_GLOG = "F1130 02:11:32.075587  157988 client.h:77] "
_POLLED = ("E1130 02:11:32.075402  157988 coordination_service_agent.cc:332] Polled an error from "
           "coordination service (this can be an error from this or another task).\n")
_FATAL = ("Terminating process because the JAX distributed service detected fatal errors. This "
          "most likely indicates that another task died; see the other task logs for more "
          "details. Disable Python buffering, i.e. `python -u`, to be sure to see all the "
          "previous output. absl::Status: ")
_RPC = ("UNAVAILABLE: Failed to send RPC to coordination service. Either the leader task "
        "died/restarted unexpectedly or this task is experiencing network issues. Check earlier "
        "logs from this task and the leader (usually slice 0 process/task/worker 0)  to debug "
        "further.\n")


def test_jax_fatal_error_alone_is_a_victim_naming_nobody(tmp_path: Path) -> None:
    for text, pattern in (
            (_POLLED + _GLOG + _FATAL + "INTERNAL: Shutdown barrier has failed.\n", JAX_FATAL),
            (_POLLED + _GLOG + _FATAL + _RPC, JAX_FATAL),
            (_GLOG + "Terminating process because of missing heartbeat response from the "
             "coordinator. This most likely indicates that the coordinator task died; see the "
             "coordinator's task logs for more details. Status: UNAVAILABLE: failed to connect\n",
             JAX_FATAL),
            ("jaxlib.xla_extension.XlaRuntimeError: " + _RPC, TSL_RPC)):
        code, roots = _run(tmp_path, text)
        assert code == 1, text  # was "no evidence" (exit 3)
        assert _by(roots, pattern) == [("undecided", [], "low")], text
        assert _suspects(roots) == [], text
        assert not any(f["kind"] == "rank_failure" for f in roots), text
    code, roots = _run(tmp_path, _POLLED + _GLOG + _FATAL + _RPC)
    assert "process 0" in roots[0]["evidence"]["reason"]


def test_jax_fatal_error_leaves_a_heartbeat_notice_to_its_own_rule(tmp_path: Path) -> None:
    text = (_POLLED + _GLOG + _FATAL + "UNAVAILABLE: The following tasks are unhealthy (stopped "
            "sending heartbeats):\n/job:jax_worker/replica:0/task:3\nThe tasks have crashed. "
            "Check the task logs for an earlier error, or scheduler events (e.g. preemption, "
            "eviction) to debug further.\n\nRPC: /tensorflow.CoordinationService/PollForError\n")
    code, roots = _run(tmp_path, text)
    assert code == 1
    assert _by(roots, "xla.coordination.heartbeat_timeout") == [("rank_failure", [3], "low")]
    assert _by(roots, JAX_FATAL) == []

# --- Paddle's launcher on several nodes (synthetic, from Container.__str__'s " \nenv {…}" in the
# 2.6.2 wheel — 3.0.0 with FLAGS_print_launcher_env — and collective.py's container env) ---------
PADDLE = "paddle.launch.container_failed"


def _paddle_failed(local: int, code: int, env: dict[str, str] | None) -> str:
    head = "LAUNCH {} 2026-11-30 01:20:33,120 {}\n"
    line = (f"Container rank {local} status failed cmd ['python', '-u', 'train.py'] code {code} "
            f"log log/workerlog.{local} ")
    if env is not None:
        line += "\nenv " + repr({"PADDLE_LOG_DIR": "/srv/log", **env})
    return (head.format("INFO", "Pod failed") + head.format("ERROR", "Container failed !!!")
            + line + "\n" + head.format("INFO", "Exit code -1"))


def _env(trainer: int, nodes: int) -> dict[str, str]:
    return {"PADDLE_MASTER": "10.0.0.1:8090", "PADDLE_GLOBAL_SIZE": str(8 * nodes),
            "PADDLE_LOCAL_SIZE": "8", "PADDLE_GLOBAL_RANK": str(trainer),
            "PADDLE_LOCAL_RANK": str(trainer % 8), "PADDLE_NNODES": str(nodes),
            "PADDLE_TRAINER_ID": str(trainer), "PADDLE_TRAINERS_NUM": str(8 * nodes)}


def test_paddle_env_makes_the_local_index_a_global_suspect(tmp_path: Path) -> None:
    job = ("LAUNCH INFO 2026-11-30 01:19:02,001 Job: default, mode collective, replicas 2[2:2], "
           "elastic False\n")
    for text, want in ((job + _paddle_failed(5, -9, _env(13, 2)), [13]),
                       # two nodes' launchers pasted together: both global ids are suspects
                       (_paddle_failed(1, 1, _env(9, 2)) + _paddle_failed(4, -6, _env(4, 2)),
                        [4, 9])):
        code, roots = _run(tmp_path, text)
        assert code == 1, text
        assert not any(f["kind"] == "rank_failure" for f in roots), text
        assert _by(roots, PADDLE) == [("undecided", [], "low")], text
        assert _suspects(roots) == want, text
        assert "PADDLE_TRAINER_ID" in roots[0]["evidence"]["rank_from"]


def test_paddle_without_env_on_two_nodes_still_names_nobody(tmp_path: Path) -> None:
    job = ("LAUNCH INFO 2026-11-30 01:19:02,001 Job: default, mode collective, replicas 2[2:2], "
           "elastic False\n")
    code, roots = _run(tmp_path, job + _paddle_failed(5, -9, None))
    assert code == 1
    assert _by(roots, PADDLE) == [("undecided", [], "low")]
    assert _suspects(roots) == []
    # one container's env printed, the other's not: the local one keeps the old reading
    code, roots = _run(tmp_path, _paddle_failed(1, 1, _env(9, 2)) + _paddle_failed(4, -6, None))
    assert code == 1
    assert _suspects(roots) == []
