"""Each catalogue pattern (analyzers/stalls/grammar.py) on lines built from the emitter's OWN
format string, at the versions it names, and what the analysis concludes from them.

Every builder below writes the line exactly as the cited ``printf``/``c10::str``/Python format
prints it (file and version in its docstring), plus the launcher prefix torchrun adds. The
verbatim problem lines of issue 23 are kept as they were reported.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import logs_parser as lp
from stormotel.analyzers.stalls.log_analysis import analyze_logs

from tests.stalls.helpers import run_json

REPO = Path(__file__).resolve().parents[2]
REAL = Path(__file__).parent / "data" / "real"


def analyze(tmp_path: Path, text: str, **kw: int):  # type: ignore[no-untyped-def]
    log = tmp_path / "job.log"
    log.write_text(text)
    result = analyze_logs(lp.parse_logs([str(log)]), **kw)
    return result, [f for f in result.findings if f.consequence_of is None]


def cli(tmp_path: Path, text: str, *args: str) -> tuple[int, list[dict]]:  # type: ignore[type-arg]
    log = tmp_path / "job.log"
    log.write_text(text)
    code, report = run_json("--logs", str(log), *args)
    return code, [f for f in report["stall_findings"] if f["consequence_of"] is None]


# --- torch c10d ProcessGroupGloo: monitored_barrier -------------------------------------------
def barrier_ranks(ranks: list[int], ms: int) -> str:
    """ProcessGroupGloo.cpp (1.10 .. main), waitAllRanks: c10::str("[Rank 0]: Ranks ",
    c10::Join(", ", failedRanks), " failed to pass monitoredBarrier in ", timeout, " ms")."""
    return (f"[Rank 0]: Ranks {', '.join(map(str, ranks))} failed to pass monitoredBarrier in "
            f"{ms} ms")


def test_issue_line_monitored_barrier_names_ranks_4_to_7_not_rank_0(tmp_path: Path) -> None:
    # the verbatim line of issue 23, as rank 0 raises it (torchrun prefix)
    text = ("[rank0]: Traceback (most recent call last):\n"
            '[rank0]:   File "/w/train.py", line 40, in <module>\n'
            "[rank0]:     dist.monitored_barrier(timeout=timedelta(seconds=30), "
            "wait_all_ranks=True)\n"
            "[rank0]: RuntimeError: [Rank 0]: Ranks 4, 5, 6, 7 failed to pass monitoredBarrier "
            "in 30000 ms\n")
    code, roots = cli(tmp_path, text)
    assert code == 1
    assert [(f["kind"], f["ranks"]) for f in roots] == [("straggler", [4, 5, 6, 7])]
    assert roots[0]["evidence"]["pattern"] == "torch.gloo.monitored_barrier_ranks"
    assert roots[0]["evidence"]["witnesses"] == [0]
    assert not any(0 in f["ranks"] for f in roots)


def test_monitored_barrier_wait_all_format(tmp_path: Path) -> None:
    text = f"[rank0]:[E1121 05:30:00.1 ProcessGroupGloo.cpp:2875] {barrier_ranks([2, 9], 600)}\n"
    _, [root] = analyze(tmp_path, text)
    assert (root.kind, root.ranks, root.confidence) == ("straggler", [2, 9], "high")


def test_monitored_barrier_first_failure_only(tmp_path: Path) -> None:
    """ProcessGroupGloo.cpp (1.10+), not waitAllRanks: logAndThrow(error, c10::str(error,
    "\\n Original exception: \\n", e.what())) with error = "[Rank 0]: Rank " r " failed to pass
    monitoredBarrier in " ms " ms" — later ranks were not probed, so medium."""
    text = ("RuntimeError: [Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms\n"
            " Original exception: \n"
            "[../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
            "[2401:db00:eef0:1100:3560:0:1c05:25d]:8594\n")
    _, [root] = analyze(tmp_path, text)
    assert (root.kind, root.ranks, root.confidence) == ("straggler", [1], "medium")
    assert root.evidence["pattern"] == "torch.gloo.monitored_barrier_rank"


def test_monitored_barrier_ran_out_of_time_is_a_suspect(tmp_path: Path) -> None:
    """ProcessGroupGloo.cpp checkRemainingTime (1.10+): c10::str("Rank ", currentRank, " timed
    out in monitoredBarrier after ", ms, " ms.") "\\n" "Successfully processed ranks: 1, 2"."""
    text = ("RuntimeError: Rank 0 timed out in monitoredBarrier after 30000 ms.\n"
            "Successfully processed ranks: 1, 2\n")
    _, [root] = analyze(tmp_path, text)
    assert (root.kind, root.ranks) == ("undecided", [])
    assert root.evidence["suspects"] == [3]


# --- torch c10d desync debug (TraceUtils.h) ------------------------------------------------------
def test_desync_never_joined_names_the_ranks(tmp_path: Path) -> None:
    """TraceUtils.h analyzeMissingRanks (2.0+): "\\n\\t - To our best knowledge, ranks [" …
    "] are the lagging ranks that caused this timeout. They never joined any collectives"."""
    text = ("[rank0]:[E515 18:36:47.3 ProcessGroupNCCL.cpp:1937] [Rank 0]\n"
            "\t - [0] Timeout at collective: ALLREDUCE, #5\n"
            "\t - To our best knowledge, ranks [3, 6] are the lagging ranks that caused this "
            "timeout. They never joined any collectives\n")
    _, [root] = analyze(tmp_path, text)
    assert (root.kind, root.ranks) == ("straggler", [3, 6])
    assert root.evidence["pattern"] == "torch.nccl.desync_never_joined"


# --- torch c10d ProcessGroupNCCL ------------------------------------------------------------
PRE = "[rank{r}]:[E1121 05:30:{s:02d}.415871201 ProcessGroupNCCL.cpp:1743] "
TAG = "[PG ID 0 PG GUID 0(default_pg) Rank {r}] "


def dump_signal(r: int, frm: str, enq: int, done: int) -> str:
    """ProcessGroupNCCL.cpp (2.5+) getNCCLWatchdogTimeoutErrorMsg: logPrefix() "Received a dump
    signal due to a collective timeout from " extraMsg " and we will try our best to dump the
    debug info. " "Last enqueued NCCL work: " … ", last completed NCCL work: " … "." …, with
    extraMsg "this local rank" or " rank N" (two spaces in the printed line)."""
    return (PRE.format(r=r, s=1) + TAG.format(r=r) + "Received a dump signal due to a "
            f"collective timeout from {frm} and we will try our best to dump the debug info. "
            f"Last enqueued NCCL work: {enq}, last completed NCCL work: {done}.This is most "
            "likely caused by incorrect usages of collectives, e.g., wrong sizes used across "
            "ranks\n")


def test_the_rank_that_signalled_the_dump_is_not_blamed(tmp_path: Path) -> None:
    text = dump_signal(3, "this local rank", 10, 9) + "".join(
        dump_signal(r, " rank 3", 10, 9) for r in (0, 1, 2))
    result, roots = analyze(tmp_path, text, world_size=4)
    assert all(3 not in f.ranks for f in result.findings)
    st = {s.rank: s.role for s in result.states["0:default_pg"]}
    assert st == {0: "observer", 1: "observer", 2: "observer", 3: "initiator"}
    assert [f.kind for f in roots] == ["undecided"]


def test_idle_observers_are_the_stragglers(tmp_path: Path) -> None:
    text = dump_signal(0, "this local rank", 10, 9) + dump_signal(1, " rank 0", 10, 9) + \
        dump_signal(2, " rank 0", 9, 9) + dump_signal(3, " rank 0", 10, 9)
    _, [root] = analyze(tmp_path, text, world_size=4)
    assert (root.kind, root.ranks) == ("straggler", [2])
    assert root.evidence["pattern"] == "torch.nccl.timeout_counters"


def test_watchdog_timeout_without_seqnum(tmp_path: Path) -> None:
    """ProcessGroupNCCL.cpp 1.8/1.9: "Watchdog caught collective operation timeout: " <<
    "WorkNCCL(OpType=" … ", Timeout(ms)=" … ")" " ran for " … " milliseconds before timing out."
    (no SeqNum yet): read, a stall, nobody named."""
    text = "".join(
        f"  what():  [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(OpType="
        f"ALLREDUCE, Timeout(ms)=1800000) ran for 180{r}530 milliseconds before timing out.\n"
        for r in (3, 1, 4))
    parsed = lp.parse_logs([str(_write(tmp_path, text))])
    assert {(e.seq, e.op) for e in parsed.events if e.kind == lp.TIMEOUT} == {(None, "ALLREDUCE")}
    code, roots = cli(tmp_path, text)
    assert code == 1 and [f["kind"] for f in roots] == ["undecided"]


def test_heartbeat_monitor_alone_is_a_stall_not_health(tmp_path: Path) -> None:
    """ProcessGroupNCCL.cpp (2.2+) heartbeatMonitor: logPrefix() "Heartbeat monitor timed out!
    Process will be terminated after dumping debug info. workMetaList_.size()=" …"""
    text = ("[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 5 Rank 0] Heartbeat monitor timed out! "
            "Process will be terminated after dumping debug info. workMetaList_.size()=3\n")
    code, [root] = cli(tmp_path, text)
    assert code == 1 and (root["kind"], root["ranks"]) == ("undecided", [])
    assert root["evidence"]["pattern"] == "torch.nccl.heartbeat"


def test_bare_rank_tag_cuda_error_is_a_suspect_not_a_culprit(tmp_path: Path) -> None:
    """ProcessGroupNCCL.cpp 2.1/2.2: "[Rank " r "] NCCL watchdog thread terminated with exception:
    " … — the rank of SOME group (vLLM/Ray processes have several)."""
    text = ("[E ProcessGroupNCCL.cpp:916] [Rank 0] NCCL watchdog thread terminated with "
            "exception: CUDA error: an illegal memory access was encountered\n")
    result, roots = analyze(tmp_path, text)
    assert roots and all(f.kind == "undecided" and not f.ranks for f in roots)
    [cuda] = [f for f in result.findings if f.evidence["pattern"] == "torch.cuda.error"]
    assert (cuda.kind, cuda.evidence["suspects"]) == ("undecided", [0])


# --- TORCH_DISTRIBUTED_DEBUG=DETAIL (ProcessGroupWrapper.cpp) --------------------------------
def running(r: int, seq: int) -> str:
    """ProcessGroupWrapper.cpp runCollectiveChecks (1.13+, TORCH_CPP_LOG_LEVEL=INFO):
    LOG(INFO) << "[Rank " << rank << "] " << "Running collective: " << fingerprint, where the
    fingerprint prints as CollectiveFingerPrint(SequenceNumber=…, OpType=…, TensorShape=[…],
    TensorDtypes=…, TensorDeviceTypes=…)."""
    return (f"[I ProcessGroupWrapper.cpp:562] [Rank {r}] Running collective: "
            f"CollectiveFingerPrint(SequenceNumber={seq}, OpType=ALLREDUCE, TensorShape=[], "
            "TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), "
            "device=cuda, layout=Strided (default), requires_grad=false (default)))\n")


def test_detail_trace_names_the_rank_behind(tmp_path: Path) -> None:
    text = running(2, 1276) + running(0, 1277) + running(1, 1277) + running(3, 1277)
    _, [root] = analyze(tmp_path, text)
    assert (root.kind, root.ranks) == ("straggler", [2])
    assert root.evidence["pattern"] == "torch.detail.running_collective"


# --- torchelastic ------------------------------------------------------------------------------
def summary(entries: list[tuple[int, int, str]], root: tuple[int, int, str]) -> str:
    """torch/distributed/elastic/multiprocessing/errors/__init__.py ChildFailedError.format_msg
    (1.9+): a "Failures:" block, "Root Cause (first observed failure):", each entry
    "[i]:" then "  time      : …" "  host      : …" "  rank      : r (local_rank: l)"
    "  exitcode  : c (pid: p)" "  error_file: …" "  traceback : …"."""
    def entry(i: int, e: tuple[int, int, str]) -> str:
        r, code, tb = e
        return (f"[{i}]:\n  time      : 2024-03-05_07:01:51\n  host      : node-0\n"
                f"  rank      : {r} (local_rank: {r})\n  exitcode  : {code} (pid: {100 + r})\n"
                f"  error_file: <N/A>\n  traceback : {tb}\n")
    fails = "".join(entry(i + 1, e) for i, e in enumerate(entries)) or "  <NO_OTHER_FAILURES>\n"
    return ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
            "============================================================\ntrain.py FAILED\n"
            "------------------------------------------------------------\nFailures:\n" + fails
            + "------------------------------------------------------------\n"
            "Root Cause (first observed failure):\n" + entry(0, root)
            + "============================================================\n")


def test_torchelastic_sigabrt_alone_is_undecided_not_healthy(tmp_path: Path) -> None:
    code, [root] = cli(tmp_path, summary([], (5, -6, "Signal 6 (SIGABRT) received by PID 105")))
    assert code == 1 and (root["kind"], root["ranks"]) == ("undecided", [])
    assert root["evidence"]["suspects"] == [5]
    assert root["evidence"]["pattern"] == "torchelastic.root_cause"


def test_torchelastic_sigkill_names_the_rank(tmp_path: Path) -> None:
    _, [root] = analyze(tmp_path, summary([], (7, -9, "Signal 9 (SIGKILL) received by PID 7")))
    assert (root.kind, root.ranks, root.evidence["signal"]) == ("rank_failure", [7], "SIGKILL")


def test_torchelastic_first_failure_tied_in_one_second_names_nobody(tmp_path: Path) -> None:
    tb = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
    _, roots = analyze(tmp_path, summary([(1, 1, tb), (2, 1, tb), (3, 1, tb)], (0, 1, tb)))
    assert [(f.kind, f.ranks) for f in roots] == [("undecided", [])]


_AGENT = "[2024-05-01 10:11:12,123] torch.distributed.elastic.multiprocessing.api: [{lvl}] "


def agent_failed(code: int, local: int, pid: int = 1322) -> str:
    """torch/distributed/elastic/multiprocessing/api.py (1.10+, PContext._poll): "failed
    (exitcode: %s) local_rank: %s (pid: %s) of binary: %s" — a LOCAL rank of one node."""
    return (_AGENT.format(lvl="ERROR") + f"failed (exitcode: {code}) local_rank: {local} "
            f"(pid: {pid}) of binary: /usr/bin/python\n")


def agent_closing(pid: int) -> str:
    """multiprocessing/api.py (SubprocessContext._close): "Sending process %s closing signal
    %s" — one line per worker of the node still running."""
    return _AGENT.format(lvl="WARNING") + f"Sending process {pid} closing signal SIGTERM\n"


def rendezvous_result(group_rank: int, nodes: int, per_node: int) -> str:
    """agent/server/api.py (_rendezvous, 1.9+): "[%(role)s] Rendezvous complete for workers.
    Result:\\n  restart_count=…\\n  master_addr=…\\n  master_port=…\\n  group_rank=%s\\n
    group_world_size=%s\\n  local_ranks=%s\\n  role_ranks=%s\\n  global_ranks=%s\\n
    role_world_sizes=%s\\n  global_world_sizes=%s\\n"; global = group_rank * per_node + local
    (_assign_worker_ranks, homogeneous nodes)."""
    local = list(range(per_node))
    glob = [group_rank * per_node + r for r in local]
    world = [nodes * per_node] * per_node
    return ("INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for "
            "workers. Result:\n  restart_count=0\n  master_addr=node0\n  master_port=29500\n"
            f"  group_rank={group_rank}\n  group_world_size={nodes}\n  local_ranks={local}\n"
            f"  role_ranks={glob}\n  global_ranks={glob}\n  role_world_sizes={world}\n"
            f"  global_world_sizes={world}\n\n")


def launch_configs(max_nodes: int, nproc: int) -> str:
    """launcher/api.py (launch_agent, 1.9+): "Starting elastic_operator with launch configs:
    \\n  entrypoint       : %(entrypoint)s\\n  min_nodes        : %(min_nodes)s\\n  max_nodes
          : %(max_nodes)s\\n  nproc_per_node   : %(nproc_per_node)s\\n …"."""
    return ("INFO:torch.distributed.launcher.api:Starting elastic_operator with launch configs:\n"
            "  entrypoint       : train.py\n  min_nodes        : 1\n"
            f"  max_nodes        : {max_nodes}\n  nproc_per_node   : {nproc}\n"
            "  run_id           : none\n  rdzv_backend     : static\n")


def test_torchelastic_local_rank_alone_is_presumed_global_at_low_only(tmp_path: Path) -> None:
    """global_rank = the node's offset + local_rank (_assign_worker_ranks): a lone agent line
    proves a local rank only. With nothing showing a second node, the node's only failure is
    read as that global rank under the pattern of a presumption, never above low."""
    _, [root] = analyze(tmp_path, agent_failed(-9, 0))
    assert (root.kind, root.ranks, root.confidence) == ("rank_failure", [0], "low")
    assert root.evidence["pattern"] == "torchelastic.worker_failed_one_node"
    assert "presumed one node" in root.evidence["rank_from"]
    from stormotel.analyzers.families import stall_verdict

    assert "one node presumed" in stall_verdict([root])  # the verdict line says it too
    # exit 1 (a Python exception of its own) with nobody seen waiting: the same presumption
    _, [root] = analyze(tmp_path, agent_failed(1, 3))
    assert (root.kind, root.ranks, root.confidence) == ("rank_failure", [3], "low")
    assert root.evidence["category"] == "exception"


def test_a_presumption_is_never_called_high() -> None:
    from stormotel.analyzers.stalls import calibration

    assert "torchelastic.worker_failed_one_node" in calibration.PRESUMED
    assert calibration.ceiling("torchelastic.worker_failed_one_node") == "low"


@pytest.mark.parametrize(("before", "world"), [
    (launch_configs(2, 4), None),                                   # max_nodes 2
    ("[rank12]:[W Utils.hpp] some warning\n", None),                # a rank above one node
    ("node-a: " + agent_closing(30), None),                         # agents of two hosts
    ("".join(agent_closing(20 + p) for p in range(1, 4)), 16),       # 4 workers of 16
    ("", 32),                                                       # a world above one node
])
def test_torchelastic_local_rank_is_not_presumed_when_a_second_node_shows(
        tmp_path: Path, before: str, world: int | None) -> None:
    kw = {"world_size": world} if world else {}
    failed = agent_failed(-9, 0, 20)
    _, [root] = analyze(tmp_path, before + ("node-b: " + failed if "node-a" in before
                                            else failed), **kw)
    assert (root.kind, root.ranks) == ("undecided", []), root.evidence


def test_torchelastic_exit_1_is_not_presumed_when_a_rank_waited(tmp_path: Path) -> None:
    """exit 1 is a timeout's exception as often as a bug: with a rank seen timing out, the
    node's first failure names nobody."""
    text = ("[rank1]:[E ProcessGroupNCCL.cpp:1182] [Rank 1] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n")
    _, roots = analyze(tmp_path, text + agent_failed(1, 1))
    assert not any(f.kind == "rank_failure" for f in roots), roots


def test_torchelastic_local_rank_of_one_node_of_several(tmp_path: Path) -> None:
    # 8 workers on this node, 40 in the job: local rank 5 is one of 5, 13, 21, 29, 37
    text = "".join(agent_closing(20 + p) for p in range(8) if p != 5) + agent_failed(-9, 5, 25)
    _, [root] = analyze(tmp_path, text, world_size=40)
    assert (root.kind, root.ranks) == ("undecided", [])
    assert root.evidence["candidates"] == [5, 13, 21, 29, 37]
    # a pdsh / srun --label host prefix names the node; its global rank still needs its offset
    _, [root] = analyze(tmp_path, "gpu-node-3: " + agent_failed(-9, 5, 25), world_size=40)
    assert (root.kind, root.evidence["host"]) == ("undecided", "gpu-node-3")
    assert "gpu-node-3" in root.evidence["reason"]


@pytest.mark.parametrize(("layout", "world", "rank"), [
    (rendezvous_result(0, 1, 4), None, 2),           # group_world_size=1: one node
    (rendezvous_result(1, 2, 4), None, 6),           # node 1 of 2: global_ranks [4..7]
    (launch_configs(1, 4), None, 2),                 # max_nodes 1
    (launch_configs(2, 4), 4, 2),                    # nproc_per_node == the world size
    ("".join(agent_closing(20 + p) for p in (0, 1, 3)), 4, 2),  # this agent ran the world
])
def test_torchelastic_local_rank_read_as_global_only_when_proven(
        tmp_path: Path, layout: str, world: int | None, rank: int) -> None:
    kw = {"world_size": world} if world else {}
    _, [root] = analyze(tmp_path, layout + agent_failed(-9, 2, 22), **kw)
    assert (root.kind, root.ranks, root.confidence) == ("rank_failure", [rank], "low")
    assert root.evidence["local_rank"] == 2 and root.evidence["rank_from"]


def test_torchelastic_max_nodes_above_one_proves_nothing(tmp_path: Path) -> None:
    _, [root] = analyze(tmp_path, launch_configs(2, 4) + agent_failed(-9, 2))
    assert root.kind == "undecided"


# --- NCCL NCCL_DEBUG_SUBSYS=COLL (src/enqueue.cc) -------------------------------------------------
def coll(r: int, op: str, opcount: int, count: int = 1024, nranks: int = 4,
         prefix: bool = True, comm: str | None = None) -> str:
    """src/debug.cc "%s:%d:%d [%d] NCCL INFO " + src/enqueue.cc (2.18: count %zi; 2.24+: %zu)
    "%s: opCount %lx sendbuff %p recvbuff %p count %zi datatype %d op %d root %d comm %p
    [nranks=%d] stream %p"."""
    head = f"[rank{r}]:" if prefix else ""
    return (f"{head}node1:{100 + r}:{200 + r} [{r}] NCCL INFO {op}: opCount {opcount:x} "
            f"sendbuff 0x7f{r}000 recvbuff 0x7f{r}800 count {count} datatype 7 op 0 root 0 "
            f"comm {comm or f'0x55aa{r:04x}'} [nranks={nranks}] stream 0x5600{r}\n")


def test_issue_nccl_coll_op_split_names_the_minority(tmp_path: Path) -> None:
    text = "".join(coll(r, "AllReduce", 0x28B) for r in range(4)) + "".join(
        coll(r, "AllGather" if r == 2 else "AllReduce", 0x28C) for r in range(4))
    code, [root] = cli(tmp_path, text)
    assert code == 1
    assert (root["kind"], root["ranks"], root["seq_id"]) == ("op_type_mismatch", [2], 0x28C)
    assert root["evidence"]["pattern"] == "nccl.coll" and root["confidence"] == "medium"


def test_nccl_coll_count_split_is_a_size_mismatch(tmp_path: Path) -> None:
    text = "".join(coll(r, "AllReduce", 0x10, count=999 if r == 0 else 1024)
                   for r in range(4))
    _, [root] = analyze(tmp_path, text)
    assert (root.kind, root.ranks) == ("size_mismatch", [0])


def test_nccl_coll_rank_behind(tmp_path: Path) -> None:
    text = "".join(coll(r, "AllReduce", 0x28) for r in range(4)) + "".join(
        coll(r, "AllReduce", 0x29) for r in (0, 1, 3))
    _, [root] = analyze(tmp_path, text)
    assert (root.kind, root.ranks) == ("straggler", [2])


def test_nccl_coll_rank_ahead_names_nobody(tmp_path: Path) -> None:
    """COLL lines are printed when a rank enqueues (src/enqueue.cc, host side, asynchronous):
    one rank that launched opCount 29 while three stopped at 28 ran an extra collective, or the
    three are blocked before their next launch — the counts cannot tell (as in RAS)."""
    text = "".join(coll(r, "AllReduce", 0x28) for r in range(4)) + coll(2, "Broadcast", 0x29)
    _, [root] = analyze(tmp_path, text)
    assert (root.kind, root.ranks) == ("undecided", [])
    assert root.evidence["ahead_ranks"] == [2]


def init_line(r: int, comm: str, nranks: int, v221: bool) -> str:
    """src/init.cc: 2.18 "comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId
    0x%llx - Init COMPLETE"; 2.21+ prefixes the function: "ncclCommInitRank comm %p …"."""
    fn = "ncclCommInitRank " if v221 else ""
    return (f"node1:{100 + r}:{200 + r} [{r}] NCCL INFO {fn}comm {comm} rank {r} nranks "
            f"{nranks} cudaDev {r} nvmlDev {r} busId {r}1000 commId 0x795520212f433144 - Init "
            "COMPLETE\n")


@pytest.mark.parametrize("v221", [False, True])
def test_nccl_coll_ranks_from_init_lines_without_launcher_prefix(tmp_path: Path,
                                                                 v221: bool) -> None:
    comms = {r: f"0x55fb6f3c{r:04x}" for r in range(4)}
    text = "".join(init_line(r, comms[r], 4, v221) for r in range(4)) + "".join(
        coll(r, "Broadcast" if r == 1 else "AllReduce", 0x5, prefix=False, comm=comms[r])
        for r in range(4))
    _, [root] = analyze(tmp_path, text)
    assert (root.kind, root.ranks) == ("op_type_mismatch", [1])
    assert "communicator ranks" in root.evidence["ranks_are"]


def test_nccl_coll_everyone_launched_is_undecided_not_healthy(tmp_path: Path) -> None:
    code, [root] = cli(tmp_path, "".join(coll(r, "AllReduce", 0x7) for r in range(4)))
    assert code == 1 and (root["kind"], root["ranks"]) == ("undecided", [])


# --- NCCL RAS (src/ras/client_support.cc) ------------------------------------------------------
def ras_member(r: int, count: int | None = None) -> str:
    """client_support.cc (2.24+): "  Rank %d -- GPU %s managed by process %d on node %s" and,
    for a one-rank group, "  Rank %d has launched up to operation %ld -- GPU %s managed by
    process %d on node %s"."""
    what = "" if count is None else f" has launched up to operation {count}"
    return (f"  Rank {r}{what} -- GPU {r % 8} managed by process {4830 + r} on node "
            f"10.0.0.{r // 8}\n")


def test_ras_2_24_count_split_names_the_rank_behind(tmp_path: Path) -> None:
    """2.24: "#%d-%d (%016lx) MISMATCH", "  Communicator ranks have different collective
    operation counts", "  %d ranks have launched up to operation %ld"."""
    text = ("Warnings\n========\n#0-0 (27a079b828ff1a75) MISMATCH\n"
            "  Communicator ranks have different collective operation counts\n"
            "  31 ranks have launched up to operation 6650\n" + ras_member(21, 6649) + "\n")
    code, [root] = cli(tmp_path, text)
    assert code == 1 and (root["kind"], root["ranks"]) == ("straggler", [21])
    assert root["evidence"]["pattern"] == "nccl.ras.count_group"


def test_ras_2_26_per_op_group_members(tmp_path: Path) -> None:
    """2.26+: "  Communicator ranks have different %s operation counts" per ncclFuncStr; the
    members of an outlier group follow its "%d ranks have launched up to operation %ld"."""
    text = ("#0-0 (9e17999afaa87dbb) MISMATCH\n"
            "  Communicator ranks have different AllReduce operation counts\n"
            "  30 ranks have launched up to operation 6650\n"
            "  2 ranks have launched up to operation 6649\n" + ras_member(4) + ras_member(20)
            + "\n")
    _, [root] = analyze(tmp_path, text)
    assert (root.kind, root.ranks, root.op) == ("straggler", [4, 20], "AllReduce")


def test_ras_missing_rank(tmp_path: Path) -> None:
    """2.24+: "  Missing communicator data from %d rank%s" "  The missing rank%s: %s"."""
    text = ("Errors\n======\n#0-0 (cf264af53edbe986) INCOMPLETE\n"
            "  Missing communicator data from 1 rank\n  The missing rank: 21\n")
    code, [root] = cli(tmp_path, text)
    assert code == 1 and (root["kind"], root["ranks"]) == ("straggler", [21])
    assert root["evidence"]["pattern"] == "nccl.ras.missing"


# --- the catalogue itself ------------------------------------------------------------------------
def test_catalogue_is_complete_and_documented() -> None:
    docs = (REPO / "docs" / "stalls.md").read_text()
    assert gr.markdown_table() in docs  # the table is written from the catalogue, not by hand
    for p in gr.CATALOGUE:
        assert p.id.count(".") >= 1 and p.message and p.versions and p.source and p.proves
        assert f"`{p.id}`" in docs, p.id
        assert all(t == t.lower() for t in p.triggers)


def test_every_log_finding_names_a_catalogue_pattern() -> None:
    for case in sorted(p for p in REAL.iterdir() if p.is_dir()):
        for f in analyze_logs(lp.parse_logs([str(case)])).findings:
            assert f.evidence.get("pattern") in gr.BY_ID, (case.name, f.kind, f.evidence)


def test_rank_lists_and_bounds() -> None:
    assert gr.parse_rank_list("4, 5, 6, 7") == [4, 5, 6, 7]
    assert gr.parse_rank_list("[3-5, 9]") == [3, 4, 5, 9]
    assert gr.parse_rank("12345678") is None and gr.parse_rank("x") is None
    assert gr.parse_rank("1000000") is None and gr.parse_rank("999999") == 999999
    assert gr.parse_rank_list("3, 5000000, 0-999999999") == [0, 3]  # bounds, no huge range


def _write(tmp_path: Path, text: str) -> Path:
    log = tmp_path / "job.log"
    log.write_text(text)
    return log


def test_ras_confidence_needs_the_communicator_to_be_the_world(tmp_path: Path) -> None:
    text = ("#0-0 (27a079b828ff1a75) MISMATCH\n"
            "  Communicator ranks have different collective operation counts\n"
            "  31 ranks have launched up to operation 6650\n" + ras_member(21, 6649) + "\n")
    _, [root] = analyze(tmp_path, text)
    assert root.confidence == "low"  # communicator ranks: global only for the world's comm
    _, [root] = analyze(tmp_path, text, world_size=32)
    assert (root.ranks, root.confidence) == ([21], "medium")


def test_nccl_coll_of_several_same_size_communicators_is_not_voted(tmp_path: Path) -> None:
    # three tensor-parallel pairs (nranks=2) progress independently: no split across them
    text = "".join(coll(r, "AllReduce", 0x5 if r < 4 else 0x4, nranks=2) for r in range(6))
    _, roots = analyze(tmp_path, text)
    assert all(not f.ranks for f in roots) and [f.kind for f in roots] == ["undecided"]


def test_the_same_error_on_every_rank_is_the_job_not_a_rank(tmp_path: Path) -> None:
    text = "".join(f"[rank{r}]: ValueError: tokenizer has no pad token\n" for r in range(4))
    _, roots = analyze(tmp_path, text)
    assert [(f.kind, f.ranks) for f in roots] == [("undecided", [])]
    assert roots[0].evidence["category"] == "every_rank"
    text = ("[rank2]: ValueError: tokenizer has no pad token\n"
            + "".join(f"[rank{r}]: step 10 loss 1.0\n" for r in (0, 1, 3)))
    _, [root] = analyze(tmp_path, text)
    assert (root.kind, root.ranks) == ("rank_failure", [2])


def test_ctrl_c_on_a_hung_job_is_not_a_failure(tmp_path: Path) -> None:
    text = ("[rank1]: Traceback (most recent call last):\n"
            '[rank1]:   File "/w/train.py", line 9, in <module>\n[rank1]: KeyboardInterrupt\n')
    _, roots = analyze(tmp_path, text)
    assert all(f.kind != "rank_failure" for f in roots)


@pytest.mark.parametrize("line", [
    # ProcessGroupNCCL.cpp broadcastUniqueNCCLID (2.1+; "retreiving" before): names group rank 0
    "[rank3]: torch.distributed.DistBackendError: [3] is setting up NCCL communicator and "
    "retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') "
    "got error: Socket Timeout",
    "RuntimeError: [1] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via "
    "c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer",
    # distributed_c10d.py _store_based_barrier (2.x wording)
    "RuntimeError: Timed out initializing process group in store based barrier on rank 3, for "
    "key: store_based_barrier_key:1 (world_size=8, num_workers_joined=7, timeout=0:30:00)",
    # TCPStore.cpp
    "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 "
    "clients joined.",
])
def test_setup_waits_are_stalls_that_never_name_the_waiter(tmp_path: Path, line: str) -> None:
    # issue 37: an ncclUniqueId wait points at the group's rank 0 (low, a presumption), never
    # at the rank that waits; the barrier/store counts alone name nobody
    code, roots = cli(tmp_path, line + "\n")
    named = [(f["kind"], f["ranks"], f["confidence"]) for f in roots]
    if "ncclUniqueId" in line:
        assert code == 1 and named == [("straggler", [0], "low")]
    else:
        assert code == 1 and [(k, r) for k, r, _ in named] == [("undecided", [])]
