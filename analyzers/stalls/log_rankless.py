"""Stall and failure lines that name no culprit: the job stopped, so it is never "healthy".

Some emitters say *that* a job failed or stalled without saying *which* rank caused it — the
watchdog's teardown line, an aborted communicator, the elastic agent stopped by a signal, a
rendezvous that never completed, an NCCL error printed without a rank prefix. Before this
module a log holding only such lines read as "healthy" (exit 0) or "no evidence" (exit 3). Each
message is read off its emitter's source, and what it proves is said per pattern:

- ``torch.nccl.ops_failed`` — ``WorkNCCL::handleException`` in
  ``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp`` (1.10+; ``logPrefix()`` ``[Rank r]`` /
  ``[PG … Rank r]`` in front from 2.2): "Some NCCL operations have failed or timed out. Due to
  the asynchronous nature of CUDA kernels, …". Proves: a collective *of the reporter* failed or
  timed out and its process is going down — the reporter is a victim, never the culprit.
- ``torch.nccl.comm_aborted`` — ``NCCLComm::checkForNcclError`` in
  ``torch/csrc/distributed/c10d/NCCLUtils.hpp`` (1.10+): "NCCL communicator was aborted on rank
  " rank_ ". Original reason for failure was: …"; in 1.8 – 1.9 ``NCCLComm::getNcclComm``
  (``NCCLUtils.hpp``, ``torch/lib/c10d`` in 1.8) throws "NCCL communicator was aborted." with no
  rank — the same aborted communicator, used again by its reporter. ``rank_`` is the rank *in
  that communicator*; the reporter's own communicator was aborted (by its watchdog after a
  timeout or an error): a victim again.
- ``torchelastic.agent_signal`` — ``SimpleElasticAgent.run`` in
  ``torch/distributed/elastic/agent/server/api.py`` (1.9+; ``Signals.SIGTERM`` up to 2.1, the
  number after): "Received %s death signal, shutting down workers". Proves: the agent of one
  node was stopped *from outside* (scheduler, preemption, a user, the node's OOM killer); no
  worker is named.
- ``torchelastic.rendezvous_error`` — ``torch/distributed/elastic/rendezvous/api.py``
  (``RendezvousTimeoutError``, ``RendezvousConnectionError``, ``RendezvousClosedError``,
  ``RendezvousStateError``; 1.9+). Proves: this node could not complete the rendezvous (a node
  never joined in time, the store was unreachable, the run was closed by another node); no rank
  exists yet.
- ``nccl.error_rankless`` — ``C10D_NCCL_CHECK`` in ``NCCLUtils.hpp``: "NCCL error in: <file>:<line>,
  <reason>" and NCCL's own error names (``ncclInternalError``, ``ncclUnhandledCudaError``,
  ``ncclInvalidUsage``, ``ncclInvalidArgument``) **on a line with no rank**: an NCCL call failed
  in some process. With a rank the failure is that rank's own (``nccl.error``, read by
  :mod:`.log_failures`); without one nobody can be named.

- ``tf.tpu.lame_workers`` — ``GracefulShutdownHook.after_run`` in
  ``tensorflow/python/tpu/session_support.py`` (read at v2.4.0 and v2.15.0): "ShutdownHook: lame
  workers found: HeartbeatManager(<devices>)", the TPU hosts whose heartbeat answered with a
  health status other than OK. Proves: those hosts (tasks of the TF cluster) failed or were
  being stopped — a host, not a rank.

- ``tf.distributed.task_error`` — ``RunManyGraphs::WhenDone`` in TensorFlow's
  ``tensorflow/core/distributed_runtime/master_session.cc`` (a 2.x version read; an older 1.x one
  has no prefix): "From /job:<job>/replica:<r>/task:<i>:" then the task's error. Proves: that
  task's own step failed first as the master heard it (the rest were cancelled after it); its
  error says whether of its own or as a peer's consequence — a task, not a rank.

- ``mpich.hydra.bad_termination`` — ``control_cb`` in MPICH's
  ``src/pm/hydra/mpiexec/pmiserv_cb.c`` (read at v3.3 – v5.0.0): "BAD TERMINATION OF ONE OF YOUR
  APPLICATION PROCESSES / PID %d RUNNING AT %s / EXIT CODE: %d". Proves: a process on that host
  died of a signal; a pid, never a rank.

The rule speaks only when nothing else in the logs is evidence (every other event is one of
:data:`QUIET`): then the answer is ``undecided`` at ``low`` with what to collect next, and the
reporter is never a suspect. Any other rule that reads the same logs decides instead.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_busy, log_elastic, log_ncclwarn
from stormotel.analyzers.stalls import log_failures as lf
from stormotel.analyzers.stalls.log_finding import log_finding

KIND = "rankless_stall"  #: the event kind: a stall or failure shown, no culprit named

OPS_FAILED = "torch.nccl.ops_failed"
COMM_ABORTED = "torch.nccl.comm_aborted"
AGENT_SIGNAL = "torchelastic.agent_signal"
RENDEZVOUS = "torchelastic.rendezvous_error"
NCCL_RANKLESS = "nccl.error_rankless"
STORE_CLIENTS = "torch.store.clients_timeout"
OMPI_PEER = "openmpi.peer_disconnected"
OMPI_NONZERO = "openmpi.nonzero_exit"
OMPI_SIGNAL = "openmpi.signal_handler"  #: read by log_mpi_signal (a process's own crash report)
#: Open MPI's [mpi-abort] of a communicator other than the world, with no 5.x ``Proc`` line: the
#: rank is not a world rank (read by log_mpirun, which emits this event)
OMPI_ABORT = "openmpi.mpi_abort"
#: the daemon of one node lost ([orterun|prun:proc-comm-failed]; grammar ``openmpi.node_lost``)
OMPI_NODE_LOST = "openmpi.node_lost"
#: torchelastic 2.13's agent: a worker (by pid) in uninterruptible sleep (D-state)
ELASTIC_WEDGED = "torchelastic.worker_wedged"
#: srun: "timeout waiting for task launch, started %d of %d tasks" (``slurm.srun.launch_timeout``)
SRUN_LAUNCH_TIMEOUT = "slurm.srun.launch_timeout"
DS_LAUNCHER = "deepspeed.launcher_exit"
#: sglang's scheduler (``managers/scheduler.py`` ``watchdog_thread``, 0.3 … 0.5):
#: ``logger.error(f"Watchdog timeout ({self.watchdog_timeout=})")`` when a running batch made no
#: forward step for that many seconds, then SIGQUIT to the server; its log prefix names the
#: tensor-parallel rank (``[time TP4]``), the rank that waited, not one it waited on
SGLANG_WATCHDOG = "sglang.scheduler_watchdog"
#: slurmstepd's task/cgroup OOM count of a step on one node (grammar ``slurm.stepd.oom_kill``)
SLURM_OOM_KILL = "slurm.stepd.oom_kill"
#: XLA's rendezvous among one process's threads (grammar ``xla.rendezvous.stuck``)
XLA_RENDEZVOUS = "xla.rendezvous.stuck"
#: srun's task line when each task is a per-node launcher (emitted by log_srun_exit)
SRUN_TASK_NODE = "slurm.srun.task_exit"
#: a pod table whose pods map to no rank (emitted by log_pod_table)
K8S_POD = "k8s.pod_status"
#: a kubectl describe pod block whose pod maps to no rank (emitted by log_pod_describe)
K8S_DESCRIBE = "k8s.describe_pod.terminated"
#: TensorFlow TPU's shutdown hook: TPU hosts whose heartbeat was not OK (grammar
#: ``tf.tpu.lame_workers``): a host of the TF cluster, not a rank
TPU_LAME = "tf.tpu.lame_workers"
#: MPICH Hydra's "BAD TERMINATION" block: a pid and a host, never a rank
#: (grammar ``mpich.hydra.bad_termination``)
HYDRA_BAD = "mpich.hydra.bad_termination"
#: TensorFlow's master: the task whose RunGraph step failed (grammar
#: ``tf.distributed.task_error``): a task of the TF cluster, not a rank
TF_TASK = "tf.distributed.task_error"
#: the kernel's OOM killer: a pid no launcher's pid map names (emitted by log_oom_kill)
OOM_KILLED = "kernel.oom_kill.killed_process"
#: TensorFlow's allocator: a task's device out of memory (``tf.resource.oom_allocating``)
TF_OOM = "tf.resource.oom_allocating"
#: the coordination service: a task's process was replaced (``tsl.coordination.task_restarted``)
TASK_RESTARTED = "tsl.coordination.task_restarted"
#: a JAX process ending itself on the coordination service's fatal error: a victim
#: (``jax.distributed.fatal_error``)
JAX_FATAL = "jax.distributed.fatal_error"
#: an agent's RPC to the coordination service failed: the leader (process 0) or this task's
#: network (``tsl.coordination.rpc_failed``)
TSL_RPC = "tsl.coordination.rpc_failed"
#: Ray Train 2.9 – 2.40's driver: the run failed, the cause in the messages before it
#: (``ray.train.training_failed``)
RAY_TRAIN_FAILED = "ray.train.training_failed"
#: what those two lines carry after them that another rule reads whole (a heartbeat / barrier
#: notice names the tasks): the line is left to it
_COORD_NAMED = re.compile(r"stopped sending heartbeats|heartbeat timeout|Barrier timed out|"
                          r"incarnation", re.I)

#: (pattern id, lower-case triggers, regex), in the order tried; the first match of a line wins
PATTERNS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    (OPS_FAILED, ("some nccl operations",),
     re.compile(r"Some NCCL operations have failed or timed out", re.I)),
    (COMM_ABORTED, ("communicator was aborted",),
     re.compile(r"NCCL communicator was aborted(?: on rank (?P<rank>\d{1,7})|\.)", re.I)),
    (AGENT_SIGNAL, ("death signal",),
     re.compile(r"Received (?:Signals\.)?(?P<sig>SIG[A-Z]{2,8}|\d{1,2}) death signal, "
                r"shutting down workers")),
    (RENDEZVOUS, ("rendezvous",),
     re.compile(r"(?<![A-Za-z])Rendezvous(?P<what>Timeout|Connection|Closed|State)Error(?![A-Za-z])")),
    (NCCL_RANKLESS, ("nccl error in:", "nccl"),
     re.compile(r"NCCL error in: \S{1,300}:\d{1,6}, (?P<reason>[^,\n]{1,120})|"
                r"\bnccl(?P<code>Internal|UnhandledCuda|InvalidUsage|InvalidArgument)Error\b|"
                r"\bNCCL error: (?P<reason2>[a-z][a-z ]{2,80}[a-z])")),
    (STORE_CLIENTS, ("waiting for clients", "waiting for workers", "clients joined",
                     "workers joined"),
     re.compile(r"Timed out after (?P<secs>\d{1,9}) seconds waiting for (?:clients|workers)|"
                r"(?P<n>\d{1,7})/(?P<of>\d{1,7}) (?:clients|workers) joined")),
    (OMPI_PEER, ("peer process has unexpectedly disconnected",),
     re.compile(r"MPI communication peer process has unexpectedly disconnected")),
    (OMPI_NONZERO, ("exited with non-zero", "process returned"),
     re.compile(r"detected that one or more processes exited with non-zero|"
                r"Primary job\s+terminated normally, but \d{1,7} process(?:es)? returned")),
    (OMPI_NODE_LOST, gr.BY_ID[OMPI_NODE_LOST].triggers, gr.BY_ID[OMPI_NODE_LOST].regex),
    (ELASTIC_WEDGED, gr.BY_ID[ELASTIC_WEDGED].triggers, gr.BY_ID[ELASTIC_WEDGED].regex),
    (SRUN_LAUNCH_TIMEOUT, gr.BY_ID[SRUN_LAUNCH_TIMEOUT].triggers,
     gr.BY_ID[SRUN_LAUNCH_TIMEOUT].regex),
    (SLURM_OOM_KILL, gr.BY_ID[SLURM_OOM_KILL].triggers, gr.BY_ID[SLURM_OOM_KILL].regex),
    (XLA_RENDEZVOUS, gr.BY_ID[XLA_RENDEZVOUS].triggers, gr.BY_ID[XLA_RENDEZVOUS].regex),
    (TPU_LAME, gr.BY_ID[TPU_LAME].triggers, gr.BY_ID[TPU_LAME].regex),
    (HYDRA_BAD, gr.BY_ID[HYDRA_BAD].triggers, gr.BY_ID[HYDRA_BAD].regex),
    (TF_TASK, gr.BY_ID[TF_TASK].triggers, gr.BY_ID[TF_TASK].regex),
    (TF_OOM, gr.BY_ID[TF_OOM].triggers, gr.BY_ID[TF_OOM].regex),
    (TASK_RESTARTED, gr.BY_ID[TASK_RESTARTED].triggers, gr.BY_ID[TASK_RESTARTED].regex),
    (JAX_FATAL, gr.BY_ID[JAX_FATAL].triggers, gr.BY_ID[JAX_FATAL].regex),
    (TSL_RPC, gr.BY_ID[TSL_RPC].triggers, gr.BY_ID[TSL_RPC].regex),
    (RAY_TRAIN_FAILED, gr.BY_ID[RAY_TRAIN_FAILED].triggers, gr.BY_ID[RAY_TRAIN_FAILED].regex),
    (SGLANG_WATCHDOG, ("watchdog_timeout=",),
     re.compile(r"Watchdog timeout \(self\.watchdog_timeout=(?P<secs>\d{1,9}(?:\.\d{1,6})?)\)")),
    (DS_LAUNCHER, ("sigkill_handler",),
     re.compile(r"sigkill_handler\] (?:Killing subprocess (?P<pid>\d{1,10})|"
                r"[^\n]{0,4000}?exits with return code = (?P<code>-?\d{1,4}))")),
)

#: event kinds that prove nothing about a stall on their own (layout, world size, a traceback
#: marker, a progress bar, a launcher closing the rest after another rank's end)
#: (logs_parser's names; spelled here because the parser imports this module's scanner table)
QUIET = frozenset({lf.WORLD_HINT, gr.K_NCCL_INIT, log_ncclwarn.CHANNEL,
                   log_elastic.ELASTIC_CLOSING, "elastic_layout", "exception", log_busy.KIND,
                   KIND, "store_rankless",  # log_store_rankless's lines: a fallback too
                   "pg_nccl_error",  # log_pg_error: a LOG call site, read by the triage
                   "serving_rankless",  # log_serving's lines: a fallback too
                   "unfinished_traceback",  # log_cut_traceback: a cut traceback, as "exception"
                   "paddle_endpoints_map"})  # log_paddle_endpoints: a printed map, no event

_SIGNAL_NAMES = {"1": "SIGHUP", "2": "SIGINT", "3": "SIGQUIT", "4": "SIGILL", "6": "SIGABRT",
                 "7": "SIGBUS", "8": "SIGFPE", "9": "SIGKILL", "11": "SIGSEGV", "15": "SIGTERM"}

#: what each pattern proves and what to collect next (one sentence each)
_SAYS: dict[str, tuple[str, str, str]] = {
    OPS_FAILED: (
        "unknown",
        "the watchdog of {who} found its own NCCL work failed or timed out and took its "
        "process down — {who} waited (a victim); the line does not say which rank it waited on",
        "Collect every rank's log (torchrun --tee 3 / --log-dir keeps each rank's lines with "
        "its [rankN]: prefix), the 'Watchdog caught collective operation timeout' line with its "
        "SeqNum, and Flight Recorder dumps (TORCH_NCCL_TRACE_BUFFER_SIZE, "
        "TORCH_NCCL_DUMP_ON_TIMEOUT=1)."),
    COMM_ABORTED: (
        "unknown",
        "the NCCL communicator of {who} was aborted (by its watchdog after a timeout or an "
        "error; the rank is the communicator's) — {who} is a victim; the original reason names "
        "no other rank",
        "Collect every rank's log from before the abort: the first rank with its own error "
        "(CUDA error, OOM, exception) or no watchdog line at all is the one to look at; "
        "Flight Recorder dumps name who never entered the collective."),
    AGENT_SIGNAL: (
        "signal",
        "the elastic agent of one node received {sig} from outside and shut its workers down: "
        "the scheduler, a preemption, a user or the node's OOM killer stopped it — no worker "
        "is named",
        "Collect the scheduler's record of why the job or node was stopped (sacct -j JOB -o "
        "State,ExitCode,Reason; kubectl describe pod; the node's dmesg for the OOM killer) and "
        "every node's agent log; if a rank hung first, its watchdog lines come before this."),
    RENDEZVOUS: (
        "rendezvous",
        "torchelastic's rendezvous did not complete ({what}): a node never joined in time, the "
        "store at rdzv_endpoint was unreachable, or another node closed the run — no rank "
        "exists yet",
        "Collect every node's agent log (which nodes joined) and check that every node runs "
        "the same --nnodes/--rdzv-id/--rdzv-endpoint and can reach the endpoint "
        "(nc -zv HOST PORT)."),
    NCCL_RANKLESS: (
        "nccl_error",
        "an NCCL call failed ({reason}) in a process whose rank the line does not give",
        "Rerun with rank prefixes (torchrun --tee 3, or accelerate/deepspeed per-rank logs) and "
        "NCCL_DEBUG=WARN: the rank whose own NCCL error comes first is the one to look at."),
    STORE_CLIENTS: (
        "store_unreachable",
        "the TCPStore server (the process that hosts it: rank 0 or node 0's agent) timed out "
        "waiting for its clients{joined}: the processes that never connected are not named",
        "Collect every node's launcher log (which nodes started at all), and check MASTER_ADDR/"
        "MASTER_PORT, --nnodes/--nproc_per_node against what was launched, and firewalls."),
    OMPI_PEER: (
        "peer_lost",
        "Open MPI saw a peer process disconnect unexpectedly: the peer (on the host the message "
        "names) failed, not the reporter; its rank is not given",
        "Collect the peer host's output (mpirun --tag-output so every line carries its rank), "
        "its dmesg (OOM killer, Xid) and any core file."),
    OMPI_NONZERO: (
        "exception",
        "Open MPI's launcher saw a process exit with a non-zero status and ended the job; the "
        "first process to do so is not given in these lines",
        "Collect mpirun's full message ('The first process to do so was: Process name: "
        "[[job,vpid],rank]') and each rank's output (mpirun --tag-output)."),
    OMPI_SIGNAL: (
        "signal",
        "Open MPI's signal handler reports process(es) {procs} dying of {sig}; no line gives "
        "their MPI rank",
        "Rerun with mpirun --tag-output (every line carries [job,rank]) to know the rank; one "
        "process crashing alone is the culprit, every process crashing alike is a build or "
        "environment fault of the whole job."),
    DS_LAUNCHER: (
        "signal",
        "DeepSpeed's launcher ended this node's processes{code}; the command it prints is the "
        "LAST one it spawned (launch.py's sigkill_handler prints the loop's last cmd), not the "
        "process that failed",
        "Collect each local rank's own output (deepspeed --enable_each_rank_log DIR, or the "
        "per-rank lines) — the first rank with its own error or signal is the one to look at; "
        "-9 is usually the host's OOM killer (dmesg)."),
    OMPI_ABORT: (
        "exception",
        "a process called MPI_Abort on a communicator other than the world ({comm}): its rank "
        "there is not its MPI_COMM_WORLD rank, so no world rank is named; Open MPI then killed "
        "every process",
        "Collect every rank's output with mpirun --tag-output (each line carries [job,rank]) — "
        "the rank printing the error just before MPI_ABORT is the one that aborted; Open MPI 5 "
        "also prints its 'Proc:' name (the vpid is the world rank)."),
    OMPI_NODE_LOST: (
        "peer_lost",
        "Open MPI's launcher lost the connection to the daemon of one node (the 'Process name' "
        "is a daemon, not an MPI rank — the state is set only for daemons): that node died or "
        "its network failed, and the job was aborted; which ranks ran there is not said",
        "Map the node to its ranks (mpirun --display-map, or the hostfile order), then read "
        "that node's kernel log (dmesg: OOM killer, Xid, kernel panic, link down) and the "
        "scheduler's record of it; the ranks on it are the ones to look at."),
    ELASTIC_WEDGED: (
        "unknown",
        "torchelastic's agent saw worker process(es) {procs} in uninterruptible kernel sleep "
        "(D-state: a GPU or NIC driver wait that no signal ends) — past its timeout the agent "
        "marks the group UNHEALTHY without restarts, and cannot reap the process at teardown; "
        "the line names a pid and the worker group's role, not a rank",
        "Map the pid to its rank (the worker's own log, torchrun --log-dir keeps each rank's "
        "output; ps -o pid,args on that host), then read its kernel stack (cat /proc/PID/stack) "
        "and the host's dmesg (Xid, NIC or filesystem driver); the host may need recycling."),
    SRUN_LAUNCH_TIMEOUT: (
        "rendezvous",
        "srun waited its 10 minutes for the step's tasks to start and gave up{started}: some "
        "nodes' slurmd never answered the launch — which tasks, the line does not say",
        "Collect the slurmd logs of the step's nodes (which node never answered: "
        "scontrol show step; sacct -j JOB --format=JobID,NodeList,State), and check those "
        "nodes are up (sinfo -R)."),
    SGLANG_WATCHDOG: (
        "unknown",
        "sglang's scheduler watchdog on {who} saw a running batch make no forward step for its "
        "timeout and ended the server — a hang inside a forward pass or one of its collectives; "
        "every tensor-parallel rank that prints it waited, and the line names no culprit",
        "Collect the stacks sglang dumps with it (py-spy, one per scheduler), NCCL_DEBUG=INFO "
        "logs of every TP rank and Flight Recorder dumps (TORCH_NCCL_TRACE_BUFFER_SIZE, "
        "TORCH_NCCL_DUMP_ON_TIMEOUT=1): the rank stuck outside the collective is the culprit."),
    SLURM_OOM_KILL: (
        "oom",
        "slurmstepd found OOM kills in the memory cgroup of a step on one node{step}: a process "
        "of that node's tasks (or a child of one) was killed for memory — which task, and which "
        "node, the line does not say",
        "Collect srun's own lines ('srun: error: HOST: task N: Out Of Memory' names the node and "
        "the first task to end there), sacct -j JOB --format=JobID,NodeList,State,MaxRSS, and "
        "the node's dmesg (the OOM killer names the pid); raise --mem / --mem-per-gpu or lower "
        "the host memory per task (dataloader workers, pinned buffers)."),
    XLA_RENDEZVOUS: (
        "unknown",
        "XLA's rendezvous in one process waited past its warning: of the threads of that "
        "process (one per local device) some had not joined a collective or clique setup — a "
        "local participant late, counted but not named, and never a rank",
        "Collect every process's log of the same moment (the process whose device threads all "
        "arrived and whose peers did not is waiting on another host), py-spy dump --native of "
        "the stuck process, and NCCL_DEBUG=INFO lines of the clique being initialised."),
    SRUN_TASK_NODE: (
        "unknown",
        "srun reports a task of the step ending ({error}) — but each task here is a per-node "
        "launcher (torchrun / DeepSpeed / accelerate), so the task id is a NODE's index, not a "
        "rank",
        "Read that node's launcher summary (torchrun's 'Root Cause (first observed failure)' "
        "with its global rank) and its workers' own lines ([rankN]: prefixes); node k holds "
        "ranks k*nproc_per_node .. (k+1)*nproc_per_node-1."),
    K8S_POD: (
        "unknown",
        "a pod table shows failed pods ({error}) whose names map to no rank (not a PyTorchJob's "
        "master-0 / worker-i, or no master among them)",
        "Collect the failed pods' own logs (kubectl logs POD --previous) and kubectl describe "
        "pod (the container's Last State: OOMKilled / exit code); the operator's rank of each "
        "pod is its RANK / JOB_COMPLETION_INDEX environment (kubectl get pod POD -o yaml)."),
    K8S_DESCRIBE: (
        "unknown",
        "kubectl describe shows pods that ended ({error}) whose rank the block does not give "
        "(no RANK in their environment, more than one process per pod, or a name that is not "
        "a PyTorchJob's master-0 / worker-i beside its master)",
        "Collect the failed pods' own logs (kubectl logs POD --previous): their [rankN]: lines "
        "or the launcher's summary name the rank; the operator's index of each pod is its "
        "RANK / JOB_COMPLETION_INDEX / LWS_WORKER_INDEX environment."),
    TPU_LAME: (
        "peer_lost",
        "TensorFlow's TPU shutdown hook pinged every TPU host's worker and found {procs} "
        "answering with a health status other than OK (a shutdown signal received — a "
        "preemption or maintenance —, an internal error, or shutting down): those TPU hosts "
        "failed or were being stopped. A task of the TF cluster is a HOST driven by the one "
        "TPUEstimator client, not a rank, so no rank is named",
        "Collect the named hosts' own logs (the TPU worker's log on each: "
        "/tmp/tpu_logs or the VM's serial console) and the TPU's state history (gcloud "
        "compute tpus describe / the operations list: PREEMPTED, maintenance events); the "
        "job restarts from the checkpoint the hook saved."),
    HYDRA_BAD: (
        "signal",
        "MPICH's mpiexec (Hydra) reports a process of the job killed by a signal: the block "
        "names its PID and host, not its rank — the first such process of one node, reported "
        "once all of that node's processes had ended; Hydra then killed every other process, so "
        "further blocks are the cleanup's victims",
        "Rerun with mpiexec -l (-prepend-rank: every line carries its rank) or map the PID to "
        "its rank from the process's own output; the EXIT CODE is the raw wait status (9 = "
        "SIGKILL, usually the host's OOM killer — dmesg on that host names the pid; 11 = "
        "SIGSEGV; 128 + n with a core dump)."),
    TF_TASK: (
        "unknown",
        "TensorFlow's master (the session's client) had the step of {procs} fail with "
        "{error!r}: the first task whose own RunGraph call came back with an error that was not "
        "a cancellation (the master then cancelled every other task's call) — its own failure "
        "if the error is (an OOM, an invalid argument, an internal error), a peer's consequence "
        "if it is Unavailable / Aborted / DeadlineExceeded (a closed socket, a recv from a dead "
        "task). A TASK of the TF cluster (a worker or TPU host), not a rank, so no rank is named",
        "Collect the named task's own log (its worker process's stderr on that host) and, when "
        "its error is Unavailable / Aborted (a peer's consequence), every other task's log for "
        "the first own error; map a task to a rank only where the job says so (TF_CONFIG's "
        "task index is not a torch rank)."),
    TF_OOM: (
        "oom",
        "TensorFlow's allocator on {procs} could not give a kernel its tensor (OOM when "
        "allocating): that task's OWN failure, its device out of memory — a TASK of the TF "
        "cluster (a worker process or host), not a rank, so no rank is named",
        "Read the named task's log for its allocator summary (report_tensor_allocations_upon_oom "
        "in RunOptions lists the live tensors); lower the per-replica batch or sequence length, "
        "or enable memory growth; map a task to a rank only where the job says so (TF_CONFIG's "
        "task index is not a torch rank)."),
    JAX_FATAL: (
        "peer_lost",
        "{who} ended itself because the JAX distributed service (the coordination service, run "
        "by JAX process 0) reported a fatal error{what}: the process that prints this is a "
        "VICTIM sharing another's fate, and the line names no task",
        "Collect every JAX process's log: the first to end with its own error (an OOM kill, a "
        "segfault, a Python exception) is the cause; the absl::Status after this line, cut here, "
        "names the unhealthy tasks (\"The following tasks are unhealthy …\") when the service "
        "saw a heartbeat stop."),
    TSL_RPC: (
        "peer_lost",
        "{who} could not reach the coordination service{what} (its RPC failed UNAVAILABLE): "
        "the leader task died or restarted, or this task's network failed — no task named",
        "Read the leader's log (JAX process 0 / task 0, which runs the coordination service) "
        "for its own last error before this time, and this host's network (the coordinator "
        "address and port reachable from it)."),
    RAY_TRAIN_FAILED: (
        "exception",
        "Ray Train's driver reports the run failed (TrainingFailedError){what}: the cause is "
        "in the messages before it, and the line names no worker",
        "Collect the driver's whole output and the workers' logs: Ray Train's 'Worker N has "
        "failed.' or the 'Started distributed worker processes' list (pid -> world_rank) with "
        "the worker's own '(RayTrainWorker pid=P, ip=A)' error lines names the rank."),
    TASK_RESTARTED: (
        "peer_lost",
        "the coordination service saw {procs} connect again as a new process (a different "
        "incarnation, or a task already in error): that task's earlier process ended — a crash, "
        "a kill, a preemption — and came back, or a second process claimed the same task (a "
        "duplicate launch, another job on the same coordinator address); the service then failed "
        "every task. A TASK, not a rank, so no rank is named",
        "Read the named task's own log just before the restart for its last error (an OOM kill, "
        "a segfault, a preemption notice) and the scheduler's record of that host; check that no "
        "other job uses the same coordinator address and port (jax.distributed.initialize("
        "coordinator_address=…) / TF_CONFIG), and that each process has a distinct task id."),
    OOM_KILLED: (
        "oom",
        "the kernel's OOM killer killed {procs} for host or cgroup memory (the largest process "
        "by badness, in the host's pid namespace): no launcher line in these logs gives that "
        "pid a rank — a rank's process, a child of one (a DataLoader worker) or another job's",
        "Map the pid to its rank: the launcher's start lines (DeepSpeed 0.13.2+ logs 'process P "
        "spawned with command: [… --local_rank=N …]', Ray Train 'world_rank=N' with its pid), "
        "torchrun's failure table (exitcode -9 with its pid), or ps -o pid,args on that host "
        "while the job runs; then lower host memory per rank (DataLoader workers, pinned "
        "buffers, CPU offload) or raise the node's / container's memory limit."),
}


class Scanner:
    """One event per line that holds a rankless stall/failure message (:data:`PATTERNS`)."""

    def __init__(self, ctx: Any) -> None:
        self.stamp = ctx.stamp
        self.found: list[lf.Found] = []
        self._tf: int | None = None  #: a TF task error whose message line is still to come

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if self._tf is not None and seg.strip():
            tf_err, self._tf = self.found[self._tf], None
            if "from /job:" not in low:
                tf_err.detail["error"] = seg.strip()[:200]
        for pid, triggers, rx in PATTERNS:
            if not any(t in low for t in triggers):
                continue
            m = rx.search(seg)
            if m is None:
                continue
            if pid == NCCL_RANKLESS and (rank is not None or lf_has_rank(seg)):
                return  # a rank's own NCCL error: log_failures reads it as that rank's
            detail: dict[str, object] = {"reporter": rank}
            if pid == COMM_ABORTED:
                detail["comm_rank"] = gr.parse_rank(m.group("rank"))
            elif pid == AGENT_SIGNAL:
                sig = m.group("sig")
                detail["signal"] = _SIGNAL_NAMES.get(sig, sig if sig.startswith("SIG") else
                                                     f"signal {sig}")
            elif pid == RENDEZVOUS:
                detail["error"] = f"Rendezvous{m.group('what')}Error"
            elif pid == NCCL_RANKLESS:
                detail["reason"] = (m.group("reason") or m.group("reason2")
                                    or f"nccl{m.group('code')}Error").strip()
            elif pid == STORE_CLIENTS and m.group("of"):
                detail |= {"joined": int(m.group("n")), "expected": int(m.group("of"))}
            elif pid == ELASTIC_WEDGED and (wp := m.group("pid") or m.group("pid2")):
                detail["process"] = f"pid {int(wp)}"
            elif pid == TPU_LAME:
                tasks = _TPU_TASK.findall(m.group("devices") or "")
                detail["process"] = ("TPU host task(s) " + ", ".join(
                    f"/job:{j}/task:{t}" for j, t in dict.fromkeys(tasks))[:400]
                    if tasks else "unnamed TPU host(s)")
            elif pid == TF_OOM:
                detail |= {"process": f"task /job:{m.group('job')}/task:{int(m.group('task'))}",
                           "device": m.group("device")}
            elif pid in (JAX_FATAL, TSL_RPC):
                if _COORD_NAMED.search(seg, m.end()):
                    return  # the notice after it names the tasks: log_xla_health / _coord read it
                detail["error"] = (
                    " — the coordinator stopped answering this process, which suspects the "
                    "coordinator's process (JAX process 0) or its own network"
                    if pid == TSL_RPC or m.group("coord") or
                    "failed to send rpc to coordination service" in low else "")
            elif pid == TASK_RESTARTED:
                job, tid = m.group("job") or m.group("job2"), m.group("tid") or m.group("tid2")
                jax = f" (JAX process {int(tid)})" if job == "jax_worker" else ""
                detail["process"] = f"task /job:{job}/task:{int(tid)}{jax}"
            elif pid == TF_TASK:
                detail["process"] = f"task /job:{m.group('job')}/task:{int(m.group('task'))}"
                if rest := seg[m.end():].strip():
                    detail["error"] = rest[:200]
                else:
                    self._tf = len(self.found)  # its error message is the next line
            elif pid == SLURM_OOM_KILL:
                detail["step"] = m.group("step").rstrip(".")
            elif pid == SRUN_LAUNCH_TIMEOUT:
                detail |= {"started": int(m.group("n")), "requested": int(m.group("of"))}
            elif pid == DS_LAUNCHER and m.group("code"):
                code = int(m.group("code"))
                detail |= {"exit_code": code, "signal": _SIGNAL_NAMES.get(str(-code))
                           if code < 0 else None}
            self.found.append(lf.Found(KIND, no, None, self.stamp(seg), seg.strip()[:300],
                                       detail, pid))
            return

    def finish(self, text: str) -> list[lf.Found]:
        return self.found


#: a device of a TF cluster: its job and task (a TPU host), in the lame-workers list
_TPU_TASK = re.compile(r"/job:([\w.-]{1,64})/replica:\d{1,7}/task:(\d{1,7})")
_RANK_TAG = re.compile(r"\[(?:PG [^\]]{0,80} )?Rank (\d{1,7})\]|\[rank(\d{1,7})\]:")


def lf_has_rank(seg: str) -> bool:
    """Whether the line carries a rank tag (``[Rank r]``, ``[PG … Rank r]``, ``[rankN]:``)."""
    return _RANK_TAG.search(seg) is not None


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """``undecided`` (low) when the only evidence is lines that name no culprit."""
    mine = [e for e in events if e.kind == KIND]
    if not mine or any(e.kind not in QUIET for e in events):
        return []
    # the kernel's kill names a pid and the cause: more than a launcher's exit code says
    first = next((e for e in mine if e.pattern == OOM_KILLED), mine[0])
    category, says, collect = _SAYS.get(first.pattern or "", _SAYS[OPS_FAILED])
    d: dict[str, Any] = {}  # per key, the first event that carries it
    for e in mine:
        for k, v in (e.detail or {}).items():
            if v is not None:
                d.setdefault(k, v)
    reporters = sorted({int(r) for e in mine if e.detail and (r := e.detail.get("reporter"))
                        is not None} | {int(r) for e in mine if e.detail and
                                        (r := e.detail.get("comm_rank")) is not None})
    who = f"rank(s) {reporters}" if reporters else "the reporting process"
    procs = sorted({str(e.detail.get("process")) for e in mine
                    if e.detail and e.detail.get("process")})
    joined = (f" ({d['joined']}/{d['expected']} joined)" if d.get("expected") else "")
    code = (f" after one exited with code {d['exit_code']}"
            + (f" ({d['signal']})" if d.get("signal") else "") if d.get("exit_code") is not None
            else "")
    started = (f" ({d['started']} of {d['requested']} tasks started)" if d.get("requested")
               else "")
    reason = says.format(who=who, sig=d.get("signal", "a signal"), what=d.get("error", ""),
                         reason=d.get("reason", ""), joined=joined, code=code,
                         started=started, comm=d.get("abort_comm", "?"),
                         step=f" ({d['step']})" if d.get("step") else "",
                         error=d.get("error", "?"),
                         procs=", ".join(procs[:8]) or "?")
    return [log_finding(
        "undecided", [], category, "low", first.pattern or OPS_FAILED,
        f"{reason} ({len(mine)} such line(s)) — the job stopped, so it is not healthy; "
        "nothing in these logs names the rank that caused it",
        [collect], mine, suspects=[], reported_by=reporters)]
