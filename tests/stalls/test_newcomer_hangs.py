"""Hangs as users make them, round two (helper uh): the REAL newcomer gloo jobs that carried a
fix (tests/stalls/newcomer_hang_jobs.py; the other nine stay in
benchmarks/eval_newcomer_hangs.py), judged from the archive alone through the CLI.

- ``ckpt_barrier2``: a barrier under ``if rank == 0:`` after a checkpoint. Rank 1 goes on to the
  next step; "the rank in the later step skipped one" named rank 1 at medium. The marks show
  rank 0 waits in a collective its previous step never entered: undecided, both places given.
- ``healthy_eval2``: rank 1 waits past its deadline in the last step's barrier while rank 0
  evaluates; no step followed, so the job that ended well read as hung. The tracker's stop from
  the training thread now says the rank got over it: exit 0, "Verdict: healthy".
- ``gather_shape2`` (gloo's size check aborts rank 1; rank 0, a forked worker, fails in its
  all_gather and leaves through ``os._exit``): no rank stopped its tracker and no snapshot
  fired: exit 0, "healthy". Their armed, never-fired, never-removed snapshot files now make it
  undecided (exit 1), the ranks that ended so as the suspects, no rank at medium.
- ``raise3x`` (rank 1 raises in its own code, its exit handlers run as a script's do; torchrun
  stops the others): every tracker stopped cleanly, nothing fired: exit 0, "healthy". The step
  spans' exception events now name rank 1 (raised in its own code; rank 2 failed inside its
  all_reduce because of it) at medium.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stormotel import exitcodes
from tests.bench_modules import load_benchmark
from tests.cpu_lock import cpu_heavy
from tests.fuzz.boundary import analyze, check
from tests.stalls import newcomer_hang_jobs as jobs

pytestmark = pytest.mark.slow
RUN = ["ckpt_barrier2", "healthy_eval2", "gather_shape2", "raise3x"]


@pytest.fixture(scope="module")
def newcomer_hangs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("newcomer_hangs")
    with cpu_heavy(tmp_path_factory, exclusive=True):  # the benchmark's own runner
        ran_s = load_benchmark("eval_newcomer_hangs").run_jobs(root, RUN, timeout_s=400)
    print(f"newcomer hang jobs ran in {ran_s:.1f} s")
    return root


def _analyze(root: Path, name: str) -> tuple[int, dict, str]:
    out, text = root / f"{name}.json", root / f"{name}.txt"
    result = analyze(str(root / name / "archive"), "--format", "json", "-o", str(out), "-q")
    check(result, out)
    again = analyze(str(root / name / "archive"), "-o", str(text), "-q")
    check(again, text)
    assert again.code == result.code
    return result.code, json.loads(out.read_text()), text.read_text()


def _exits(root: Path, name: str) -> dict[str, int]:
    return json.loads((root / name / "exits.json").read_text())


def test_an_added_barrier_on_rank_0_names_no_wrong_rank(newcomer_hangs: Path) -> None:
    code, report, _ = _analyze(newcomer_hangs, "ckpt_barrier2")
    assert code == exitcodes.FINDINGS
    lead = report["stall_findings"][0]
    assert lead["source"] == "stacks" and lead["kind"] == "undecided", lead
    assert lead["evidence"]["suspects"] == [0, 1]
    assert "nccl:barrier" in lead["evidence"]["proof"] and "previous step never entered" in \
        lead["evidence"]["proof"]
    assert not [f for f in report["stall_findings"] if 1 in f["ranks"]
                and f["confidence"] in ("medium", "high")]
    places = report["extra"]["stalls"]["per_rank"]
    assert places["0"]["sources"]["stacks"]["collective"] == "barrier"
    assert places["1"]["sources"]["stacks"]["collective"] == "all_reduce"


def test_a_wait_in_the_last_step_of_a_job_that_ended_well_is_healthy(
        newcomer_hangs: Path) -> None:
    assert _exits(newcomer_hangs, "healthy_eval2") == {"0": 0, "1": 0}
    stacks = newcomer_hangs / "healthy_eval2" / "archive" / "healthy_eval2" / "stacks"
    assert list(stacks.glob("rank-1-*.stack.txt")), "rank 1 must have waited past its deadline"
    code, report, text = _analyze(newcomer_hangs, "healthy_eval2")
    assert code == exitcodes.OK, report["stall_findings"]
    assert text.strip().splitlines()[-1] == "Verdict: healthy"


def test_a_job_whose_ranks_died_without_stopping_is_never_healthy(newcomer_hangs: Path) -> None:
    name = "gather_shape2"
    exits = _exits(newcomer_hangs, name)
    culprit = jobs.JOBS[name].culprit
    assert culprit is not None and exits[str(culprit[0])] != 0, exits
    code, report, text = _analyze(newcomer_hangs, name)
    assert code == exitcodes.FINDINGS
    lead = report["stall_findings"][0]
    assert (lead["kind"], lead["confidence"]) == ("undecided", "low"), lead
    assert lead["evidence"]["pattern"] == "stormotel.stacks.ended_unstopped"
    died = sorted(int(r) for r, c in exits.items() if c not in (0, -15))  # not the SIGTERMed
    assert lead["evidence"]["suspects"] == died and culprit[0] in died
    assert all(f["confidence"] != "high" for f in report["stall_findings"])
    assert "--logs" in lead["remediation"][0]
    assert not text.strip().splitlines()[-1].startswith("Verdict: healthy")


def test_the_rank_that_raised_in_its_own_code_is_named_from_its_spans(
        newcomer_hangs: Path) -> None:
    exits = _exits(newcomer_hangs, "raise3x")
    assert exits["1"] == 1, exits  # the launcher stopped the rest
    code, report, text = _analyze(newcomer_hangs, "raise3x")
    assert code == exitcodes.FINDINGS
    lead = report["stall_findings"][0]
    assert (lead["kind"], lead["ranks"], lead["confidence"]) == ("rank_failure", [1], "medium")
    assert lead["evidence"]["pattern"] == "stormotel.telemetry.exception_own_code"
    assert "ValueError" in lead["evidence"]["exceptions"]["1"]
    assert "load_batch" in lead["evidence"]["exceptions"]["1"]
    # the peers that failed did so inside their collective, because of rank 1
    for r, why in lead["evidence"]["exceptions"].items():
        if r != "1":
            assert "all_reduce" in why or "Connection" in why, why
    assert all(f["confidence"] != "high" for f in report["stall_findings"])
    assert "rank_failure on rank(s) 1" in text.strip().splitlines()[-1]


def test_snapshots_without_any_telemetry_file_are_still_judged(newcomer_hangs: Path,
                                                              tmp_path: Path) -> None:
    """Forked ranks that die before the archive's first write leave their snapshots and no
    telemetry file: judged from the snapshots (exit 1), not "no telemetry" (exit 3)."""
    src = newcomer_hangs / "gather_shape2" / "archive" / "gather_shape2" / "stacks"
    dst = tmp_path / "archive" / "gather_shape2" / "stacks"
    shutil.copytree(src, dst)
    out = tmp_path / "r.json"
    result = analyze(str(tmp_path / "archive"), "--format", "json", "-o", str(out), "-q")
    check(result, out)
    assert result.code == exitcodes.FINDINGS, result.stderr
    report = json.loads(out.read_text())
    assert report["stall_findings"][0]["evidence"]["pattern"] == \
        "stormotel.stacks.ended_unstopped"
    assert any("no telemetry file" in n for n in report["notes"])
