"""Rules written from the emitters' source (helper rs11), at the CLI (``stormotel analyze --logs``).

Every line below is SYNTHETIC: built from the emitter's format string at the versions its
module's docstring names — DeepSpeed's ``deepspeed/launcher/launch.py`` (v0.15.0, v0.16.0: the
"process P spawned with command: [...]" map, the layout lines, ``sigkill_handler``'s lines) and
the Linux kernel's ``mm/oom_kill.c`` ("%s: Killed process %d (%s) total-vm:…", the pre-4.19
"Killed process %d (%s) total-vm:…", the 4.19+ "oom-kill:constraint=…,task=%s,pid=%d,uid=%d"
summary) — not copied from any collected case; pids, hosts and sizes are invented.

- the kernel's OOM victim joined with DeepSpeed's pid map (log_oom_kill): that rank at low
  (nnodes=1: the --local_rank argument; several nodes: global_rank_mapping[node][i]);
- the same through Ray Train's pid → world_rank list, the victim's comm Ray's "ray::" title;
- a pid off the map, a comm that is not the map's program (another pid namespace), two
  launchers' lines that spawn order cannot place: nobody — undecided at low, the pid in the
  reason; two mapped ranks killed: suspects;
- TensorFlow's "OOM when allocating tensor … on /job:J/…/task:I/device:D" (op_kernel.cc) and the
  coordination service's restarted-task errors (coordination_service.cc): a TASK, never a rank;
- verl's worker actor name "<prefix><Class>_0:N" in Ray's ActorDiedError (verl 0.3.0.post1 /
  0.5.0 single_controller/ray/base.py): rank N a suspect — ray.get raises the lowest-rank
  failure, not the first.
"""

from __future__ import annotations

from pathlib import Path

from tests.stalls.helpers import root_findings as _run
from tests.stalls.test_rules_from_source_rs9 import _by, _suspects

KILLED = "kernel.oom_kill.killed_process"
_DS = "[2025-03-02 09:14:0{s},100] [INFO] [launch.py:{line}:main] "


def _launcher(nnodes: int, procs: int, node: int, mapping: str, pids: list[int],
              local_arg: bool = True) -> str:
    """DeepSpeed launch.py's start lines (logger format of deepspeed/utils/logging.py)."""
    out = [_DS.format(s=1, line=146) + "WORLD INFO DICT: " + mapping,
           _DS.format(s=1, line=152) + f"nnodes={nnodes}, num_local_procs={procs}, "
           f"node_rank={node}",
           _DS.format(s=1, line=163) + "global_rank_mapping=defaultdict(<class 'list'>, "
           + mapping + ")",
           _DS.format(s=1, line=168) + "Setting CUDA_VISIBLE_DEVICES=0,1,2,3"]
    for i, pid in enumerate(pids):
        arg = f"'--local_rank={i}', " if local_arg else ""
        out.append(_DS.format(s=2, line=256) + f"process {pid} spawned with command: "
                   f"['/opt/conda/bin/python', '-u', 'finetune.py', {arg}'--deepspeed', "
                   "'ds_z3.json']")
    return "\n".join(out) + "\n"


def _sigkill(pids: list[int], code: int) -> str:
    """sigkill_handler: every child, then the LAST spawned command with the first non-zero code."""
    lines = [f"[2025-03-02 10:40:12,001] [INFO] [launch.py:319:sigkill_handler] Killing "
             f"subprocess {p}" for p in pids]
    lines.append("[2025-03-02 10:40:12,500] [ERROR] [launch.py:325:sigkill_handler] "
                 "['/opt/conda/bin/python', '-u', 'finetune.py', '--local_rank=3', '--deepspeed',"
                 f" 'ds_z3.json'] exits with return code = {code}")
    return "\n".join(lines) + "\n"


def _killed(pid: int, comm: str = "python", memcg: bool = False) -> str:
    """oom_kill.c __oom_kill_process (5.x: UID, pgtables and oom_score_adj appended)."""
    msg = "Memory cgroup out of memory" if memcg else "Out of memory"
    return (f"[Sun Mar  2 10:40:11 2025] {msg}: Killed process {pid} ({comm}) "
            "total-vm:98304212kB, anon-rss:71203344kB, file-rss:81920kB, shmem-rss:0kB, "
            "UID:1000 pgtables:140712kB oom_score_adj:0\n")


_PIDS = [40110, 40111, 40112, 40113]
_ONE_NODE = "{'localhost': [0, 1, 2, 3]}"


def test_oom_victim_on_deepspeeds_pid_map_is_that_rank_at_low(tmp_path: Path) -> None:
    for comm in ("python", "pt_main_thread"):
        code, roots = _run(tmp_path, _launcher(1, 4, 0, _ONE_NODE, _PIDS) + _killed(40112, comm)
                           + _sigkill(_PIDS, -9))
        assert code == 1
        assert _by(roots, KILLED) == [("rank_failure", [2], "low")], comm
        ev = roots[0]["evidence"]
        assert ev["category"] == "oom" and ev["pid"] == 40112
        assert "deepspeed.launcher.process_spawned" in ev["rank_from"]


def test_second_nodes_launcher_maps_spawn_order_through_global_rank_mapping(
        tmp_path: Path) -> None:
    # node_rank=1 of two nodes, --no_local_rank; the kernel's 4.19+ one-line summary (memcg)
    two = "{'node-a': [0, 1, 2, 3], 'node-b': [4, 5, 6, 7]}"
    summary = ("[ 8123.441201] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,"
               "mems_allowed=0-1,oom_memcg=/slurm/uid_1000/job_77,task_memcg=/slurm/uid_1000/"
               "job_77/step_0,task=python,pid=40111,uid=1000\n")
    code, roots = _run(tmp_path, _launcher(2, 4, 1, two, _PIDS, local_arg=False) + summary
                       + _sigkill(_PIDS, -9))
    assert code == 1
    assert _by(roots, KILLED) == [("rank_failure", [5], "low")]


def test_oom_victim_off_the_map_names_nobody_but_says_the_pid(tmp_path: Path) -> None:
    # a DataLoader worker (its own pid), and the kernel's line alone (pre-4.19 form, no prefix)
    for text in (_launcher(1, 4, 0, _ONE_NODE, _PIDS) + _killed(40377) + _sigkill(_PIDS, -9),
                 "[ 8123.1] Killed process 40377 (python) total-vm:9830421kB, anon-rss:7120334kB,"
                 " file-rss:8192kB, shmem-rss:0kB\n"):
        code, roots = _run(tmp_path, text)
        assert code == 1, text
        assert not any(f["kind"] == "rank_failure" for f in roots)
        assert _by(roots, KILLED) == [("undecided", [], "low")]
        assert "pid 40377 (python)" in roots[0]["evidence"]["reason"]
        assert _suspects(roots) == []


def test_a_comm_that_is_not_the_maps_program_is_not_joined(tmp_path: Path) -> None:
    # the kernel prints host-namespace pids: a containerised launcher's pid can be another
    # process's on the host
    code, roots = _run(tmp_path, _launcher(1, 4, 0, _ONE_NODE, _PIDS)
                       + _killed(40112, "postgres", memcg=True) + _sigkill(_PIDS, -9))
    assert code == 1
    assert not any(f["kind"] == "rank_failure" for f in roots)
    assert _by(roots, KILLED) == [("undecided", [], "low")]


def test_two_launchers_lines_or_two_killed_ranks_name_nobody(tmp_path: Path) -> None:
    # two nodes' launchers in one file (8 spawned lines for num_local_procs=4): not placed
    code, roots = _run(tmp_path, _launcher(1, 4, 0, _ONE_NODE, _PIDS)
                       + _launcher(1, 4, 0, _ONE_NODE, [50110, 50111, 50112, 50113])
                       + _killed(40112))
    assert code == 1
    assert not any(f["kind"] == "rank_failure" for f in roots)
    # two mapped ranks killed: suspects
    code, roots = _run(tmp_path, _launcher(1, 4, 0, _ONE_NODE, _PIDS) + _killed(40112)
                       + _killed(40110) + _sigkill(_PIDS, -9))
    assert code == 1
    assert _by(roots, KILLED) == [("undecided", [], "low")]
    assert _suspects(roots) == [0, 2]


def test_oom_victim_on_ray_trains_worker_list_is_that_world_rank(tmp_path: Path) -> None:
    # backend_executor.py (ray 2.9): the worker list; the victim's comm is Ray's process title
    ray = ("(TrainTrainable pid=9001) Started distributed worker processes: \n"
           "- (ip=10.0.0.5, pid=9120) world_rank=0, local_rank=0, node_rank=0\n"
           "- (ip=10.0.0.6, pid=9233) world_rank=1, local_rank=0, node_rank=1\n")
    code, roots = _run(tmp_path, ray + _killed(9233, "ray::RayTrainWo"))
    assert code == 1
    assert _by(roots, KILLED) == [("rank_failure", [1], "low")]
    assert "ray.train.worker_processes" in roots[0]["evidence"]["rank_from"]


# --- TensorFlow's allocator and the coordination service (synthetic, from the format strings) ---
TF_OOM = "tf.resource.oom_allocating"
RESTARTED = "tsl.coordination.task_restarted"
_TF_OOM = ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
           "tensor with shape[128,2048,4096] and type float on /job:worker/replica:0/task:{t}/"
           "device:GPU:0 by allocator GPU_0_bfc\n"
           "\t [[{{{{node gradient_tape/model/dense_3/MatMul}}}}]]\n")


def test_tf_oom_names_the_task_and_its_device_never_a_rank(tmp_path: Path) -> None:
    # alone, and behind the master's "From /job:…/task:I:" prefix (master_session.cc)
    for text in (_TF_OOM.format(t=3),
                 "tensorflow.python.framework.errors_impl.ResourceExhaustedError: From "
                 "/job:worker/replica:0/task:3:\n" + _TF_OOM.format(t=3)):
        code, roots = _run(tmp_path, text)
        assert code == 1, text
        assert not any(f["kind"] == "rank_failure" for f in roots)
        assert [(f["kind"], f["ranks"], f["confidence"]) for f in roots] == [
            ("undecided", [], "low")]
        assert "task /job:worker/task:3" in roots[0]["evidence"]["reason"]
        assert _suspects(roots) == []
    code, roots = _run(tmp_path, _TF_OOM.format(t=3))
    assert _by(roots, TF_OOM) == [("undecided", [], "low")]
    assert roots[0]["evidence"]["category"] == "oom"


def test_a_task_that_reconnected_as_a_new_process_is_named_as_a_task(tmp_path: Path) -> None:
    # RegisterTask's newer form (LOG(ERROR), then propagated to every task), RecordHeartbeat's
    # mismatch behind SetTaskError's prefix, and the older duplicate-registration form
    for line, who in (
            ("E0302 10:11:12.000000 12 coordination_service.cc:612] /job:jax_worker/replica:0/"
             "task:6 unexpectedly tried to connect with a different incarnation. It has likely "
             "restarted.", "task /job:jax_worker/task:6 (JAX process 6)"),
            ("E0302 10:11:12.000000 12 coordination_service.cc:990] /job:worker/replica:0/task:2 "
             "has been set to ERROR in coordination service: ABORTED: Incarnation ID mismatch: "
             "expecting 8812 but got 9931. This means the remote task has restarted.",
             "task /job:worker/task:2"),
            ("tensorflow.python.framework.errors_impl.AbortedError: Duplicate task registration "
             "with task_name=/job:worker/replica:0/task:1", "task /job:worker/task:1")):
        code, roots = _run(tmp_path, line + "\n")
        assert code == 1, line
        assert _by(roots, RESTARTED) == [("undecided", [], "low")], line
        assert who in roots[0]["evidence"]["reason"], roots[0]["evidence"]["reason"]
        assert _suspects(roots) == []


# --- verl's worker actor names inside Ray's ActorDiedError (synthetic, from the format strings) --
VERL = "verl.worker_group.actor_name"


def _verl_died(name: str, exit_type: str = "SYSTEM_ERROR") -> str:
    """ray/exceptions.py ActorDiedError's fields; the name verl's RayWorkerGroup gives
    (f"{name_prefix}{cia_name}_{pg_idx}:{local_rank}")."""
    return ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this "
            "task.\n\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict\n"
            "\tactor_id: 7a1b2c3d4e5f60718293a4b501000000\n\tpid: 88231\n"
            f"\tname: {name}\n\tnamespace: 0d6c1e2f-3a4b\n\tip: 10.1.2.3\n"
            "The actor is dead because its worker process has died. Worker exit type: "
            f"{exit_type} Worker exit detail: Worker unexpectedly exits with a connection error "
            "code 2. End of file.\n")


def test_verl_actor_name_in_placement_group_0_makes_that_rank_a_suspect(tmp_path: Path) -> None:
    # ray.get over the group's calls raises the lowest-rank failure, not the first one
    code, roots = _run(tmp_path, _verl_died("kQ3vZpWorkerDict_0:5"))
    assert code == 1
    assert not any(f["kind"] == "rank_failure" for f in roots)
    assert _by(roots, VERL) == [("undecided", [], "low")]
    assert _suspects(roots) == [5]


def test_verl_name_past_group_0_or_an_intended_exit_names_nobody(tmp_path: Path) -> None:
    # placement group 1: the rank needs local_world_size, which the name does not carry; an
    # INTENDED_USER_EXIT is the driver's own shutdown, not a death
    for text in (_verl_died("kQ3vZpWorkerDict_1:2"),
                 _verl_died("kQ3vZpWorkerDict_0:5", "INTENDED_USER_EXIT")):
        code, roots = _run(tmp_path, text)
        assert code == 1 and roots, text  # the death still reads as a failure (log_serving)
        assert not any(f["kind"] == "rank_failure" for f in roots), text
        assert _by(roots, VERL) == []
