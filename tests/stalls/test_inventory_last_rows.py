"""The inventory's last unhandled c10d C++ and RAS rows (issue 37 item 1), each built from its
emitter's format string and read through the CLI, as a user's log is.

- ``ProcessGroupWrapper.cpp`` (``CollectiveFingerPrint::verify``, 1.13–2.13): ``"Detected
  mismatch between collectives on ranks. Rank " << backend->getRank() << " is running
  collective: " << *this << ", but Rank " << rank << " is running collective: " <<
  rank_fingerprint << "."`` — the first rank is the reporter, the second the first rank whose
  fingerprint differs from the reporter's. One line proves only that the two disagree.
- ``ProcessGroupNCCL::broadcastSignal`` (2.8): ``"Broadcasting signal " << signal << " to other
  ranks via TCPStore."`` — the reporter's watchdog caught the error: a victim, never a culprit.
- ``TCPStoreLibUvBackend.cpp`` (2.13): ``C10D_TRACE("barrier key:{} worldSize:{} address:{}")``
  traced for every barrier request: printed on the normal path (criterion 1).
- NCCL ``src/ras/client_support.cc``: ``"  Communicator ranks have different collective
  operation counts\\n"`` (2.24.3) / ``"… different %s operation counts\\n"`` (2.26+), printed
  only when a rank's count differs from the first rank's; ``"ranks_count": %d`` (2.28.7+) is
  ``comm->nRanks``, the length of the ``ranks`` array that follows it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from stormotel.analyzers.stalls import inventory as inv
from stormotel.analyzers.stalls.inventory_families import family_of

from tests.cli import run_stormotel_here
from tests.stalls.helpers import root_findings as cli

FP = ("CollectiveFingerPrint(SequenceNumber=12, OpType={op}, TensorShape=[1024], "
      "TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda))")
HEAD = "#0-0 (27a079b828ff1a75) MISMATCH"


def mismatch(me: int, other: int, mine: str, theirs: str) -> str:
    return (f"[rank{me}]:RuntimeError: Detected mismatch between collectives on ranks. Rank {me} "
            f"is running collective: {FP.format(op=mine)}, but Rank {other} is running "
            f"collective: {FP.format(op=theirs)}.Collectives differ in the following aspects:   "
            f"Op type: {mine}vs {theirs}\n")


def test_one_fingerprint_line_names_both_sides_and_blames_neither(tmp_path: Path) -> None:
    code, found = cli(tmp_path, mismatch(3, 5, "ALLREDUCE", "BROADCAST"))
    assert code == 1
    assert [(f["kind"], f["ranks"], f["confidence"]) for f in found] == [("undecided", [], "low")]
    assert found[0]["evidence"]["suspects"] == [3, 5]  # the reporter and the rank it names


def test_fingerprint_lines_of_every_rank_vote_the_odd_rank(tmp_path: Path) -> None:
    """Every rank runs verify(): the others name rank 2 (the first rank differing from theirs),
    rank 2 names rank 0 — the vote names rank 2 alone."""
    text = "".join(mismatch(r, 2, "ALLREDUCE", "BROADCAST") for r in (0, 1, 3))
    text += mismatch(2, 0, "BROADCAST", "ALLREDUCE")
    code, found = cli(tmp_path, text)
    assert code == 1
    assert [(f["ranks"], f["confidence"]) for f in found] == [([2], "medium")]


def test_the_inventory_fills_the_fingerprint_fragment_as_its_source_builds_it() -> None:
    entry = {"emitter": "pytorch.c10d-cpp", "file": "libtorch_cpu.so", "call": "c10::str",
             "level": "error", "tags": ["v2.13.0"],
             "template": "Detected mismatch between collectives on ranks. Rank "}
    line, used = inv.concrete(entry, family_of("pytorch.c10d-cpp", "error", entry["template"]))
    assert f"Rank {inv.REPORTER} is running collective: " in line
    assert f", but Rank {inv.NAMED} is running collective: " in line
    assert used == [inv.REPORTER, inv.NAMED]
    j = inv.judge_all([entry])[0]
    assert j.handled, j.reason


def test_the_dump_signal_broadcast_is_read_and_never_blames_its_reporter(tmp_path: Path
                                                                         ) -> None:
    line = ("[rank3]:[I1128 23:40:00.123456789 ProcessGroupNCCL.cpp:1] [PG ID 0 PG GUID "
            "0(default_pg) Rank 3] Broadcasting signal exception_dump to other ranks via "
            "TCPStore.\n")
    code, found = cli(tmp_path, line)
    assert code == 1  # a stall shown: never healthy, never "no evidence"
    assert [(f["kind"], f["ranks"], f["confidence"]) for f in found] == [("undecided", [], "low")]
    assert 3 not in found[0]["evidence"]["suspects"]
    assert found[0]["evidence"]["witnesses"] == [3]
    assert found[0]["evidence"]["pattern"] == "torch.nccl.dump_lines"


def test_the_store_servers_barrier_trace_is_normal_path() -> None:
    fam = family_of("pytorch.c10d-cpp", "error", "barrier key:{} worldSize:{} address:{}")
    assert (fam.id, fam.relevance) == ("c10d.normal_path", "info")


@pytest.mark.parametrize("heading", [
    "  Communicator ranks have different collective operation counts",  # 2.24.3
    "  Communicator ranks have different AllReduce operation counts",  # 2.26+
])
def test_a_ras_report_cut_after_the_count_heading_is_a_split_naming_nobody(
        tmp_path: Path, heading: str) -> None:
    code, found = cli(tmp_path, f"{HEAD}\n{heading}\n")
    assert code == 1
    assert [(f["kind"], f["ranks"], f["confidence"]) for f in found] == [("undecided", [], "low")]
    assert found[0]["evidence"]["pattern"] == "nccl.ras.mismatch_head"
    assert found[0]["evidence"]["suspects"] == []
    log = tmp_path / "head.log"  # the section head alone proves no count split
    log.write_text(f"{HEAD}\n")
    proc = run_stormotel_here("analyze", "--logs", str(log), "--format", "json", "--quiet")
    assert proc.returncode == 3, proc.stderr


def test_a_whole_ras_report_reads_as_before_with_its_heading(tmp_path: Path) -> None:
    groups = ("  7 ranks have launched up to operation 6650\n"
              "  Rank 5 has launched up to operation 6649 -- GPU 5 managed by process 4245 on "
              "node 10.0.0.1\n")
    _, with_head = cli(tmp_path, f"{HEAD}\n  Communicator ranks have different collective "
                                 f"operation counts\n{groups}")
    _, without = cli(tmp_path, f"{HEAD}\n{groups}")
    assert [(f["kind"], f["ranks"]) for f in with_head] == [("straggler", [5])]
    assert [(f["kind"], f["ranks"], f["confidence"]) for f in with_head] == [
        (f["kind"], f["ranks"], f["confidence"]) for f in without]


def test_ranks_count_stays_unhandled_it_repeats_the_ranks_array() -> None:
    entry = {"emitter": "nccl-ras", "file": "src/ras/client_support.cc", "call": "rasOutAppend",
             "level": "info", "tags": ["v2.28.7-1"], "template": '      "ranks_count": %d,\n'}
    j = inv.judge_all([entry])[0]
    assert not j.handled and "reads the same without it" in j.reason
