"""The rules helper f6 wrote for fresh5's held-out inference / transport messages.

vLLM's shm_broadcast wait, Ray's worker / actor deaths (analyzers/stalls/log_serving.py), NCCL's
"Attempt to use communicator before the previous operation returned ncclSuccess" and NCCL's
socket failure text without its WARN header (grammar: nccl.warn.comm_not_ready,
nccl.socket.connect_error_text). Each is checked through ``stormotel analyze --logs`` both ways,
on the shapes the emitters' sources print: the line must give a finding that names nobody
(undecided, low) — never a rank, never "healthy" — and the neighbouring line of a healthy or
intended path must not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stormotel.analyzers.stalls.logs_parser import parse_logs

from tests.stalls.helpers import analyze_log_text

OURS = {"vllm.shm_broadcast.no_block", "ray.raylet.worker_died", "ray.actor.worker_died",
        "ray.actor_died_error", "nccl.warn.comm_not_ready", "nccl.socket.connect_error_text"}

#: later releases' text (INFO, shm_broadcast.py acquire_write / acquire_read), vllm#44185's shape
SHM = ("(EngineCore_DP0 pid=1454) INFO 05-28 14:45:27 [shm_broadcast.py:681] No available shared "
       "memory broadcast block found in 60 seconds. This typically happens when some processes "
       "are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache "
       "quantization).\n")
#: 0.5.x's text (logger.warning "No available block found in %s second. ")
SHM_05 = ("(VllmWorkerProcess pid=161) WARNING 08-22 06:24:42 shm_broadcast.py:386] No available "
          "block found in 60 second. \n")
#: a healthy vLLM server's lines, shm_broadcast.py's own INFO among them (MessageQueue.__init__)
HEALTHY_VLLM = (
    "(EngineCore_DP0 pid=1454) INFO 05-28 14:40:01 [shm_broadcast.py:289] vLLM message queue "
    "communication handle: Handle(local_reader_ranks=[0, 1, 2, 3], buffer_handle=(4, 16777216, "
    "10, 'psm_f6a3aee2'), local_subscribe_addr='ipc:///tmp/ebf48a25', remote_subscribe_addr=None,"
    " remote_addr_ipv6=False)\n"
    "(APIServer pid=1400) INFO 05-28 14:41:10 [loggers.py:123] Engine 000: Avg prompt throughput: "
    "512.3 tokens/s, Avg generation throughput: 88.1 tokens/s, Running: 4 reqs, Waiting: 0 reqs\n"
    '(APIServer pid=1400) INFO:     127.0.0.1:39984 - "POST /v1/chat/completions HTTP/1.1" '
    '200 OK\n')
#: node_manager.cc DisconnectClient (SYSTEM_ERROR only), openrlhf#265 / verl#472's shape
RAYLET = ("(raylet) A worker died or was killed while executing a task by an unexpected system "
          "error. To troubleshoot the problem, check the logs for the dead worker. RayTask ID: "
          "ffffffffffffffff308b51161c6df986f5e8ce0502000000 Worker ID: ecb9585c3a722865f339a86d7d9a"
          "e9abb131b502d1452edadee7b0e3 Node ID: ed9580448251cc916430246358f4b61106db8cf2a06ff38a04"
          "a51eb1 Worker IP address: 10.0.0.1 Worker port: 10074 Worker PID: 27499 Worker exit "
          "type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection "
          "error code 2. End of file.\n")


def _actor_dead(exit_type: str, detail: str) -> str:
    """gcs_actor_manager.cc GenWorkerDiedCause's text."""
    return ("The actor is dead because its worker process has died. Worker exit type: "
            f"{exit_type} Worker exit detail: {detail}\n")


ACTOR_ERROR = ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this "
               "task.\n\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict\n")
#: init.cc ncclCommEnsureReady through debug.cc's WARN header (tensorrt-llm#1039's shape)
COMM_NOT_READY = ("instance-1:390729:390729 [2] init.cc:303 NCCL WARN Attempt to use communicator "
                  "before the previous operation returned ncclSuccess\n"
                  "instance-1:390729:390729 [2] NCCL INFO enqueue.cc:1605 -> 512\n")


def _run(tmp_path: Path, text: str) -> tuple[int, list[dict[str, Any]]]:
    code, report = analyze_log_text(tmp_path, "job.log", text)
    return code, [f for f in report.get("stall_findings", []) if f["consequence_of"] is None]


def _names_nobody(tmp_path: Path, text: str, pattern: str) -> dict[str, Any]:
    code, roots = _run(tmp_path, text)
    assert code == 1, (code, roots)
    assert [(f["kind"], f["ranks"], f["confidence"]) for f in roots] == [("undecided", [], "low")]
    root = roots[0]
    assert root["evidence"]["pattern"] == pattern
    assert root["evidence"]["suspects"] == [] and root["remediation"]
    return root


def _silent(tmp_path: Path, text: str) -> None:
    code, roots = _run(tmp_path, text)
    assert code in (0, 3), (code, roots)
    assert not {f["evidence"].get("pattern") for f in roots} & OURS


# --- vLLM shm_broadcast ------------------------------------------------------------------
def test_a_shm_broadcast_wait_is_undecided_and_names_nobody(tmp_path: Path) -> None:
    """Writer and readers print the same text: the line says a process waited, not on whom."""
    root = _names_nobody(tmp_path, SHM * 3, "vllm.shm_broadcast.no_block")
    assert "60 s" in root["evidence"]["reason"] and "3 line(s)" in root["evidence"]["reason"]


def test_the_older_shm_broadcast_text_is_read_too(tmp_path: Path) -> None:
    _names_nobody(tmp_path, SHM_05, "vllm.shm_broadcast.no_block")


def test_a_healthy_vllm_log_mentioning_shm_broadcast_is_not_read(tmp_path: Path) -> None:
    _silent(tmp_path, HEALTHY_VLLM)


# --- Ray ---------------------------------------------------------------------------------
def test_a_raylet_worker_death_names_the_process_not_a_rank(tmp_path: Path) -> None:
    root = _names_nobody(tmp_path, HEALTHY_VLLM + RAYLET, "ray.raylet.worker_died")
    assert "worker PID 27499" in root["evidence"]["reason"]


def test_an_actor_whose_worker_died_by_a_system_error_is_read(tmp_path: Path) -> None:
    _names_nobody(tmp_path, _actor_dead("SYSTEM_ERROR", "Worker exits unexpectedly."),
                  "ray.actor.worker_died")


def test_an_actor_that_exited_as_intended_is_not_read(tmp_path: Path) -> None:
    """exit_actor() gives INTENDED_USER_EXIT: a normal end, whatever the 'is dead' wording."""
    for i, (exit_type, detail) in enumerate((
            ("INTENDED_USER_EXIT", "Worker exits by an user request. exit_actor() is called."),
            ("INTENDED_SYSTEM_EXIT", "Worker exits because it was idle."))):
        (tmp_path / str(i)).mkdir()
        _silent(tmp_path / str(i), _actor_dead(exit_type, detail))


def test_a_caller_of_a_dead_actor_is_read(tmp_path: Path) -> None:
    _names_nobody(tmp_path, ACTOR_ERROR, "ray.actor_died_error")


def test_a_rank_naming_rule_still_decides_over_the_serving_lines(tmp_path: Path) -> None:
    """A fallback: with watchdog timeouts on ranks 0-2 and rank 3 silent outside NCCL, rank 3
    is still the straggler, whatever vLLM / Ray lines sit beside them."""
    timeouts = "".join(
        f"[rank{r}]:[E ProcessGroupNCCL.cpp:523] [Rank {r}] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600272 milliseconds before timing out.\n" for r in (0, 1, 2))
    code, roots = _run(tmp_path, SHM + timeouts + "[rank3]: step 4120 loss 1.93\n" + RAYLET)
    assert code == 1 and [(f["kind"], f["ranks"]) for f in roots] == [("straggler", [3])]


# --- NCCL ----------------------------------------------------------------------------------
def test_attempt_to_use_communicator_is_a_follow_on_error_naming_nobody(tmp_path: Path) -> None:
    """The [2] of the header is the CUDA device, not a rank: nobody named."""
    _names_nobody(tmp_path, COMM_NOT_READY, "nccl.warn.comm_not_ready")


def test_ordinary_nccl_info_lines_are_not_read_as_it(tmp_path: Path) -> None:
    _silent(tmp_path, "instance-1:390729:390729 [2] NCCL INFO enqueue.cc:1605 -> 512\n"
                      "instance-1:390729:390729 [2] NCCL INFO comm 0x55 rank 2 nranks 4 cudaDev 2 "
                      "nvmlDev 2 busId 3b000 commId 0x1234 - Init COMPLETE\n")


def test_the_socket_text_without_its_header_is_read(tmp_path: Path) -> None:
    """nccl#1515's prose: socket.cc's WARN text alone, as ncclGetLastError returns it."""
    texts = ("it sometimes reports `socketStartConnect: Connect to 10.45.234.83<47527> "
             "failed : Software caused connection abort`\n",
             "Last error:\nsocketProgressOpt: Call to recv from 10.0.0.2<45763> failed : "
             "Connection reset by peer\n",
             "Net : Connect to 10.1.2.3<33641> failed : Connection refused\n")
    for i, text in enumerate(texts):
        sub = tmp_path / str(i)
        sub.mkdir()
        _names_nobody(sub, text, "nccl.socket.connect_error_text")


def test_the_socket_retry_info_line_is_not_read(tmp_path: Path) -> None:
    """2.24+'s INFO on each retried connect ("returned …, retrying") is no failure yet."""
    _silent(tmp_path, "node1:12:40 [0] NCCL INFO socketStartConnect: connect to 10.0.0.2<4567> "
                      "returned Connection refused, retrying (1/34) after sleep for 100 msec\n")


def test_the_socket_text_with_its_header_is_read_once(tmp_path: Path) -> None:
    """The header form stays nccl.warn.failure's: one event per line, not two."""
    log = tmp_path / "job.log"
    log.write_text("ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: "
                   "Connect to 10.0.0.2<45763> failed : Software caused connection abort\n")
    patterns = [e.pattern for e in parse_logs([str(log)]).events]
    assert patterns.count("nccl.warn.failure") == 1
    assert "nccl.socket.connect_error_text" not in patterns


def test_a_teardown_line_and_a_ray_death_give_one_finding_naming_nobody(tmp_path: Path) -> None:
    """Both rules are fallbacks that name nobody; each counts the other's lines as quiet, so one
    finding comes back (log_rankless's, on the process group's own words), not none."""
    text = ("[rank1]:[E ProcessGroupNCCL.cpp:577] [Rank 1] Some NCCL operations have failed or "
            "timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations "
            "might run on corrupted/incomplete data.\n" + RAYLET)
    code, roots = _run(tmp_path, text)
    assert code == 1 and len(roots) == 1
    assert (roots[0]["kind"], roots[0]["ranks"]) == ("undecided", [])
    assert roots[0]["evidence"]["pattern"] == "torch.nccl.ops_failed"
