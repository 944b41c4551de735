"""Hangs as users make them, round four (helper nh4): every hang rule held out on new real gloo
jobs, each rank a process of its own (tests/stalls/newcomer_hang_jobs4.py, labelled before the
analyzer ran; the rest stay in ``benchmarks/eval_newcomer_hangs.py --set four``). The two jobs
here carry the fixes, each checked at the CLI boundary:

- ``wrong_peer3`` (its real snapshots, tests/stalls/data/newcomer4: three ``python`` processes
  with ``env://`` cost ~12 s of CPU, over the suite's budget): rank 2 receives from the wrong peer;
  rank 1 waits in its ``isend``'s ``Work.wait()`` — a C++ method, so its snapshot shows only its
  own line — while rank 2 waits in ``recv`` and rank 0 in the next step's all_reduce.
  ``odd_group`` named rank 1 ("the others wait for it") at medium: a bystander. Beside a
  point-to-point wait, ranks "in no collective" are now undecided.
- ``init_port2`` (real job, two ``python`` processes): rank 1 has another ``MASTER_PORT``;
  both wait in ``init_process_group`` until killed, no step ever runs, no snapshot fires: the
  archive read healthy (exit 0). A tracker that started and never stopped, its telemetry long
  ended, is now undecided with those ranks the suspects — and ``healthy_final_ckpt2``'s real
  archive (its trackers stopped, judged long after) is still healthy.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from stormotel.analyzers.sources.loader import LIVE_WRITER_S

from stormotel import exitcodes
from tests.stalls.helpers import json_report, newcomer_jobs

DATA = Path(__file__).resolve().parent / "data" / "newcomer4"
RUN = ["init_port2"]
CONFIDENT = ("medium", "high")


@pytest.fixture(scope="module")
def newcomer_hangs4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return newcomer_jobs(tmp_path_factory, RUN, "tests.stalls.newcomer_hang_jobs4")


def test_ranks_beside_a_point_to_point_wait_are_undecided_not_the_odd_one(
        tmp_path: Path) -> None:
    code, report = json_report(tmp_path, "--stacks", str(DATA / "wrong_peer3"))
    assert code == exitcodes.FINDINGS
    stacks = {r: v["sources"]["stacks"] for r, v in report["extra"]["stalls"]["per_rank"].items()}
    assert stacks["2"]["collective"] == "recv", stacks
    assert not stacks["1"].get("collective"), stacks  # its isend's wait(): no Python frame
    assert not [f for f in report["stall_findings"] if f["ranks"]
                and f["confidence"] in CONFIDENT], report["stall_findings"]
    lead = report["stall_findings"][0]
    assert (lead["kind"], lead["evidence"]["pattern"]) == (
        "undecided", "stormotel.stacks.p2p_undecided"), lead
    assert 2 in lead["evidence"]["suspects"] and "Work.wait()" in lead["evidence"]["proof"]


@pytest.mark.slow
def test_a_tracker_that_never_stopped_is_no_healthy_end(newcomer_hangs4: Path,
                                                        tmp_path: Path) -> None:
    job = newcomer_hangs4 / "init_port2"
    assert set(json.loads((job / "exits.json").read_text())) == {"0", "1"}
    assert not list(job.glob("archive/*/stacks/*"))  # no step: no snapshot
    # the rule speaks once the telemetry is older than a live writer's (LIVE_WRITER_S)
    last = max(p.stat().st_mtime for p in job.glob("archive/**/*.zst"))
    time.sleep(max(0.0, last + LIVE_WRITER_S + 2 - time.time()))
    code, report = json_report(tmp_path, str(job / "archive"))
    assert code == exitcodes.FINDINGS, report["stall_findings"]
    lead = report["stall_findings"][0]
    assert (lead["kind"], lead["confidence"], lead["evidence"]["pattern"]) == (
        "undecided", "low", "stormotel.telemetry.ended_unstopped"), lead
    assert lead["evidence"]["suspects"] == [0, 1]
    assert "never began a step" in lead["evidence"]["reason"]


def test_a_job_whose_trackers_stopped_long_ago_is_still_healthy(tmp_path: Path) -> None:
    """healthy_final_ckpt2's real archive (torchrun, 2 ranks): rank 1 waited 8 s in the final
    barrier while rank 0 wrote its checkpoint, then both stopped; judged long after."""
    code, report = json_report(tmp_path, str(DATA / "healthy_final_ckpt2"))
    assert code == exitcodes.OK, report["stall_findings"]
    assert report["participating_ranks"] == [0, 1]
