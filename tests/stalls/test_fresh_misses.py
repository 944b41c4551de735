"""The first fresh set's misses (issue 37, round two): what each log proves, at the CLI.

Lines are built from the emitters' own format strings (cited per builder). Each rule names a
rank only when the log proves it; where the world size decides, the answer stays ``undecided``
and says so — and once the size is given (``--world-size`` or a line stating it) the rule that
needs it decides.
"""

from __future__ import annotations

from pathlib import Path

from tests.stalls.helpers import root_findings as cli


# --- Horovod: every rank misses a tensor another submitted, no majority path ------------------
def horovod_report(missing: dict[int, list[str]], tag: bool = True) -> str:
    """horovod/common/stall_inspector.cc (0.20.1+) as rank 0 prints it under mpirun
    --tag-output: the warning, "Missing ranks:", then "<rank>: [<tensor>, …]" per rank."""
    pre = "[1,0]<stderr>:" if tag else ""
    out = [f"{pre}[2021-02-10 17:39:53.403710: W horovod/common/stall_inspector.cc:105] One or "
           "more tensors were submitted to be reduced, gathered or broadcasted by subset of "
           "ranks and are waiting for remainder of ranks for more than 60 seconds. This may "
           "indicate that different ranks are trying to submit different tensors or that only "
           "subset of ranks is submitting tensors, which will cause deadlock.",
           f"{pre}Missing ranks:"]
    out += [f"{pre}{r}: [{', '.join(ts)}]" for r, ts in sorted(missing.items())]
    return "\n".join(out) + "\n"


_JOIN = {0: ["broadcast.noname.3765", "broadcast.noname.3873"], 1: ["broadcast.noname.3873"],
         2: ["broadcast.noname.3765"], 3: ["broadcast.noname.3765"]}


def test_horovod_paths_with_no_majority_name_nobody(tmp_path: Path) -> None:
    # horovod#2662's shape: rank 0 submitted neither broadcast, rank 1 one, ranks 2-3 the other
    code, [root] = cli(tmp_path, horovod_report(_JOIN))
    assert code == 1 and (root["kind"], root["ranks"], root["confidence"]) == (
        "undecided", [], "low")
    assert root["evidence"]["suspects"] == [0, 1, 2, 3]
    assert root["evidence"]["largest_path"] == 2
    assert "job's size" in root["evidence"]["collect_next"]
    assert "more than 8 ranks" in root["evidence"]["reason"]


def test_horovod_same_report_in_a_larger_stated_world_names_the_listed_ranks(
        tmp_path: Path) -> None:
    # nine ranks: 4..8 submitted everything, the majority path; 0-3 all lag behind them
    code, [root] = cli(tmp_path, horovod_report(_JOIN), "--world-size", "9")
    assert code == 1 and root["kind"] == "straggler" and root["ranks"] == [0, 1, 2, 3]
    assert root["confidence"] == "low"


def test_horovod_a_majority_path_still_names_the_minority(tmp_path: Path) -> None:
    # two code paths, three ranks on one: rank 0 took the other branch (no rank is complete)
    report = horovod_report({0: ["grad_a"], 1: ["grad_b"], 2: ["grad_b"], 3: ["grad_b"]})
    code, [root] = cli(tmp_path, report)
    assert code == 1 and (root["kind"], root["ranks"]) == ("op_type_mismatch", [0])
    # one straggler missing every tensor: the others are complete, the rule does not apply
    code, [root] = cli(tmp_path, horovod_report({2: ["grad_a", "grad_b"]}), "--world-size", "4")
    assert code == 1 and (root["kind"], root["ranks"]) == ("straggler", [2])


# --- one rank busy while the rest time out: the world size decides --------------------------
def watchdog_12(rank: int) -> str:
    """ProcessGroupNCCL.cpp 1.12/1.13 (WorkNCCL::checkTimeout): "[Rank r] Watchdog caught
    collective operation timeout: WorkNCCL(SeqNum=…, OpType=…, Timeout(ms)=…) ran for … milliseconds
    before timing out." behind glog's "[E ProcessGroupNCCL.cpp:475] "."""
    return (f"[E ProcessGroupNCCL.cpp:475] [Rank {rank}] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=1800000) ran for 1800328 milliseconds before timing out.")


def tqdm_bar(n: int, total: int = 2969526) -> str:
    """tqdm's default bar_format, as datasets' map prints it (no newline: the next write of the
    same terminal lands behind it)."""
    return (f"Running tokenizer on dataset:   9%|████████▊   | {n}/{total} "
            "[29:55<4:48:08, 155.57 examples/s]")


def _busy_log(ranks: tuple[int, ...] = (2, 1, 3)) -> str:
    return "".join((tqdm_bar(280000 + r) if i % 2 == 0 else "") + watchdog_12(r) + "\n"
                   for i, r in enumerate(ranks))


def test_busy_rank_without_a_stated_world_names_rank_0_at_low_and_asks_for_the_size(
        tmp_path: Path) -> None:
    # changed in round three (issue 37 item 2, helper 37r): ranks 1-3 time out in one
    # collective and rank 0 prints nothing — rank 0 is pointed at by its absence (low), and the
    # world size that would exclude ranks 4.. is what collect_next asks for
    code, [root] = cli(tmp_path, _busy_log())
    assert code == 1 and (root["kind"], root["ranks"], root["confidence"]) == (
        "straggler", [0], "low")
    ev = root["evidence"]
    assert ev["pattern"] == "log.rank0_absent" and ev["waiting_ranks"] == [1, 2, 3]
    assert "world size" in ev["collect_next"] and "ranks 4.. may be missing" in ev["collect_next"]
    assert ev["world_lower_bound"] == 4 and "progress bar" in ev["reason"]


def test_busy_rank_with_the_world_stated_in_the_log_is_named_at_low(tmp_path: Path) -> None:
    # the launcher's environment dump states it (launcher.world_size: "WORLD_SIZE=N")
    code, [root] = cli(tmp_path, "WORLD_SIZE=4\n" + _busy_log())
    assert code == 1 and (root["kind"], root["ranks"], root["confidence"]) == (
        "straggler", [0], "low")
    code, [root] = cli(tmp_path, _busy_log(), "--world-size", "4")
    assert (root["kind"], root["ranks"]) == ("straggler", [0])


def test_busy_rank_in_a_larger_stated_world_names_nobody(tmp_path: Path) -> None:
    code, found = cli(tmp_path, _busy_log(), "--world-size", "8")
    assert code == 1 and found and all(not f["ranks"] for f in found)


def test_absence_of_rank_0_below_ranks_1_to_k_without_a_bar(tmp_path: Path) -> None:
    # changed in round three: vllm#8978's shape WITHOUT its stated world (TP 4) — ranks 1-3
    # time out, rank 0 prints nothing: rank 0 at low by absence, the world size asked for
    text = "".join(watchdog_12(r) + "\n" for r in (1, 2, 3))
    code, [root] = cli(tmp_path, text)
    assert code == 1 and (root["kind"], root["ranks"], root["confidence"]) == (
        "straggler", [0], "low")
    assert "progress bar" not in root["evidence"]["reason"]
    # with the world stated the existing rules decide (vllm#8978 itself: --world-size 4 leaves
    # it undecided, a paste may simply leave a rank out); a larger world names nobody
    for world in ("4", "8"):
        code, found = cli(tmp_path, text, "--world-size", world)
        assert code == 1 and all(not f["ranks"] for f in found), world
        assert all(f["evidence"]["pattern"] != "log.rank0_absent" for f in found)


def test_absence_of_rank_0_needs_ranks_1_to_k_without_gaps_and_a_silent_rank_0(
        tmp_path: Path) -> None:
    # a gap above 0 (ranks 2, 3 only; or 1 and 3): the paste leaves ranks out anywhere
    for ranks in ((2, 3), (1, 3)):
        text = tqdm_bar(1) + "\n" + "".join(watchdog_12(r) + "\n" for r in ranks)
        code, found = cli(tmp_path, text)
        assert code == 1 and all(not f["ranks"] for f in found), ranks
        assert all("world_lower_bound" not in f["evidence"] for f in found)
    # rank 0 reached the same collective (its own timeout): everyone waits, nobody named
    text = "".join(watchdog_12(r) + "\n" for r in (0, 1, 2, 3))
    code, found = cli(tmp_path, text)
    assert code == 1 and all(f["evidence"]["pattern"] != "log.rank0_absent" for f in found)
    # rank 0 reports its own error: that line decides, not its absence
    oom = ("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
           "GPU 0 has a total capacity of 79.15 GiB of which 1.2 GiB is free.\n")
    code, found = cli(tmp_path, oom + "".join(watchdog_12(r) + "\n" for r in (1, 2, 3)))
    assert code == 1 and all(f["evidence"]["pattern"] != "log.rank0_absent" for f in found)
    # a reporter's own error (rank 2's OOM) leads: rank 0's absence is not read
    code, found = cli(tmp_path, oom.replace("rank0", "rank2") + "".join(
        watchdog_12(r) + "\n" for r in (1, 2, 3)))
    assert code == 1 and all(f["evidence"]["pattern"] != "log.rank0_absent" for f in found)
    assert 0 not in found[0]["ranks"]
    # two different collectives (SeqNum 2 and 3): not one wait
    text = watchdog_12(1) + "\n" + watchdog_12(2).replace("SeqNum=2", "SeqNum=3") + "\n"
    code, found = cli(tmp_path, text)
    assert all(f["evidence"]["pattern"] != "log.rank0_absent" for f in found)
    # one rank's timeout alone is a paste of that rank (DeepDeWedge#22): nobody named
    code, found = cli(tmp_path, watchdog_12(1) + "\n")
    assert code == 1 and all(not f["ranks"] for f in found)


# --- Gloo monitoredBarrier seen from one non-coordinator; a store wait beside a bar ----------
def barrier_peer(rank: int) -> str:
    """ProcessGroupGloo.cpp monitoredBarrier, rank != 0 (1.10 .. main): "Rank r successfully
    reached monitoredBarrier, but received errors while waiting for send/recv from rank 0.
    Please check rank 0 logs for faulty rank." (logAndThrow → RuntimeError)."""
    return (f"RuntimeError: Rank {rank} successfully reached monitoredBarrier, but received "
            "errors while waiting for send/recv from rank 0. Please check rank 0 logs for "
            "faulty rank.\n")


def test_one_barrier_peer_names_rank_0_at_low_and_says_what_decides(tmp_path: Path) -> None:
    # changed in round three (issue 37 item 2: the rank the message names, not the reporter)
    code, [root] = cli(tmp_path, barrier_peer(2))
    assert code == 1 and (root["kind"], root["ranks"], root["confidence"]) == (
        "straggler", [0], "low")
    assert root["evidence"]["witnesses"] == [2]
    decides = root["evidence"]["decides"]
    assert "failed to pass monitoredBarrier" in decides and "--world-size" in decides
    assert "late" in root["evidence"]["reason"] and "another rank missing" in root[
        "evidence"]["reason"]
    # every other rank of a stated world reached it: rank 0 is named (log_monitored's rule)
    code, [root] = cli(tmp_path, "".join(barrier_peer(r) for r in range(1, 8)),
                       "--world-size", "8")
    assert (root["kind"], root["ranks"], root["confidence"]) == ("straggler", [0], "medium")


def test_rank_0s_own_failed_to_pass_line_wins_over_the_reference(tmp_path: Path) -> None:
    """ProcessGroupGloo.cpp monitoredBarrier on rank 0: "[Rank 0]: Ranks 3, 5 failed to pass
    monitoredBarrier in 30000 ms" (wait_all_ranks) — the ranks it names, never rank 0."""
    own = ("[rank0]: RuntimeError: [Rank 0]: Ranks 3, 5 failed to pass monitoredBarrier in "
           "30000 ms\n")
    code, [root] = cli(tmp_path, barrier_peer(2) + own)
    assert code == 1 and root["ranks"] == [3, 5] and 0 not in root["ranks"]
    code, found = cli(tmp_path, own + barrier_peer(1) + barrier_peer(4))
    assert all(0 not in f["ranks"] for f in found)


def test_a_barrier_peer_in_a_larger_stated_world_with_silent_ranks_stays_undecided(
        tmp_path: Path) -> None:
    # ranks 2-7 of 8 silent: one of them may be the rank rank 0 found missing
    code, [root] = cli(tmp_path, barrier_peer(1), "--world-size", "8")
    assert code == 1 and (root["kind"], root["ranks"]) == ("undecided", [])
    assert root["evidence"]["suspects"] == [0, 2, 3, 4, 5, 6, 7]


def test_the_tail_alone_points_at_the_rank_it_names(tmp_path: Path) -> None:
    # the head of the message wrapped away: "… Please check rank 0 logs for faulty rank."
    tail = "[rank3]: for send/recv from rank 0. Please check rank 0 logs for faulty rank.\n"
    code, [root] = cli(tmp_path, tail)
    assert code == 1 and (root["kind"], root["ranks"], root["confidence"]) == (
        "straggler", [0], "low")
    assert root["evidence"]["pattern"] == "torch.gloo.check_rank_logs"


def test_a_store_wait_of_rank_1_with_rank_0_silent_names_rank_0_at_low(tmp_path: Path) -> None:
    """socket.cpp (2.4+) waitForInput warning under torchrun's [rankN]: prefix, glued behind a
    tqdm bar (axolotl#2684's shape). Changed in round three: the store and the set-up keys are
    rank 0's and rank 0 printed nothing — rank 0 at low, the bar mentioned when present."""
    line = ("Tokenizing Prompts (num_proc=64):  92%|█████████▏| 328986/359152 [29:58<12:05, "
            "41.59 examples/s][rank1]:[W516 14:34:56.854597329 socket.cpp:489] [c10d] "
            "waitForInput: socket SocketImpl(fd=79, addr=[localhost]:41170, "
            "remote=[localhost]:29500) timed out after 1800000ms\n")
    code, [root] = cli(tmp_path, line)
    assert code == 1 and (root["kind"], root["ranks"], root["confidence"]) == (
        "straggler", [0], "low")
    assert root["evidence"]["category"] == "store_wait"
    assert "progress bar" in root["evidence"]["reason"]
    bare = line.split("s]", 1)[1]
    code, [root] = cli(tmp_path, bare)
    assert root["ranks"] == [0] and "progress bar" not in root["evidence"]["reason"]
    # rank 0 waited on the store too: the store waits name nobody (rank 0 a suspect)
    code, [root] = cli(tmp_path, bare + bare.replace("[rank1]", "[rank0]"))
    assert (root["kind"], root["ranks"]) == ("undecided", [])
    assert "progress bar" not in root["evidence"]["decides"]
    # a stated world: the store-wait rule says what decides it, nobody named
    code, [root] = cli(tmp_path, line, "--world-size", "2")
    assert (root["kind"], root["ranks"]) == ("undecided", [])
    assert "progress bar" in root["evidence"]["decides"]


def test_an_nccl_id_wait_names_the_rank_it_waits_for(tmp_path: Path) -> None:
    """ProcessGroupNCCL.cpp broadcastUniqueNCCLID (2.x): "[r] is setting up NCCL communicator and
    retrieving ncclUniqueId from [0] via c10d key-value store by key 'k', but store->get('k')
    got error: " + the store's error (here socket.cpp's timeout, as a wrapped next line)."""
    head = ("[rank{r}]: torch.distributed.DistBackendError: [{r}] is setting up NCCL "
            "communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key "
            "'0', but store->get('0') got error: Socket Timeout\n")
    code, [root] = cli(tmp_path, "".join(head.format(r=r) for r in (1, 2, 3)))
    assert code == 1 and (root["kind"], root["ranks"], root["confidence"]) == (
        "straggler", [0], "low")
    assert root["evidence"]["pattern"] == "torch.nccl.unique_id_wait"
    # a sub-group: global rank 6 is group rank 1, its group's rank 0 is not global 0
    code, [root] = cli(tmp_path, head.format(r=1).replace("[rank1]", "[rank6]"))
    assert (root["kind"], root["ranks"]) == ("undecided", [])
    # a lone send/recv's communicator (getKeySendRecv: key "low:high", its p2p rank 0 is the
    # lower rank): rank 3 waits for rank 1's id, whatever "[0]" the message prints
    p2p = head.format(r=3).replace("key '0'", "key '1:3'").replace("get('0')", "get('1:3')")
    code, [root] = cli(tmp_path, p2p)
    assert (root["kind"], root["ranks"], root["confidence"]) == ("straggler", [1], "low")
    # the pair's lower rank is the one that publishes: a "waiter" that is the lower rank is
    # not this wait (nothing named), nor is a pair of a sub-group
    code, [root] = cli(tmp_path, p2p.replace("[3]", "[1]").replace("[rank3]", "[rank1]"))
    assert (root["kind"], root["ranks"]) == ("undecided", [])
    code, [root] = cli(tmp_path, p2p.replace("[rank3]", "[rank7]"))
    assert (root["kind"], root["ranks"]) == ("undecided", [])


def elastic_rendezvous(world: int, local: int = 4) -> str:
    """torch/distributed/elastic/agent/server/api.py ``_rendezvous`` (1.9+): the agent's
    "[default] Rendezvous complete for workers. Result:" block; every worker's world size."""
    return ("INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for "
            "workers. Result:\n  restart_count=0\n  master_addr=127.0.0.1\n  master_port=29500\n"
            f"  group_rank=0\n  group_world_size=1\n  local_ranks={list(range(local))}\n"
            f"  role_ranks={list(range(local))}\n  global_ranks={list(range(local))}\n"
            f"  role_world_sizes={[world] * local}\n  global_world_sizes={[world] * local}\n\n")


def test_the_elastic_agents_rendezvous_result_states_the_world(tmp_path: Path) -> None:
    code, [root] = cli(tmp_path, elastic_rendezvous(4) + _busy_log())
    assert code == 1 and (root["kind"], root["ranks"], root["confidence"]) == (
        "straggler", [0], "low")
    assert root["evidence"]["world_size"] == 4
    # group_world_size (the number of agents) is not the world: 8 ranks leaves 4.. unaccounted
    code, found = cli(tmp_path, elastic_rendezvous(8) + _busy_log())
    assert code == 1 and found and all(not f["ranks"] for f in found)
