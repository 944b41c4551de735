"""The multi-line reports users paste (Horovod's stall inspector, torch's fr_trace output, NCCL
RAS, torchelastic's failure table), built from each emitter's OWN format strings, and what the
analysis concludes from them (docs/stalls.md, "Reports that name ranks").

Every builder writes the text exactly as the cited source prints it (file and versions in its
docstring); the expected verdicts follow from what the source says each line means, not from
any pasted case.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from stormotel.analyzers.stalls import logs_parser as lp
from stormotel.analyzers.stalls.log_analysis import analyze_logs

from tests.stalls import fr_trace_batch
from tests.stalls.helpers import run_json


def roots(tmp_path: Path, text: str, **kw: int):  # type: ignore[no-untyped-def]
    log = tmp_path / "job.log"
    log.write_text(text)
    result = analyze_logs(lp.parse_logs([str(log)]), **kw)
    return [f for f in result.findings if f.consequence_of is None]


# --- Horovod --------------------------------------------------------------------------------
_HVD_PREFIX = ("[2024-03-05 10:11:12.345678: W "
               "/tmp/pip-req-build/horovod/common/stall_inspector.cc:107] ")


def horovod_report(missing: dict[int, list[str]], seconds: int = 60, shutdown: tuple[int, ...] = ()
                   ) -> str:
    """horovod/common/stall_inspector.cc (0.19 .. master), CheckForStalledTensors: the head,
    std::endl, "Missing ranks:", then per rank std::endl << rank [<< "!"] << ": [" tensors
    joined by ", " (six at most, then " ...") << "]"; LOG(WARNING) adds Horovod's prefix."""
    out = (_HVD_PREFIX + "One or more tensors were submitted to be reduced, gathered or "
           "broadcasted by subset of ranks and are waiting for remainder of ranks for more than "
           f"{seconds} seconds. This may indicate that different ranks are trying to submit "
           "different tensors or that only subset of ranks is submitting tensors, which will "
           "cause deadlock. \nMissing ranks:")
    for rank, tensors in sorted(missing.items()):
        names = tensors[:6]
        more = " ..." if len(tensors) > 6 else ""
        out += f"\n{rank}{'!' if rank in shutdown else ''}: [{', '.join(names)}{more}]"
    return out + "\n"


def test_horovod_ranks_missing_every_tensor_are_stragglers(tmp_path: Path) -> None:
    text = ("[0]<stderr>:" + "training step 1200\n"
            + horovod_report({2: ["DistributedAdamOptimizer_Allreduce/HorovodAllreduce_g_0",
                                  "DistributedAdamOptimizer_Allreduce/HorovodAllreduce_g_1"]})
            + "[1]<stderr>: step 1201\n")
    [root] = roots(tmp_path, text, world_size=8)
    assert (root.kind, root.ranks, root.confidence) == ("straggler", [2], "medium")
    assert root.evidence["pattern"] == "horovod.stall_report"
    assert root.evidence["witnesses"] == [0]


def test_horovod_different_tensors_name_the_odd_code_path(tmp_path: Path) -> None:
    # ranks 0-2 submitted grads_a, rank 3 alone submitted eval_b: each side is missing the
    # other's tensor, and rank 3's path is the odd one
    text = horovod_report({0: ["eval_b"], 1: ["eval_b"], 2: ["eval_b"], 3: ["grads_a"]},
                          shutdown=(3,))
    [root] = roots(tmp_path, text)
    assert (root.kind, root.ranks) == ("op_type_mismatch", [3])
    assert root.evidence["shutdown_ranks"] == [3]


def test_horovod_a_tensor_most_ranks_lack_names_nobody(tmp_path: Path) -> None:
    # only rank 0 submitted "loss": a rank-0-only collective, or ranks 1-3 stuck before it —
    # the report cannot tell which
    [root] = roots(tmp_path, horovod_report({1: ["loss"], 2: ["loss"], 3: ["loss"]}))
    assert root.kind == "undecided" and root.ranks == []
    assert root.evidence["suspects"] == [1, 2, 3]


def test_horovod_tie_is_undecided(tmp_path: Path) -> None:
    [root] = roots(tmp_path, horovod_report({2: ["g"], 3: ["g"]}), world_size=4)
    assert root.kind == "undecided"


def test_horovod_before_the_stall_inspector(tmp_path: Path) -> None:
    """horovod/common/operations.cc (before 0.19): "Stalled ops:" then tensor_name << "
    [missing ranks: " ranks joined by ", " << "]"."""
    text = ("W0305 10:11:12.345 operations.cc:700] One or more tensors were submitted to be "
            "reduced, gathered or broadcasted by subset of ranks and are waiting for remainder "
            "of ranks for more than 60 seconds. This may indicate that different ranks are "
            "trying to submit different tensors or that only subset of ranks is submitting "
            "tensors, which will cause deadlock. \nStalled ops:"
            "HorovodAllreduce_grads_0 [missing ranks: 5]\n")
    [root] = roots(tmp_path, text, world_size=8)
    assert (root.kind, root.ranks) == ("straggler", [5])


_HVD_HEAD = ("One or more tensors were submitted to be reduced, gathered or broadcasted by "
             "subset of ranks and are waiting for remainder of ranks for more than 60 seconds. "
             "This may indicate that different ranks are trying to submit different tensors or "
             "that only subset of ranks is submitting tensors, which will cause deadlock. ")


def horovod_ready_report(ready: dict[str, list[int]]) -> str:
    """horovod/tensorflow/mpi_ops.cc (0.9.0-0.11) and common/operations.cc (0.12-0.13.6),
    CheckForStalledTensors: std::cerr << "WARNING: " head << "Stalled ops: ", then per tensor
    tensor_name << " [ready ranks:" << " " r << ", " r … << "]", tensors joined by ", ", one
    std::endl at the end — the ranks that HAVE submitted, in arrival order."""
    ops = ", ".join(f"{t} [ready ranks: {', '.join(map(str, rs))}]" for t, rs in ready.items())
    return "WARNING: " + _HVD_HEAD + "Stalled ops: " + ops + "\n"


def horovod_missing_ops_report(missing: dict[str, list[int]], glued: bool = False) -> str:
    """horovod/common/operations.cc 0.13.7-0.15.x: std::cerr << "WARNING: " head << std::endl
    << "Stalled ops:" << std::endl, then per tensor tensor_name << " [missing ranks:" << " " r
    << ", " r … << "]" << std::endl (every rank of [0, size) not ready). 0.16.0-0.16.1
    (``glued``): one LOG(WARNING) per tensor, the first one's message ending
    std::endl << "Stalled ops:" << tensor_name with no separator."""
    lines = [f"{t} [missing ranks: {', '.join(map(str, rs))}]" for t, rs in missing.items()]
    if glued:
        pre = "[2019-03-01 10:11:12.345678: W horovod/common/operations.cc:1661] "
        return (pre + _HVD_HEAD + "\nStalled ops:" + lines[0] + "\n"
                + "".join(pre + line + "\n" for line in lines[1:]))
    return "WARNING: " + _HVD_HEAD + "\nStalled ops:\n" + "".join(x + "\n" for x in lines)


def test_horovod_ready_ranks_name_the_rank_missing_by_omission(tmp_path: Path) -> None:
    text = horovod_ready_report({"HorovodAllreduce_grad_0": [4, 6, 7, 1, 5, 3, 2],
                                 "HorovodAllreduce_grad_1": [5, 4, 6, 7, 1, 3, 2]})
    [root] = roots(tmp_path, text, world_size=8)
    assert (root.kind, root.ranks, root.confidence) == ("straggler", [0], "medium")
    assert root.evidence["ready"]["HorovodAllreduce_grad_0"] == [1, 2, 3, 4, 5, 6, 7]
    # without the size only the gap below the highest ready rank is known: low, size to collect
    [root] = roots(tmp_path, text)
    assert (root.kind, root.ranks, root.confidence) == ("straggler", [0], "low")
    assert "size" in root.evidence["collect_next"]


def test_horovod_ready_ranks_of_most_of_a_larger_world_name_nobody(tmp_path: Path) -> None:
    # the same lines in a job of 16: ranks 0 and 8-15 (9 of 16) did not submit — not a minority
    text = horovod_ready_report({"g0": [1, 2, 3, 4, 5, 6, 7]})
    [root] = roots(tmp_path, text, world_size=16)
    assert root.kind == "undecided" and root.ranks == []


def test_horovod_missing_ranks_per_tensor_lines(tmp_path: Path) -> None:
    text = horovod_missing_ops_report({f"HorovodBroadcast_w{i}_0": [0] for i in range(4)})
    [root] = roots(tmp_path, text, world_size=4)
    assert (root.kind, root.ranks, root.confidence) == ("straggler", [0], "medium")
    # size unknown: rank 0 missing, at least one other rank submitted each broadcast; a larger
    # world only adds submitters, so 1 vs 1 is the one world where rank 0 is not a minority
    [root] = roots(tmp_path, text)
    assert (root.kind, root.ranks, root.confidence) == ("straggler", [0], "low")
    assert root.evidence["spoke"]["of"] is None


def test_horovod_missing_ranks_glued_to_stalled_ops(tmp_path: Path) -> None:
    text = horovod_missing_ops_report({"HorovodAllreduce_a_0": [3], "HorovodAllreduce_b_0": [3]},
                                      glued=True)
    [root] = roots(tmp_path, text, world_size=8)
    assert (root.kind, root.ranks) == ("straggler", [3])
    assert set(root.evidence["missing"]) == {"HorovodAllreduce_a_0", "HorovodAllreduce_b_0"}


def test_horovod_stalled_ranks_header(tmp_path: Path) -> None:
    """stall_inspector.cc 0.16.2-0.20.0 print "Stalled ranks:" where 0.20.1+ print "Missing
    ranks:"; the per-rank lines are the same."""
    text = horovod_report({5: ["HorovodAllreduce_g_0"]}).replace("Missing ranks:",
                                                                  "Stalled ranks:")
    [root] = roots(tmp_path, text, world_size=8)
    assert (root.kind, root.ranks) == ("straggler", [5])


def test_horovod_missing_majority_with_unknown_size_names_nobody(tmp_path: Path) -> None:
    # ranks 0-2 lack g; at least rank 3 sent it: 3 vs 1 at the lower bound — not a minority
    [root] = roots(tmp_path, horovod_missing_ops_report({"g": [0, 1, 2]}))
    assert root.kind == "undecided"


def test_horovod_report_is_never_healthy(tmp_path: Path) -> None:
    log = tmp_path / "h.log"
    log.write_text(horovod_report({1: ["g"], 2: ["g"]}))
    code, report = run_json("--logs", str(log))
    assert code == 1 and report["stall_findings"]


# --- torch fr_trace's printed report ----------------------------------------------------------
def fr_not_joined(seq: int, group: str, op: str, missing: set[int], expected: set[int]) -> str:
    """torch/distributed/flight_recorder/components/utils.py error_analysis + types.py
    EntryState.log (2.7 .. main): one logger.info line each, FlightRecorderLogger prints
    "%(message)s"."""
    return (f"Not all ranks joining collective, sequence number: {seq}\n"
            "internal record id: 41\n"
            f"group info: {group}\n"
            f"collective: {op}\n"
            f"missing ranks: {missing}\n"
            "input sizes: [[1024]]\noutput sizes: [[1024]]\n"
            f"world size: {len(expected)}\n"
            f"expected ranks: {expected}\n"
            "collective state: scheduled\n"
            "collective stack trace: \n all_reduce at /w/torch/distributed/distributed_c10d.py:2950"
            "\n step at /w/train.py:88\n")


def test_fr_trace_not_joined_names_the_missing_rank(tmp_path: Path) -> None:
    [root] = roots(tmp_path, fr_not_joined(6, "0:default_pg", "nccl:all_reduce", {2},
                                           {0, 1, 2, 3, 4, 5, 6, 7}))
    assert (root.kind, root.ranks, root.confidence) == ("straggler", [2], "medium")
    assert root.evidence["pattern"] == "torch.fr_trace.not_joined"


def test_fr_trace_nested_groups_victim_in_another_block(tmp_path: Path) -> None:
    # rank 5 stalls before a tp all_reduce; its tp partner 4 waits there, so fr_trace also
    # reports 4 missing from its dp group — 4 is present (waiting) in the tp block
    text = (fr_not_joined(3, "3:tp", "nccl:all_reduce", {5}, {4, 5})
            + fr_not_joined(9, "5:dp", "nccl:all_reduce", {4}, {0, 2, 4, 6})
            + fr_not_joined(9, "6:dp", "nccl:all_reduce", {5}, {1, 3, 5, 7}))
    [root] = roots(tmp_path, text)
    assert (root.kind, root.ranks) == ("straggler", [5])
    assert root.evidence["waiting_elsewhere"] == [4]


def test_fr_trace_2_5_format_with_a_count(tmp_path: Path) -> None:
    """2.5-2.6: "Not all ranks joining collective %s at entry %s" … "expected ranks: %d"."""
    text = ("Not all ranks joining collective 5 at entry 4\ngroup info: 0:default_pg\n"
            "collective: nccl:all_reduce\nmissing ranks: {1}\ninput sizes: [[3, 4]]\n"
            "output sizes: [[3, 4]]\nexpected ranks: 4\ncollective state: scheduled\n"
            "collective stack trace:\n  all_reduce at /p/distributed_c10d.py:2696\n")
    [root] = roots(tmp_path, text)
    assert (root.kind, root.ranks) == ("straggler", [1])


def test_fr_trace_2_4_print_form(tmp_path: Path) -> None:
    """tools/flight_recorder (2.4): print(f"Not all ranks joining collective for group
    {pg_name}:{desc} collective {profiling_name}", f"Missing ranks are {…}")."""
    text = ("Not all ranks joining collective for group 0:default_pg collective "
            "nccl:all_reduce Missing ranks are {3}\n")
    [root] = roots(tmp_path, text)
    assert (root.kind, root.ranks) == ("straggler", [3])


def test_fr_trace_missing_majority_is_undecided(tmp_path: Path) -> None:
    [root] = roots(tmp_path, fr_not_joined(1, "0:default_pg", "nccl:broadcast", {1, 2, 3},
                                           {0, 1, 2, 3}))
    assert root.kind == "undecided" and root.evidence["suspects"] == [1, 2, 3]


def fr_errors(seq: int, culprits: dict[int, str], expected: set[int]) -> str:
    """2.7+: "Collective sequence number: %s has errors" … "error msg: " ", ".join(f"Culprit
    rank {r}; {MatchInfo}") with MatchInfo.__str__ = f"Error type: {state.name}, {culprit}"."""
    msg = ", ".join(f"Culprit rank {r}; Error type: {t}, Expected input sizes: '[[4]]' does not "
                    "match found input sizes: '[[41]]'" for r, t in sorted(culprits.items()))
    return (f"Collective sequence number: {seq} has errors\ninternal record id: 12\n"
            "group info: 0:default_pg\ncollective: nccl:all_reduce\ninput sizes: [[4]]\n"
            f"output sizes: [[4]]\nworld size: {len(expected)}\nexpected ranks: {expected}\n"
            f"collective state: scheduled\nerror msg: {msg}\ncollective stack trace: \n x\n")


def test_fr_trace_culprit_rank(tmp_path: Path) -> None:
    [root] = roots(tmp_path, fr_errors(6, {1: "SIZE_OR_SYNTAX_MISMATCH"}, {0, 1, 2, 3}))
    assert (root.kind, root.ranks) == ("size_mismatch", [1])
    assert root.evidence["pattern"] == "torch.fr_trace.culprit"


def test_fr_trace_blaming_everyone_but_its_reference_names_the_reference(tmp_path: Path) -> None:
    # fr_trace assumes its first rank right: when rank 0 is the odd one it lists 1, 2, 3
    text = fr_errors(6, {r: "COLLECTIVE_TYPE_MISMATCH" for r in (1, 2, 3)}, {0, 1, 2, 3})
    [root] = roots(tmp_path, text)
    assert (root.kind, root.ranks) == ("op_type_mismatch", [0])


def test_fr_trace_state_mismatch_names_nobody(tmp_path: Path) -> None:
    text = fr_errors(6, {2: "COLLECTIVE_STATE_MISMATCH"}, {0, 1, 2, 3})
    [root] = roots(tmp_path, text)
    assert root.kind == "undecided"


def test_fr_trace_missing_dump_files_are_suspects(tmp_path: Path) -> None:
    text = ("Traceback (most recent call last):\n  File \"fr_trace.py\", line 5, in <module>\n"
            "AssertionError: Missing dump files from ranks {6}\n")
    [root] = roots(tmp_path, text)
    assert root.kind == "undecided" and root.evidence["suspects"] == [6]


# --- NCCL RAS ---------------------------------------------------------------------------------
def ras_head(kind: str = "MISMATCH", comm: str = "#0-0 (27a079b828ff1a75)") -> str:
    return f"{comm} {kind}\n"


def ras_group(n: int, count: int) -> str:
    """src/ras/client_support.cc (2.24+): "  %d ranks have launched up to operation %ld"."""
    return f"  {n} ranks have launched up to operation {count}\n"


def ras_member(rank: int, gpu: int = 0) -> str:
    """ "  Rank %d -- GPU %s managed by process %d on node %s" (an outlier group's members)."""
    return f"  Rank {rank} -- GPU {gpu} managed by process {480000 + rank} on node 172.16.64.210\n"


def test_ras_2_26_missing_ranks_are_listed_one_per_line(tmp_path: Path) -> None:
    """2.26+: INCOMPLETE lists each missing rank as "  Rank %d -- GPU %s managed by process %d
    on node %s" (2.24-2.25 printed "  The missing rank: 21")."""
    text = (ras_head("INCOMPLETE", "#0-0 (cf264af53edbe986)")
            + "  Missing communicator data from 1 rank\n" + ras_member(21, 5) + "\n")
    [root] = roots(tmp_path, text, world_size=32)
    assert (root.kind, root.ranks) == ("straggler", [21])
    assert root.evidence["pattern"] == "nccl.ras.missing"


def test_ras_missing_without_the_list_is_undecided(tmp_path: Path) -> None:
    text = ras_head("INCOMPLETE") + "  Missing communicator data from 12 ranks\n\n"
    [root] = roots(tmp_path, text, world_size=64)
    assert root.kind == "undecided" and "ncclras -v" in root.evidence["reason"]


def test_ras_missing_majority_is_undecided(tmp_path: Path) -> None:
    text = (ras_head("INCOMPLETE") + "  Missing communicator data from 3 ranks\n"
            + "".join(ras_member(r) for r in (1, 2, 3)) + "\n")
    [root] = roots(tmp_path, text, world_size=4)
    assert root.kind == "undecided" and root.evidence["suspects"] == [1, 2, 3]


def test_ras_behind_minority_is_named(tmp_path: Path) -> None:
    # NCCL's guide's own example: 26 at 6650, 6 listed at 6649
    text = (ras_head() + "  Communicator ranks have different collective operation counts\n"
            + ras_group(26, 6650) + ras_group(6, 6649)
            + "".join(ras_member(r, r) for r in (0, 2, 3, 4, 5, 7)) + "\n")
    [root] = roots(tmp_path, text, world_size=32)
    assert (root.kind, root.ranks, root.confidence) == ("straggler", [0, 2, 3, 4, 5, 7],
                                                        "medium")


def test_ras_large_behind_side_names_nobody(tmp_path: Path) -> None:
    # 30 of 32 have not launched operation 6650; the 2 ahead are listed (an outlier group).
    # The 2 may have taken a branch the others did not, or the 30 are blocked before it
    # together: one snapshot cannot tell — and the 30 are never named as culprits
    text = (ras_head() + "  Communicator ranks have different AllReduce operation counts\n"
            + ras_group(30, 6649) + ras_group(2, 6650) + ras_member(8) + ras_member(9) + "\n")
    [root] = roots(tmp_path, text, world_size=32)
    assert root.kind == "undecided" and root.ranks == []
    assert root.evidence["ahead"] == [8, 9] and root.evidence["suspects"] == [8, 9]


def test_ras_status_lines_are_not_counts(tmp_path: Path) -> None:
    """ "  Communicator ranks have different status" "  %d ranks have status %s" then the
    outlier's rank lines — before the operation counts in the same block."""
    text = (ras_head() + "  Communicator ranks have different status\n"
            "  30 ranks have status RUNNING\n  2 ranks have status ABORT\n"
            + ras_member(3) + ras_member(4)
            + "  Communicator ranks have different AllReduce operation counts\n"
            + ras_group(31, 120) + "  Rank 7 has launched up to operation 119 -- GPU 7 managed "
            "by process 480007 on node 172.16.64.210\n\n")
    [root] = roots(tmp_path, text, world_size=32)
    assert (root.kind, root.ranks) == ("straggler", [7])


# --- torchelastic: SIGABRT together vs still alive ---------------------------------------------
def elastic_entry(idx: int, rank: int, code: int, when: str = "2024-06-01_10:00:05") -> str:
    """errors/__init__.py _FAILURE_FORMAT_TEMPLATE (1.9+; the signal name after the pid from
    2.x): "[${idx}]:" "time : …" "host : …" "rank : ${rank} (local_rank: ${local_rank})"
    "exitcode : ${exitcode} (pid: ${pid})" "error_file: …" "traceback : Signal 6 (SIGABRT)
    received by PID ${pid}" (ProcessFailure: f"Signal {-exitcode} ({signal_name}) received by
    PID {pid}")."""
    sig = {-6: "SIGABRT", -15: "SIGTERM"}[code]
    pid = 9000 + rank
    return (f"[{idx}]:\n  time      : {when}\n  host      : node-1\n"
            f"  rank      : {rank} (local_rank: {rank})\n"
            f"  exitcode  : {code} (pid: {pid}) ({sig})\n  error_file: <N/A>\n"
            f"  traceback : Signal {-code} ({sig}) received by PID {pid}")


def elastic_table(root: str, others: list[str]) -> str:
    """_MSG_FORMAT_TEMPLATE: border, title, section, "Failures:", the others (or
    "  <NO_OTHER_FAILURES>"), section, "Root Cause (first observed failure):", root, border."""
    return ("=" * 60 + "\ntrain.py FAILED\n" + "-" * 60 + "\nFailures:\n"
            + ("\n".join(others) if others else "  <NO_OTHER_FAILURES>") + "\n" + "-" * 60
            + "\nRoot Cause (first observed failure):\n" + root + "\n" + "=" * 60 + "\n")


def test_elastic_the_rank_left_alive_among_aborts_is_the_straggler(tmp_path: Path) -> None:
    # torch 2.5+: the agent's SIGTERM'd workers are listed too (-15)
    others = [elastic_entry(i, r, -15 if r == 5 else -6) for i, r in enumerate(range(1, 8), 1)]
    text = elastic_table(elastic_entry(0, 0, -6), others)
    [root] = roots(tmp_path, text)
    assert (root.kind, root.ranks) == ("straggler", [5])
    assert root.evidence["pattern"] == "torchelastic.abort_split"
    assert root.evidence["aborted"] == [0, 1, 2, 3, 4, 6, 7]


def test_elastic_old_table_counts_the_closing_lines(tmp_path: Path) -> None:
    """Before 2.5 the table holds only the failed workers; api.py logs "Sending process %s
    closing signal %s" for each one still running."""
    others = [elastic_entry(i, r, -6) for i, r in enumerate((1, 2, 3, 4, 6, 7), 1)]
    text = ("WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 9005 closing "
            "signal SIGTERM\n" + elastic_table(elastic_entry(0, 0, -6), others))
    [root] = roots(tmp_path, text)
    assert (root.kind, root.ranks, root.confidence) == ("straggler", [5], "low")


def test_elastic_a_lone_sigabrt_names_nobody(tmp_path: Path) -> None:
    closing = "".join(f"[W] Sending process {9000 + r} closing signal SIGTERM\n"
                      for r in range(1, 8))
    [root] = roots(tmp_path, closing + elastic_table(elastic_entry(0, 0, -6), []))
    assert root.kind == "undecided" and root.ranks == []


def test_elastic_aborts_far_apart_are_not_one_timeout(tmp_path: Path) -> None:
    others = [elastic_entry(1, 1, -6, "2024-06-01_10:09:00"), elastic_entry(2, 2, -6),
              elastic_entry(3, 3, -15)]
    [root] = roots(tmp_path, elastic_table(elastic_entry(0, 0, -6), others))
    assert root.kind == "undecided"


# --- the report torch's own fr_trace prints, run here on NCCL-shaped dumps ------------------------
def _coll(rec: int, seq: int, done: bool, op: str = "all_reduce", size: int = 1024
          ) -> dict[str, object]:
    return {"record_id": rec, "pg_id": 0, "process_group": ["0", "default_pg"],
            "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
            "profiling_name": f"nccl:{op}", "time_created_ns": 1000 + rec,
            "input_sizes": [[size]], "input_dtypes": ["Float"], "output_sizes": [[size]],
            "output_dtypes": ["Float"], "state": "completed" if done else "scheduled",
            "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
            "retired": done, "timeout_ms": 600000, "is_p2p": False, "frames": []}


FR_TRACE_SCENARIOS = ("straggler", "size", "op")


@pytest.fixture(scope="module")
def fr_trace_printed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What torch's fr_trace prints for each scenario's dumps (rank 2 never issues the 6th
    collective; rank 1's is another size; rank 3's another op), all from one interpreter
    (tests/stalls/fr_trace_batch.py: torch imported once, the report's own main per folder)."""
    pytest.importorskip("torch.distributed.flight_recorder.fr_trace")
    import sys

    from benchmarks.compare_fr_peers import _nccl_pickle

    root = tmp_path_factory.mktemp("fr_trace")
    folders = []
    for scenario in FR_TRACE_SCENARIOS:
        per = {r: [_coll(i, i + 1, True) for i in range(5)] for r in range(4)}
        for r in range(4):
            if scenario == "straggler" and r == 2:
                continue
            per[r].append(_coll(5, 6, False, op="broadcast" if scenario == "op" and r == 3
                                else "all_reduce", size=41 if scenario == "size" and r == 1
                                else 4))
        folders.append(str(_nccl_pickle(root / scenario, per)))  # type: ignore[arg-type]
    (root / "printed").mkdir()
    proc = subprocess.run([sys.executable, "-m", "tests.stalls.fr_trace_batch",
                           str(root / "printed"), *folders], capture_output=True, text=True,
                          timeout=120, check=False, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {s: fr_trace_batch.printed(root / "printed", i)
            for i, s in enumerate(FR_TRACE_SCENARIOS)}


@pytest.mark.parametrize(("scenario", "expected"), [
    ("straggler", ("straggler", [2])), ("size", ("size_mismatch", [1])),
    ("op", ("op_type_mismatch", [3]))])
def test_real_fr_trace_output_read_back(tmp_path: Path, fr_trace_printed: dict[str, str],
                                        scenario: str, expected: tuple[str, list[int]]) -> None:
    printed = fr_trace_printed[scenario]
    assert "sequence number: 6" in printed, printed[-2000:]
    [root] = roots(tmp_path, printed)
    assert (root.kind, root.ranks) == expected


def test_real_childfailederror_table_read_back(tmp_path: Path) -> None:
    """The table torch's own ChildFailedError.format_msg prints (the installed torch), with
    the agent's SIGTERM'd worker listed as torch 2.5+ does, behind a torchrun [rank]-less
    prefix-free paste."""
    errors = pytest.importorskip("torch.distributed.elastic.multiprocessing.errors")
    failures = {r: errors.ProcessFailure(local_rank=r, pid=9000 + r,
                                         exitcode=-15 if r == 5 else -6,
                                         error_file=str(tmp_path / "none"))
                for r in range(8)}
    text = errors.ChildFailedError("train.py", failures).format_msg()
    [root] = roots(tmp_path, "torch.distributed.elastic.multiprocessing.errors."
                   "ChildFailedError: \n" + text + "\n")
    assert (root.kind, root.ranks) == ("straggler", [5])
    # every worker aborted, nobody alive: nothing to split, the launcher's table names nobody
    failures = {r: errors.ProcessFailure(local_rank=r, pid=9000 + r, exitcode=-6,
                                         error_file=str(tmp_path / "none")) for r in range(4)}
    [root] = roots(tmp_path, errors.ChildFailedError("train.py", failures).format_msg())
    assert root.kind == "undecided"


def ras_json(counts: dict[int, int], unresponsive: tuple[int, ...] = ()) -> str:
    """rasDumpCommsToJSON (2.28.7+): jsonWriteHeader, jsonStartCommunicator, one
    jsonWriteRankData per rank (collective_counts per ncclFuncToString), jsonWriteMissingRank
    (status.unresponsive / considered_dead), footer."""
    ops = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
    ranks = ",\n".join(
        "        {\n"
        f'          "rank": {r},\n          "host": "172.16.64.245",\n          "pid": {100 + r},\n'
        f'          "cuda_dev": {r % 8},\n          "nvml_dev": {r % 8},\n'
        '          "status": {\n            "init_state": 0,\n            "async_error": 0,\n'
        '            "finalize_called": false,\n            "destroy_flag": false,\n'
        '            "abort_flag": false\n          },\n          "collective_counts": {\n'
        + ",\n".join(f'            "{op}": {n if op == "AllReduce" else 0}' for op in ops)
        + "\n          }\n        }" for r, n in sorted(counts.items()))
    missing = ",\n".join(
        f'        {{\n          "rank": {r},\n          "host": "unknown",\n          "pid": -1,\n'
        f'          "cuda_dev": 0,\n          "nvml_dev": 0,\n          "status": {{\n'
        '            "unresponsive": true,\n            "considered_dead": false\n          }\n'
        "        }" for r in unresponsive)
    size = len(counts) + len(unresponsive)
    return ('{\n  "nccl_version": "2.29.1",\n  "cuda_runtime_version": 13000,\n'
            '  "cuda_driver_version": 13000,\n  "timestamp": "2025-12-19 13:06:53",\n'
            '  "communicators_count": 1,\n  "communicators": [\n    {\n'
            '      "hash": "0xae94423cfbb2ef4a",\n'
            '      "secondary_hash": "0xb7e7187447156001:0xb8242ed28a71381e",\n'
            f'      "size": {size},\n      "ranks_count": {len(counts)},\n'
            f'      "missing_ranks_count": {len(unresponsive)},\n      "ranks": [\n{ranks}\n'
            f'      ],\n      "missing_ranks": [\n{missing}\n      ]\n    }}\n  ],\n'
            '  "collection_time": 0.01,\n  "timeouts_count": 0\n}\n')


def test_ras_json_names_the_rank_behind(tmp_path: Path) -> None:
    counts = {r: 812 for r in range(8)} | {6: 811}
    [root] = roots(tmp_path, ras_json(counts), world_size=8)
    assert (root.kind, root.ranks) == ("straggler", [6])
    assert root.evidence["pattern"] == "nccl.ras.count_group"


def test_ras_json_unresponsive_rank(tmp_path: Path) -> None:
    [root] = roots(tmp_path, ras_json({r: 40 for r in range(7)}, unresponsive=(7,)),
                   world_size=8)
    assert (root.kind, root.ranks) == ("straggler", [7])
    assert root.evidence["pattern"] == "nccl.ras.missing"


def test_ras_json_few_ahead_is_undecided(tmp_path: Path) -> None:
    counts = {r: 99 for r in range(8)} | {0: 100}
    [root] = roots(tmp_path, ras_json(counts), world_size=8)
    assert root.kind == "undecided" and root.evidence["ahead"] == [0]


def test_horovod_shut_down_is_a_victims_line(tmp_path: Path) -> None:
    """SHUT_DOWN_ERROR (horovod/common/common.h): raised on the ranks that did NOT fail."""
    shut = ("Horovod has been shut down. This was caused by an exception on one of the ranks or "
            "an attempt to allreduce, allgather or broadcast a tensor after one of the ranks "
            "finished execution. If the shutdown was caused by an exception, you should see the "
            "exception in the log before the first shutdown message.")
    text = "".join(f"[1,{r}]<stderr>:tensorflow.python.framework.errors_impl.UnknownError:  "
                   f"{shut}\n" for r in (0, 2, 3))
    log = tmp_path / "h.log"
    log.write_text(text)
    code, report = run_json("--logs", str(log))
    assert code == 1
    assert all(f["kind"] != "rank_failure" for f in report["stall_findings"])


# --- NCCL WARN: a process's own CUDA failure, and which rank that process is ----------------------
def nccl_line(host: str, pid: int, dev: int, body: str, level: str = "INFO") -> str:
    """src/debug.cc: "%s:%d:%d [%d] " host, pid, tid, cudaDev; WARN adds "%s:%d " file, line."""
    where = "include/alloc.h:65 " if level == "WARN" else ""
    return f"{host}:{pid}:{pid + 300} [{dev}] {where}NCCL {level} {body}\n"


def test_nccl_cuda_failure_rank_from_the_channel_lines(tmp_path: Path) -> None:
    """shm.cc: "Channel %02d : %d[%d] -> %d[%d] via SHM/direct" (rank[nvmlDev] -> peer);
    cudawrap.h CUCHECK: WARN("Cuda failure %d '%s'")."""
    text = (nccl_line("node7", 2374, 0, "Channel 00 : 0[0] -> 1[1] via SHM/direct/direct")
            + nccl_line("node7", 2375, 1, "Cuda failure 2 'out of memory'", "WARN")
            + "[rank1]: Traceback (most recent call last):\n")
    [root] = roots(tmp_path, text, world_size=2)
    assert (root.kind, root.ranks, root.confidence) == ("rank_failure", [1], "low")
    assert root.evidence["pattern"] == "nccl.warn.cuda_failure"


def test_nccl_cuda_failure_rank_from_the_init_line(tmp_path: Path) -> None:
    """init.cc: "comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx -
    Init COMPLETE" of the same host:pid names its rank."""
    text = (nccl_line("n1", 501, 3, "ncclCommInitRank comm 0x5581 rank 11 nranks 16 cudaDev 3 "
                      "nvmlDev 3 busId 1b000 commId 0xabc - Init COMPLETE")
            + nccl_line("n1", 501, 3, "Cuda failure 'an illegal memory access was encountered'",
                        "WARN"))
    [root] = roots(tmp_path, text, world_size=16)
    assert (root.kind, root.ranks) == ("rank_failure", [11])


def test_nccl_cuda_failure_with_remapped_devices_names_nobody(tmp_path: Path) -> None:
    # CUDA_VISIBLE_DEVICES per process: the printer's CUDA device 0 is NVML device 4
    text = (nccl_line("n1", 600, 0, "Channel 00/0 : 0[4] -> 1[5] via P2P/IPC")
            + nccl_line("n1", 601, 0, "Cuda failure 2 'out of memory'", "WARN"))
    [root] = roots(tmp_path, text)
    assert root.kind == "undecided"
