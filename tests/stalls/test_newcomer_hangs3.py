"""Hangs as users make them, round three (helper nh): round two's rules held out on new real
gloo jobs (tests/stalls/newcomer_hang_jobs3.py, labelled before the analyzer ran; the rest stay in
``benchmarks/eval_newcomer_hangs.py --set three``), each fix at the CLI boundary.

- ``wrong_src3`` (real job): rank 2 broadcasts from ``src=2``, ranks 0,1 from ``src=0``; rank 1
  receives rank 0's broadcast and goes on to step 13. "The rank in the later step skipped a
  collective every step enters" named rank 1 (a bystander) at medium; its marks show it entered
  and left that very broadcast in step 12: nobody skipped it, undecided.
- ``monitored3`` (real job): rank 2 late to ``monitored_barrier`` past its timeout; every rank
  then ends in an exception inside the barrier. The telemetry's "every rank failed inside a
  collective" (naming nobody) led the snapshots' finding that names rank 2: named findings now
  lead undecided ones.
- ``new_group4`` (its real snapshots, tests/stalls/data/newcomer3): ranks 0,1 wait in
  ``new_group`` (a rendezvous of every member) while 2,3 wait in an all_reduce; 0,1 were "in no
  collective" and named at medium.
- ``ddp_stuck_read2`` (its real snapshots): rank 0 waits in DDP's backward (the gradient
  all_reduce, C++ below ``_engine_run_backward``), rank 1 blocks in its own read: "every rank at
  the same place"; now rank 1 at ``low`` (the wait is inferred), backward named as one.
- A healthy job's quiet ranks leave empty logs: ``--logs`` beside the archive exited 2.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from stormotel import MemoryTracker, exitcodes
from tests.fuzz.boundary import analyze, check
from tests.stalls.helpers import json_report, newcomer_jobs

DATA = Path(__file__).resolve().parent / "data" / "newcomer3"
RUN = ["wrong_src3", "monitored3"]
CONFIDENT = ("medium", "high")


@pytest.fixture(scope="module")
def newcomer_hangs3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return newcomer_jobs(tmp_path_factory, RUN, "tests.stalls.newcomer_hang_jobs3")


_report = json_report


def _exits(root: Path, name: str) -> dict[str, int]:
    return json.loads((root / name / "exits.json").read_text())


@pytest.mark.slow
def test_a_rank_that_received_the_broadcast_and_went_on_is_no_culprit(
        newcomer_hangs3: Path, tmp_path: Path) -> None:
    code, report = _report(tmp_path, str(newcomer_hangs3 / "wrong_src3" / "archive"))
    assert code == exitcodes.FINDINGS
    places = report["extra"]["stalls"]["per_rank"]
    assert places["1"]["sources"]["stacks"]["step"] == places["0"]["sources"]["stacks"]["step"] + 1
    assert not [f for f in report["stall_findings"] if f["ranks"]
                and f["confidence"] in CONFIDENT], report["stall_findings"]
    lead = report["stall_findings"][0]
    assert (lead["kind"], lead["evidence"]["pattern"]) == (
        "undecided", "stormotel.stacks.split_undecided"), lead
    assert "entered 'nccl:broadcast'" in lead["evidence"]["proof"]
    assert "nobody skipped it" in lead["evidence"]["proof"]


@pytest.mark.slow
def test_the_rank_the_others_waited_for_leads_every_rank_failing_in_the_barrier(
        newcomer_hangs3: Path, tmp_path: Path) -> None:
    assert set(_exits(newcomer_hangs3, "monitored3").values()) == {1}
    code, report = _report(tmp_path, str(newcomer_hangs3 / "monitored3" / "archive"))
    assert code == exitcodes.FINDINGS
    roots = [f for f in report["stall_findings"] if f["consequence_of"] is None]
    assert roots[0]["ranks"] == [2] and roots[0]["source"] == "stacks", roots[0]
    assert roots[0]["confidence"] != "high"
    patterns = [f["evidence"].get("pattern") for f in roots]
    assert "stormotel.telemetry.exception_in_collective" in patterns[1:], patterns
    assert not [f for f in roots if f["ranks"] and f["ranks"] != [2]], roots


def test_ranks_creating_a_group_wait_in_a_rendezvous_not_in_their_own_code(
        tmp_path: Path) -> None:
    code, report = _report(tmp_path, "--stacks", str(DATA / "new_group4"))
    assert code == exitcodes.FINDINGS
    lead = report["stall_findings"][0]
    assert lead["kind"] == "undecided" and lead["confidence"] == "low", lead
    assert sorted(g["collective"] for g in lead["evidence"]["stack_groups"]) == [
        "all_reduce", "new_group"]
    assert not [f for f in report["stall_findings"] if f["ranks"]]


def test_a_wait_in_ddp_backward_is_an_inferred_collective_wait(tmp_path: Path) -> None:
    code, report = _report(tmp_path, "--stacks", str(DATA / "ddp_stuck_read2"))
    assert code == exitcodes.FINDINGS
    lead = report["stall_findings"][0]
    assert (lead["kind"], lead["ranks"], lead["confidence"]) == ("straggler", [1], "low"), lead
    assert "backward()" in lead["evidence"]["proof"]
    place = report["extra"]["stalls"]["per_rank"]["0"]["sources"]["stacks"]
    assert place["collective"] == "backward" and "DDP" in place["collective_inferred"]
    result = analyze("--stacks", str(DATA / "ddp_stuck_read2"), "-q")
    assert "rank 0: main thread inside backward (DDP/FSDP" in result.stdout


def _healthy_archive(tmp_path: Path) -> Path:
    t = MemoryTracker(sampler="simulated", archive_dir=tmp_path / "archive", job_id="j",
                      rank=0, world_size=1, sampling_interval=0.05, stall_snapshots=False)
    t.start_tracking()
    for i in range(5):
        with t.step(i):
            time.sleep(0.01)
    t.stop_tracking()
    return tmp_path / "archive"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_empty_logs_beside_an_archive_are_a_note_and_alone_bad_input(tmp_path: Path) -> None:
    archive = _healthy_archive(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    for r in range(2):  # torchrun --log-dir: a quiet rank's files are empty
        (logs / f"rank-{r}.log").write_text("")
    code, report = _report(tmp_path, str(archive), "--logs", str(logs))
    assert code == exitcodes.OK, report
    assert any("no readable log" in n for n in report["notes"]), report["notes"]
    alone = analyze("--logs", str(logs), "-q")
    check(alone)
    assert alone.code == exitcodes.USAGE and "empty file" in alone.stderr
