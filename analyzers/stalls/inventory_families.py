"""Message families of the rank-bearing inventory: what a message of each family proves.

Why families and not lines: the inventory (``docs/data/stall_inventory.json``) holds hundreds of
format strings read from the emitters' source; what a line proves about which ranks is a
property of the family (a watchdog timeout proves its reporter waited, whatever the wording of
the release). Each family is read off the source that prints it and says:

- ``role``: which rank a right reading names — ``waits`` (the reporter is a victim: a finding,
  and the reporter never a culprit), ``names`` (the line names another rank — the one waited
  on, the one that failed the barrier: that rank, not the reporter), ``own`` (the rank's own
  failure: that rank), ``unnamed`` (a stall or failure shown, but the line names no rank — a
  pid, a launcher daemon, a count: a finding that names no culprit), ``any`` (not read per
  family yet: any finding counts);
- ``relevance``: ``stall`` (evidence of a stall or failure: counted in the handled share),
  ``info`` (INFO-level context, or printed on the normal path too), ``config`` (a usage or
  configuration error: the job never ran a collective, nothing to attribute), ``unreachable``
  (see below).

Two written criteria take a message out of the denominator, for every emitter alike, and each
family that uses one says in its comment the source lines that prove it:

1. **printed on the normal path** — the source prints it also when nothing failed (a LOG(INFO)
   of a clean shutdown, a branch of a normal exit): it cannot be evidence of a stall (``info``);
2. **unreachable at the tags read** — no code path of that release sets the state or flag that
   selects the message (the help text is kept, its caller's state is never entered): no log of
   those releases can hold it (``unreachable``).

The first family whose emitter matches and whose regex finds the message wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    id: str
    emitters: tuple[str, ...]  #: emitter prefixes this family applies to ("" = any)
    regex: re.Pattern[str]
    role: str  #: waits | names | own
    relevance: str  #: stall | info | config
    proves: str


def _f(id: str, emitters: str, regex: str, role: str, relevance: str, proves: str) -> Family:
    return Family(id, tuple(emitters.split()), re.compile(regex, re.I | re.S), role,
                  relevance, proves)


TORCH = "pytorch"
FAMILIES: tuple[Family, ...] = (
    # --- usage and setup errors that would otherwise match a stall family's words ------------
    _f("setup.config", "pytorch torchelastic",
       r"parameter missing|not in the environment|appeared in both|are ignored since|"
       r"deprecated|somaxconn|Unknown? worker|do not match|register signal handlers|"
       r"is absent in|comma-separated|mismatch in Store|in Store indices|local rank mapping|"
       r"Worker group in \S+ state|must be|should be|should not|exclusion list|"
       r"is not supported|invalid|out of bounds|exceeds available|cannot be empty",
       "own", "config", "a usage, setup or environment error (no collective ran yet)"),
    # --- PyTorch c10d: lines of the normal path (criterion for "not a rank-bearing error"):
    # the source prints them at LOG(INFO)/VLOG or as a one-time notice on the NORMAL path —
    # a thread that ended normally, the CUDA driver shutting down at process exit, a success,
    # a leak warning at exit, an error the source says it ignores, a notice of an operation
    # the user asked for. They prove nothing about a stall and are not counted.
    _f("c10d.normal_path", TORCH,
       r"terminated normally|destroyed cuda before watchdog loop exited|hasn't been destroyed|"
       r"so ignoring the error|Completed store-based barrier|Shrinking default group will destroy|"
       r"Launching ProcessGroupNCCL abort asynchr|ProcessGroupNCCL aborts successfully|"
       r"Failed to (?:get timeout rank ID from|check the \"should dump\" flag on|get exception "
       r"dump flag from|set dump signal in) (?:TCPStore|the global store|tcpstore)|"
       r"^barrier key:\{\} worldSize:|^All ranks passed monitoredBarrier in|"
       r"^Shutting down ProcessGroupAgent on rank",
       "waits", "info",
       "printed on the normal path (LOG(INFO)/VLOG: 'watchdog thread terminated normally', "
       "'main process destroyed cuda before watchdog loop exited' at process exit; "
       "'Completed store-based barrier': every rank arrived; the destroy-at-exit leak warning; "
       "a bind error ignored under TORCHELASTIC_USE_AGENT_STORE; shrink_group's notice; "
       "'Launching ProcessGroupNCCL abort asynchronously' / 'aborts successfully', LOG(INFO) of "
       "every destroy_process_group while shutdown() called abort(); the heartbeat monitor's "
       "failed store polls, '(maybe TCPStore server has shut down too early)', printed after a "
       "normal completion when rank 0's store exits first; the libuv store server's "
       "C10D_TRACE 'barrier key:{} worldSize:{} address:{}' (TCPStoreLibUvBackend.cpp "
       "parse_barrier_command), traced for every barrier request a client sends, before the "
       "store checks who arrived — worldSize is the count the caller asked for; 1.9's gloo "
       "monitoredBarrier success, 'All ranks passed monitoredBarrier in' (ProcessGroupGloo.cpp, "
       "printed only when every rank passed); 1.8-1.9 RPC's LOG(INFO) 'Shutting down "
       "ProcessGroupAgent on rank' (process_group_agent.cpp shutdownImpl, every rpc.shutdown()): "
       "not stall evidence (the completed barrier clears the waiting lines of its key)"),
    # criterion 2, unreachable: caffe2's gloo and store operators (caffe2/contrib/gloo/
    # common_world_ops.h: LOG(ERROR) "Caught gloo IO exception: " / "Caught store handler timeout
    # exception: "; caffe2/operators/communicator_op.cc: the CreateCommonWorld schema's output
    # doc) were linked into libtorch 1.8-1.10 but run only inside a caffe2 net; no
    # torch.distributed code path calls them
    _f("c10d.caffe2", TORCH,
       r"^Caught gloo IO exception: |^Caught store handler timeout exception: |"
       r"^A common world for collective operations",
       "waits", "unreachable",
       "unreachable at the tags read: caffe2's gloo/store operators (and one operator schema "
       "doc) share libtorch_cpu 1.8-1.10 with c10d, but only a caffe2 net runs them — no "
       "torch.distributed code path prints them"),
    # --- PyTorch c10d: init -----------------------------------------------------------------
    _f("c10d.store_barrier", TORCH, r"store.based barrier|store_based_barrier", "waits", "stall",
       "the reporter checked in at init and waits for the rest of the world; the ranks that "
       "never print it are the missing ones (by absence); worker_count above world_size is a "
       "second launch, not a slow rank"),
    _f("c10d.unique_id", TORCH, r"ncclUniqueId|unique ?id|retrieving .* from \[", "names", "stall",
       "the reporter waits for the communicator's root (the rank in `from [r]`, usually 0) to "
       "publish the NCCL id through the store: the root is the one to look at"),
    _f("c10d.monitored_barrier_timeout", TORCH,
       r"timed out in monitoredBarrier|No ranks successfully processed in monitoredBarrier",
       "waits", "stall",
       "rank 0 (the coordinator, the printing rank) ran out of time in monitoredBarrier; the "
       "processed ranks are innocent, the next one was being waited on (a suspect, not proven)"),
    _f("c10d.monitored_barrier", TORCH, r"monitoredBarrier|monitored_barrier", "names", "stall",
       "rank 0 (coordinator) lists the ranks that missed the barrier (all with wait_all_ranks, "
       "else the first); a non-coordinator names rank 0 (`check rank 0 logs`)"),
    _f("c10d.store", TORCH,
       r"TCPStore|\bstore\b|socket|waitForInput|connect(?:ion)?|client|server|recvValue|"
       r"sendBytes|recvBytes|address",
       "waits", "stall",
       "the reporter could not reach the store (rank 0's TCPStore, the master address) or a peer "
       "socket: it waits; the store host is named by reference when the line gives it"),
    # --- PyTorch c10d: collectives ----------------------------------------------------------
    _f("c10d.desync", TORCH, r"desync|lagging|didn't join|did not join", "names", "stall",
       "PyTorch's own conclusion: the ranks it lists lag or died"),
    _f("c10d.fingerprint", TORCH, r"mismatch between collectives|CollectiveFingerPrint", "names",
       "stall", "a split: the rank whose collective differs at one sequence number"),
    _f("c10d.heartbeat", TORCH, r"heartbeat|watchdog.{0,40}(stuck|hang|not been updated)",
       "waits", "stall",
       "the reporter's watchdog itself is stuck (a CUDA call or NCCL abort blocks): that rank "
       "is wedged, its peers wait on it"),
    _f("c10d.fr_dump", TORCH, r"flight recorder|dump|signal from|debug info", "waits", "stall",
       "the reporter is the initiator (own watchdog fired) or an observer (told by another "
       "rank): neither is a culprit; `from rank r` names whose watchdog fired first"),
    _f("c10d.watchdog_timeout", TORCH,
       r"timed? ?out|Timeout|ran for|watchdog|last enqueued|last completed|SeqNum", "waits",
       "stall", "the reporter waits in the collective at that sequence number: culprits by "
       "vote (who is behind, who never entered) and by absence"),
    _f("c10d.teardown", TORCH, r"abort|terminat|taking the entire process down|destroy|shut",
       "waits", "stall", "the end of a rank that was waiting (a consequence of the timeout)"),
    _f("c10d.nccl_error", TORCH, r"NCCL error|nccl\w*Error|ncclRemote|NCCL communicator",
       "waits", "stall", "an NCCL error seen by the reporter: its own (CUDA, internal) or a "
       "peer's (remote, system); the line alone does not say which rank began it"),
    _f("c10d.peer_lost", TORCH, r"peer|closed|reset|failed to (?:recv|send)|recv|send",
       "waits", "stall", "the reporter lost a peer connection (gloo): the peer is named by "
       "address, seldom by rank"),
    _f("c10d.config", TORCH,
       r"must|should|invalid|not supported|unsupported|expected|not part of|does not belong|"
       r"argument|specif|deprecated|only .*support|cannot|can't|not (?:been )?initiali|"
       r"already|out of range|greater than|less than|not a member|exceed|requires|duplicate|"
       r"unknown|no backend|not found|has to be|needs to|"
       # 1.8-1.9 RPC ProcessGroupAgent's TORCH_CHECKs at construction (worker name not in the
       # name map, or mapped to another rank) and 1.8 rendezvous.py's
       # `raise _env_error("WORLD_SIZE")` ("environment variable %s expected, but not set")
       r"to a ProcessGroup rank\.|does not match ProcessGroup rank|^(?:WORLD_SIZE|RANK)$",
       "names", "config", "a usage or configuration error raised before any collective ran"),
    # --- torchelastic -----------------------------------------------------------------------
    _f("elastic.worker_failed", "torchelastic",
       r"exitcode|exit code|ChildFailedError|Root Cause|failed \(|local_rank.*pid", "own",
       "stall", "the agent saw a LOCAL worker end (global = the node's offset + local rank); "
       "a death by its own signal names it, SIGABRT/SIGTERM (how a waiting rank ends) a suspect"),
    _f("elastic.closing_signal", "torchelastic", r"closing signal|Sending process", "waits",
       "stall", "the process was still running when another local worker failed"),
    _f("elastic.rendezvous", "torchelastic", r"rendezvous|barrier|timed? ?out|timeout|waiting",
       "waits", "stall", "the agent waits for other agents (nodes) at rendezvous or exit: "
       "the nodes that never join are the missing ones"),
    _f("elastic.worker_stuck", "torchelastic", r"uninterruptible|D-state|did not exit",
       "unnamed", "stall", "the agent saw a worker process (by pid; the `[%s]` in front is the "
       "worker group's ROLE, 2.13 local_elastic_agent.py) wedged in the kernel (a GPU or NIC "
       "driver wait): a worker of that node is stuck — the line names a pid, not a rank"),
    _f("elastic.signal", "torchelastic", r"signal|shutting down|SIGTERM|SIGKILL", "waits",
       "stall", "the agent itself was stopped (the launcher's or scheduler's decision)"),
    # --- NCCL -------------------------------------------------------------------------------
    # criterion for "not a rank-bearing error": the fragment is a column header or label that
    # names no rank, no count of ranks with a property, no status and no error (its "Ranks"
    # are column titles); it is counted as info, not against the share
    _f("nccl.ras.summary_header", "nccl-ras", r"^Group\s+Comms\s+Nodes\s+Ranks", "waits", "info",
       "the column header of RAS's communicator summary table: names no rank, count, status "
       "or error (the Errors section below it does)"),
    _f("nccl.ras.split_head", "nccl-ras",
       r"Communicator ranks have different (?:collective|%s) operation counts", "unnamed",
       "stall",
       "the heading of a count split: rasClientRunComms prints it only when some rank's "
       "operation count differs from the first rank's, so it proves a split even when the "
       "report is cut after it; it names no rank (the groups below it do)"),
    _f("nccl.ras", "nccl-ras",
       r"missing|Rank %|collective operation|counts?|status|unresponsive|dead|ranks? ", "names",
       "stall", "RAS: per communicator, how many operations each rank launched (the ranks "
       "behind, the ranks ahead) and the ranks that did not answer"),
    _f("nccl.cuda_failure", "nccl",
       r"Cuda failure|CUDA|cuda\w*\(|out of memory|illegal|Xid|ECC", "own", "stall",
       "the reporter's own CUDA failure: that process (its rank by prefix or init line)"),
    _f("nccl.bootstrap", "nccl", r"bootstrap|checked in|root|unique", "waits", "stall",
       "init: the reporter waits for the bootstrap root (rank 0's process) or its ring "
       "neighbour; a rank checked in twice is a duplicate launch"),
    # enqueue.cc 2.11.4-2.12.12 (enqueueSegOp): a CollNet tree peer with no intra-node rank on
    # the reporter's node; WARN then `return ncclInternalError` - the reporter's own call fails
    _f("nccl.internal", "nccl", r"Invalid intra-node rank", "own", "stall",
       "the reporter's NCCL found its own CollNet tree inconsistent (a peer with no intra-node "
       "rank) and failed the call with ncclInternalError: its own failure, no peer blamed"),
    _f("nccl.net_peer", "nccl",
       r"remote|peer|closed|connect|NET/|IB|ibv|socket|timeout|timed out|abort|proxy|recv|"
       r"send|transport|p2p|shm",
       "waits", "stall", "a transport error between the reporter and a peer (named by host or "
       "rank): either end may be the cause; the reporter is a witness"),
    _f("nccl.mismatch", "nccl", r"mismatch|differ|another rank|not all ranks|inconsistent",
       "names", "stall", "ranks disagree on a configuration or buffer: the named rank differs"),
    _f("nccl.config", "nccl",
       r"topo|xml|graph|nvls|nvml|ring|channel|tree|could not find|invalid|not supported|"
       r"exceeds|must|should|register|window|team|GIN|lsa|segment|diviser|range|user",
       "own", "config", "a topology, registration or API-use error on the reporter (the job "
       "cannot start or the call is refused); not a stall between ranks"),
    _f("nccl.inspector", "nccl-inspector", r".", "waits", "info",
       "the Inspector plugin's per-collective performance records (JSON): timing, not failure"),
    # --- Horovod ----------------------------------------------------------------------------
    _f("horovod.stall", "horovod",
       r"stall|missing ranks|ready ranks|submitted to be reduced|waiting for remainder",
       "names", "stall", "the coordinator (rank 0) lists, per tensor, the ranks that have not "
       "submitted it: a minority missing is the stragglers"),
    _f("horovod.shut_down", "horovod", r"shut down|shutdown|exception on one of the ranks",
       "waits", "stall", "a victim: another rank raised or finished early"),
    _f("horovod.join", "horovod", r"\bjoin", "names", "stall",
       "hvd.join: the ranks that joined wait for the rest"),
    _f("horovod.config", "horovod", r".", "own", "config",
       "a setup or API-use error (process sets, hosts, sizes)"),
    # --- launchers --------------------------------------------------------------------------
    # PRRTE's ``--help`` text (``[usage]``): printed on request; its option list holds words
    # ("non-zero status") of the stall families below
    _f("mpi.usage", "openmpi prrte", r"Usage: %s \[OPTION\]|list of command line options",
       "own", "config", "the launcher's --help text, printed on request"),
    # criterion 2, unreachable: [orterun|prun:proc-mem-exceeded] needs a proc in state
    # SENSOR_BOUND_EXCEEDED with exit code MEM_LIMIT_EXCEEDED, [..:proc-heartbeat-failed] a
    # proc in state HEARTBEAT_FAILED; at v4.1.6 (orte/) and PRRTE v3.0.13 / v4.0.0 (src/) no code
    # sets either (git grep: only orte_quit.c/prte_quit.c, which print them, the errmgr's case
    # labels and the state-name tables mention them — the sensor framework that set them is gone)
    _f("mpi.unreachable", "openmpi prrte",
       r"exceeded memory limits|failed to receive scheduled heartbeat", "own", "unreachable",
       "unreachable at the tags read: no code path sets the proc state that selects it "
       "(SENSOR_BOUND_EXCEEDED + MEM_LIMIT_EXCEEDED, HEARTBEAT_FAILED) — no log of these releases "
       "holds it"),
    _f("mpi.node_lost", "openmpi prrte", r"critical communication path was lost", "unnamed",
       "stall", "the launcher lost a DAEMON (the 'Process name' is [[job,0],d] / [nspace@0,d]: "
       "the errmgr sets COMM_FAILED only for daemons): that node died or its network failed; "
       "which ranks ran there the line does not say"),
    _f("mpi.signal", "openmpi prrte",
       r"noticed that process rank|exited on\s+signal|killed by signal|signal %d",
       "own", "stall", "the launcher names the first process of its world to die of a signal "
       "(the MPI rank: a worker's global rank when mpirun starts the workers)"),
    _f("mpi.first_exit", "openmpi prrte", r"first process to do so|non-zero status", "own",
       "stall", "the first process to exit non-zero"),
    _f("mpi.abort", "openmpi prrte",
       r"exiting\s+improperly|calling\s+.abort|MPI_ABORT was invoked|aborted|without calling",
       "own", "stall", "the rank that ended without finalising or by MPI_Abort: as often the "
       "rank that noticed a peer's failure as the failing one (a suspect)"),
    _f("mpi.resource", "openmpi prrte", r"memory limit|killed|lost|unreachable|heartbeat|daemon",
       "own", "stall", "a process or node lost (memory limit, daemon lost)"),
    _f("mpi.config", "openmpi prrte", r".", "own", "config",
       "a launch or configuration error (no process of the job ran a collective)"),
    # criterion 1, normal path: task_state_update (src/srun/task_state.c) prints it in the
    # TS_NORMAL_EXIT branch as in the TS_ABNORMAL_EXIT one — a task's exit message arriving
    # twice, whatever the exit; the first message already counted the task
    _f("srun.normal_path", "slurm-srun", r"reported exit for a second time", "own", "info",
       "printed on the normal path too (a duplicate exit message of a task that may have "
       "exited normally): srun's bookkeeping, not evidence of a failure"),
    _f("srun.launch_timeout", "slurm-srun", r"timeout waiting for task launch", "unnamed",
       "stall", "srun gave up waiting (10 min) for the step's tasks to start: how many started, "
       "not which — some node never answered"),
    _f("srun.task_exit", "slurm-srun",
       r"exit|killed|terminated|signal|abort|core dumped|OOM|out of memory|launch failed",
       "own", "stall", "srun names the task (the global rank of a one-task-per-rank step) that "
       "ended abnormally"),
    _f("srun.config", "slurm-srun", r".", "own", "config", "srun bookkeeping or setup"),
    # --- wrappers (DeepSpeed, Accelerate, Lightning) -----------------------------------------
    _f("wrapper.process_exit", "deepspeed accelerate lightning",
       r"exit|return code|killing|killed|signal|died|terminat", "own", "stall",
       "the wrapper's launcher reports a process it started ended (a local rank)"),
    _f("wrapper.timeout", "deepspeed accelerate lightning", r"timed? ?out|timeout|hang|stuck|wait",
       "waits", "stall", "the wrapper re-prints a wait or timeout of the reporter"),
    _f("wrapper.config", "deepspeed accelerate lightning", r".", "own", "config",
       "a wrapper's usage or configuration error, or a rank-0-only notice"),
)

#: families for emitters none of the above matches: errors and warnings count, INFO does not
OTHER = Family("other", ("",), re.compile("."), "any", "stall",
               "an error or warning that names a rank, not read per family yet (handled when "
               "the analysis reads it as evidence at all)")
INFO = Family("info", ("",), re.compile("."), "waits", "info", "INFO-level context")


def family_of(emitter: str, level: str, template: str) -> Family:
    """The family a message belongs to; INFO lines are context unless a stall family claims
    them (NCCL RAS output is printed as information but is a report)."""
    for fam in FAMILIES:
        if not any(emitter.startswith(e) for e in fam.emitters):
            continue
        if fam.regex.search(template):
            if level == "info" and fam.relevance == "stall" and not fam.id.startswith(
                    ("nccl.ras", "horovod.stall", "c10d.watchdog", "c10d.store_barrier",
                     "c10d.unique_id")):
                return INFO
            return fam
    return INFO if level == "info" else OTHER
