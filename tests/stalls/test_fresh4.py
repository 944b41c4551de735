"""The fourth fresh set (tests/stalls/data/fresh4) scored by the suite, like fresh2.

45 real public cases gathered on 2026-11-29 (issue 37 "Stuck jobs, round three") by
searches on three families the earlier sets hold little of: rank 0 busy (tokenizing, dataset
map, caching, evaluating, saving) while the other ranks wait in a barrier or a collective;
Horovod's stall inspector and shut-down messages through mpirun / horovodrun stdio tags; lines
as users paste them through launchers and platforms (Slurm, Kubernetes, Ray, Beaker, pdsh,
Markdown quotes, hard wraps, lines glued behind a tqdm bar). Labelled from the threads before
the tool ran (``label_basis``: "thread", or "source" where the message names the culprit per its
emitter's source), split into dev / held-out before any rule was written: the case id's hash,
plus the whole Horovod family held out; a round b of 7 cases, gathered after the first rule was
written, is held out whole. Rules were written on the dev half only. The right /
undecided figures per half and family are the evaluation's (``eval_stalls.py --reach``,
/work/notes/37k.md and docs/stalls.md), not asserted here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.stalls import fresh_checks as fc
from tests.stalls.test_case_corpus import EVAL, _folders, _fresh_folders, _spec
from tests.stalls.test_case_corpus import test_case_is_well_formed as _well_formed

FRESH4 = EVAL.FRESH4_DIR
FAMILIES = ("rank0_busy", "horovod_mpirun", "launcher_prefix")
#: the family held out whole (Horovod through mpirun / horovodrun tags): held out whatever the
#: hash says
HELD_FAMILY = "horovod_mpirun"
#: dev cases whose kept log holds no stall or failure message at all (the thread's excerpt stops
#: before anything went wrong): "no evidence" (exit 3) is the true answer there
NO_STALL_MESSAGE = frozenset({"kubeflow-pytorch-operator-202-master-0-nccl-never-starts"})
#: confident answers on held-out cases the threads did not label. Measured before any rule of
#: this round: PFT-SR#13 (ranks 6 and 7 at work 70005, rank 2 timing out at 70002, five of the
#: eight ranks unseen) was named rank 2 at medium by the SeqNum-split rule; since the lead's
#: fix (log_analysis._confidence: never above low while the unseen ranks could outvote the
#: majority that spoke) it is rank 2 at low. None left; any new one fails here.
MEASURED_OPEN: set[str] = set()


def _fresh4() -> list[Path]:
    return sorted(p for p in FRESH4.iterdir() if p.is_dir())


@pytest.mark.parametrize("folder", _fresh4(), ids=lambda p: p.name)
def test_fresh4_case_is_well_formed_and_split_before_the_rules(folder: Path) -> None:
    _well_formed(folder)
    spec = _spec(folder)
    assert spec["set"] == "fresh4" and spec["real"] and not spec["tuned_on"]
    assert spec["collected"] in ("2026-11-29c", "2026-11-29d")
    assert spec["family"] in FAMILIES and spec["label_basis"] in ("thread", "source")
    # round b ("…d") was gathered after the first rule (log_main_first) and is held out whole
    round_b = spec["collected"].endswith("d")
    expected_half = "heldout" if spec["family"] == HELD_FAMILY or round_b else \
        EVAL.half_of(spec["id"])
    assert spec["half"] == expected_half
    case_md = (folder / "CASE.md").read_text()
    assert spec["established_by"] in case_md and spec["source"] in case_md
    # a label read off the message itself says so; no culprit → nothing can name it
    if spec["expected"]["evidence_names_them"]:
        assert spec["label_basis"] == "source" and spec["expected"]["ranks"]


def test_fresh4_is_new_material() -> None:
    """No thread of the corpus or of an earlier fresh set, no id twice; enough cases per half."""
    specs = [_spec(f) for f in _fresh4()]
    older_dirs = [p for base in sorted(FRESH4.parent.glob("fresh*")) if base != FRESH4
                  for p in base.iterdir() if p.is_dir()]
    older = [_spec(f) for f in _folders() + _fresh_folders() + older_dirs]
    fc.assert_new_material(specs, older, min_cases=25, min_projects=12, min_dev=8)
    assert {s["family"] for s in specs} == set(FAMILIES)


@pytest.fixture(scope="module")
def fresh4_results() -> list[Any]:
    return EVAL.evaluate(EVAL.load_cases([FRESH4]))


def test_fresh4_never_crashes_nor_names_a_wrong_rank_confidently(
        fresh4_results: list[Any]) -> None:
    fc.assert_every_case_ran(fresh4_results, len(_fresh4()))
    wrong = {r.case.id for r in fresh4_results if r.confident_wrong}
    assert not {r.case.id for r in fresh4_results
                if r.confident_wrong and r.case.half == "dev"}
    assert wrong == MEASURED_OPEN, wrong


def test_fresh4_dev_half_is_never_healthy_nor_no_evidence(fresh4_results: list[Any]) -> None:
    """Every dev case whose log shows a stall or a failure gets a finding (exit 1), never
    "healthy" (0) or "no evidence" (3); and every dev answer is right."""
    fc.assert_dev_half_is_a_finding_and_right(fresh4_results, 8, NO_STALL_MESSAGE)


def test_fresh4_stays_out_of_the_halves_and_the_ceilings(fresh4_results: list[Any]) -> None:
    fc.assert_outside_the_halves_and_ceilings(fresh4_results)


def test_fresh4_is_read_by_reach_with_its_own_halves() -> None:
    dev, _ = fc.reach_halves("fresh4", [_spec(f) for f in _fresh4()])
    assert dev["(all)"]["confident_wrong"] == 0
