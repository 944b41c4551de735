"""The grammar of stuck-job evidence: one pattern per message an emitter prints.

Each :class:`Pattern` is read off the emitter's own format string at the released versions
named in ``versions`` (PyTorch c10d / torchelastic, NCCL, RCCL, gloo), not fitted to a pasted
log, and says **what a line of that shape proves about which ranks**:

- ``witness``: the rank that printed the line (its prefix, file or tag) — a reporter, never a
  culprit by the mere fact of reporting;
- ``culprits``: the ranks the line itself names as the cause (``Ranks 4, 5, 6, 7 failed to pass
  monitoredBarrier`` printed by rank 0 names 4-7, not 0);
- ``victims``: ranks the line shows waiting (a watchdog timeout proves its reporter waited);
- ``split``: a value compared across ranks (op and count at one opCount, operation counts per
  rank in an NCCL RAS report, enqueued vs completed) — the minority is named by a vote;
- ``time``: where the line's time comes from.

:func:`scan` returns every catalogue hit in a line; the parser turns hits into events and the
analysis reasons on what each hit proves. Every finding names the pattern it stands on
(``evidence["pattern"]``) so its confidence can be capped by the measured precision of that
pattern (:mod:`.calibration`). ``docs/stalls.md`` lists the catalogue as a table
(:func:`markdown_table` writes it).

Ranks in parsed text go through :func:`parse_rank` / :func:`parse_rank_list` only, so one bound
on what a rank may be applies everywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stormotel.analyzers.timeline import MAX_WORLD_SIZE

#: the most digits a rank, SeqNum, byte count or size may have; longer numbers are bad input
MAX_DIGITS = 18
#: the highest rank parsed text may name (``timeline.MAX_WORLD_SIZE`` - 1)
MAX_RANK = MAX_WORLD_SIZE - 1


@dataclass(frozen=True)
class Pattern:
    """One message of one emitter and what a line of that shape proves."""

    id: str  #: ``<emitter>.<message-id>``, the name findings carry in ``evidence["pattern"]``
    emitter: str
    message: str  #: the format string, as the source writes it (abridged with ``…``)
    versions: str
    source: str  #: file in the emitter's repository
    proves: str  #: what the line proves about which ranks (reporter / culprits / victims / split)
    regex: re.Pattern[str]
    #: lower-case substrings of which one must be in a line before the regex runs (cheap filter)
    triggers: tuple[str, ...]
    kind: str  #: the event kind the parser makes of a hit


def _p(id: str, emitter: str, message: str, versions: str, source: str, proves: str,
       regex: str, triggers: tuple[str, ...], kind: str, flags: int = 0) -> Pattern:
    return Pattern(id, emitter, message, versions, source, proves, re.compile(regex, flags),
                   triggers, kind)


# --- event kinds the catalogue feeds (the parser's vocabulary) ---------------------------
K_TIMEOUT = "watchdog_timeout"
K_COUNTERS = "counters"
K_FIRST_SIGNAL = "first_signal"
K_OBSERVED_SIGNAL = "observed_signal"
K_HEARTBEAT = "heartbeat"
K_TEARDOWN = "teardown"
K_WITNESS = "witness"  #: one rank reports on others: the line names culprits
K_BARRIER_TIMEOUT = "barrier_timeout"  #: rank 0 ran out of time in monitoredBarrier
K_GLOO_WAIT = "gloo_wait"  #: a gloo collective of the reporter timed out / lost its peer
K_NCCL_COLL = "nccl_coll"  #: NCCL_DEBUG_SUBSYS=COLL: one collective launched by the reporter
K_NCCL_INIT = "nccl_init"  #: NCCL init line: comm pointer -> communicator rank, size, id
K_ELASTIC_FAILED = "elastic_failed"  #: torchelastic's agent saw a local worker fail
K_WORLD = "world_hint"
#: not a message but a reading of one under a presumption (never above ``low``)
K_READING = "reading"

PT_NCCL = "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
PT_GLOO = "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp"

CATALOGUE: tuple[Pattern, ...] = (
    # ---------------------------------------------------------------- PyTorch ProcessGroupNCCL
    _p("torch.nccl.watchdog_timeout", "torch c10d ProcessGroupNCCL",
       '"Watchdog caught collective operation timeout: " WorkNCCL(SeqNum=…, OpType=…[, '
       'NumelIn=…, NumelOut=…], Timeout(ms)=…) " ran for " … " milliseconds before timing out."',
       "1.8-1.9 (no SeqNum); 1.10-2.0 (no Numel*); 2.1+ (NumelIn/NumelOut); 2.2+ [Rank r] / "
       "[PG … Rank r] tag",
       PT_NCCL + " (WorkNCCL::checkTimeout, operator<<(WorkNCCL))",
       "reporter: waited in collective SeqNum (victim); SeqNum/op/size split across ranks",
       r"WorkNCCL\(\s*(?:SeqNum=(?P<seq>\d+),\s*)?OpType=(?P<op>[A-Za-z_]+)"
       r"(?:,\s*NumelIn=(?P<nin>-?\d+),\s*NumelOut=(?P<nout>-?\d+))?"
       r"(?:,\s*Timeout\(ms\)=(?P<tmo>\d+))?", ("worknccl",), K_TIMEOUT),
    _p("torch.nccl.watchdog_caught", "torch c10d ProcessGroupNCCL",
       '"Watchdog caught collective operation timeout" (the head of the message, or its '
       'native frame "WorkNCCL::checkTimeout") where the WorkNCCL record is cut or paraphrased',
       "1.8+", PT_NCCL,
       "reporter: a collective of its own timed out (victim); names nobody — a stall shown",
       # a paste cut mid-word ("… Watchdog caught collective oper"): the head up to the line's
       # end is the same message (no other ProcessGroupNCCL line starts with these words)
       r"Watchdog caught collective operation timeout|Watchdog caught collective op[a-z]{0,7}"
       r"\s*$|WorkNCCL::checkTimeout|checkTimeout at "
       r"ProcessGroupNCCL", ("watchdog caught", "checktimeout"), "watchdog_bare", re.I),
    _p("torch.nccl.timeout_counters", "torch c10d ProcessGroupNCCL",
       '"Timeout at NCCL work: " … ", last enqueued NCCL work: " … ", last completed NCCL '
       'work: " …  /  "failure detected by watchdog at work sequence id: " … " PG status: last '
       'enqueued work: " … ", last completed work: " …',
       "2.2-2.3 (Timeout at NCCL work); 2.4+ (failure detected by watchdog)", PT_NCCL,
       "reporter: enqueued vs completed; enqueued == completed below the stuck SeqNum = never "
       "entered it (straggler), enqueued > completed = waiting (victim)",
       r"last enqueued (?:NCCL )?work: (?P<enq>-?\d+), last completed (?:NCCL )?work: "
       r"(?P<done>-?\d+)", ("last enqueued",), K_COUNTERS, re.I),
    _p("torch.nccl.pg_status", "torch c10d ProcessGroupNCCL / Flight Recorder",
       "pg_status: {last_enqueued_collective: …, last_started_collective: …, "
       "last_completed_collective: …}", "2.4+", PT_NCCL + " (dump_nccl_trace pg_status)",
       "reporter: enqueued vs completed (as torch.nccl.timeout_counters)",
       # bounded gap and \W{1,8}: an unclosed "last_enqueued_collective" repeated over a line
       # must not rescan the rest of the line from every occurrence (was quadratic)
       r"last_enqueued_collective\W{1,8}(?P<enq>-?\d{1,19})[^\n]{0,400}?"
       r"last_completed_collective\W{1,8}(?P<done>-?\d{1,19})",
       ("last_enqueued",), K_COUNTERS, re.I),
    _p("torch.nccl.dump_signal_received", "torch c10d ProcessGroupNCCL",
       '"Received a dump signal due to a collective timeout from " (this local rank | " rank '
       'N") " and we will try our best to dump the debug info. Last enqueued NCCL work: " …',
       "2.5+", PT_NCCL + " (HeartbeatMonitor::getNCCLWatchdogTimeoutErrorMsg)",
       "reporter: observer (or initiator for 'this local rank'); names rank N as the rank "
       "whose watchdog fired first — a victim that timed out, never a culprit",
       r"Received a dump signal due to a collective timeout from\s+(?:(?P<local>this local "
       r"rank)|rank (?P<initiator>\d+))", ("dump signal",), K_OBSERVED_SIGNAL),
    _p("torch.nccl.first_signal", "torch c10d ProcessGroupNCCL",
       '"First PG on this rank to signal dumping."', "2.4+", PT_NCCL,
       "reporter: initiator (its own watchdog fired: it waited longest)",
       r"First PG on this rank to signal dumping", ("signal dumping",), K_FIRST_SIGNAL, re.I),
    _p("torch.nccl.observed_signal", "torch c10d ProcessGroupNCCL",
       '"Observed flight recorder dump signal from another rank via TCPStore."', "2.4+", PT_NCCL,
       "reporter: observer — it may never have entered the collective",
       r"Observed flight recorder dump signal from another rank", ("dump signal",),
       K_OBSERVED_SIGNAL, re.I),
    _p("torch.nccl.heartbeat", "torch c10d ProcessGroupNCCL",
       '"Heartbeat monitor timed out! Process will be terminated after dumping debug info." / '
       '"ProcessGroupNCCL\'s watchdog got stuck for " … " seconds without making progress"',
       "2.2+", PT_NCCL + " (heartbeatMonitor)",
       "reporter: its own watchdog thread is stuck (usually in a CUDA/NCCL call); a hint, "
       "not a verdict",
       r"Heartbeat monitor timed out|no heartbeat|watchdog got stuck", ("heartbeat", "watchdog"),
       K_HEARTBEAT, re.I),
    _p("torch.nccl.teardown", "torch c10d ProcessGroupNCCL",
       '"To avoid data inconsistency, we are taking the entire process down." / "Process group '
       'watchdog thread terminated with exception: " …', "1.13+", PT_NCCL,
       "reporter: its watchdog fired and is taking the process down (it spoke)",
       r"taking the entire process down|watchdog thread terminated with exception|"
       r"terminate called after throwing", ("entire process", "watchdog", "terminate called"),
       K_TEARDOWN, re.I),
    _p("torch.nccl.desync_never_joined", "torch c10d desync debug",
       '"To our best knowledge, ranks [" … "] are the lagging ranks that caused this timeout. '
       'They never joined any collectives"', "2.0+ (TORCH_NCCL_DESYNC_DEBUG=1)",
       "torch/csrc/distributed/c10d/TraceUtils.h (analyzeMissingRanks)",
       "reporter: witness; culprits: the listed ranks (never joined)",
       r"ranks \[(?P<ranks>[\d, ]{1,8000})\] are the lagging ranks that caused this timeout",
       ("lagging ranks",), K_WITNESS),
    _p("torch.nccl.desync_report", "torch c10d desync debug",
       '"the lagging/dead/mismatched ranks that caused the desync are:" "[" … "] joined but '
       'didn\'t finish collective #" … / "[" … "] finished collective #" … ", but didn\'t join '
       'collective #" …', "1.13+ (TORCH_NCCL_DESYNC_DEBUG=1)",
       "torch/csrc/distributed/c10d/TraceUtils.h (analyzeLaggingRanks)",
       "reporter: witness; culprits: the listed ranks (multi-line, read by log_failures)",
       r"lagging/dead/mismatched ranks that caused the desync are", ("lagging/dead",),
       "desync_head", re.I),
    _p("torch.nccl.init_options", "torch c10d ProcessGroupNCCL",
       '"ProcessGroupNCCL initialization options: size: " …', "2.2+", PT_NCCL,
       "the default group's size is the world size",
       r"\[PG ID 0 PG GUID 0[^\]]*\] ProcessGroupNCCL initialization options: size: (?P<n>\d+)",
       ("initialization options",), K_WORLD),
    # ---------------------------------------------------- TORCH_DISTRIBUTED_DEBUG=DETAIL wrapper
    _p("torch.detail.fingerprint_mismatch", "torch c10d ProcessGroupWrapper",
       '"Detected mismatch between collectives on ranks. Rank " … " is running collective: " '
       'CollectiveFingerPrint(SequenceNumber=…, OpType=…, TensorShape=[…], TensorDtypes=…, …) '
       '", but Rank " … " is running collective: " …', "1.10+ (TORCH_DISTRIBUTED_DEBUG=DETAIL)",
       "torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp",
       "reporter: one side of a two-rank comparison; op/shape/dtype split voted across "
       "every fingerprint (read by log_failures)",
       r"Rank (?P<a>\d+) is running (?:inconsistent )?collective:\s*CollectiveFingerPrint",
       ("collectivefingerprint",), "fingerprint"),
    _p("torch.detail.running_collective", "torch c10d ProcessGroupWrapper",
       '"[Rank " r "] " "Running collective: " CollectiveFingerPrint(SequenceNumber=…, OpType=…, '
       'TensorShape=[…], TensorDtypes=…, …)', "1.13+ (TORCH_DISTRIBUTED_DEBUG=DETAIL, "
       "TORCH_CPP_LOG_LEVEL=INFO)", "torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp "
       "(runCollectiveChecks)",
       "reporter: about to run collective SequenceNumber of this op/shape/dtype; split: a rank "
       "whose last SequenceNumber is lower never reached the collective the others run",
       r"\[Rank (?P<rank>\d+)\] Running collective: CollectiveFingerPrint\((?:SequenceNumber="
       r"(?P<seq>\d+), )?OpType=(?P<op>\w+)(?:, TensorShape=(?P<shape>\[[^\]]{0,200}\]))?"
       r"(?:, TensorDtypes=(?P<dtype>\w+))?", ("running collective",), "detail_trace"),
    # ------------------------------------------------------- rendezvous / communicator setup
    # (read by log_store_barrier / log_store_wait: the culprit is the rank that is absent from
    # the waiters, or the rank the waiter names — never the waiter)
    _p("torch.nccl.unique_id_wait", "torch c10d ProcessGroupNCCL",
       '"[" rank_ "] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via '
       'c10d key-value store by key \'" key "\', but store->get(\'" key "\') got error: " … '
       '(1.13-2.0 spell it "retreiving")', "1.13+", PT_NCCL + " (broadcastUniqueNCCLID)",
       "reporter: a GROUP rank waiting (victim) for the group's rank 0 to publish the NCCL id; "
       "points at that rank 0 (crashed, busy — a prompt, preprocessing — or its store/network "
       "failed): global rank 0 when the reporter's group rank equals its global rank (ranks "
       "of a new_group are sorted, so group ranks 0..N-1 are then global 0..N-1) or the key "
       "names default_pg; a presumption, never above low. A key 'a:b' is a lone send/recv's "
       "two-rank communicator (getKeySendRecv): the id is the LOWER rank a's to publish",
       r"\[(?P<rank>\d{1,7})\] is setting up NCCL communicator and retr(?:ie|ei)ving "
       r"ncclUniqueId from \[(?P<root>\d{1,7})\](?: via c10d key-value store by key "
       r"'(?P<key>[^']{0,200})')?(?P<err>[^\n]{0,400})", ("nccluniqueid",), "store_wait", re.I),
    _p("torch.c10d.store_barrier_waiting", "torch.distributed (distributed_c10d.py)",
       '"Waiting in store based barrier to initialize process group for rank: " r ", key: " '
       'k " (world_size=" W ", worker_count=" K ", timeout=" … ")" (1.8-1.13, every 10 s) / '
       '"… (world_size=%s, num_workers_joined=%s, timeout=%s)" (2.0-2.1, logger.info) / '
       '"Waiting in store based barrier to initialize process group for %s seconds" "rank: '
       '%s, key: %s (world_size=%s, num_workers_joined=%s, timeout=%s error=%s)" (2.2+, '
       'logger.debug)', "1.8+ (default logging shows it up to 2.1)",
       "torch/distributed/distributed_c10d.py (_store_based_barrier)",
       "reporter: global rank r ARRIVED at the barrier of group key k (a victim); K of the "
       "group's W ranks had arrived. The ranks of the group that never report are the missing "
       "ones, named only when every arrival reported (as many silent ranks as W - K); "
       "K > W is a duplicate launch (two jobs on one MASTER_ADDR:PORT, or a restarted rank "
       "that joined again), never a straggler",
       r"Waiting in store based barrier to initialize process ?group for (?:[\d.]+ seconds ?)?"
       r"rank:? ?(?P<rank>\d{1,7}), key: ?(?P<key>[^\s(]{0,200}) \(world_size=(?P<w>\d{1,7}), "
       r"(?:worker_count|num_workers_joined)=(?P<k>\d{1,7})", ("store based barrier",),
       "store_barrier"),
    _p("torch.c10d.store_barrier_timeout", "torch.distributed (distributed_c10d.py)",
       '"Timed out initializing process group in store based barrier on rank: " r ", for key: '
       '" k " (world_size=" W ", worker_count=" K ", timeout=" … ")" (1.8-1.13) / "… on rank " '
       'r ", for key: " k " (world_size=" W ", num_workers_joined=" K ", timeout=" … ")" (2.0+; '
       '" error=…" from 2.2)', "1.8+", "torch/distributed/distributed_c10d.py "
       "(_store_based_barrier)",
       "reporter: global rank r arrived and gave up (victim); K of W arrived when it did — the "
       "count at the end of the wait; read with the waiting lines (log_store_barrier)",
       r"Timed out initializing process group in store based ?barrier on rank:? ?(?P<rank>\d+)"
       r"(?:, for key: ?(?P<key>[^\s(]{0,200}) \(world_size=(?P<w>\d{1,7}), "
       r"(?:worker_count|num_workers_joined)=(?P<k>\d{1,7}))?", ("store based barrier",),
       "store_barrier"),
    _p("torch.c10d.store_barrier_completed", "torch.distributed (distributed_c10d.py)",
       '"Rank %s: Completed store-based barrier for key:%s with %s nodes."', "1.10+",
       "torch/distributed/distributed_c10d.py (_store_based_barrier)",
       "every rank of that key's group arrived (the barrier let this one through): nobody is "
       "missing there, whatever earlier waiting lines counted",
       r"Rank (?P<rank>\d{1,7}): Completed store-based barrier for key: ?(?P<key>[^\s(]{0,200}) "
       r"with (?P<w>\d{1,7}) nodes", ("completed store-based barrier",), "store_barrier"),
    _p("torch.store.clients_joined", "torch c10d TCPStore",
       '"Timed out after " … " seconds waiting for clients. " n "/" N " clients joined."',
       "1.10+", "torch/csrc/distributed/c10d/TCPStore.cpp",
       "reporter: the store's server; N - n processes never connected (which ones is not said)",
       r"waiting for clients\. (?P<n>\d+)/(?P<of>\d+) clients joined", ("clients joined",),
       "store_barrier"),
    _p("torch.store.wait_timeout", "torch c10d TCPStore / socket.cpp",
       '"wait timeout after " ms "ms, keys: " keys (TCPStore.cpp doWait, DistStoreError) / '
       '"waitForInput: socket {} timed out after " ms "ms" / "waitForInput: poll for socket " … '
       '" returned 0, likely a timeout" (socket.cpp, C10D_WARNING) / "Socket Timeout"',
       "2.0+ (waitForInput lines 2.2+)", "torch/csrc/distributed/c10d/TCPStore.cpp, socket.cpp",
       "reporter: waited on the job's key-value store for a key another process should have "
       "set (victim); the store is served by global rank 0's process (or the agent of node "
       "0) — names nobody by itself: rank 0 is the suspect",
       r"wait timeout after (?P<ms>\d+) ?ms(?:, keys: (?P<keys>[^\n]{0,300}))?|waitForInput: "
       r"(?:socket (?:SocketImpl\([^\n)]{0,300}\) )?timed out after (?P<ms2>\d+)|"
       r"poll for socket [^\n]{0,300}? returned 0, likely a timeout)|\bSocket Timeout\b",
       ("wait timeout", "waitforinput", "socket timeout"),
       "store_wait"),
    _p("torch.store.connect_timeout", "torch c10d TCPStore / socket.cpp",
       '"The client socket has timed out after " … " while trying to connect to (" host ", " '
       'port ")." (2.1+) / "… has timed out after " … " while trying to connect to " host:port '
       '(2.0) / "… has timed out while trying to connect to " addr (1.11-1.13) / "TCP client '
       'failed to connect/validate to host " host ":" port " - retrying …" / "The server '
       'socket has timed out, will retry"', "1.11+ (socket.cpp)",
       "torch/csrc/distributed/c10d/socket.cpp, TCPStore.cpp",
       "reporter: could not reach the store at host:port at all (victim); names an address, "
       "not a rank — a wrong MASTER_ADDR/PORT, a firewall, or the store's host (rank 0 / node "
       "0's agent) not up: names nobody",
       r"client socket has timed out (?:after [^\n]{0,40}? )?while trying to connect to (?:\("
       # a pasted address is often redacted ("(PRIVATE_IP, PORT)"): any word in its place
       r"(?P<host>[^,\s]{1,255}), (?P<port>\d{1,5}|[A-Za-z_<>]{1,40})\)|"
       r"(?P<host3>[^\s():,]{1,255}):"
       r"(?P<port3>\d{1,5}))|TCP client failed to connect/validate to host "
       r"(?P<host2>\S{1,255}):(?P<port2>\d{1,5})|server socket on [^\n]{0,200}? has timed out",
       ("client socket has timed out", "failed to connect/validate", "server socket"),
       "store_wait"),
    # ------------------------------------------- the store, broken with no culprit named
    # (read by log_store_rankless: each shows the job broke at its key-value store; none
    # names the rank that caused it, so the answer is undecided — never "healthy")
    _p("torch.store.connection_lost", "torch c10d TCPStore",
       '"recvValue failed on " socket.repr() ": " what / "recvVector failed on …" / '
       '"recvValueWithTimeout failed on …" (TCPStore.cpp, C10D_WARNING; what: "Connection reset '
       'by peer", "failed to recv, got 0 bytes", "Failed to recv, got 0 bytes. Connection was '
       'likely closed. Did the remote server shutdown or crash?"). Not the heartbeat monitor\'s '
       '"Failed to check the \\"should dump\\" flag on TCPStore": the inventory\'s normal '
       'path (c10d.normal_path)',
       "2.3+ (C10D_WARNING form)", "torch/csrc/distributed/c10d/TCPStore.cpp",
       "reporter: lost its connection to the job's store (a victim); the store is served by "
       "rank 0's process or node 0's agent, which went away — crashed, killed, or finished "
       "first (then at the very end of a run this is teardown noise): names nobody",
       r"\b(?:recvValue|recvVector|recvValueWithTimeout) failed on SocketImpl",
       ("failed on socketimpl",), "store_rankless"),
    _p("torch.nccl.normal_shutdown", "torch c10d ProcessGroupNCCL",
       '"Launching ProcessGroupNCCL abort asynchronously." / "ProcessGroupNCCL aborts '
       'successfully." (LOG(INFO) of destroy_process_group while shutdown() calls abort(), '
       '2.3+) / "… watchdog thread terminated normally" / "main process destroyed cuda before '
       'watchdog loop exited" (at process exit)', "2.2+", PT_NCCL,
       "the normal path: the reporter is shutting its process group down after its work (not "
       "stall evidence); with it in the logs, lost-store lines are teardown noise",
       r"Launching ProcessGroupNCCL abort asynchr|ProcessGroupNCCL aborts successfully|"
       r"thread terminated normally|destroyed cuda before watchdog loop exited",
       ("processgroupnccl abort", "terminated normally", "destroyed cuda before"),
       "store_rankless"),
    _p("torch.store.listen_failed", "torch c10d socket.cpp / TCPStoreLibUvBackend",
       '"The server socket has failed to listen on any local network address." (C10D_ERROR, '
       'then SocketError / DistNetworkError with each "The server socket has failed to bind to '
       '" addr " (errno: " n " - " msg ")." appended; libuv 2.4+: "… port: " p ", useIpv6: " … '
       '", code: " c ", name: " EADDRINUSE …)', "1.11+ (socket.cpp)",
       "torch/csrc/distributed/c10d/socket.cpp",
       "reporter: the process that should serve the store (rank 0 or node 0's agent) could not "
       "bind MASTER_PORT — usually taken by another job or a leftover process: the job never "
       "started; names no rank",
       r"server socket has failed to listen on any local network address",
       ("failed to listen on any local",), "store_rankless"),
    _p("torch.store.poll_failed", "torch c10d socket.cpp",
       '"While waitForInput, poolFD failed with " err "." (C10D_WARNING in SocketImpl::'
       'waitForInput when poll() fails while a store call waits for the server\'s answer)',
       "2.4+", "torch/csrc/distributed/c10d/socket.cpp",
       "reporter: its wait on the job's store (a barrier, a get/wait of a key) broke off (a "
       "victim); the store's server is rank 0's process or node 0's agent: names nobody",
       r"While waitForInput, poolFD failed", ("poolfd failed",), "store_rankless"),
    _p("torch.store.connect_reset", "torch c10d TCPStore",
       '"Connection reset by peer" raised by the TCPStore constructor (RuntimeError up to 2.0, '
       'DistNetworkError / DistStoreError from 2.1; alone on the traceback\'s last line, or '
       'glued to "TCPStore(" by a paste) — the client connected, the server reset it '
       '(a listen backlog overflowing at scale, the server going down)',
       "1.8+", "torch/csrc/distributed/c10d/TCPStore.cpp, socket.cpp",
       "reporter: could not join the job's store at init (a victim); the store's server is "
       "rank 0's process or node 0's agent: names nobody",
       # the traceback's last line alone: c10d's std::system_error as pybind11 raises it (a
       # Python socket's reset is "ConnectionResetError: [Errno 104] …", requests' is its own)
       r"TCPStore\([^\n]{0,60}?Connection reset by peer|Dist(?:Network|Store)Error: Connection "
       r"reset by peer|^\s*RuntimeError: Connection reset by peer\s*$",
       ("connection reset by peer",), "store_rankless"),
    _p("torch.nccl.unique_id_head", "torch c10d ProcessGroupNCCL",
       '"[" rank_ "] is setting up NCCL communicator" (the head of broadcastUniqueNCCLID\'s '
       'error, cut before "and retrieving ncclUniqueId from [0] …" — by a GitHub title, a '
       'terminal, a paste)', "1.13+", PT_NCCL + " (broadcastUniqueNCCLID)",
       "reporter: group rank r failed to get the NCCL id through the store (a victim); the "
       "cut tail would name the group's rank 0 and the store's error — without them the rank "
       "waited on may be a sub-group's, and the failure the store's own: a suspect, no more",
       r"\[(?P<rank>\d{1,7})\] is setting up NCCL communicator(?! and retr)",
       ("setting up nccl communicator",), "store_rankless"),
    _p("torch.c10d.store_barrier_rankless", "torch.distributed (distributed_c10d.py)",
       '"Timed out initializing process group in store based barrier" with its "on rank: " r '
       '", for key: " k " (world_size=" W ", worker_count=" K …")" cut off or paraphrased',
       "1.8+", "torch/distributed/distributed_c10d.py (_store_based_barrier)",
       "reporter: some rank arrived at the init barrier and gave up (a victim); without the "
       "rank and counts nobody missing can be named",
       r"Timed out initializing process group in store based ?barrier(?! on rank:? ?\d)",
       ("store based",), "store_rankless", re.I),
    # ---------------------------------------------------------------------- gloo / monitored
    _p("torch.gloo.monitored_barrier_ranks", "torch c10d ProcessGroupGloo",
       '"[Rank 0]: Ranks " c10::Join(", ", failedRanks) " failed to pass monitoredBarrier in " '
       '… " ms"', "1.10+ (monitored_barrier(wait_all_ranks=True))", PT_GLOO,
       "reporter: rank 0 (witness); culprits: every listed rank (group ranks) — all of them "
       "missed the barrier",
       r"Ranks (?P<ranks>\d{1,19}(?:, ?\d{1,19}){0,4096}) failed to pass monitoredBarrier in "
       r"(?P<ms>\d+) ms", ("monitoredbarrier",), K_WITNESS),
    _p("torch.gloo.monitored_barrier_rank", "torch c10d ProcessGroupGloo",
       '"[Rank 0]: Rank " … " failed to pass monitoredBarrier in " … " ms" "\\n Original '
       'exception: \\n" …', "1.10+ (monitored_barrier, first failure only)", PT_GLOO,
       "reporter: rank 0 (witness); culprits: the named rank (later ranks were not probed)",
       r"(?<!\w)Rank (?P<ranks>\d{1,19}) failed to pass monitoredBarrier in (?P<ms>\d+) ms",
       ("monitoredbarrier",), K_WITNESS),
    _p("torch.gloo.monitored_barrier_timeout", "torch c10d ProcessGroupGloo",
       '"Rank " … " timed out in monitoredBarrier after " … " ms." "\\n" ("Successfully '
       'processed ranks: " … | "No ranks successfully processed in monitoredBarrier.")',
       "1.10+", PT_GLOO + " (checkRemainingTime)",
       "reporter: rank 0 ran out of time; processed ranks are innocent, the next one was "
       "being waited for (a suspect, not proven)",
       r"Rank (?P<rank>\d{1,19}) timed out in monitoredBarrier after (?P<ms>\d+) ms\.?"
       r"(?:\s*Successfully processed ranks: (?P<done>[\d, ]{0,8000}))?",
       ("monitoredbarrier",), K_BARRIER_TIMEOUT),
    _p("torch.gloo.monitored_barrier_processed", "torch c10d ProcessGroupGloo",
       '"Successfully processed ranks: " c10::Join(", ", processedRanks) (the line after '
       '"timed out in monitoredBarrier")', "1.10+", PT_GLOO + " (checkRemainingTime)",
       "the ranks that did pass the barrier (innocent)",
       r"Successfully processed ranks: (?P<done>\d{1,19}(?:, ?\d{1,19}){0,4096})",
       ("successfully processed",), K_BARRIER_TIMEOUT),
    _p("torch.gloo.monitored_barrier_peer", "torch c10d ProcessGroupGloo",
       '"Rank " rank " successfully reached monitoredBarrier, but received errors while '
       'waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank." "\\n '
       'Original exception: \\n" … (c10::str, logAndThrow)', "1.10+", PT_GLOO
       + " (monitoredBarrier, rank != 0)",
       "reporter: a non-coordinator that REACHED the barrier (innocent); rank 0, the "
       "coordinator, failed it: rank 0 was late or dead, or rank 0 found another rank missing "
       "and raised — rank 0 is pointed at by reference: medium when every other rank of the "
       "group reported reaching it, low with no world size stated, a suspect when a stated "
       "world has other silent ranks; rank 0's own 'failed to pass' line names the faulty "
       "rank instead and wins (read by log_monitored)",
       r"Rank (?P<rank>\d{1,7}) successfully reached monitoredBarrier, but received errors "
       r"while waiting(?: for send/recv)? from rank (?P<root>\d{1,7})",
       ("successfully reached monitoredbarrier",), "barrier_peer"),
    _p("torch.gloo.timeout", "gloo (via ProcessGroupGloo)",
       '"Timed out waiting " … "ms for recv operation to complete" / "[…/pair.cc:…] '
       'Connection closed by peer [" addr "]:" port / "[…/pair.cc:…] Read error [" addr "]: …" / '
       '"Application timeout caused pair '
       'closure"', "1.13+", "third_party/gloo/gloo/transport/tcp/pair.cc, unbound_buffer.cc",
       "reporter: waited in a gloo operation (victim); the peer is named by address, not rank",
       r"Timed out waiting (?P<ms>\d+)ms for (?:recv|send) operation|Connection closed by peer"
       r"|Application timeout caused pair closure|gloo/transport/tcp/pair\.cc:\d+\] (?:Read|Write)"
       r" error", ("timed out waiting", "closed by peer", "pair closure", "pair.cc"),
       K_GLOO_WAIT),
    # ------------------------------------------------------------------------- torchelastic
    _p("torchelastic.worker_failed", "torch.distributed.elastic",
       '"failed (exitcode: " … ") local_rank: " … " (pid: " … ") of binary: " …', "1.10+",
       "torch/distributed/elastic/multiprocessing/api.py (SubprocessContext._poll: printed "
       "after close() stopped the node's other workers; the first failure by timestamp)",
       "reporter: the agent of one node; names a LOCAL rank of that node (global rank unknown "
       "without the node's rank offset)",
       r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local>\d+) "
       r"\(pid: (?P<pid>\d{1,10})\)",
       ("failed (exitcode",), K_ELASTIC_FAILED),
    _p("torchelastic.worker_failed_one_node", "torch.distributed.elastic (a reading, not a "
       "message)",
       '"failed (exitcode: " c ") local_rank: " … — the same line, read when nothing in the '
       "logs shows a second node (c a death signal, or c > 0 with no rank seen waiting)", "1.10+",
       "torch/distributed/elastic/agent/server/api.py (_assign_worker_ranks: global rank = the "
       "node's offset + local rank; the offset is 0 on the first node only)",
       "the node's only failed worker — dead of its own signal, or exited non-zero while no "
       "rank is seen waiting (a timeout's exception would be a victim's) — PRESUMED global "
       "because nothing shows a second node (no node count above 1, no larger world, no rank "
       "above 7, no second host): right on one node, wrong on every node but the first; "
       "never more than low",
       r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local>\d+)",
       ("failed (exitcode",), K_READING),
    _p("torchelastic.root_cause", "torch.distributed.elastic",
       '"Root Cause (first observed failure):" "[" i "]:" "time : " … "rank : " r " (local_rank: '
       '…)" "exitcode : " c " (pid: …)" "traceback : " …', "1.9+",
       "torch/distributed/elastic/multiprocessing/errors/__init__.py (ChildFailedError.format_msg)",
       "reporter: the launcher; names the first FAILED rank it observed and its exit code / "
       "signal — SIGABRT (-6) is what a watchdog timeout ends with, so -6 alone names a "
       "victim as often as a culprit (multi-line, read by log_failures)",
       r"Root Cause \(first observed failure\)", ("root cause",), "elastic_summary"),
    _p("torchelastic.failures", "torch.distributed.elastic",
       '"Failures:" "[" i "]:" "rank : " r … "exitcode : " c …', "1.9+",
       "torch/distributed/elastic/multiprocessing/errors/__init__.py",
       "reporter: the launcher; other ranks that failed after the root cause (consequences "
       "as often as not)", r"^\s*Failures:\s*$", ("failures:",), "elastic_summary"),
    # --------------------------------------------------------------- a rank's own errors
    _p("torch.cuda.oom", "torch CUDA caching allocator",
       '"CUDA out of memory. Tried to allocate " … / "DefaultCPUAllocator: can\'t allocate '
       'memory"', "1.13+ (torch.OutOfMemoryError from 2.1)", "c10/cuda/CUDACachingAllocator.cpp",
       "reporter: culprit — its own failure (ordered against the first timeout)",
       r"CUDA out of memory|OutOfMemoryError|can't allocate memory", ("memory",), "own_error",
       re.I),
    _p("torch.cuda.error", "torch / CUDA runtime",
       '"CUDA error: " cudaGetErrorString(…) (illegal memory access, device-side assert, ECC)',
       "1.13+", "c10/cuda/CUDAException.h (C10_CUDA_CHECK)",
       "reporter: culprit — its own failure, also when printed by its watchdog thread",
       r"CUDA error: |device-side assert triggered|uncorrectable ECC error", ("cuda error",
                                                                           "assert", "ecc"),
       "own_error", re.I),
    _p("nccl.error", "NCCL via ProcessGroupNCCL",
       '"NCCL error in: " … ", unhandled cuda error (run with NCCL_DEBUG=INFO for details)" '
       '(ncclUnhandledCudaError / ncclInternalError / ncclInvalidUsage)', "1.13+",
       "torch/csrc/distributed/c10d/NCCLUtils.hpp (C10D_NCCL_CHECK)",
       "reporter: culprit — NCCL failed on this rank itself (ncclRemoteError is a peer's)",
       r"ncclUnhandledCudaError|ncclInternalError|ncclInvalidUsage|ncclInvalidArgument",
       ("nccl",), "own_error", re.I),
    _p("python.exception", "CPython traceback (any rank's training code)",
       '"Traceback (most recent call last):" … "<Type>Error: <message>"', "any",
       "Python/traceback.c",
       "reporter: culprit when the exception is its own (not a timeout/abort/store error "
       "reporting a peer's trouble) and it precedes the first timeout",
       r"Traceback \(most recent call last\)", ("traceback",), "own_error"),
    # ---------------------------------------------------------------------------- NCCL / RCCL
    _p("nccl.coll", "NCCL / RCCL (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL)",
       '"%s: opCount %lx sendbuff %p recvbuff %p count %zi datatype %d op %d root %d comm %p '
       '[nranks=%d] stream %p"', "2.18+ (count %zu from 2.24); RCCL same",
       "src/enqueue.cc (ncclEnqueueCheck)",
       "reporter: launched collective opCount (hex) of this op/count/dtype on comm; split: op "
       "and count at one opCount across ranks; a rank whose last opCount is lower never "
       "launched the collective the others wait in",
       r"NCCL INFO (?P<op>[A-Za-z]+): opCount (?P<opcount>[0-9a-fA-F]{1,16}) sendbuff \S+ "
       r"recvbuff \S+ count (?P<count>\d+) datatype (?P<dtype>\d+) op (?P<redop>\d+) root "
       r"(?P<root>-?\d+) comm (?P<comm>\S+) \[nranks=(?P<nranks>\d+)\]", ("opcount",),
       K_NCCL_COLL),
    _p("nccl.init", "NCCL / RCCL (NCCL_DEBUG=INFO)",
       '"[ncclCommInitRank|ncclCommSplit ]comm %p rank %d nranks %d cudaDev %d nvmlDev %d '
       'busId %lx [parent … color … key …] commId 0x%llx - Init COMPLETE"',
       "2.18 (bare); 2.21+ (function name); 2.27+ ([Rank r] on Init START)", "src/init.cc",
       "maps a comm pointer to its communicator rank, size and id (attributes nccl.coll lines "
       "with no launcher prefix)",
       r"comm (?P<comm>0x[0-9a-fA-F]+|\(nil\)) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev"
       r"[^\n]{0,400}?commId (?P<commid>0x[0-9a-fA-F]+) - Init "
       r"COMPLETE", ("init complete",), K_NCCL_INIT),
    _p("nccl.warn.net", "NCCL / RCCL",
       '"NET/IB : Got completion from peer %s with status=%d opcode=%d len=%u vendor err %d" / '
       '"NET/Socket : …" (NCCL WARN)', "2.18+", "src/transport/net_ib.cc, net_socket.cc",
       "reporter: its network transport failed; the peer is an address — a fabric hint",
       r"NCCL WARN NET/|ncclRemoteError|ncclSystemError|\bibv_\w+|remote process exited|Xid \d+",
       ("nccl warn", "ncclremote", "ncclsystem", "ibv_", "remote process", "xid "), "fabric",
       re.I),
    _p("nccl.warn.failure", "NCCL / RCCL",
       '"%s:%d:%d [%d] %s:%d NCCL WARN " fmt (src/debug.cc) with a failure: "Cuda failure %d '
       '\'%s\'", "Call to %s failed", "… error …", "… timeout …", "… abort …" / "Invalid '
       'intra-node rank %d for peer %d" (2.11.4 – 2.12.12 enqueue.cc: CollNet registered '
       'buffers, returns ncclInternalError)', "2.11+",
       "src/debug.cc, src/include/checks.h (CUDACHECK, SYSCHECK)",
       "reporter: its NCCL failed (the process is named by host:pid and the CUDA device, not "
       "by rank) — a stall shown, nobody named without the rank prefix",
       r"NCCL WARN (?!NET/).{0,300}?(?:[Ff]ail|[Ee]rror|[Aa]bort|[Tt]imeout|[Mm]ismatch|"
       r"[Uu]nhandled|Invalid intra-node rank)", ("nccl warn",), "nccl_warn"),
    _p("nccl.warn.cuda_failure", "NCCL / RCCL",
       '"%s:%d:%d [%d] %s:%d NCCL WARN Cuda failure %d \'%s\'" (cudawrap.h CUCHECK, 2.19+) / '
       '"… NCCL WARN Cuda failure \'%s\'" (checks.h CUDACHECK) / "Failed to CUDA calloc …"',
       "2.18+", "src/include/checks.h, cudawrap.h, alloc.h; prefix src/debug.cc",
       "reporter: culprit — a CUDA call of NCCL failed in ITS OWN process (host:pid, CUDA "
       "device); its rank from the line's launcher prefix, the process's init line on the "
       "world's communicator, or (weak: low) NCCL's intra-node channel lines naming the rank "
       "on that device (read by log_ncclwarn)",
       r"NCCL WARN (?:\S+:\d+ )?(?:Cuda failure|Failed to CUDA calloc|CUDA error)",
       ("nccl warn",), "nccl_warn_own"),
    _p("nccl.channel", "NCCL / RCCL (NCCL_DEBUG=INFO)",
       '"Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/…" (p2p.cc) / "Channel %02d : %d[%d] -> '
       '%d[%d] via SHM/direct" (shm.cc)', "2.18+ (NVML device in the brackets; older releases "
       "print a bus id there)", "src/transport/p2p.cc, shm.cc",
       "the printing rank and its peer with their NVML devices, both on the printer's host "
       "(communicator ranks): which rank drives which device of a host",
       r"Channel \d+(?:/\d+)? : (?P<a>\d{1,7})\[(?P<da>\d{1,4})\] -> (?P<b>\d{1,7})\[(?P<db>"
       r"\d{1,4})\] via (?:SHM|P2P)", ("via shm", "via p2p"), "nccl_channel"),
    _p("nccl.ras.count_group", "NCCL RAS (ncclras client)",
       '"  %d ranks have launched up to operation %ld" / "  %d ranks have not launched any '
       'operations"', "2.24+ (per collective type from 2.26)", "src/ras/client_support.cc",
       "a group of N ranks of one communicator at one operation count (read by log_ras)",
       r"^\s*(?P<n>\d+) ranks have (?:launched up to operation (?P<count>\d+)|not launched any "
       r"operations)", ("ranks have",), "ras"),
    _p("nccl.ras.rank_count", "NCCL RAS (ncclras client)",
       '"  Rank %d has launched up to operation %ld -- GPU %s managed by process %d on node %s" '
       '/ "  Rank %d has not launched any operations -- …"', "2.24+",
       "src/ras/client_support.cc",
       "one (outlier) communicator rank and its operation count: RAS prints ranks one by one "
       "only for outlier groups (≤ 25 % of the communicator)",
       r"^\s*Rank (?P<rank>\d+) has (?:launched up to operation (?P<count>\d+)|not launched any "
       r"operations) --", ("has launched", "has not launched"), "ras"),
    _p("nccl.ras.rank_member", "NCCL RAS (ncclras client)",
       '"  Rank %d -- GPU %s managed by process %d on node %s"', "2.24+",
       "src/ras/client_support.cc",
       "a member of the group printed just above (an outlier group's rank list)",
       r"^\s*Rank (?P<rank>\d+) -- (?:GPU|\[process)", ("rank ",), "ras"),
    _p("nccl.ras.missing", "NCCL RAS (ncclras client)",
       '"#%d-%d (%016lx) INCOMPLETE" "  Missing communicator data from %d rank%s" then "  The '
       'missing rank%s: %s" (2.24-2.25) or one "  Rank %d -- GPU %s managed by process %d on '
       'node %s" line per rank (2.26+); the ranks are listed only for an outlier count '
       '(1, or at most 10 and 25 % of the job; verbose: under 50 %)', "2.24+",
       "src/ras/client_support.cc (rasClientRunComms, rasCountIsOutlier)",
       "culprits: communicator ranks whose process did not answer RAS at all (its RAS thread "
       "runs beside the training thread, so a process stuck in Python still answers: dead, "
       "stopped or unreachable) — named while they are a minority of the communicator; a "
       "missing majority more likely means the querying node was cut off",
       r"^\s*(?:The missing ranks?: (?P<ranks>\d{1,19}(?:[, -]+\d{1,19}){0,4096})|Missing "
       r"communicator data from (?P<n>\d{1,7}) ranks?\b)", ("missing rank", "missing communicator"),
       "ras"),
    _p("nccl.ras.json", "NCCL RAS (ncclras -f json)",
       '{"nccl_version": …, "communicators": [{"hash": "0x%lx", "size": %d, "ranks": [{"rank": '
       '%d, …, "collective_counts": {"Broadcast": %lu, …, "AllReduce": %lu}}], "missing_ranks": '
       '[{"rank": %d, …, "status": {"unresponsive": true|false, "considered_dead": …}}]}]}',
       "2.28.7+", "src/ras/client_support.cc (rasDumpCommsToJSON, jsonWriteRankData, "
       "jsonWriteMissingRank)",
       "the same evidence as the text form with every rank listed: per operation type the "
       "count split (findings: nccl.ras.count_group) and the unresponsive ranks (nccl.ras."
       "missing; NOCOMM ranks answered and are not missing) — read by log_ras",
       r'"collective_counts"\s*:', ("collective_counts",), "ras"),
    _p("nccl.ras.status_group", "NCCL RAS (ncclras client)",
       '"  Communicator ranks have different status" "  %d ranks have status %s" / "  Rank %d '
       'has status %s -- GPU %s managed by process %d on node %s" (RUNNING, INIT, FINALIZE, '
       'ABORT, NOCOMM/UNKNOWN)', "2.24+ (NOCOMM from 2.26)", "src/ras/client_support.cc",
       "a communicator's ranks in different life-cycle states (init, tear-down, abort after a "
       "timeout): names nobody — the rank lines under it are not operation counts",
       r"^\s*(?:\d+ ranks have status (?P<status>[A-Z]+)|Rank (?P<rank>\d+) has status "
       r"(?P<rstatus>[A-Z]+))|Communicator ranks have different status", ("status",), "ras"),
    _p("nccl.ras.mismatch_head", "NCCL RAS (ncclras client)",
       '"#%d-%d (%016lx) MISMATCH" "  Communicator ranks have different (collective|%s) '
       'operation counts"', "2.24+ (collective); 2.26+ (per op: AllReduce, …)",
       "src/ras/client_support.cc", "opens one communicator's count split (read by log_ras)",
       r"^\s*#(?P<group>\d+)-(?P<comm>\d+) \((?P<hash>[0-9a-f]+)\) (?P<what>[A-Z,]+)"
       r"|Communicator ranks have different (?P<op>\w+) operation counts", ("#", "different"),
       "ras"),
    # ------------------------------------------- MPI launchers (Open MPI / PRRTE) and Paddle's
    _p("nccl.ras.error_head", "NCCL RAS (ncclras client)",
       '"#%d-%d (%016lx) ERROR" then "  Initialization error%s on %d rank%s" / "  Asynchronous '
       'error%s on %d rank%s"', "2.24.3 – 2.30.7", "src/ras/client_support.cc "
       "(rasClientRunComms)",
       "the communicator's ranks that hold an NCCL error: the lines after it list them (read "
       "by log_ras_health)",
       r"^\s*(?P<what>Initialization|Asynchronous) errors? on (?P<n>\d{1,7}) ranks?",
       ("errors on", "error on"), "ras_health"),
    _p("nccl.ras.error_rank", "NCCL RAS (ncclras client)",
       '"  %d ranks reported %s" (members follow as "  Rank %d -- GPU …") / "  Rank %d reported '
       '%s -- GPU %s managed by process %d on node %s" / "… -- [process information not '
       'found]" (%s: ncclGetErrorString)', "2.24.3 – 2.30.7", "src/ras/client_support.cc "
       "(rasClientBreakDownErrors)",
       "the ranks whose communicator holds that NCCL error: their own (a CUDA, system, internal "
       "or usage error: suspects) or a peer's ('remote process exited or there was a network "
       "error': victims, the peer is elsewhere)",
       r"^\s*(?:(?P<n>\d{1,7}) ranks reported (?P<gerr>[^\n]{1,120})|Rank (?P<rank>\d{1,7}) "
       r"reported (?P<err>[^\n]{1,120}?) -- (?:GPU|\[process))", ("reported",), "ras_health"),
    _p("nccl.ras.status_list", "NCCL RAS (ncclras client)",
       '"  Rank %s has status %s" (a comma list of the ranks that sent no data for the '
       'communicator, status NOCOMM)', "2.24.3", "src/ras/client_support.cc",
       "the listed ranks' processes answered but hold no such communicator (destroyed, or "
       "never created it): suspects of a status split (read by log_ras_health)",
       r"^\s*Rank (?P<ranks>\d{1,7}(?:,\d{1,7}){0,4096}) has status (?P<status>[A-Z]{1,12})$",
       ("has status",), "ras_health"),
    _p("openmpi.proc_aborted", "Open MPI mpirun/orterun (1.x-4.x), PRRTE prterun (Open MPI 5)",
       '"%s noticed that process rank %lu with PID %lu on node %s exited on signal %d (%s)."',
       "Open MPI 1.6+ ([orterun:proc-aborted(-strsignal)]), PRRTE 2+ ([prun:proc-aborted…])",
       "orte/tools/orterun/help-orterun.txt; prrte src/tools/prun/help-prun.txt",
       "reporter: the launcher; names the FIRST process of its world it saw die of a signal "
       "(the MPI rank: a worker's global rank unless the launcher starts per-node launchers). "
       "An own-death signal (SIGKILL, SIGSEGV, SIGBUS, SIGILL, SIGFPE) names a culprit; SIGABRT "
       "(a watchdog timeout's end) or SIGTERM/SIGINT a suspect only (read by log_mpirun)",
       r"noticed that process rank (?P<rank>\d+) with PID \w+ on node (?:\S+ )?exited on signal "
       r"(?P<sig>\d+)", ("noticed that process rank",), "mpi_launcher"),
    _p("openmpi.first_nonzero_exit", "Open MPI mpirun/orterun, PRRTE prterun",
       '"%s detected that one or more processes exited with non-zero status, thus causing\\nthe '
       'job to be terminated. The first process to do so was:\\n\\n  Process name: %s\\n  '
       'Exit code:    %d"', "Open MPI 1.6+ ([orterun:non-zero-exit]), PRRTE 2+ "
       "([prun:non-zero-exit])", "orte/tools/orterun/help-orterun.txt; prrte help-prun.txt",
       "reporter: the launcher; names the first process to exit non-zero (ORTE "
       "[[family,job],vpid] / PRRTE [nspace,vpid]: the vpid is the MPI rank) — a failure of "
       "its own, as torchelastic's root cause (multi-line, read by log_mpirun)",
       r"The first process to do so was:", ("first process to do so",), "mpi_launcher"),
    _p("openmpi.proc_exit", "Open MPI mpirun/orterun, PRRTE prterun",
       '"%s has exited due to process rank %lu with PID %lu on\\nnode %s exiting improperly." / '
       '"… calling \\"abort\\"."', "Open MPI 1.6+ ([orterun:proc-exit-no-sync], "
       "[orterun:proc-ordered-abort]), PRRTE 2+", "orte/tools/orterun/help-orterun.txt; prrte "
       "help-prun.txt", "reporter: the launcher; the rank that ended first without finalising "
       "or by MPI_Abort — how a framework ends the rank that NOTICED a peer's failure as often "
       "as its own: a suspect only (wrapped over two lines, read by log_mpirun)",
       r"has exited due to process rank (?P<rank>\d+)", ("has exited due to process rank",),
       "mpi_launcher"),
    _p("paddle.launch_abort", "PaddlePaddle launcher (launch_utils.watch_local_trainers)",
       '"ABORT!!! Out of all {} trainers, the trainer process with rank={} was aborted. Please '
       'check its log."', "1.5+ (fluid/incubate launch_utils.py, distributed/utils)",
       "python/paddle/distributed/utils/launch_utils.py (watch_local_trainers)",
       "reporter: one node's launcher; the world size and the global ranks of its trainers "
       "found with a non-zero return code at one poll (1 s apart): one rank names a failure of "
       "its own; several are first only together (a tie names nobody)",
       r"ABORT!!! Out of all (?P<n>\d+) trainers, the trainer process with rank=\[(?P<ranks>"
       r"[\d,\s]*)\] was aborted", ("abort!!!",), "mpi_launcher"),
    _p("openmpi.mpi_abort", "Open MPI (the aborting process itself, MPI_Abort)",
       '"MPI_ABORT was invoked on rank %d in communicator %s\\nwith errorcode %d." (4.x) / '
       '"MPI_ABORT was invoked on rank %d in communicator %s\\n  Proc: %s\\n  Errorcode: %d" '
       '(5.x; OMPI_NAME_PRINT of the caller) / "MPI_ABORT invoked on rank %d in communicator" '
       "(1.x)", "Open MPI 1.x – 5.0.10 ([mpi-abort] of help-mpi-api.txt)",
       "ompi/mpi/c/abort.c; ompi/mpi/help-mpi-api.txt",
       "reporter: the process that called MPI_Abort; the rank is its rank IN THAT "
       "communicator — the world rank only for MPI_COMM_WORLD or from 5.x's Proc name (its "
       "vpid). It decided to abort, as often after noticing a peer's failure as its own: a "
       "suspect only, never a culprit (read by log_mpirun)",
       r"MPI_ABORT (?:was )?invoked on rank (?P<rank>\d{1,7}) in communicator"
       r"(?:[ \t]{1,4}(?P<comm>[^\n]{1,200}))?", ("invoked on rank",), "mpi_launcher"),
    _p("openmpi.node_lost", "Open MPI mpirun/orterun (4.x), PRRTE prterun (Open MPI 5)",
       '"A critical communication path was lost to:\\n\\n  My name:      %s\\n  Process name: '
       '%s\\n  Node:         %s"', "Open MPI 1.6 – 4.1.6 ([orterun:proc-comm-failed]), PRRTE "
       "3.0.13 – 4.0.0 ([prun:proc-comm-failed])",
       "orte/runtime/orte_quit.c + orte/mca/errmgr/default_hnp (the state is set only for a "
       "DAEMON: 'Comm failure: daemon %s - aborting'); prrte src/runtime/prte_quit.c + "
       "src/mca/errmgr/dvm",
       "reporter: the launcher; the process named is a launcher DAEMON ([[job,0],d] / "
       "[nspace@0,d]: d is the daemon's index, one per node), never an MPI rank: the node it "
       "ran on died or its network failed. Which ranks ran there the line does not say — no "
       "culprit, a rankless stall (read by log_rankless)",
       r"A critical communication path was lost to", ("critical communication path",),
       "rankless"),
    _p("slurm.srun.launch_failed", "Slurm srun (step launch)",
       '"task %u launch failed: %s" (srun: error: …)', "23.02 – 26.05 (all read)",
       "src/api/step_launch.c (_launch_handler: the node's slurmd answered RESPONSE_LAUNCH_TASKS "
       "with an error, once per task of that node)",
       "reporter: srun; task r (its SLURM_PROCID: the global rank of a one-task-per-rank step) "
       "was never started on its node — its node's failure, and every task of that node is "
       "listed: suspects (read by log_srun)",
       r"\btask (?P<rank>\d{1,7}) launch failed: (?P<why>[^\n]{1,200})", ("launch failed",),
       "srun"),
    _p("slurm.srun.launch_timeout", "Slurm srun (step launch)",
       '"timeout waiting for task launch, started %d of %d tasks"', "23.02 – 26.05 (all read)",
       "src/api/step_launch.c (slurm_step_launch_wait_start)",
       "reporter: srun; some nodes never answered the launch: how many tasks started, not "
       "which ones — a rankless stall at launch (read by log_rankless)",
       r"timeout waiting for task launch, started (?P<n>\d{1,7}) of (?P<of>\d{1,7}) tasks",
       ("timeout waiting for task launch",), "rankless"),
    # --------------------------------------------------------- Horovod's stall inspector
    _p("horovod.stall_report", "Horovod (stall inspector, coordinator rank 0)",
       '"One or more tensors were submitted to be reduced, gathered or broadcasted by subset of '
       'ranks and are waiting for remainder of ranks for more than " N " seconds. This may '
       'indicate that different ranks are trying to submit different tensors or that only '
       'subset of ranks is submitting tensors, which will cause deadlock. " then, by release: '
       '"Stalled ops: " and "<tensor> [ready ranks: 4, 6, 1]" joined by ", " on ONE line '
       '(0.9.0-0.13.6) / "Stalled ops:" and one "<tensor> [missing ranks: 1, 2]" per line '
       '(0.13.7-0.16.1; 0.16.0-0.16.1 glue the first to "Stalled ops:") / "Stalled ranks:" '
       '(0.16.2-0.20.0) or "Missing ranks:" (0.20.1+) and one line per rank '
       '"<rank>[!]: [<tensor>, … ...]"',
       "0.9.0+ (tensorflow/mpi_ops.cc 0.9-0.11, common/operations.cc 0.12-0.16, "
       "common/stall_inspector.cc 0.17+)",
       "horovod/common/stall_inspector.cc, operations.cc (CheckForStalledTensors)",
       "reporter: the coordinator (rank 0), a witness; per tensor, the ranks that have NOT "
       "submitted it while others have (the others wait for them). The ranks missing a tensor, "
       "when a minority, are stragglers; submitters that are a minority AND lack what the "
       "others sent ran another code path (the odd one); a tensor most ranks lack while its "
       "submitters lack nothing names nobody (multi-line, read by log_horovod)",
       r"submitted to be reduced, gathered or broadcasted by subset of ranks", ("subset of ranks",),
       "horovod_head"),
    _p("horovod.stall_rank_line", "Horovod (stall inspector)",
       '"\\n" rank ["!"] ": [" tensor {", " tensor} [" ..."] "]" ("!": stalled past '
       'HOROVOD_STALL_SHUTDOWN_TIME_SECONDS, Horovod shuts down)', "0.16.2+",
       "horovod/common/stall_inspector.cc",
       "one rank that has not submitted the listed tensors (at most six names are printed)",
       r"^\s*(?P<rank>\d{1,7})(?P<bang>!)?: \[(?P<tensors>[^\]]{0,4000})\]?\s*$", (": [",),
       "horovod_line"),
    _p("horovod.stall_op_line", "Horovod (operations.cc, before the stall inspector)",
       'tensor_name " [missing ranks: " r {", " r} "]"', "0.13.7-0.16.1",
       "horovod/common/operations.cc (CheckForStalledTensors)",
       "one tensor and the ranks that have not submitted it (every rank of [0, size) not "
       "ready is listed, so an unlisted rank submitted it)",
       r"(?<![^\s,\[\]])(?P<tensor>[^\s,\[\]]{1,500}) "
       r"\[missing ranks: (?P<ranks>\d{1,7}(?:, ?\d{1,7}){0,4096})"
       r"\]", ("missing ranks:",), "horovod_line"),
    _p("horovod.stall_ready_line", "Horovod (mpi_ops.cc / operations.cc, the first releases)",
       'tensor_name " [ready ranks:" (" " r {", " r}) "]", the tensors joined by ", " on the '
       'report\'s one line', "0.9.0-0.13.6",
       "horovod/tensorflow/mpi_ops.cc (0.9-0.11), horovod/common/operations.cc (0.12-0.13.6) "
       "(CheckForStalledTensors)",
       "one tensor and the ranks that HAVE submitted it (in arrival order); the ranks missing it "
       "are the others of the job — by omission, so the world size decides who they are: "
       "without it only the gaps below the highest ready rank are known",
       r"(?<![^\s,\[\]])(?P<tensor>[^\s,\[\]]{1,500}) "
       r"\[ready ranks: ?(?P<ranks>\d{1,7}(?:, ?\d{1,7}){0,4096})"
       r"\]", ("ready ranks:",), "horovod_line"),
    _p("horovod.shut_down", "Horovod (operations.cc / common.h SHUT_DOWN_ERROR)",
       '"Horovod has been shut down. This was caused by an exception on one of the ranks or an '
       'attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished '
       'execution. If the shutdown was caused by an exception, you should see the exception in '
       'the log before the first shutdown message."', "0.13+ (UnknownError; Aborted in later "
       "releases; HorovodInternalError in elastic mode)",
       "horovod/common/common.h, operations.cc (SHUT_DOWN_ERROR)",
       "reporter: a victim — ANOTHER rank raised or finished early (or the stall inspector "
       "shut the job down); never the reporter's own failure",
       r"Horovod has been shut down", ("horovod has been shut down",), "horovod_shutdown"),
    # ------------------------------------------------- torch's Flight Recorder analyzer (text)
    _p("torch.fr_trace.not_joined", "torch fr_trace / torchfrtrace (Flight Recorder analyzer)",
       '"Not all ranks joining collective, sequence number: %s" (2.7+) / "Not all ranks '
       'joining collective %s at entry %s" (2.5-2.6) then "group info: %s", "collective: %s", '
       '"missing ranks: %s", … "expected ranks: %s" / "Not all ranks joining collective for '
       'group {pg}:{desc} collective {op}" "Missing ranks are {…}" (2.4, tools/flight_recorder)',
       "2.4 (tools/flight_recorder, print); 2.5-2.6 (logger); 2.7+ "
       "(torch/distributed/flight_recorder)",
       "torch/distributed/flight_recorder/components/utils.py (error_analysis), types.py "
       "(EntryState.log)",
       "reporter: the analyzer over every rank's dump; culprits: the ranks whose dump holds no "
       "entry for a collective the others recorded — its oldest such block may be a ring that "
       "dropped the entry, and a rank missing from one group while it is present (waiting) in "
       "another block's collective is a victim (multi-line, read by log_frtrace)",
       r"Not all ranks joining collective", ("not all ranks joining",), "fr_trace"),
    _p("torch.fr_trace.culprit", "torch fr_trace / torchfrtrace (Flight Recorder analyzer)",
       '"Collective sequence number: %s has errors" (2.7+) / "Collective %s at entry %s '
       'errors" (2.5-2.6) then "error msg|error message: Culprit rank %s; Error type: '
       '%s[, detail]" joined by ", "',
       "2.5+", "torch/distributed/flight_recorder/components/utils.py (error_analysis), "
       "types.py (MatchInfo)",
       "every rank whose entry differs from the FIRST rank's (fr_trace assumes that rank "
       "right): culprits are the smaller side of the vote — when most of the group is listed, "
       "the reference rank is the odd one (multi-line, read by log_frtrace)",
       r"Culprit rank (?P<rank>\d{1,7}); Error type: (?P<type>[A-Z_]+)", ("culprit rank",),
       "fr_trace"),
    _p("torch.fr_trace.missing_dumps", "torch fr_trace / torchfrtrace (Flight Recorder analyzer)",
       '"Missing dump files from ranks {…}" (AssertionError) / "We cannot decide what\'s wrong '
       'with this collective entry because we missed FR dumps from ranks (%s) …"', "2.5+",
       "torch/distributed/flight_recorder/components/utils.py",
       "the ranks that left no dump: suspects, never culprits (a dump may just not have been "
       "collected)",
       r"Missing dump files from ranks (?P<ranks>\{[\d, ]{1,8000}\})|missed FR dumps from ranks "
       r"\((?P<ranks2>\{?[\d, ]{1,8000}\}?)\)", ("missing dump files", "missed fr dumps"),
       "fr_trace"),
    # ------------------------------------------------------- torchelastic: who was still alive
    _p("torchelastic.closing_signal", "torch.distributed.elastic",
       '"Sending process %s closing signal %s"', "1.9+",
       "torch/distributed/elastic/multiprocessing/api.py (SubprocessContext._close)",
       "reporter: the agent of one node; the process (by pid) was still RUNNING when another "
       "local worker failed — it did not die of its own watchdog",
       r"Sending process (?P<pid>\d{1,10}) closing signal (?P<sig>SIG[A-Z]+)",
       ("closing signal",), "elastic_closing"),
    _p("torchelastic.node_layout", "torch.distributed.elastic",
       '"[%(role)s] Rendezvous complete for workers. Result:" … "  group_world_size=%s" '
       '"  local_ranks=%s" "  global_ranks=%s" (agent/server/api.py _rendezvous) / "Starting '
       'elastic_operator with launch configs:" … "  max_nodes        : %s" "  nproc_per_node   '
       ': %s" (launcher/api.py launch_agent)', "1.9+",
       "torch/distributed/elastic/agent/server/api.py (_rendezvous, _assign_worker_ranks), "
       "torch/distributed/launcher/api.py (launch_agent)",
       "how one node's local ranks map to global ranks: global_ranks beside local_ranks map them "
       "directly; group_world_size=1 or max_nodes 1 (one agent), or nproc_per_node equal to the "
       "known world size, mean a single node where local rank == global rank; anything else "
       "leaves a local rank's global rank undecided (global = the node's offset + local rank)",
       r"\bgroup_world_size=(?P<nodes>\d{1,7})\b|\bmax_nodes\s*:\s*(?P<maxn>\d{1,7})\b"
       r"|\bnproc_per_node\s*:\s*(?P<nproc>\d{1,7})\b"
       r"|\b(?P<which>local|global)_ranks=\[(?P<ranks>[\d, ]{0,40000})\]",
       ("group_world_size=", "max_nodes", "nproc_per_node", "_ranks=["), "elastic_layout"),
    _p("torchelastic.abort_split", "torch.distributed.elastic",
       'one node\'s ChildFailedError table: ranks with "exitcode  : -6 (pid: …)" / "traceback : '
       'Signal 6 (SIGABRT) received by PID …" vs its other local ranks, still running (listed '
       'with -15 SIGTERM from 2.5, or absent and named by "Sending process … closing signal")',
       "1.9+ (terminated ranks listed in Failures from torch 2.5)",
       "torch/distributed/elastic/multiprocessing/api.py (_poll, _close), errors/__init__.py",
       "split: a watchdog timeout ends every rank that waits in the stuck collective with "
       "SIGABRT; a rank that never entered it has nothing pending, its watchdog never fires "
       "and it is still alive when the agent stops the node — the minority left alive are "
       "the stragglers of that node (read by log_elastic)",
       r"Signal 6 \(SIGABRT\) received by PID", ("sigabrt",), "elastic_summary"),
    _p("log.busy_rank", "tqdm progress bar beside c10d watchdog timeouts (a reading, not a "
       "message)",
       "'{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, "
       "{rate_fmt}{postfix}]' (tqdm's default bar_format) in the stream where every rank but "
       "one prints a watchdog timeout of the same collective", "tqdm 4.x; torch 1.8+",
       "tqdm/std.py (format_meter); torch c10d ProcessGroupNCCL.cpp (WorkNCCL::checkTimeout)",
       "the one rank of a known world with no stall line at all, while a progress bar keeps "
       "running in the same stream (rank 0 tokenizing under main_process_first / zero_first "
       "while the others wait): PRESUMED to be the busy rank that owns the bar — the bar "
       "carries no rank — so never more than low",
       r"(?P<pct>\d{1,3})%\|[^|\n]{0,200}\| *\d+(?:\.\d+)?[kMG]?/\d+(?:\.\d+)?[kMG]? \[\d",
       ("%|",), K_READING),
    _p("log.rank0_absent", "c10d watchdog timeouts / TCPStore waits of ranks 1..k, none of rank "
       "0 (a reading, not a message)",
       "the watchdog timeout of one collective (one SeqNum) printed by every rank 1..k (k >= 2), "
       "or a store wait ('wait timeout after …ms', socket.cpp waitForInput) by ranks 1..k "
       "(k >= 1), and no line at all from rank 0, in logs that do not state the world size",
       "torch 1.8+", "torch c10d ProcessGroupNCCL.cpp (WorkNCCL::checkTimeout), TCPStore.cpp, "
       "socket.cpp; read by log_absent_zero",
       "rank 0 exists in every job and is the one rank certainly absent from the reporters: "
       "PRESUMED the rank the others wait for (late, stuck or dead without a line); ranks above "
       "k may be missing as well (the world size decides) — never more than low",
       # the lines it reads (never scanned by this id: no triggers; the rule reads the events)
       r"Watchdog caught collective operation timeout|wait timeout after \d{1,12} ?ms|"
       r"waitForInput: socket", (), K_READING),
    # ------------------------------------------- c10d lines that show their reporter only
    # (read by log_c10d_reporter; versions = the torch wheels the inventory read the string
    # from: 1.13.0, 2.0.0, 2.2.0, 2.4.0, 2.6.0, 2.8.0, 2.13.0)
    _p("torch.nccl.watchdog_error", "torch c10d ProcessGroupNCCL",
       '"Exception (either an error or timeout) detected by watchdog at work: " … / '
       '"ProcessGroupNCCL\'s watchdog detected an exception from the local rank." / "Timeout at '
       'NCCL work: " … / "(Watchdog caught exception: " / " found async exception when checking '
       'for NCCL errors: " / " timed out in blocking wait (TORCH_NCCL_BLOCKING_WAIT=1)." / "NCCL '
       'timeout in communicator initialization." / "NCCL timeout when waiting for nonblocking '
       'call to become successful." / "NCCL monitor thread timeout" / "watchdog thread '
       'terminated with unknown exception"',
       "1.13+ (the wording of each release: docs/stalls.md, inventory)", PT_NCCL
       + " (watchdog, checkForNCCLErrors, WorkNCCL::wait, initialization, heartbeat monitor)",
       "reporter: a collective, communicator or wait of ITS OWN failed or timed out (a victim "
       "or the origin — the line cannot tell); names no other rank: a stall shown",
       r"Exception \(either an error or timeout\) detected by watchdog at work|"
       r"watchdog detected an exception from the local rank"
       r"|Timeout at NCCL work|\(Watchdog caught exception|found async exception when checking "
       r"for NCCL errors|timed out in blocking wait|NCCL timeout (?:in communicator "
       r"initialization|when waiting for nonblocking call)|NCCL monitor thread timeout|watchdog "
       r"thread terminated with unknown exception",
       ("watchdog", "timed out", "nccl errors", "nccl timeout", "timeout at nccl",
        "thread timeout"),
       "c10d_reporter"),
    _p("torch.nccl.abort_lines", "torch c10d ProcessGroupNCCL",
       '"… This means that rank has aborted its NCCL communicators previously and is not in a '
       'healthy state." / '
       '"ProcessGroupNCCL monitor thread is disabled, but would have terminated the process" / '
       '"[Rank r] (Watchdog) wrote aborted communicator id to store: " …', "1.13+", PT_NCCL,
       "reporter: its communicator was aborted (after its own error or its watchdog's timeout — "
       "the end of a waiting rank as often as of the failing one): a stall shown, no culprit",
       r"has aborted its NCCL communicators previously|monitor thread is disabled, but would "
       r"have terminated|rote aborted communicator id to store",
       ("abort", "would have terminated"), "c10d_reporter"),
    _p("torch.store.setup_failed", "torch c10d TCPStore / ProcessGroupGloo",
       '"barrier timeout after {}ms, key: {}" (TCPStore::barrier, DistStoreError) / "Gloo '
       'connectFullMesh failed with " … (ProcessGroupGloo) / "UV Store bind failed. useIpv6:{} '
       'code:{} name:{} message:{}" / "UV Store listen failed. …" (TCPStoreLibUvBackend) / '
       '"No ranks successfully processed in monitoredBarrier." (ProcessGroupGloo)',
       "2.0+ (libuv store 2.2+; TCPStore::barrier 2.13)",
       "torch/csrc/distributed/c10d/TCPStore.cpp, TCPStoreLibUvBackend.cpp, ProcessGroupGloo.cpp",
       "reporter: its store barrier or gloo mesh set-up timed out (a victim: some peer never "
       "came), or — bind/listen — the store server on the reporter could not start (its own "
       "failure: the port taken, often by a second job or a leftover process): names no other "
       "rank",
       r"barrier timeout after \d{1,12} ?ms, key: |Gloo connectFullMesh failed with|UV Store "
       r"(?:bind|listen) failed|No ranks successfully processed in monitoredBarrier",
       ("barrier timeout", "connectfullmesh", "uv store", "no ranks successfully"),
       "c10d_reporter"),
    _p("torch.nccl.watchdog_hang", "torch c10d ProcessGroupNCCL",
       '"ProcessGroupNCCL watchdog hang" / "This typically indicates a NCCL/CUDA API (e.g., '
       'CudaEventDestroy) hang blocking the watchdog, " … / "… because we want to wait longer to '
       'verify there is indeed a watchdog hang." / "Flight recorder dump in heartbeatMonitor" / '
       '"If you suspect the watchdog is not actually stuck and a longer timeout would help, " …',
       "2.2+", PT_NCCL + " (HeartbeatMonitor)",
       "reporter: its own watchdog thread is stuck in a CUDA/NCCL call — the reporter is wedged "
       "(a suspect, as torch.nccl.heartbeat says: a hint, not a verdict)",
       r"ProcessGroupNCCL watchdog hang|hang blocking the watchdog|verify there is indeed a "
       r"watchdog hang|Flight recorder dump in heartbeatMonitor|suspect the watchdog is not "
       r"actually stuck", ("watchdog", "heartbeatmonitor"), "c10d_reporter"),
    _p("torch.nccl.dump_lines", "torch c10d ProcessGroupNCCL / Flight Recorder",
       '"Received a global dump signal from rank " r / "ProcessGroupNCCL\'s watchdog detected a '
       'dump signal from rank " r / "Received a dump signal from this local rank and will " … / '
       '"Broadcasting flight recorder dump signal to other processes via TCPStore." / "First '
       'watchdog to set the dump signal." / "First PG on this rank detecting the dump signal '
       'through tcpstore." / " giving time for flight recorder dumps to finish." / '
       '"ProcessGroupNCCL preparing to dump debug info." / "ProcessGroupNCCL dumping nccl trace '
       'to " … / "Flight Recorder trace successfully dumped." / "Broadcasting signal " signal " '
       'to other ranks via TCPStore." (2.8: broadcastSignal(…, EXCEPTION_DUMP, …), the '
       'initiator\'s LOG(INFO) once its watchdog caught the error)', "2.2+", PT_NCCL,
       "reporter: an initiator (its own watchdog fired) or an observer (told through the store); "
       "'from rank r' names the rank whose watchdog fired first — a victim that timed out, "
       "never a culprit",
       r"dump signal from (?:rank (?P<initiator>\d{1,7})|this local rank)|Broadcasting flight "
       r"recorder dump signal|First watchdog to set the dump signal|detecting the dump signal "
       r"through tcpstore|giving time for flight recorder dumps|preparing to dump debug info|"
       r"dumping nccl trace to|Flight Recorder trace successfully dumped|Broadcasting signal "
       r"\S{1,80} to other ranks via TCPStore",
       ("dump", "flight recorder", "other ranks via tcpstore"), "c10d_reporter", re.I),
    _p("torch.nccl.health_check", "torch c10d ProcessGroupNCCL",
       '"ProcessGroupNCCL: Health check failure: Failed to initialize NCCL communicator on rank " '
       'r', "1.13+ (TORCH_ENABLE_NCCL_HEALTH_CHECK=1)", PT_NCCL + " (runHealthCheck)",
       "rank r (the reporter) could not create its NCCL communicator at init: its own failure "
       "or its peers' absence — a suspect, never more",
       r"Health check failure: Failed to initialize NCCL communicator on rank (?P<rank>\d{1,7})",
       ("health check failure",), "c10d_reporter"),
    _p("torch.store_collectives.missing", "torch c10d StoreCollectives (control collectives)",
       '"barrier failed -- missing ranks: " i ", " … e.what() (also "all_gather failed -- '
       'missing ranks: " …)', "2.4+", "torch/csrc/distributed/c10d/control_collectives/"
       "StoreCollectives.cpp",
       "reporter: gave up waiting; the listed ranks had not set their key in the store when "
       "it looked (named by reference, ranks of the StoreCollectives world): the ranks every "
       "report lists are named at low (log_c10d_reporter)",
       r"(?:barrier|all_gather|gather|scatter|all_sum) failed -- missing ranks: (?P<ranks>\d{1,7}"
       r"(?:, ?\d{1,7}){0,4096})", ("missing ranks",), "c10d_reporter"),
    _p("torch.gloo.check_rank_logs", "torch c10d ProcessGroupGloo",
       '"… for send/recv from rank 0. Please check rank 0 logs for faulty rank." (the tail of '
       'the monitoredBarrier peer message when its head is cut)', "1.10+", PT_GLOO,
       "reporter: a non-coordinator of monitored_barrier; rank r (its coordinator) is named by "
       "reference — pointed at, low (read by log_monitored like the full message, whose "
       "reporter it lacks)",
       r"Please check rank (?P<root>\d{1,7}) logs for (?:the )?faulty rank", ("faulty rank",),
       "c10d_reporter"),
    _p("torch.detail.mismatch_hint", "torch c10d ProcessGroupWrapper / ProcessGroupNCCL",
       '"Detected mismatch between collectives on ranks. Rank " … (the fingerprints cut) / "… '
       'sizes used across ranks, the order of collectives is not same for all ranks …"', "1.10+",
       "torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp, ProcessGroupNCCL.cpp",
       "reporter: ranks disagree on a collective; which ranks, only the fingerprints (or the "
       "Flight Recorder) say — a split shown, no culprit",
       r"Detected mismatch between collectives on ranks|order of collectives is not same for "
       r"all ranks", ("mismatch between collectives", "order of collectives"), "c10d_reporter"),
    _p("torchelastic.worker_wedged", "torch.distributed.elastic",
       '"[%s] Worker pid=%s entered uninterruptible sleep (D-state); …" / "[%s] Worker pid=%s '
       'stuck in uninterruptible sleep (D-state) for %.1fs …" / "Process %s did not exit after '
       '%s within %ss; … Worker may be in uninterruptible kernel sleep …"', "2.13",
       "torch/distributed/elastic/multiprocessing (2.13)",
       "the agent saw a worker process (by pid; the '[%s]' in front is the worker group's ROLE) "
       "wedged in the kernel (a GPU or NIC driver wait): a worker of that node is stuck; which "
       "rank, the line does not say — a rankless stall (read by log_rankless)",
       r"Worker pid=(?P<pid>\d{1,10}) (?:entered|stuck in) uninterruptible sleep|"
       r"(?:Process (?P<pid2>\d{1,10}) )?did not exit after [^\n]{0,80}? within [^\n]{0,40}?; "
       r"abandoning", ("uninterruptible", "did not exit"), "rankless"),
    # ------------------------------------- NCCL WARNs that name ranks (log_ncclwarn_ranks)
    _p("nccl.warn.duplicate_checkin", "NCCL / RCCL",
       '"Bootstrap Root : rank %d of %d ranks has already checked in"', "2.18.3 – 2.30.7",
       "src/bootstrap.cc (bootstrapRoot)",
       "reporter: the bootstrap root (the process of rank 0 of that communicator); two "
       "processes claimed rank r — a duplicate launch (a doubled or restarted worker, two jobs "
       "on one unique id), never a straggler; r a suspect",
       r"Bootstrap Root : rank (?P<rank>\d{1,7}) of (?P<n>\d{1,7}) ranks has already checked in",
       ("already checked in",), "nccl_warn_ranks"),
    _p("nccl.warn.duplicate_gpu", "NCCL / RCCL",
       '"Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx" (2.18.3 – '
       '2.28.7) / "Multiple Ranks are using the same GPU/Partition. Set '
       'NCCL_MULTI_RANK_GPU_ENABLE=1 …" (2.30.7) / "… communicator has multiple ranks using the '
       'same NVML device. This is not compatible with NCCL_NVLS_ENABLE=1." (2.30.7)',
       "2.18.3 – 2.30.7", "src/init.cc, src/transport/nvls.cc",
       "the named ranks were launched on one GPU (a launch misconfiguration: CUDA_VISIBLE_DEVICES "
       "or LOCAL_RANK): suspects; the communicator never formed",
       r"Duplicate GPU detected : rank (?P<a>\d{1,7}) and rank (?P<b>\d{1,7}) both on CUDA "
       r"device|Multiple Ranks are using the same GPU|multiple ranks using the same NVML device",
       ("duplicate gpu", "same gpu", "same nvml device"), "nccl_warn_ranks"),
    _p("nccl.warn.version_mismatch", "NCCL / RCCL",
       '"Mismatched NCCL version detected : rank %d version %d rank %d version %d"',
       "2.24.3 – 2.30.7", "src/init.cc",
       "the two named ranks run different NCCL releases (mixed images or wheels): one of them "
       "differs — both suspects, which one the line cannot say",
       r"Mismatched NCCL version detected : rank (?P<a>\d{1,7}) version \d{1,9} rank "
       r"(?P<b>\d{1,7}) version \d{1,9}", ("mismatched nccl version",), "nccl_warn_ranks"),
    _p("nccl.warn.peer_closed", "NCCL / RCCL",
       '"socketProgress: Connection closed by remote peer %s" (2.18.3 – 2.30.7, '
       'src/misc/socket.cc) / "Net : Connection closed by remote peer %s" (2.10.3 – 2.14.3: '
       'socket.h, then misc/socket.cc) / "Net : Connection closed by remote peer" (2.7.8 – '
       '2.8.4, socket.h: no address)', "2.7.8 – 2.30.7",
       "src/misc/socket.cc, src/include/socket.h",
       "reporter: a victim — the peer at that address closed the socket (it died or aborted); "
       "the peer is an address, not a rank (2.7 – 2.8 print no address)",
       r"(?:socketProgress|Net ?): Connection closed by remote peer(?: (?P<peer>[^\s,]{1,255}))?",
       ("closed by remote peer",), "nccl_warn_ranks"),
    _p("nccl.warn.no_path", "NCCL / RCCL",
       '"No transport found for rank %d[%lx] -> rank %d[%lx]" (transport.cc) / "Rank %d has no '
       'transport for %s peer %d on channel %d/%d" (proxy.cc) / "Rank %d requires NIC %d but '
       'that NIC is not available for rank %d" (graph/search.cc, 2.18 – 2.20) / "Set CPU '
       'affinity : unable to find GPU/CPU for rank %d" (graph/topo.cc, 2.18 – 2.22) / '
       '"Detected mixed local (Coll)Net device counts across ranks …" / "User requested GIN but '
       'not all ranks in the communicator support GIN" / "Elastic GIN: rank %d …" (2.30.7)',
       "2.18.3 – 2.30.7", "src/transport.cc, src/proxy.cc, src/graph/*.cc, src/init.cc, "
       "src/dev_runtime*.cc",
       "a topology or configuration that does not connect the named ranks (no path, no NIC, "
       "nodes set up differently): the communicator cannot form — the named ranks suspects",
       r"No transport found for rank (?P<a>\d{1,7})\[[0-9a-fx]{0,18}\] -> rank (?P<b>\d{1,7})|"
       r"Rank (?P<a2>\d{1,7}) has no transport for \w{1,12} peer (?P<b2>\d{1,7})|Rank "
       r"(?P<a3>\d{1,7}) requires NIC \d{1,4} but that NIC is not available for rank "
       r"(?P<b3>\d{1,7})|unable to find GPU/CPU for rank (?P<a4>\d{1,7})|Detected mixed local "
       r"(?:CollNet|Net) device counts across ranks|not all ranks in the communicator support "
       r"GIN|Elastic GIN: rank (?P<a5>\d{1,7}) (?:has|segment)",
       ("no transport", "requires nic", "unable to find gpu/cpu", "mixed local", "support gin",
        "elastic gin"), "nccl_warn_ranks"),
    _p("nccl.warn.api_check", "NCCL / RCCL",
       '"peer %d is not within valid range of ranks %d." / "ncclPutSignal: peerWin is NULL" / '
       '"improper usage of ncclCommInitRank: nId = %d, nranks=%d" / "ncclCommGrow: …" / '
       '"MemManager: …" / "ncclProxyConnect: peerIndex|tpRank %d out of bounds …" / "RMA CE: '
       'peerBuff is NULL …" / "RMA: trying to send to non-connected peer %d" / "Rma Proxy create '
       'context: invalid rank stride …" / "Unable to use GIN: Peermem is not supported …" / '
       '"rank %d invalid IPC peerIndex|peerRank …"',
       "2.24.3 – 2.30.7 (most 2.30.7 only)",
       "src/dev_runtime.cc, enqueue.cc, init.cc, mem_manager.cc, proxy.cc, rma/*.cc, "
       "transport/net_ib/gin.cc, transport/p2p.cc",
       "reporter: its NCCL refused a call or failed an internal check (an API misuse or a "
       "bug on that process): the reporter is a suspect, the peers wait on it",
       r"peer -?\d{1,10} is not within valid range of ranks|ncclPutSignal: peerWin is NULL|"
       r"improper usage of ncclCommInitRank|ncclCommGrow: (?:new ranks must pass|total ranks)|"
       r"MemManager: (?:Buffer ptr=\S{1,40} already exported|Cannot re-import peer buffer|"
       r"Unknown handle type)|ncclProxyConnect: (?:peerIndex|tpRank) -?\d{1,10} out of bounds|"
       r"RMA CE: peerBuff is NULL|RMA: trying to send to non-connected peer|Rma Proxy create "
       r"context: invalid rank stride|Unable to use GIN: Peermem is not supported|invalid IPC "
       r"peer(?:Index|Rank)",
       ("valid range of ranks", "peerwin", "improper usage", "ncclcommgrow", "memmanager",
        "out of bounds", "peerbuff", "non-connected peer", "rank stride", "unable to use gin",
        "invalid ipc peer"), "nccl_warn_ranks"),
    # ----------------------------------------------------------------- wrappers / launchers
    _p("launcher.world_size", "torchrun / Lightning / DeepSpeed / Megatron",
       '"world_size=N", "WORLD_SIZE=N", Lightning "Initializing distributed: GLOBAL_RANK: r, '
       'MEMBER: m/N", torchelastic\'s "Rendezvous complete for workers. Result: … '
       'global_world_sizes=[N, …]" (elastic/agent/server/api.py _rendezvous, 1.9+)', "any",
       "launcher logs",
       "the world size (so a rank that never spoke can be counted)",
       r"\bworld[_ ]size\s*[=:]\s*(?P<n>\d+)\b|\bWORLD_SIZE\s*=\s*(?P<n2>\d+)\b|"
       r"GLOBAL_RANK: \d+, MEMBER: \d+/(?P<n3>\d+)|\bglobal_world_sizes=\[(?P<n4>\d+)",
       ("size", "member:"), K_WORLD, re.I),
    # ------------------------------------------- fresh5 (issue f5): read off its dev half only
    _p("nccl.ib.completion_error_text", "NCCL / RCCL (IB transport, the WARN's text alone)",
       '"NET/IB : Got completion from peer %s with error %d, opcode %d, len %d, vendor err %d" '
       '(2.14 – 2.20) / "… with status=%d opcode=%d len=%d vendor err %d (%s)…" (2.21 – 2.29) / '
       '"NET/IB: … with status=%s(%d) opcode=%s(%d) vendor_err=%u …" (2.30.7) — without the '
       '"host:pid:tid [dev] file:line NCCL WARN " header: the text torch prints after "Last '
       'error:" (ncclGetLastError) and users paste in prose',
       "2.14.3 – 2.30.7 (read at v2.14.3-1, v2.18.3-1, v2.21.5-1, v2.27.3-1, v2.30.7-1)",
       "src/transport/net_ib.cc (ncclIbTest; 2.30.7 net_ib/p2p.cc, net_ib/gin.cc); src/debug.cc "
       "(ncclDebugLog keeps every WARN's text, without the header, in ncclLastError even when "
       "NCCL_DEBUG is unset)",
       "reporter: its IB transport got an ERROR work completion on a queue pair to the peer at "
       "that address (status 12: retry exceeded, the peer or the link stopped answering; 5: "
       "flushed after an earlier error) — a fabric failure seen from one side, usually a "
       "victim's view; the peer is an address, not a rank: nobody named. The TRACE line of a "
       "normal completion (\"Got completion from peer … wr_id=…\") carries no vendor err and is "
       "not read",
       r"(?<!NCCL WARN )NET/IB\w{0,8}(?:/GIN)? ?: ?Got completion from peer (?P<peer>\S{1,255}) "
       r"with (?:error -?\d{1,9}|status=)[^\n]{0,160}?vendor[ _]err",
       ("got completion from peer",), "fabric"),
    _p("torch.c10.pg_nccl_error_line", "torch c10d ProcessGroupNCCL (c10 logging prefix)",
       '"[E" [mmdd hh:mm:ss.ns] " ProcessGroupNCCL.cpp:" line "] " … / "[F…" — any ERROR or FATAL '
       'line ProcessGroupNCCL logs (LOG(ERROR) / LOG(FATAL)); file:line is the LOG statement\'s',
       "1.13 – 2.10",
       "c10/util/Logging.cpp (MessageLogger: \"[\" + severity letter FEWIV + optional "
       "timestamp + \" \" + file:line + \"] \"); torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
       "reporter: only which LOG statement printed the line (same build, same file:line). At the "
       "call site of other ranks' read 'Watchdog caught collective operation timeout' lines "
       "(WorkNCCL's timeout, printed only for the rank's OWN timed-out work) the rank printed "
       "the watchdog timeout too — a waiter, not silent outside NCCL, still not named (its "
       "message was cut). At any other call site nothing: the heartbeat monitor of every rank, a "
       "straggler outside NCCL included, logs the dump signal (ERROR) and its FATAL kill "
       "(read by log_pg_error; context only)",
       r"\[[EF](?:\d{3,4} \d{2}:\d{2}:\d{2}\.\d{1,9})? ?(?:\d{1,9} )?"
       r"ProcessGroupNCCL\.cpp:(?P<line>\d{1,6})\]",
       ("processgroupnccl.cpp:",), "pg_nccl_error"),
    # ------------------------------------------- fresh5 round c (issue f6): four messages the
    # held-out inference / transport cases showed unread (those cases are marked tuned on)
    _p("nccl.warn.comm_not_ready", "NCCL / RCCL",
       '"%s:%d:%d [%d] init.cc:%d NCCL WARN Attempt to use communicator before the previous '
       'operation returned ncclSuccess" (ncclCommEnsureReady)',
       "2.14.3 – 2.30.7 (read at v2.14.3-1, v2.18.3-1, v2.21.5-1, v2.24.3-1, v2.26.2-1, "
       "v2.27.3-1, v2.30.7-1; absent at v2.13.4-1)",
       "src/init.cc (ncclCommEnsureReady, called first by every collective's ncclEnqueueCheck in "
       "src/enqueue.cc and by the communicator API calls); prefix src/debug.cc",
       "reporter: it called NCCL on a communicator whose asynchronous state was not ncclSuccess "
       "— up to 2.24 any earlier error of that communicator (a failed or aborted operation, a "
       "remote error), from 2.26 only a non-blocking init or operation still in progress — so "
       "the communicator was already broken or not ready before this call: a follow-on error, "
       "never the first one; the line names a process (host:pid) and a CUDA device, not a rank: "
       "nobody named",
       r"NCCL WARN Attempt to use communicator before the previous operation returned "
       r"ncclSuccess", ("attempt to use communicator",), "nccl_warn"),
    _p("nccl.socket.connect_error_text", "NCCL / RCCL (socket layer, the WARN's text alone)",
       '"Net : Connect to %s failed : %s" / "Net : Call to recv from %s failed : %s" (2.14) / '
       '"socketStartConnect: Connect to %s failed : %s" / "socketProgressOpt: Call to recv from '
       '%s failed : %s" (2.18 – 2.23) / "%s: Connect to %s failed : %s" (2.24 – 2.26) / '
       '"%s: connect to %s failed : %s", "socketProgressOpt: Call to %s %s failed : %s" (2.27) / '
       '"ncclOsSocketProgressOpt: Call to …" (2.30, src/os/linux.cc) — without the "host:pid:tid '
       '[dev] file:line NCCL WARN " header: the text ncclGetLastError returns and torch prints '
       'after "Last error:", which users paste in prose',
       "2.14.3 – 2.30.7 (read at v2.14.3-1, v2.18.3-1, v2.21.5-1, v2.23.4-1, v2.24.3-1, "
       "v2.27.3-1, v2.30.7-1)",
       "src/misc/socket.cc (socketConnectCheck / socketStartConnect / socketProgressOpt; 2.30.7 "
       "src/os/linux.cc); src/debug.cc (ncclDebugLog keeps every WARN's text, without the "
       "header, in ncclLastError)",
       "reporter: its connect() to, or recv/send with, the socket at that address failed with "
       "that errno (Connection refused / reset, Software caused connection abort …) — the "
       "bootstrap or a socket transport broke, seen from one side; often a secondary effect of "
       "another failure (nccl#1515's maintainer); the peer is an address, not a rank: nobody "
       "named. The header form is left to nccl.warn.failure (one event per line)",
       r"(?<!NCCL WARN )(?:\b(?:socketStartConnect|socketPollConnect|socketConnectCheck|"
       r"ncclSocketConnect|ncclOsSocketConnect)|Net ?): ?[Cc]onnect to (?P<peer>\S{1,255}) "
       r"failed : [A-Za-z]|"
       r"(?<!NCCL WARN )(?:\b(?:socketProgressOpt|ncclOsSocketProgressOpt)|Net ?): ?Call to "
       r"(?:recv from|send to) (?P<peer2>\S{1,255}) failed : [A-Za-z]",
       ("connect to", "call to recv from", "call to send to"), "fabric"),
    # (read by log_serving: inference / RL frameworks' own lines; none names a rank)
    _p("vllm.shm_broadcast.no_block", "vLLM MessageQueue (shm_broadcast; SGLang keeps a copy)",
       '"No available block found in %s second. " (logger.warning / print, 0.5.x) / "No '
       'available shared memory broadcast block found in %s second." (logger.debug) / "No '
       'available shared memory broadcast block found in %s seconds. This typically happens '
       'when some processes are hanging or doing some time-consuming work (e.g. compilation, '
       'weight/kv cache quantization)." (INFO, later releases)',
       "0.5.x – 0.20 (the index's copies of shm_broadcast.py; release tags not readable here: "
       "the repository is over the fetch limit)",
       "vllm/distributed/device_communicators/shm_broadcast.py (MessageQueue.acquire_write and "
       "acquire_read; create_from_process_group: writer_rank=0 of the group writes)",
       "reporter: one process of a vLLM group waited that long on the shared-memory ring "
       "buffer — the SAME text is printed by the writer (the group's writer_rank, 0 by default: "
       "the driver / engine core broadcasting the scheduler's work; a block not yet read by "
       "every reader) and by a reader (no new block written), so the line does not say which "
       "side waited, nor on whom; slow work (compilation, quantization) prints it too: a wait "
       "shown, nobody named",
       r"No available (?:shared memory broadcast )?block found in ?(?P<secs>\d{1,9}"
       r"(?:\.\d{1,6})?) seconds?", ("no available",), "serving_rankless"),
    _p("ray.raylet.worker_died", "Ray raylet (node_manager)",
       '"A worker died or was killed while executing a task by an unexpected system error. To '
       'troubleshoot the problem, check the logs for the dead worker. RayTask ID: … Worker ID: … '
       'Node ID: … Worker IP address: … Worker port: … Worker PID: … [Worker exit type: … '
       'Worker exit detail: …]" (pushed to the driver, printed "(raylet) …" or by worker.py)',
       "1.x – 2.x (\"Lease ID\" for \"RayTask ID\" in the newest; exit type and detail from 2.x)",
       "src/ray/raylet/node_manager.cc (NodeManager::DisconnectClient: only for a worker "
       "disconnected with SYSTEM_ERROR)",
       "a Ray worker process (an actor: a vLLM worker, a training rank of an RL trainer) died "
       "by a system error — killed (OOM killer, SIGKILL), crashed (SIGSEGV) or its connection "
       "lost; the line names it by worker id, IP and PID, not by rank: nobody named",
       r"A worker died or was killed while executing a task by an unexpected system error",
       ("a worker died or was killed",), "serving_rankless"),
    _p("ray.actor.worker_died", "Ray GCS (actor manager) death cause",
       '"The actor is dead because its worker process has died. Worker exit type: %s Worker exit '
       'detail: %s" (ActorDiedErrorContext.error_message; exit types SYSTEM_ERROR, USER_ERROR, '
       'NODE_OUT_OF_MEMORY read; INTENDED_USER_EXIT / INTENDED_SYSTEM_EXIT are a normal end and '
       'are not)',
       "2.x",
       "src/ray/gcs/gcs_server/gcs_actor_manager.cc (GenWorkerDiedCause); the text follows "
       "python/ray/exceptions.py ActorDiedError's \"The actor died unexpectedly before finishing "
       "this task.\"",
       "the worker process of an actor died with a failing exit type: the process is named by "
       "its actor id / pid / ip, not by rank: nobody named",
       r"The actor is dead because its worker process has died\. ?Worker exit type: "
       r"(?P<exit>SYSTEM_ERROR\w*|USER_ERROR|NODE_OUT_OF_MEMORY)",
       ("worker process has died",), "serving_rankless"),
    _p("ray.actor_died_error", "Ray core worker (the caller of a dead actor)",
       '"ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task." '
       '(RayActorError before 2.x)',
       "1.x – 2.x", "python/ray/exceptions.py (ActorDiedError / RayActorError)",
       "the caller's task failed because the actor it called died: the actor is named by class, "
       "actor id and pid, not by rank: nobody named",
       r"(?:ActorDiedError|RayActorError): The actor died unexpectedly before finishing this "
       r"task", ("actor died unexpectedly",), "serving_rankless"),
    # (read by log_gpu_lost: a GPU that stopped answering, named by its PCI address; fresh6)
    _p("nvidia.xid.fallen_off_bus", "NVIDIA kernel driver (NVRM, dmesg / journal)",
       '"NVRM: Xid (PCI:%04x:%02x:%02x[ GPU-I:%02u[ GPU-CI:%02u]]): 79, pid=%s, name=%s, %s" / '
       '"NVRM: Xid (…): 79, %s" (79 = ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS)',
       "open-gpu-kernel-modules 515.43.04 – 570.86.15 (the Xid print and code 79 unchanged)",
       "src/nvidia/src/kernel/gpu/rc/kernel_rc.c (the Xid print); "
       "src/common/sdk/nvidia/inc/nverror.h (79)",
       "the GPU at that PCI address fell off the bus: every process using it is stuck or dead "
       "and its peers in a collective hang; the line names a PCI address (and a pid), not a "
       "rank — nobody named unless the address is mapped to a rank",
       r"\bXid \(PCI:(?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?"
       r"(?: GPU-C?I:\d+)*\): 79\b(?:, pid=(?P<pid>\d{1,10}))?", ("xid (pci:",), "gpu_lost"),
    _p("nvidia.gpu.fallen_off_bus", "NVIDIA kernel driver (NVRM, dmesg / journal)",
       '"NVRM: GPU %04x:%02x:%02x.%x: GPU has fallen off the bus." (RmCheckGpuState: the boot '
       'register no longer reads back) / "NVRM: The NVIDIA GPU %04x:%02x:%02x.%x" "NVRM: (PCI '
       'ID: %04x:%04x) installed in this system has" "NVRM: fallen off the bus and is not '
       'responding to commands." (three lines at (re)initialisation, often pasted joined)',
       "open-gpu-kernel-modules 515.43.04 – 570.86.15",
       "src/nvidia/arch/nvalloc/unix/src/osinit.c (NV_DEV_PRINTF \"GPU has fallen off the "
       "bus.\"); src/nvidia/arch/nvalloc/unix/src/osapi.c (the three-line message, "
       "NV_ERR_GPU_IS_LOST)",
       "the GPU at that PCI address stopped answering the driver (its registers read all "
       "ones): a process on it cannot progress; names a PCI address, not a rank",
       r"\bGPU (?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): GPU has fallen off "
       r"the bus|(?:The NVIDIA GPU (?P<bus2>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
       r"[^\n]{0,200}?)?\bfallen off the bus and is not responding",
       ("fallen off the bus",), "gpu_lost"),
    _p("nvidia_smi.device_handle_lost", "nvidia-smi (NVML)",
       '"Unable to determine the device handle for GPU%s: %s" with NVML\'s error string '
       '"Unknown Error" (NVML_ERROR_UNKNOWN) or "GPU is lost" (NVML_ERROR_GPU_IS_LOST: "The GPU '
       'has fallen off the bus or has otherwise become inaccessible"); the GPU is given by PCI '
       'address ("GPU0000:03:00.0") or index and address ("GPU1: 0000:34:00.0")',
       "nvidia-smi of drivers 450 – 610 (as pasted in public threads; nvidia-smi is closed "
       "source, NVML's error codes and strings are nvml.h's)",
       "nvidia-smi (closed source) over nvml.h's nvmlDeviceGetHandleBy* and nvmlErrorString",
       "NVML could not open that GPU: it is inaccessible (fallen off the bus, a driver fault, "
       "or not initialised at boot); a job on it cannot progress; names a GPU, not a rank",
       r"Unable to determine the device handle for GPU ?(?P<gpu>[0-9a-fA-F:.]{1,20}?)(?:: "
       r"(?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]))?: (?P<err>Unknown Error|"
       r"GPU is lost)", ("unable to determine the device handle",), "gpu_lost"),
    # --------------------------------------------- fresh7's dev half (helper f8)
    _p("openmpi.proc_aborted_cut", "Open MPI mpirun/orterun (1.x-4.x), PRRTE prterun (Open MPI 5)",
       '"%s noticed that process rank %lu with PID %lu" — the head of [orterun:proc-aborted('
       '-strsignal)] / [prun:proc-aborted(-strsignal)] cut before "on node %s exited on signal '
       '%d (%s)." (an issue title, a paste cut at the line\'s end)',
       "Open MPI 1.6+, PRRTE 2+ (every help text that begins so)",
       "orte/tools/orterun/help-orterun.txt; prrte src/tools/prun/help-prun.txt (both texts "
       "that begin 'noticed that process rank' end 'exited on signal')",
       "reporter: the launcher; the FIRST process of its world it saw end on a signal, which "
       "signal cut away: a culprit only at low (a SIGABRT or SIGTERM there would make it a "
       "victim; read by log_mpirun when the next line does not complete it)",
       r"(?P<tool>[\w./-]{1,64}) noticed that process rank (?P<rank>\d{1,7}) with PID "
       r"(?P<pid>\w{1,12})", ("noticed that process rank",), "mpi_launcher"),
    _p("xla.coordination.barrier_timeout", "XLA / TSL coordination service (JAX jax.distributed, "
       "TF multi-worker)",
       '"Barrier timed out. Barrier_id: %s" (no names) → "Barrier timed out. Barrier_id: %s. '
       'Timed out task names:\\n%s" → "Barrier timed out. Id: %s. … # of tasks that reached '
       'the barrier: %d/%d.\\nThe first task at the barrier: %s. Some timed out task '
       'names:\\n%s", each name "/job:%s/replica:0/task:%d" on its own line',
       "tensorflow coordination_service.cc (2.8 – 2.12, no names), xla/tsl "
       "coordination_service.cc (the listed forms; kPendingTaskLogLimit 20, later "
       "kPendingStragglerLogLimit 3)",
       "tensorflow/core/distributed_runtime/coordination/coordination_service.cc and "
       "xla/tsl/distributed_runtime/coordination/coordination_service.cc, "
       "CheckBarrierTimeout (pending_tasks: the tasks NOT at the barrier)",
       "reporter: the coordination service (in task 0); the tasks it names had NOT reached the "
       "barrier when it expired — JAX registers process i as /job:jax_worker/task:i; a list is "
       "complete when '# of tasks that reached' accounts for it, or when shorter than the cap "
       "(read by log_xla_coord)",
       r"Barrier timed out\. (?:Barrier_id|Id): (?P<id>[^\s\\]{1,200}?)\.?(?:\s|\\n|$)",
       ("barrier timed out",), "xla_coord"),
    _p("mindspore.msrun.time_out_nodes", "MindSpore msrun (mindspore.parallel.cluster)",
       '"Time out nodes are %s" — a Python list of the node ids scheduler.log reports as '
       '"node: <id> is timed out", printed after "There\'s worker exits with exception, kill '
       'all other workers."', "MindSpore 2.3 – 2.6 (process_entity/_api.py, _analyze_log)",
       "mindspore/python/mindspore/parallel/cluster/process_entity/_api.py (_analyze_log; a "
       "worker's node id is its rank: index, or node_rank * local_worker_num + index, exported "
       "as RANK_ID)",
       "reporter: msrun, from the scheduler's log; the listed nodes stopped heartbeating to the "
       "scheduler before it exited — one id: that worker died or hung first (msrun had SIGKILLed "
       "the rest after a worker exited non-zero); several: suspects (read by log_msrun)",
       r"Time out nodes are \[(?P<ids>[^\]\n]{0,4000})\]", ("time out nodes are",), "msrun"),
    _p("hccl.notify_wait_timeout", "Huawei Ascend HCCL (CANN), via torch_npu / MindSpore",
       '"EI0002: … The wait execution of the Notify register times out. Reason: The Notify '
       'register has not received the Notify record from remote rank: [%d]. … group '
       'information: [group:[%s], …, rankSize[%d], rankId[%s]]"',
       "CANN 7.x – 8.x (error code EI0002 as printed in public threads; HCCL is closed source)",
       "the CANN error-code reference's EI0002 text (HCCL_EXEC_TIMEOUT, default 1800 s)",
       "reporter: the rank whose task waited (its global RankID on the '[ERROR] … RankID:%d' "
       "line); the remote rank is a rank OF THE GROUP named, not a global rank: a stall in that "
       "group, the peer not named globally (read by log_hccl)",
       r"EI0002: [^\n]{0,300}?has not received the Notify record from remote rank: "
       r"\[(?P<remote>\d{1,7})\]", ("notify record from remote rank",), "hccl"),
    _p("hccl.socket_timeout", "Huawei Ascend HCCL (CANN), via torch_npu / MindSpore",
       '"EI0006: … Getting socket times out. Reason: Remote Rank did not send the data in time. '
       'Please check the reason for the rank being stuck"',
       "CANN 7.x – 8.x (error code EI0006 as printed in public threads; HCCL is closed source)",
       "the CANN error-code reference's EI0006 text (HCCL_CONNECT_TIMEOUT, default 120 s)",
       "reporter: the rank that printed it waited on a peer that did not send in time; no peer "
       "is named: a stall, nobody named (read by log_hccl)",
       r"EI0006: [^\n]{0,300}?Getting socket times out\. Reason: Remote Rank did not send",
       ("getting socket times out",), "hccl"),
    # --------------------------------------------- rules from source (helper rs)
    _p("slurm.srun.task_exit", "Slurm srun (a step's task exit)",
       '"%s: %s %s: Out Of Memory" / "%s: %s %s: Exited with exit code %d" / "%s: %s %s: %s%s" '
       '(hosts, "task"|"tasks", the task ids as bit_fmt ranges "0-3,5", strsignal() and " (core '
       'dumped)"), printed as "srun: error: …"',
       "20.11 (src/plugins/launch/slurm/launch_slurm.c), 23.02 – 26.05 (src/srun/launch.c); "
       "read at slurm-20-11-9-1, 23-02-7-1, 24-05-4-1, 26-05-3-1",
       "src/srun/launch.c (_task_finish; the OOM status is slurmstepd's step->oom_error, set by "
       "task/cgroup's check at the node's FIRST task end, src/slurmd/slurmstepd/mgr.c)",
       "reporter: srun, in the order the exit messages arrived; the task id is SLURM_PROCID (the "
       "global rank of a one-task-per-rank step, a NODE's index when each task is a per-node "
       "launcher). 'Out Of Memory' (printed once): that host's step cgroup OOM-killed a process "
       "before its first task ended — the listed task a culprit at low; the first own-death "
       "signal (Killed, Segmentation fault, Bus error …) before srun stopped the step the same; "
       "an exit code, SIGABRT/SIGTERM, several tasks on one line, or any line after 'Terminating "
       "StepId' / 'CANCELLED AT' / an earlier failed task: suspects (victims of the kill or of a "
       "timeout) — read by log_srun_exit",
       r"(?P<host>[A-Za-z0-9][\w.\-\[\],]{0,200}): (?P<word>tasks?) (?P<tasks>\d{1,7}"
       r"(?:[-,]\d{1,7}){0,400}): (?P<what>Out Of Memory|Exited with exit code (?P<code>\d{1,3})|"
       r"(?P<sig>Killed|Segmentation fault|Bus error|Illegal instruction|Floating point "
       r"exception|Aborted|Terminated|Interrupt|Hangup|Quit)(?P<core> \(core dumped\))?)",
       (": task ", ": tasks "), "srun"),
    _p("slurm.stepd.oom_kill", "Slurm slurmstepd (task/cgroup memory)",
       '"Detected %lu oom-kill event(s) in %ps cgroup. Some of your processes may have been '
       'killed by the cgroup out-of-memory handler." (20.11) / "Detected %lu oom_kill event%s in '
       '%ps. Some of the step tasks have been OOM Killed." (23.02+)',
       "20.11 – 26.05 (read at slurm-20-11-9-1, 23-02-7-1, 24-05-4-1, 26-05-3-1)",
       "src/plugins/task/cgroup/task_cgroup_memory.c (task_cgroup_memory_check_oom)",
       "reporter: one node's slurmstepd; the step's memory cgroup ON THAT NODE recorded OOM "
       "kills — which task (or which child of a task) the line does not say, nor the host: a "
       "failure shown, no rank named (read by log_rankless)",
       r"Detected (?P<n>\d{1,9}) oom[-_]kill event(?:\(s\)|s)? in (?:StepId=)?"
       r"(?P<step>[\w.]{1,40})",
       ("oom-kill event", "oom_kill event"), "rankless"),
    _p("xla.coordination.heartbeat_timeout", "XLA / TSL coordination service (JAX jax.distributed, "
       "TF multi-worker)",
       '"Task %s heartbeat timeout. This indicates that the remote task has failed, got '
       'preempted, or crashed unexpectedly." (each stale task, also in "%s has been set to ERROR '
       'in coordination service: …") / "The following tasks are unhealthy (stopped sending '
       'heartbeats):\\n%s\\nThe tasks have crashed. Check the task logs for an earlier error, '
       'or scheduler events (e.g. preemption, eviction) to debug further." (names joined by '
       '"\\n", at most kPendingStragglerLogLimit = 3)',
       "tensorflow coordination_service.cc (the per-task form: TF 2.8 – 2.12, read in its "
       "instrumented copy), xla/tsl coordination_service.cc (both forms; read at openxla/xla "
       "a4771e3c and b80f3b74)",
       "xla/tsl/distributed_runtime/coordination/coordination_service.cc (CheckHeartbeatTimeout: "
       "the CONNECTED tasks whose last heartbeat is older than heartbeat_timeout_ms)",
       "reporter: the coordination service (task 0), echoed by every task it propagates the "
       "error to; the named tasks stopped heartbeating — crashed, preempted, or (a known false "
       "positive) alive but starved. One task: that JAX process a culprit at low; several "
       "(found at one 1 s check, a tie) or a task that printed the notice itself: suspects "
       "(read by log_xla_health)",
       r"Task (?P<task>/job:[\w.-]{1,64}/replica:\d{1,7}/task:\d{1,7}) heartbeat timeout|"
       r"The following tasks are unhealthy \(stopped sending heartbeats\)",
       ("heartbeat timeout", "stopped sending heartbeats"), "xla_health"),
    _p("xla.rendezvous.stuck", "XLA (GPU/CPU runtime rendezvous: collectives, clique init)",
       '"This thread has been waiting for %d seconds and may be stuck:" → "[id=%d] This thread '
       'has been waiting for `%s` for %d seconds and may be stuck. Expected %d threads to join the '
       'rendezvous, but not all of them arrived on time." / "… All %d threads joined the '
       'rendezvous, however the leader has not marked the rendezvous as completed." and '
       '"Termination timeout … Expected %d threads to join the rendezvous, but only %d of them '
       'arrived on time."',
       "xla/service/rendezvous.cc (read at openxla/xla 16569562 — the short form — and 9f59bfa9)",
       "xla/service/rendezvous.cc (AwaitAndLogIfStuck)",
       "reporter: one thread of one process; the rendezvous is among that PROCESS's threads (one "
       "per local device): a local participant late — a device thread of this process, never a "
       "rank; counts only, nobody named (read by log_rankless)",
       r"This thread has been waiting for (?:`(?P<name>[^`\n]{0,300})` for )?(?P<secs>\d{1,9}) "
       r"seconds and may be stuck|Termination timeout (?:for `[^`\n]{0,300}` )?of \d{1,9} seconds "
       r"exceeded", ("and may be stuck", "termination timeout"), "rankless"),
    _p("k8s.pod_status", "kubectl get pods (Kubernetes printers, the STATUS column)",
       'a table "NAME READY STATUS RESTARTS AGE" whose STATUS is the pod phase or its '
       "container's Waiting/Terminated reason (OOMKilled, Error, Completed, CrashLoopBackOff), "
       '"Signal:%d" / "ExitCode:%d" when the runtime gave none, "Terminating" while deleted',
       "kubectl 1.x (printPod in pkg/printers/internalversion/printers.go); pod names by the "
       "Kubeflow training-operator (GenGeneralName: <job>-<replica type>-<index>, v1.5.0 – v1.9.0)",
       "kubernetes pkg/printers/internalversion/printers.go (printPod); kubeflow/training-operator "
       "pkg/controller.v1/pytorch/envvar.go (RANK = index, + 1 for Worker when a Master exists; "
       "read at v1.5.0 and v1.8.1)",
       "reporter: the user's paste of the cluster state; a PyTorchJob's master-0 is node 0 and "
       "worker-i node i+1 (RANK / PET_NODE_RANK) — a global rank only with one process per pod. "
       "One pod OOMKilled (or Signal:9) while the others run: that pod a culprit at low; Error, "
       "ExitCode, CrashLoopBackOff, several failed pods or other operators' names (JobSet): "
       "suspects or nobody (read by log_pod_table)",
       r"^\s*NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\b", ("restarts",), "pod_table"),
    _p("torch.cuda.oom_device", "torch CUDA caching allocator (an OOM line without a rank)",
       '"CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of which %s '
       'is free." (2.1+) / "… Tried to allocate %s (GPU %d; %s total capacity; …" (before 2.1)',
       "1.13 – 2.x (c10/cuda/CUDACachingAllocator.cpp, malloc's "
       "TORCH_CHECK_WITH(OutOfMemoryError))",
       "c10/cuda/CUDACachingAllocator.cpp",
       "reporter: a process whose rank the line does not give; GPU %d is the process's LOCAL "
       "CUDA ordinal (after CUDA_VISIBLE_DEVICES), not a rank: with one visible GPU per process "
       "every process says GPU 0. A rank only from the process's prefix or LOCAL_RANK and its "
       "node's offset — otherwise nobody named (read by log_device_oom)",
       r"(?:CUDA|GPU) out of memory\. Tried to allocate [^\n]{1,40}?(?:\. GPU (?P<dev>\d{1,3}) has "
       r"a total capacity| \(GPU (?P<dev2>\d{1,3}); )", ("out of memory",), "device_oom"),
    # --------------------------------------------- rules from source (helper rs9)
    _p("torch.mp_spawn.process_exited", "torch.multiprocessing.spawn (the parent's join())",
       '"process %d terminated with signal %s" / "process %d terminated with exit code %d" '
       "(ProcessExitedException; an f-string from 2.8, \"<Unknown signal N>\" from 2.4)",
       "1.13 – 2.13 (read at v1.13.0, v2.1.0, v2.4.0, v2.8.0 and 2.13.0: the same words)",
       "torch/multiprocessing/spawn.py (ProcessContext.join: the child's exitcode when it left "
       "no error file / queue entry)",
       "reporter: the spawning parent; N is the SPAWN INDEX (fn(i, *args)), a rank only where "
       "the user's fn makes it one (one node: usually rank = i; several: node_rank × nprocs + "
       "i). The first child join() found dead with a non-zero exit, before it stopped the "
       "others (SIGTERM, then SIGKILL): of children dead at one wake-up the LOWEST index. Its "
       "own death signal (SIGKILL, SIGSEGV, SIGBUS, SIGILL, SIGFPE): a culprit at low; SIGABRT, "
       "SIGTERM/SIGINT/SIGHUP or an exit code (a sys.exit, not an exception): a suspect (read "
       "by log_mp_spawn)",
       r"(?<![\w-])process (?P<idx>\d{1,7}) terminated with (?:signal (?P<sig>SIG[A-Z0-9]{2,8}|"
       r"<Unknown signal \d{1,3}>)|exit code (?P<code>-?\d{1,4}))",
       ("terminated with signal", "terminated with exit code"), "mp_spawn"),
    _p("torch.mp_spawn.process_raised", "torch.multiprocessing.spawn (the parent's join())",
       '"\\n\\n-- Process %d terminated with the following error:\\n" + the child\'s '
       "traceback.format_exc() (ProcessRaisedException)",
       "1.13 – 2.13 (read at v1.13.0, v2.1.0, v2.4.0, v2.8.0 and 2.13.0; the traceback travels "
       "by an error queue at 1.13 and 2.1, by a pickled error file at 2.4 and after)",
       "torch/multiprocessing/spawn.py (_wrap: an Exception raised by fn is formatted, passed "
       "to the parent and the child exits 1; ProcessContext.join re-raises it)",
       "reporter: the spawning parent; N is the spawn index (as above). The child's own "
       "traceback follows: its last exception line says whether it failed of its own (an OOM, "
       "a CUDA error, a bug: a culprit at low) or of a consequence (a timeout, a closed "
       "connection, an aborted communicator: a suspect) — read by log_mp_spawn",
       r"-- Process (?P<idx>\d{1,7}) terminated with the following error:",
       ("terminated with the following error",), "mp_spawn"),
    _p("torch.mp_spawn.index_as_rank", "torch.multiprocessing.spawn (a reading, not a message)",
       "the spawn index N of the two messages above, read as the global rank when nothing in "
       "the logs shows a second node", "1.13 – 2.13",
       "torch/multiprocessing/spawn.py (start_processes: fn(i, *args) for i in range(nprocs); "
       "the rank is whatever fn computes from i)",
       "the child join() reported, PRESUMED to be rank N because nothing shows a second node "
       "(no world above 8, no rank above 7, no node rank / node count above 0 / 1): right on "
       "one node where fn uses rank = i, wrong on every other node; never more than low",
       r"(?<![\w-])[Pp]rocess (?P<idx>\d{1,7}) terminated with ",
       ("terminated with",), K_READING),
    _p("tf.tpu.lame_workers", "TensorFlow TPU (GracefulShutdownHook, TPUEstimator)",
       '"ShutdownHook: lame workers found: %s" with the manager\'s repr '
       '"HeartbeatManager(%s)" (the lame workers\' devices joined by ",")',
       "TF 2.4 – 2.15 (tensorflow/python/tpu/session_support.py, read at v2.4.0 and v2.15.0: the "
       "same text; the ping's deadline 5 s → 60 s)",
       "tensorflow/python/tpu/session_support.py (GracefulShutdownHook.after_run → "
       "WorkerHeartbeatManager.lame_workers)",
       "reporter: the TPUEstimator client (one process driving every TPU host); the named "
       "devices are /job:<job>/replica:0/task:<i>/device:CPU:0 of the TPU HOSTS whose "
       "heartbeat answered with a health status other than OK (a shutdown signal, an internal "
       "error, shutting down) — a host that failed or is being stopped, not a rank: the task "
       "index is a host of the TF cluster. Nobody named as a rank (read by log_rankless)",
       r"ShutdownHook: lame workers found: (?:HeartbeatManager\((?P<devices>[^)\n]{0,4000})\))?",
       ("lame workers found",), "rankless"),
    _p("ray.train.worker_failed", "Ray Train (BackendExecutor's failure check)",
       '"Worker {failed_actor_rank} has failed." (logger.info)',
       "Ray 2.9 – 2.40 (ray/train/_internal/utils.py check_for_failure, read at ray-2.9.0 and "
       "ray-2.40.0: the same text)",
       "ray/train/_internal/utils.py (check_for_failure: the index of the object ref that "
       "raised RayActorError; ray/train/_internal/backend_executor.py gives worker i "
       "world_rank=i)",
       "reporter: the Ray Train driver; N is the WORLD RANK of a training worker whose actor "
       "DIED (RayActorError: its process crashed, was killed — an OOM kill, the memory monitor "
       "— or its node was lost); a worker whose training function raised is reported another "
       "way (its exception re-raised). The first dead actor ray.wait returned — workers lost "
       "together (a node) are first only together: a culprit at low; several different N "
       "(across restarts): suspects (read by log_ray_train)",
       r"(?<![\w-])Worker (?P<rank>\d{1,7}) has failed\.", ("has failed.",), "ray_train"),
    _p("mpich.hydra.bad_termination", "MPICH Hydra mpiexec (the server's proxy callback)",
       '"=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES" / "=   PID %d RUNNING AT %s" / '
       '"=   EXIT CODE: %d" / "=   CLEANING UP REMAINING PROCESSES" (between "=" rules)',
       "MPICH 3.3 – 5.0 (read at v3.3, v4.0, v4.2.0, v4.3.0, v5.0.0: the same text; "
       "src/pm/hydra/pm/pmiserv/pmiserv_cb.c up to 4.1, src/pm/hydra/mpiexec/pmiserv_cb.c after)",
       "src/pm/hydra/mpiexec/pmiserv_cb.c (control_cb, CMD_EXIT_STATUS: the first process of a "
       "node's proxy that did not exit normally, !WIFEXITED)",
       "reporter: mpiexec, when one node's proxy has sent the exit statuses of ALL its "
       "processes; the block names a PID and a host, never a rank (EXIT CODE is the raw wait "
       "status: the signal, + 128 with a core dump): a process of that node died of a signal, "
       "the first in the proxy's local order — then Hydra kills every other process, so later "
       "blocks are victims of that cleanup. Nobody named as a rank (read by log_rankless)",
       r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES", ("bad termination",),
       "rankless"),
    # --------------------------------------------- rules from source (helper rs10)
    _p("composer.launcher.rank_crashed", "MosaicML Composer launcher (composer CLI, the poll loop)",
       "log.error(f'Rank {global_rank} crashed with exit code {process.returncode}.') "
       "(logging.basicConfig's default form: \"ERROR:composer.cli.launcher:Rank N crashed …\")",
       "Composer 0.12 – 0.25 (composer/cli/launcher.py, read in the mosaicml 0.12.0, 0.17.0 and "
       "0.25.0 wheels: the same text and loop)",
       "composer/cli/launcher.py (_monitor_processes: every 0.1 s, polls its node's processes in "
       "global-rank order and stops at the first non-zero return code)",
       "reporter: the launcher of ONE node; N is a GLOBAL rank (base_rank + local_rank, the RANK "
       "it gave the process). The first of its node's processes the poll found ended non-zero — "
       "of those ended within one 0.1 s tick the LOWEST rank — before it SIGTERMs the others "
       "(their ends are the launcher's stop). The code is Popen's: -N a signal. Its own death "
       "signal (-9, -11, -7, -4, -8) or its own error in its STDERR block: a culprit at low; "
       "-6 (SIGABRT, a watchdog's end), -15/-2/-1, or a code with no own error shown: a suspect; "
       "different N (one launcher per node): suspects (read by log_composer)",
       r"(?<![\w-])Rank (?P<rank>\d{1,7}) crashed with exit code (?P<code>-?\d{1,4})\.",
       ("crashed with exit code",), "composer"),
    _p("composer.launcher.exit_status", "MosaicML Composer launcher (composer CLI, after cleanup)",
       "f'Global rank {global_rank} (PID {process.pid}) exited with code {process.returncode}' "
       "(printed, then its \"----------Begin global rank N STDOUT----------\" / \"… STDERR …\" "
       "blocks; \"logs\" for STDOUT on the MosaicML platform from 0.2x); log.error('Global "
       "rank %s (PID %s) exited with code %s') for the exit status",
       "Composer 0.12 – 0.25 (read at 0.12.0, 0.17.0 and 0.25.0; the \"logs\" label is 0.25's)",
       "composer/cli/launcher.py (_cleanup_processes → _print_process_exit_status; "
       "_aggregate_process_returncode)",
       "reporter: the launcher of one node, after it stopped the rest. Printed for EVERY process "
       "that ended non-zero and not by SIGTERM/SIGKILL (those it skips as its own kills — so an "
       "OOM-killed rank, -9, gets no block), in global-rank order, not in the order they "
       "failed; the logged form names the lowest rank with a non-zero code, a stopped victim "
       "included. Neither says who was first: the ranks are suspects; the block carries that "
       "rank's own stderr (read by log_composer)",
       r"(?<![\w-])Global rank (?P<rank>\d{1,7}) \(PID (?P<pid>\d{1,10})\) exited with code "
       r"(?P<code>-?\d{1,4})", ("exited with code",), "composer"),
    _p("tf.distributed.task_error", "TensorFlow distributed runtime (graph-mode master session)",
       'Status(code, StrCat("From ", *call->worker_name, ":\\n", <the task\'s error message>)) '
       "— the error a session.run / TPUEstimator / Estimator step raises, its first line "
       '"From /job:<job>/replica:<r>/task:<i>:"',
       "TF 2.x graph mode (tensorflow/core/distributed_runtime/master_session.cc read at the "
       "stored commit 00f0938, a 2.x file with StatusGroup; NOT in the older stored d437d4a, a "
       "1.x file whose RunManyGraphs kept the bare status: the prefix is absent there)",
       "tensorflow/core/distributed_runtime/master_session.cc (RunManyGraphs::WhenDone: the "
       "RunGraph call of one partition — one task — came back with an error)",
       "reporter: the master (the client's session); /job:J/replica:R/task:I names the TASK "
       "whose own RunGraph step failed with the error that follows. The first non-derived "
       "error cancels every other task's call (their Cancelled statuses are derived and "
       "dropped), so it is the first task the master heard fail — but its error may itself be "
       "a peer's consequence (Unavailable: Socket closed, a recv from a dead task). A TASK of "
       "the TF cluster (a worker host, a TPU host), not a rank: nobody named as a rank (read "
       "by log_rankless)",
       r"(?<![\w/])From /job:(?P<job>[\w.-]{1,64})/replica:\d{1,7}/task:(?P<task>\d{1,7}):",
       ("from /job:",), "rankless"),
    _p("ray.train.worker_processes", "Ray Train (BackendExecutor, at the worker group's start)",
       'logger.info(f"Started distributed worker processes: \\n{workers_info}"), one line per '
       'worker "- (ip={ip}, pid={pid}) world_rank={i}, local_rank={l}, node_rank={n}" (2.9; '
       '"- (node_id={id}, ip={ip}, pid={pid}) world_rank=…" at 2.40)',
       "Ray 2.9 – 2.40 (ray/train/_internal/backend_executor.py read in the ray-2.9.0 and "
       "ray-2.40.0 wheels: node_id added in front by 2.40)",
       "ray/train/_internal/backend_executor.py (_create_rank_world_size_mappings: worker i of "
       "the worker group is world_rank=i)",
       "a MAP, not an event: the worker process (pid, ip) that holds world rank i in that "
       "worker group (a restart starts a new group: new pids). Joined with a death that names "
       "a pid — ActorDiedError's \"pid: P\" / \"ip: A\" lines with a failing exit type, the "
       "raylet's \"Worker PID: P\" — it names the world rank whose process died: a culprit at "
       "low; several ranks: suspects; a pid not in the map: nobody (read by log_ray_pids)",
       r"\(\s?(?:node_id=[0-9a-fA-F]{1,64}, )?ip=(?P<ip>[\w.:-]{1,64}), pid=(?P<pid>\d{1,10})\) "
       r"world_rank=(?P<rank>\d{1,7}), local_rank=\d{1,5}, node_rank=\d{1,5}",
       ("world_rank=",), "ray_pids"),
    _p("ray.train.v2.worker_group_error", "Ray Train v2 (the controller's WorkerGroupError)",
       'WorkerGroupError: super().__init__("Training failed due to worker errors:\\n" + '
       'error_message), error_message = WorkerGroupPollStatus.get_error_string(): "\\n".join('
       'f"[Rank {world_rank}]\\n{error}" …) (2.46); errors grouped by their text with the '
       'digits ignored, f"[Rank {ranks_str} Error Snippet]:\\n{error}" with ranks_str '
       '",".join(ranks) (2.58)',
       "Ray 2.46 – 2.58 with Train v2 (ray/train/v2/api/exceptions.py and _internal/execution/"
       "worker_group/poll.py read in the ray-2.46.0 and ray-2.58.0 wheels; no v2 in the 2.40.0 "
       "wheel, whose driver prints 'Worker N has failed.' — ray.train.worker_failed)",
       "ray/train/v2/_internal/execution/worker_group/poll.py (WorkerGroupPollStatus.errors: "
       "every worker whose status carried an error at the controller's poll, by WORLD rank)",
       "reporter: the controller; the world ranks whose own training function raised (or whose "
       "actor failed its health check) by the poll that ended the run — the others were "
       "still running. One rank whose error is no wait (a timeout, a collective's or a peer's "
       "failure is how a victim ends too): a culprit at low; a timeout or several ranks: "
       "suspects (read by log_ray_train_v2)",
       r"^\s{0,8}\[Rank (?P<ranks>\d{1,7}(?:,\d{1,7}){0,4095})(?: Error Snippet\]:|\])\s*$",
       ("[rank ",), "ray_train_v2"),
    _p("lightning.child_terminated", "Lightning / Fabric DDP launcher (_ChildProcessObserver)",
       'rank_prefixed_message(f"Child process with PID {proc.pid} terminated with code '
       '{proc.returncode}. Forcefully terminating all other processes to avoid zombies 🧟", '
       'rank=i + 1) → "[rank: N] Child process with PID P terminated with code C. …"',
       "Lightning 2.1 – 2.4 (lightning/fabric/strategies/launchers/subprocess_script.py read in "
       "the lightning 2.1.0 and 2.4.0 wheels; the prefix from lightning_utilities 0.11.2)",
       "lightning/fabric/strategies/launchers/subprocess_script.py (_ChildProcessObserver._run: "
       "every 5 s, the first child in LOCAL order with a non-zero return code)",
       "reporter: local rank 0's observer thread; N is the child's LOCAL rank (children are "
       "local ranks 1 … n-1; local rank 0 is the observer's own process, never named). The "
       "first child it found ended non-zero (of those ended within one 5 s period the lowest), "
       "before it SIGKILLs every other process. Its own death signal (-9, -11, -7, -4, -8): a "
       "culprit at low, read as the global rank only when nothing shows a second node; -6, "
       "-15, or an exit code (an exception — a victim's way out too): a suspect (read by "
       "log_lightning)",
       r"\[rank: (?P<rank>\d{1,7})\] Child process with PID (?P<pid>\d{1,10}) terminated with "
       r"code (?P<code>-?\d{1,4})\.", ("child process with pid",), "lightning"),
    _p("torch.ddp.unused_parameters", "PyTorch DDP's Reducer (ensure_prior_reduction_finished)",
       '"Expected to have finished reduction in the prior iteration before starting a new one. '
       '…" + c10::str("\\n", "Parameter indices which did not receive grad for rank ", '
       "process_group_->getRank(), \": \", unmarked_param_indices); with "
       'TORCH_DISTRIBUTED_DEBUG=INFO/DETAIL also "Parameters which did not receive grad for rank '
       '{rank}: {names joined by \', \'}" before it',
       "PyTorch 1.10 – 2.x (torch/csrc/distributed/c10d/reducer.cpp read at a 1.10-era commit "
       "(DistributedDebugLevel::OFF) and a 2.x one (DebugLevel::Off); the same strings in the "
       "libtorch_cpu.so of the torch 2.13 wheel)",
       "torch/csrc/distributed/c10d/reducer.cpp (Reducer::ensure_prior_reduction_finished, "
       "called by the NEXT forward's rebuild_buckets / prepare_for_backward)",
       "an own failure of the rank that raises it: its previous backward left parameters "
       "unmarked (no autograd hook fired: its forward skipped them, or its outputs did not "
       "reach the loss), so its reduction never finished while peers that marked every bucket "
       "wait in that bucket's allreduce. Every rank prints only ITS OWN unmarked set and its "
       "own rank in DDP's process group (the global rank on the default group). One rank: a "
       "culprit at low; several: each skipped parameters (a program-wide cause) — suspects "
       "(read by log_ddp_unused)",
       r"Parameter(?:s| indices) which did not receive grad for rank (?P<rank>\d{1,7}): ?"
       r"(?P<what>[^\n]{0,200})", ("did not receive grad for rank",), "ddp_unused"),
    _p("megatron.nan_check", "Megatron-LM / Megatron-Core (check_for_nan_in_loss_and_grad)",
       "f'Rank {global_rank}: found NaN in local grad norm in backward pass before "
       "data-parallel communication collective. Device: {torch.cuda.current_device()}, node: "
       "{os.uname()[1]}' (an assert; the loss form 'found NaN in local forward loss "
       "calculation' in pretrain_gpt.py); later the rerun state machine's RuntimeError(f\"Rank "
       "{rank}, node {node}, device {device}, iteration {self.current_iteration}: Unexpected "
       "result {result} (message='{message}')\") with message 'found NaN|Inf in local grad norm "
       "for bucket #{i} in backward pass before data-parallel communication collective' / "
       "'found NaN|Inf in local forward loss calculation'",
       "megatron-core 0.6 – 0.9 (the assert: param_and_grad_buffer.py read in the 0.6.0 and "
       "0.8.0 wheels) and 0.12 – 0.14 (the RuntimeError: rerun_state_machine.py read in the "
       "0.12.0 and 0.14.0 wheels); none in 0.5.0; 0.10 – 0.11 skip the check with reruns "
       "disabled; the loss forms in pretrain_gpt.py through the index",
       "megatron/core/distributed/param_and_grad_buffer.py (start_grad_sync / check_grads: "
       "each bucket's local grad norm before the data-parallel all-reduce / reduce-scatter) + "
       "megatron/core/rerun_state_machine.py (validate_result) + pretrain_gpt.py (loss_func)",
       "the rank it names found its OWN values non-finite: R is "
       "torch.distributed.get_rank() (global), and every rank checks only its own gradients / "
       "loss before the data-parallel collective, so no data-parallel peer caused it — but its "
       "data, its device, a value from a model-parallel peer, or a cause every rank shares "
       "(a library, the image, the learning rate) met first on this rank all print the same. "
       "One rank: a suspect (held out: named as a culprit, wrong on both fresh12 cases); "
       "several: a shared cause — suspects (read by log_megatron_nan)",
       r"Rank (?P<rank>\d{1,7}): found (?P<what>NaN|Inf) in local (?P<where>grad norm|forward "
       r"loss calculation)(?:[^\n]{0,160}?node: (?P<node>[\w.-]{1,255}))?|Rank "
       r"(?P<rank2>\d{1,7}), node (?P<node2>[\w.-]{1,255}), device \d{1,4}, iteration "
       r"-?\d{1,12}: Unexpected result [^\s(]{0,40}(?:\([^()\n]{0,200}\))? "
       r"\(message='(?P<msg>[^'\n]{0,400})'",
       ("found nan in local", "found inf in local", "unexpected result"), "megatron_nan"),
    _p("megatron.rerun.verdict", "Megatron-Core's rerun state machine (validate_result, reruns "
       "enabled)",
       'log_failure(message): logger.error(f"Rank {rank}, node {node}, device {device}: '
       '{message}!") with message "Possible transient error" (the first rerun, on the SAME '
       'GPU, did not reproduce the result), "Possible persistent error" (the second rerun, '
       "resumed from a checkpoint on ANOTHER GPU, did not reproduce it) or \"Correct result "
       '(but possible Application error) ({message})" (the other GPU reproduced it)',
       "megatron-core 0.10 – 0.14 (megatron/core/rerun_state_machine.py read in the 0.10.0, "
       "0.12.0 and 0.14.0 wheels: the same three verdicts)",
       "megatron/core/rerun_state_machine.py (RerunStateMachine.validate_result, "
       "--rerun-mode validate_results; should_checkpoint_and_exit then stops the job)",
       "the machine's own conclusion about the rank R whose result it rejected (R = "
       "_safe_get_rank(), the global rank). Transient: the same GPU gave another result for "
       "the same step — that rank's device (node H, device D) misbehaved; persistent: another "
       "GPU disagreed with the first run's — the device R ran on BEFORE the resume (H, D name "
       "the new placement); correct result: another GPU reproduced it — NOT the device: the "
       "data, the model or the application (a cause every rank may share). One rank with a "
       "device verdict: a culprit at low; correct results or several ranks: suspects (read by "
       "log_megatron_rerun)",
       r"Rank (?P<rank>\d{1,7}), node (?P<node>[\w.-]{1,255}), device (?P<dev>\d{1,4}): "
       r"(?P<what>Possible transient error|Possible persistent error|Correct result \(but "
       r"possible Application error\))", ("possible transient error",
                                           "possible persistent error",
                                           "possible application error"), "megatron_rerun"),
    _p("megatron.rerun.unexpected", "Megatron-Core's rerun state machine (validate_result, the "
       "initial run)",
       'logger.error(f"Unexpected result {result} at {caller.filename} line {caller.lineno}, '
       'invokation #{sequence} at iteration #{iteration} (message=\'{message}\')") (0.10 – '
       '0.12); f"Unexpected result {result} on rank {_safe_get_rank()} at iteration '
       "#{iteration} invokation #{sequence} (message='{message}')\" (0.14)",
       "megatron-core 0.10 – 0.14 (rerun_state_machine.py read in the 0.10.0, 0.12.0 and 0.14.0 "
       "wheels: no rank before 0.14)",
       "megatron/core/rerun_state_machine.py (validate_result, state INITIAL_RUN: a rejected "
       "result — NaN / Inf, a spiky loss — before the step is rerun)",
       "the printing rank's OWN result was rejected (its gradients / loss, as the NaN check); "
       "no verdict yet — the rerun that follows says whether its device or its data. 0.14 "
       "names the (global) rank: a suspect; earlier forms name none: nobody (read by "
       "log_megatron_rerun)",
       r"Unexpected result (?P<result>[^\n]{0,120}?) (?:at (?P<file>\S{1,300}) line "
       r"\d{1,7}, |on rank (?P<rank>\d{1,7}) at iteration #-?\d{1,12} )invokation #\d{1,9}",
       ("invokation #",), "megatron_rerun"),
    _p("k8s.describe_pod.terminated", "kubectl describe pod (pkg/describe, describeStatus)",
       'w.Write(LEVEL_2, "%s:\\tTerminated\\n", stateName) with stateName "State" or "Last '
       'State", then LEVEL_3 "Reason:\\t%s" (when set), "Exit Code:\\t%d", "Signal:\\t%d" (when '
       '> 0); the block\'s "Name:\\t%s" / "Namespace:" at column 0, the pod\'s "Reason:\\t%s" '
       '(Evicted), the container\'s "Environment:" (RANK, PET_NPROC_PER_NODE)',
       "kubectl 1.24 – 1.31 (pkg/describe/describe.go read at kubernetes/kubectl v0.24.0 and "
       "v0.31.0: the same fields and order)",
       "pkg/describe/describe.go (describePod, describeContainerState, describeStatus, "
       "describeContainerEnvVars)",
       "reporter: the API server's record of one pod: its container ended (State) or ended "
       "before a restart (Last State) — OOMKilled (its memory cgroup), a death signal, or an "
       "exit code (137 a SIGKILL from anyone); the pod's Reason Evicted: the NODE's pressure. "
       "The pod's rank: its RANK (training-operator) with one process per pod, or a "
       "PyTorchJob's master-0 / worker-i beside its master. One pod OOMKilled or by its own "
       "signal: that rank at low; otherwise suspects or nobody (read by log_pod_describe)",
       r"^\s{2,24}(?:Last )?State:\s{1,60}Terminated\s*$", ("terminated",), "pod_describe"),
    _p("k8s.event.pod_stopped", "Kubernetes events (kubectl get events / kubectl events, or "
       "describe's \"Events:\" table)",
       "kubectl's event rows: get events \"LAST SEEN  TYPE  REASON  OBJECT  MESSAGE\" (OBJECT "
       "kind/name), describe \"  Type  Reason  Age  From  Message\"; the reasons read: the "
       "kubelet's \"Evicted\" (eviction/helpers.go: \"The node was low on resource: %v. \" + "
       "\"Container %s was using %s, …\"), \"BackOff\" (\"Back-off restarting failed container "
       "%s in pod %s\"), the scheduler's \"Preempted\" (\"Preempted by pod %v on node %v\"), "
       "\"FailedScheduling\" (\"0/%v nodes are available: …\"), the node controller's "
       "\"NodeNotReady\" on a pod (\"Node is not ready\"), node-problem-detector's "
       "\"OOMKilling\" on a node (the kernel's \"Killed process %d (%s) …\")",
       "kubernetes 1.2x – 1.3x (the event reasons and messages read through the index in "
       "kubernetes/kubernetes pkg/kubelet/eviction/helpers.go, pkg/scheduler/framework/"
       "preemption/preemption.go — two forms of containerMessageFmt, untagged copies —; the "
       "row layouts in kubectl pkg/describe/describe.go at v0.24.0 / v0.31.0 as read for "
       "k8s.describe_pod.terminated)",
       "pkg/kubelet/eviction (Reason \"Evicted\"), pkg/kubelet/kuberuntime (BackOff), "
       "pkg/scheduler/framework/preemption (Preempted), pkg/controller/util/node "
       "(NodeNotReady), node-problem-detector's kernel monitor (OOMKilling)",
       "reporter: the API server's record of what happened TO a pod: Evicted (the node's "
       "pressure; the largest consumer over its request is chosen), Preempted (the scheduler, "
       "for a higher-priority pod), NodeNotReady (its node stopped answering), FailedScheduling "
       "(never started), BackOff (its container keeps failing: its own log says why). Each is "
       "a cause outside the pod's processes or a repetition of their failure; the pod's rank "
       "is a PyTorchJob's master-0 / worker-i beside its master: suspects, never a culprit. "
       "OOMKilling names a node and a pid: nobody (read by log_k8s_events)",
       r"(?<!\S)(?:Normal|Warning)\s{1,40}(?P<reason>Evicted|Preempted|BackOff|NodeNotReady|"
       r"OOMKilling|FailedScheduling)\s{1,40}(?P<rest>[^\n]{0,2000})",
       ("evicted", "preempted", "backoff", "nodenotready", "oomkilling", "failedscheduling"),
       "k8s_events"),
    _p("k8s.operator.job_failed", "Kubeflow training-operator / mpi-operator (the job's "
       "Failed condition and event)",
       'fmt.Sprintf("PyTorchJob %s is failed because %d %s replica(s) failed.", name, failed, '
       'rtype) — later "%s %s is failed because %d %s replica(s) failed." (jobKind, '
       "namespace/name); the same for TFJob, MPIJob, XGBoostJob, MXJob, PaddleJob; \"… is "
       "restarting because %d %s replica(s) failed.\" with restartPolicy",
       "training-operator v1.x (pkg/controller.v1/*/…_controller.go UpdateJobStatus and "
       "pkg/common/util, read through the index: the older form with the job's name, the newer "
       "with kind and namespace/name); mpi-operator the same words",
       "pkg/controller.v1/pytorch/pytorchjob_controller.go (UpdateJobStatus)",
       "reporter: the operator; a COUNT of failed replicas of one type (Master, Worker): which "
       "pod failed it does not say — nobody named (read by log_k8s_events)",
       r"(?P<kind>[A-Z][A-Za-z]{1,40}Job) (?P<name>[\w./-]{1,300}) is (?P<what>failed|"
       r"restarting) because (?P<n>\d{1,7}) (?P<rtype>\w{1,40}) replica\(s\) failed",
       ("replica(s) failed",), "k8s_events"),
    _p("paddle.launch.container_failed", "PaddlePaddle launcher (paddle.distributed.launch "
       "controllers/controller.py, one per node)",
       'self.ctx.logger.error(f"Container failed !!!\\n{fc[0]}") with Container.__str__ '
       "\"Container rank {rank} status {status} cmd {entrypoint} code {exit_code} log "
       "{errfile}\" (2.6 appends \" \\nenv {env}\"; 3.0 only with FLAGS_print_launcher_env); "
       "the logger's format \"%(name)s %(levelname)s %(asctime)s %(message)s\" → \"LAUNCH "
       'ERROR <time> Container failed !!!"',
       "Paddle 2.6 – 3.0 (python/paddle/distributed/launch/ read in the paddlepaddle 2.6.2 and "
       "3.0.0 wheels; controller.py's older str.format form through the index)",
       "python/paddle/distributed/launch/controllers/controller.py (ControllerBase.watch) + "
       "job/pod.py (Pod.watch polls containers in LOCAL order every 1 s; failed_container) + "
       "job/container.py (__str__)",
       "reporter: one node's launcher; N is the container's LOCAL index (Pod.add_container: "
       "rank = len(containers); its global rank is PADDLE_TRAINER_ID = N + node index × "
       "containers per node), the lowest-index container found failed at the poll that saw "
       "a failure (of those ended within one poll, the lowest — not the first); C is "
       "Popen.poll() (-N a signal). An exit-code report: a suspect on one node, nobody when "
       "a second node shows (read by log_paddle_launch)",
       r"Container rank (?P<rank>\d{1,5}) status failed cmd (?P<cmd>[^\n]{0,2000}?) code "
       r"(?P<code>-?\d{1,4})\b", ("container rank",), "paddle_container"),
    _p("paddle.wait_server_ready.not_ready", "PaddlePaddle (wait_server_ready, before the "
       "communicator's init)",
       'sys.stderr.write("server not ready, wait 3 sec to retry...\\n"); sys.stderr.write("not '
       'ready endpoints:" + str(not_ready_endpoints) + "\\n") — every 3 s while a TCP connect to '
       "one of the endpoints fails",
       "Paddle 2.x (python/paddle/distributed/fleet/base/private_helper_function.py read in the "
       "paddlepaddle 2.6.2 wheel; the same loop in older fluid transpilers through the index); "
       "3.0 returns at once (read in the 3.0.0 wheel: never printed); skipped when "
       "FLAGS_dynamic_static_unified_comm is on",
       "python/paddle/distributed/fleet/base/private_helper_function.py (wait_server_ready), "
       "called by parallel.py init_parallel_env (the trainer whose PADDLE_TRAINER_ID is 0, over "
       "every other PADDLE_TRAINER_ENDPOINTS entry) and fleet/meta_optimizers/common.py (ring "
       "rank 0 over the ring's other endpoints); parameter-server modes wait for pservers",
       "reporter: the waiting trainer (trainer 0 in dygraph init); the endpoints (ip:port) it "
       "could not connect to: nothing listened there yet — that trainer had not reached its "
       "communicator init (not started, crashed or slow before it, its node down, or its "
       "endpoint computed from another --ips order). An endpoint is a trainer id only through "
       "PADDLE_TRAINER_ENDPOINTS (index = trainer id); the LAST list printed is who never "
       "joined. Mapped and a minority: not_joined at low; unmapped: nobody (read by "
       "log_paddle_endpoints)",
       r"not ready endpoints:\s?\[(?P<eps>[^\]\n]{0,8000})\]", ("not ready endpoints",),
       "paddle_endpoints"),
    _p("paddle.trainer_endpoints",
       "PaddlePaddle launchers (the trainers' PADDLE_TRAINER_ENDPOINTS)",
       "collective.py: PADDLE_TRAINER_ENDPOINTS = \",\".join(job_endpoints), job_endpoints = "
       "[f\"{h}:{p + start_port}\" for h in ips for p in range(replicas)], printed in "
       "Container.__str__'s \"env {…}\" (2.6; 3.0 with FLAGS_print_launcher_env); the legacy "
       "launch_utils' pretty_print_envs table row (values of 45+ characters cut to \"... \" + "
       "the last 41) and its endpoints.log (\"PADDLE_TRAINER_ENDPOINTS: \" then one per line)",
       "Paddle 2.6 – 3.0 (python/paddle/distributed/launch/controllers/collective.py and "
       "fleet/launch_utils.py read in the paddlepaddle 2.6.2 and 3.0.0 wheels)",
       "python/paddle/distributed/launch/controllers/collective.py (PADDLE_TRAINER_ID = i + "
       "ips.index(node ip) × replicas = the endpoint's index) + fleet/launch_utils.py "
       "(get_cluster: trainer ranks in --ips order, trainers_endpoints in the same order)",
       "a MAP, not an event: endpoint i of the list is trainer id i (the global rank) on the "
       "node that printed it; a node started with another --ips order has another map. Joined "
       "with wait_server_ready's not-ready endpoints (read by log_paddle_endpoints)",
       r"PADDLE_TRAINER_ENDPOINTS['\"]?\s{0,64}[:=|]?\s{0,64}['\"]?(?P<eps>(?:[\w.-]{1,253}:"
       r"\d{1,5},){0,4095}[\w.-]{1,253}:\d{1,5})(?![\w.:-])", ("paddle_trainer_endpoints",),
       "paddle_endpoints"),
    _p("deepspeed.launcher.process_spawned", "DeepSpeed launcher (deepspeed.launcher.launch, "
       "one per node)",
       'logger.info(f"process {process.pid} spawned with command: {cmd}") — cmd the list '
       "[python, -u, script, '--local_rank=N', …] (no --local_rank with --no_local_rank); before "
       'it: logger.info(f"nnodes={…}, num_local_procs={…}, node_rank={…}") and '
       'logger.info(f"global_rank_mapping={global_rank_mapping}")',
       "DeepSpeed 0.13.2 – 0.16 (deepspeed/launcher/launch.py read at the tags v0.15.0 and "
       "v0.16.0; added by #5004, first tagged v0.13.2; absent at v0.9.0, where the launcher "
       "prints no pid at start)",
       "deepspeed/launcher/launch.py (main: local process i of node node_rank is global rank "
       "global_rank_mapping[node][i]; LOCAL_RANK = that rank % num_local_procs at 0.16, i before)",
       "a MAP, not an event: the pid of the launcher's child that holds local rank N on this "
       "node (the global rank when the launcher says nnodes=1, or through global_rank_mapping "
       "and node_rank). The launcher's failure lines never name the failed process "
       "(sigkill_handler lists every child and prints the LAST spawned command with the first "
       "non-zero code its 1 s poll of an unordered set found); joined with a death that names a "
       "pid — the kernel's OOM killer — it names the rank whose process was killed "
       "(read by log_oom_kill)",
       r"(?<![\w-])process (?P<pid>\d{1,10}) spawned with command: \[", ("spawned with command",),
       "oom_kill"),
    _p("kernel.oom_kill.killed_process", "Linux kernel OOM killer (mm/oom_kill.c)",
       'pr_err("%s: Killed process %d (%s) total-vm:%lukB, anon-rss:%lukB, file-rss:%lukB, '
       'shmem-rss:%lukB, UID:%u pgtables:%lukB oom_score_adj:%hd\\n", message, '
       "task_pid_nr(victim), victim->comm, …) with message \"Out of memory\", \"Memory cgroup "
       'out of memory" or "Out of memory (oom_kill_allocating_task)"; before 4.19 '
       '"Killed process %d (%s) total-vm:…" after "%s: Kill process %d (%s) score %u or '
       'sacrifice child"',
       "Linux 4.x – 6.x (oom_kill_process read in a pre-4.19 tree — no message prefix, the "
       "selection line first —, in the 4.19 reorganisation and in a 6.x build; UID / pgtables "
       "/ oom_score_adj added in 5.x; no release tag could be pinned with the tools at hand)",
       "mm/oom_kill.c (__oom_kill_process: the victim — the chosen task, or before 4.19 a child "
       "of it — gets SIGKILL)",
       "reporter: the kernel of one host (dmesg, journalctl -k, a node's console); the pid (in "
       "the host's pid namespace — a container's own pids differ) and comm of the process it "
       "SIGKILLed for memory: the whole host's memory (Out of memory) or one cgroup's — a "
       "container or a Slurm step — (Memory cgroup out of memory). The victim is the "
       "largest process by badness, not necessarily the one that grew. Joined with a launcher's "
       "pid map (DeepSpeed's spawned lines, Ray Train's worker list) whose command name "
       "matches the comm: that rank's process was killed — a culprit at low; several ranks: "
       "suspects; a pid off the map: nobody, the pid in the reason (read by log_oom_kill)",
       r"(?:Memory cgroup out of memory|Out of memory(?: \(oom_kill_allocating_task\))?): "
       r"Killed process (?P<pid>\d{1,10}) \((?P<comm>[^()\n]{0,64})\)|(?<![\w-])Killed process "
       r"(?P<pid2>\d{1,10}) \((?P<comm2>[^()\n]{0,64})\) total-vm:", ("killed process",),
       "oom_kill"),
    _p("kernel.oom_kill.summary", "Linux kernel OOM killer (mm/oom_kill.c, one-line summary)",
       'pr_info("oom-kill:constraint=%s,nodemask=%*pbl", …); cpuset and memcg context '
       '(",oom_memcg=%s", ",task_memcg=%s"); pr_cont(",task=%s,pid=%d,uid=%d\\n", '
       "victim->comm, victim->pid, …)",
       "Linux 4.19 – 6.x (dump_oom_summary, added in the 4.19 reorganisation of the OOM report; "
       "the same words in a 6.x build)",
       "mm/oom_kill.c (dump_oom_summary, printed with the kill)",
       "reporter: the kernel of one host; the same victim as the 'Killed process' line (its "
       "comm and pid, the constraint: CONSTRAINT_MEMCG for a cgroup's limit, CONSTRAINT_NONE for "
       "the host's memory). Read as that line (read by log_oom_kill)",
       r"oom-kill:constraint=(?P<constraint>CONSTRAINT_[A-Z_]{1,24}),[^\n]{0,4000}?,task="
       r"(?P<comm>[^,\n]{0,64}),pid=(?P<pid>\d{1,10}),uid=\d{1,10}", ("oom-kill:constraint",),
       "oom_kill"),
    _p("tf.resource.oom_allocating", "TensorFlow op kernels (OpKernelContext::allocate_tensor)",
       'errors::ResourceExhausted("OOM when allocating tensor with shape", '
       'shape.DebugString(), " and type ", DataTypeString(type), " on ", '
       'params_->device->name(), " by allocator ", a->Name()) → "OOM when allocating tensor with '
       'shape[…] and type float on /job:J/replica:R/task:I/device:GPU:0 by allocator GPU_0_bfc"',
       "TF 1.x (late) – 2.x (tensorflow/core/framework/op_kernel.cc: the device-naming form in "
       "the Status::OK and the absl::Status versions of allocate_tensor; an early 1.x form "
       "printed only the shape and names no task — not read here; no release tag pinned with "
       "the tools at hand)",
       "tensorflow/core/framework/op_kernel.cc (OpKernelContext::allocate_tensor: the device's "
       "allocator could not give the kernel its output)",
       "reporter: the process of task I (its kernel, on its device); its OWN failure: the "
       "allocator of that device ran out of memory (the error then travels to the client, "
       "often behind \"From /job:…/task:I:\"). A TASK of the TF cluster (/job:localhost/…/task:0 "
       "is a lone process), not a rank: nobody named as a rank (read by log_rankless)",
       r"OOM when allocating tensor with shape ?\[[^\]\n]{0,400}\] and type \w{1,32} on "
       r"/job:(?P<job>[\w.-]{1,64})/replica:\d{1,7}/task:(?P<task>\d{1,7})/device:"
       r"(?P<device>[A-Za-z_]{1,16}:\d{1,5})", ("oom when allocating tensor",), "rankless"),
    _p("tsl.coordination.task_restarted", "TensorFlow / XLA TSL coordination service "
       "(RegisterTask, RecordHeartbeat)",
       'StrCat(task_name, " unexpectedly tried to connect with a different incarnation. It has '
       'likely restarted.") / "… unexpectedly tried to connect while it is already in error. '
       'ResetTask() should be called before a subsequent connect attempt." (newer); '
       '"Duplicate task registration with task_name=%s" (older); SetTaskError\'s '
       '"%s has been set to ERROR in coordination service: … Incarnation ID mismatch: expecting '
       '… but got …. This means the remote task has restarted." (TaskState::RecordHeartbeat; '
       'newest: "%s Heartbeat: Incarnation ID mismatch: … The task has restarted and likely '
       'crashed earlier …")',
       "TF 2.x (tensorflow/core/distributed_runtime/coordination/coordination_service.cc read at "
       "the stored commit 0c5f998: the 'Duplicate task registration' form) and the later "
       "TF / xla/tsl versions (absl::Status; the 'different incarnation' form, 'Existing "
       "error: …' appended to the in-error form in the newest); no release tag pinned",
       "coordination_service.cc (RegisterTask: a task registers while the service holds it "
       "connected or in error; RecordHeartbeat: a heartbeat from another incarnation)",
       "reporter: the coordination service (in task 0), propagated to every connected task (each "
       "prints it in its own error: a consequence there). The named TASK's process was replaced "
       "— its earlier incarnation ended (a crash, a kill, a preemption) and came back before its "
       "heartbeat timed out — or a second process claimed that task (a duplicate launch, "
       "another job on the same coordinator address). Which, the line does not say; a TASK "
       "(JAX's jax_worker task i is process i), not a rank: nobody named (read by log_rankless)",
       r"(?P<task>/job:(?P<job>[\w.-]{1,64})/replica:\d{1,7}/task:(?P<tid>\d{1,7})) "
       r"(?:unexpectedly tried to connect (?P<how>with a different incarnation|while it is "
       r"already in error)|has been set to ERROR in coordination service: [^\n]{0,200}?"
       r"Incarnation ID mismatch|Heartbeat: Incarnation ID mismatch)|Duplicate task "
       r"registration with task_name=/job:"
       r"(?P<job2>[\w.-]{1,64})/replica:\d{1,7}/task:(?P<tid2>\d{1,7})",
       ("unexpectedly tried to connect", "incarnation id mismatch",
        "duplicate task registration"), "rankless"),
    _p("jax.distributed.fatal_error", "JAX / XLA distributed runtime client "
       "(DistributedRuntimeClient::Options::missed_heartbeat_callback)",
       'LOG(QFATAL) << "Terminating process because the JAX distributed service detected fatal '
       'errors. This most likely indicates that another task died; see the other task logs for '
       'more details. Disable Python buffering, i.e. `python -u`, to be sure to see all the '
       'previous output. absl::Status: " << status; older: "Terminating process because the '
       'coordinator detected missing heartbeats. This most likely indicates that another task '
       'died; …" / "Terminating process because of missing heartbeat response from the '
       'coordinator. This most likely indicates that the coordinator task died; …"',
       "xla/pjrt/distributed/client.h read at openxla/xla 001918b (the two older forms, "
       "xla::Status) and openxla/openxla cb1507e (the 'JAX distributed service' form, "
       "absl::Status); no release tag pinned with the tools at hand",
       "xla/pjrt/distributed/client.h (the callback the coordination service agent calls when "
       "it polls an error from the service, or stops hearing the coordinator)",
       "reporter: a JAX process ending ITSELF because the service reported an error (another "
       "task died) — a VICTIM; the line names no task (the absl::Status after it may: a "
       "heartbeat or barrier notice, read by log_xla_health / log_xla_coord, which then take "
       "the line). The coordinator form suspects JAX process 0 or the network. Nobody named "
       "(read by log_rankless)",
       r"Terminating process because (?:the JAX distributed service detected fatal errors|the "
       r"coordinator detected missing heartbeats|(?P<coord>of missing heartbeat response from "
       r"the coordinator))", ("terminating process because",), "rankless"),
    _p("tsl.coordination.rpc_failed", "XLA / TSL coordination service agent "
       "(TrimCoordinationErrorMessage)",
       '"Failed to send RPC to coordination service. Either the leader task died/restarted '
       "unexpectedly or this task is experiencing network issues. Check earlier logs from this "
       'task and the leader (usually slice 0 process/task/worker 0) to debug further.\\n" + the '
       "gRPC detail, on an UNAVAILABLE status without the service's error payload",
       "xla/tsl/distributed_runtime/coordination/coordination_service_error_util.cc read at a "
       "stored commit of a fork (fractalyze/zkx c3db433) and through the index; no release tag "
       "pinned with the tools at hand",
       "coordination_service_error_util.cc (TrimCoordinationErrorMessage: an agent's RPC that "
       "never reached the service)",
       "reporter: one task whose RPC to the service (in the leader, JAX process 0) failed: the "
       "leader died or restarted, or this task's network failed — which, the line does not "
       "say; no task named, nobody (read by log_rankless)",
       r"Failed to send RPC to coordination service\. Either the leader task died",
       ("failed to send rpc to coordination service",), "rankless"),
    _p("ray.train.training_failed", "Ray Train (BaseTrainer.fit's TrainingFailedError)",
       'TrainingFailedError._RESTORE_MSG: "The Ray Train run failed. Please inspect the previous '
       'error messages for a cause. After fixing the issue …" (with _FAILURE_CONFIG_MSG when '
       "the trainable errored), raised from the worker's error",
       "Ray 2.9 – 2.40 (ray/train/base_trainer.py read in the ray-2.9.0 and ray-2.40.0 wheels: "
       "the same message)",
       "ray/train/base_trainer.py (BaseTrainer.fit: the run's result carried an error)",
       "reporter: the driver; the run failed and the cause is in the messages before it — no "
       "worker, no rank named: nobody (read by log_rankless; 'Worker N has failed.' and the "
       "pid map name the rank when printed)",
       r"The Ray Train run failed\. Please inspect the previous error messages",
       ("the ray train run failed",), "rankless"),
    _p("verl.worker_group.actor_name", "verl (RayWorkerGroup, the name it gives each worker actor)",
       'name = f"{self.name_prefix}{cia_name}_{pg_idx}:{local_rank}"  # e.g. Worker_2:5 — '
       "shown by Ray's ActorDiedError as its tab-indented \"name: …\" field",
       "verl 0.3 – 0.5 (verl/single_controller/ray/base.py read in the verl-0.3.0.post1 and "
       "verl-0.5.0 wheels: the same loop and name; name_prefix a random 6-character string "
       "unless given)",
       "verl/single_controller/ray/base.py (RayWorkerGroup._init_with_resource_pool: rank += 1 "
       "for each local_rank of each placement group in order, every group local_world_size "
       "wide, so rank = pg_idx * local_world_size + local_rank; RANK set to it)",
       "a MAP, not an event: the worker group's RANK of a named actor — local_rank itself in "
       "placement group 0; past it, local_world_size (not in the name) is needed and nothing is "
       "named. Read only inside an ActorDiedError whose cause is a failing exit type: that "
       "worker's process died. The driver's ray.get over the group's calls (in rank order) "
       "raises the first error in LIST order once every call is back (ray/_private/worker.py), "
       "so the named worker is the lowest-rank failure, not the first: a suspect, never a "
       "culprit (read by log_ray_pids)",
       r"^\s{0,8}(?:\\t)?\s{0,8}name: [A-Za-z0-9]{0,64}?(?P<cls>[A-Za-z_]\w{0,80})_"
       r"(?P<pg>\d{1,5}):(?P<rank>\d{1,5})\s*$", ("name: ",), "ray_pids"),
)

BY_ID: dict[str, Pattern] = {p.id: p for p in CATALOGUE}
if len(BY_ID) != len(CATALOGUE):  # pragma: no cover - a duplicated id is a programming error
    raise RuntimeError("duplicate pattern id in the catalogue")


def triggers_of(pids: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Every lower-case trigger of these catalogue patterns, once each (a scanner's pre-filter)."""
    return tuple(sorted({t for pid in pids for t in BY_ID[pid].triggers}))


def pattern(pid: str) -> Pattern:
    return BY_ID[pid]


@dataclass(frozen=True)
class Hit:
    pattern: Pattern
    match: re.Match[str]


def scan(line: str, low: str | None = None, kinds: frozenset[str] | None = None) -> list[Hit]:
    """Every catalogue pattern that matches ``line`` (``low``: the same, lower-cased)."""
    low = line.lower() if low is None else low
    hits = []
    for p in CATALOGUE:
        if kinds is not None and p.kind not in kinds:
            continue
        if not any(t in low for t in p.triggers):
            continue
        m = p.regex.search(line)
        if m:
            hits.append(Hit(p, m))
    return hits


class NumberTooLong(ValueError):
    """A number in a log line longer than :data:`MAX_DIGITS` (bad input, not a rank/SeqNum)."""


def parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise NumberTooLong(text[:20])
    return int(text)


def parse_rank(text: str | None) -> int | None:
    """A rank from parsed text: the one place a rank number is read (and bounded by
    :data:`MAX_RANK`; a larger number is not a rank of any job and reads as unknown)."""
    if text is None:
        return None
    text = text.strip()
    # ASCII digits only: str.isdigit() is also true of '²' and '①', which int() refuses (a
    # ValueError out of every reader that trusts this bound)
    if not (text.isascii() and text.isdigit()) or len(text) > 7:
        return None
    rank = int(text)
    return rank if rank <= MAX_RANK else None


def named_rank(text: str | None) -> list[int]:
    """The ranks a line names when it names one: ``[r]``, or ``[]`` where the text is no rank
    (:func:`parse_rank`) — a suspect list, as :func:`parse_rank_list` gives for several."""
    rank = parse_rank(text)
    return [] if rank is None else [rank]


def parse_rank_list(text: str) -> list[int]:
    """``"4, 5, 6, 7"`` / ``"[4, 5]"`` / RAS ranges ``"3-5, 9"`` → sorted distinct ranks."""
    out: set[int] = set()
    for part in re.split(r"[,\s\[\]]+", text.strip())[:4096]:
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        a, b = parse_rank(lo), parse_rank(hi) if sep else None
        if a is None:
            continue
        if b is not None and a <= b and b - a <= 4096:
            out.update(range(a, b + 1))
        else:
            out.add(a)
    return sorted(out)


def markdown_table() -> str:
    """The catalogue as the table docs/stalls.md shows."""
    rows = ["| pattern | emitter | message | versions | what it proves | source |",
            "|---|---|---|---|---|---|"]
    for p in CATALOGUE:
        cells = [f"`{p.id}`", p.emitter, p.message, p.versions, p.proves, f"`{p.source}`"]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)
