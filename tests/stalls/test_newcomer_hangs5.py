"""Hangs as users make them, round five (helper nh5): a second held-out set of real gloo jobs
(tests/stalls/newcomer_hang_jobs5.py, labelled before the analyzer ran; all 13 in
``benchmarks/eval_newcomer_hangs.py --set five``). The two here carry fixes, each checked at the
CLI boundary on the jobs' real output (tests/stalls/data/newcomer5: four and three ranks under
srun and torchrun cost 15–20 s of CPU to run, over the suite's budget):

- ``node_prefix4`` (its archive and its two node logs): two srun nodes of two tasks, one log per
  node (``srun -o node-%n.log``), the user's log lines prefixed with the LOCAL rank. Global rank 3
  raised; its traceback sits in node-1.log both unprefixed (the user's ``log.exception``) and
  behind torch's ``[rank3]:``. The file's trailing "1" was read as a rank: rank 1 and 3 named at
  medium. A file whose own lines carry another rank's ``[rankN]:`` is not rank N's alone.
- ``async_uneven3`` (its real snapshots): gradient all_reduces with ``async_op=True`` then
  ``wait()``; rank 1, one batch short, waits in the ``barrier()`` after its loop (step 11) while
  ranks 0 and 2 wait in step 12's ``wait()`` — C++, their snapshots end at their own line.
  ``odd_group`` named 0 and 2 as the ranks waited for. A rank "in no collective" at a later step
  than every waiting rank is undecided.
"""

from __future__ import annotations

from pathlib import Path

from stormotel import exitcodes
from tests.stalls.helpers import json_report

DATA = Path(__file__).resolve().parent / "data" / "newcomer5"
CONFIDENT = ("medium", "high")


def test_a_node_log_names_no_rank_its_torch_prefixes_contradict(tmp_path: Path) -> None:
    job = DATA / "node_prefix4"
    code, report = json_report(tmp_path, str(job / "archive"), "--logs", str(job / "logs"))
    assert code == exitcodes.FINDINGS, report["stall_findings"]
    named = [f for f in report["stall_findings"] if f["ranks"]]
    assert named and all(f["ranks"] == [3] for f in named
                         if f["confidence"] in CONFIDENT), named
    lead = report["stall_findings"][0]
    assert (lead["ranks"], lead["evidence"]["pattern"]) == ([3], "python.exception"), lead
    assert set(lead["evidence"]["per_rank"]) == {"3"}, lead["evidence"]["per_rank"]
    assert any("node-1.log" in n and "not read as a rank" in n for n in report["notes"])


def test_a_rank_past_the_waiters_step_is_not_the_one_they_wait_for(tmp_path: Path) -> None:
    code, report = json_report(tmp_path, "--stacks", str(DATA / "async_uneven3"))
    assert code == exitcodes.FINDINGS
    stacks = {r: v["sources"]["stacks"] for r, v in report["extra"]["stalls"]["per_rank"].items()}
    assert stacks["1"]["collective"] == "barrier", stacks
    assert not stacks["0"].get("collective") and not stacks["2"].get("collective"), stacks
    assert not [f for f in report["stall_findings"] if f["ranks"]], report["stall_findings"]
    lead = report["stall_findings"][0]
    assert (lead["kind"], lead["confidence"], lead["evidence"]["pattern"]) == (
        "undecided", "low", "stormotel.stacks.outside_ahead_undecided"), lead
    assert lead["evidence"]["suspects"] == [0, 1, 2]
    assert "wait()" in lead["evidence"]["proof"]
