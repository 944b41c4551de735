"""The ninth fresh set (tests/stalls/data/fresh9) scored by the suite, like fresh8 — HELD OUT
WHOLE.

25 real public cases from 20 projects gathered on 2026-11-29 (helper g9) by searches unlike the
earlier sets': torch.multiprocessing.spawn's parent reports ("process N terminated with signal
S" / "with exit code C"), TensorFlow TPU runtime messages (the heartbeat manager, "Socket closed",
an error "From /job:worker/replica:0/task:N:"), Ray-based training whose worker actor died (Ray
Train's "Worker N has failed.", verl's WorkerDict_<pg>:<local rank> actors), MPI termination
reports in training jobs (Open MPI's signal handler, mpirun's first non-zero exit), and frameworks
no earlier set holds (MosaicML Composer's launcher, MosaicML streaming, fairseq multi-node). 18
carry a culprit label (from the thread, or from a message that names the rank per its emitter's
source); the rest are undecided. They were labelled and committed (c1ef4db) before the tool ran
and before any rule was written from those emitters' source (helper rs9, at the same time), and
the whole set is held out (no dev half, whatever the id's hash says): it exists to measure those
rules, so no rule may be written from it. The right / culprit-named figures per family are the
evaluation's (``eval_stalls.py --reach --per-case``; docs/stalls.md "fresh9", /work/notes/g9.md),
not asserted here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.stalls import fresh_checks as fc
from tests.stalls.test_case_corpus import EVAL

FRESH9 = EVAL.FRESH9_DIR
FAMILIES = ("spawn", "tpu_runtime", "ray", "mpi", "other")
#: the case folders, labelled and committed before the tool ran (c1ef4db)
FOLDERS = fc.set_folders(FRESH9)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_fresh9_case_is_well_formed_and_held_out_whole(folder: Path) -> None:
    """Labelled from the thread or the emitter's source, dated before rs9's rules, held out
    whatever the id's hash says; nobody has read a case while writing a rule (none tuned on)."""
    fc.assert_culprit_case_split(folder, set_name="fresh9", before_rules="2026-11-29j",
                                 after_rules=None, families=FAMILIES, held_family=None,
                                 held_whole=True)


def test_fresh9_is_new_material_and_most_of_it_names_a_culprit() -> None:
    fc.assert_held_whole_set_is_new_and_culprit_bearing(FRESH9, FAMILIES)


def test_fresh9_runs_every_case_and_names_no_wrong_rank_confidently() -> None:
    """No crash, no usage error, every case scored as a fresh one, and no wrong rank at high or
    medium anywhere (none was measured with main's rules at 3f6a6e5)."""
    scored = list(fc.scored_set(FRESH9))
    fc.assert_every_case_ran(scored, len(FOLDERS))
    assert {r.case.id: r.confident_wrong for r in scored if r.confident_wrong} == {}


def test_fresh9_is_never_healthy_and_stays_out_of_the_halves_and_the_ceilings() -> None:
    """None read "healthy" with main's rules at 3f6a6e5 (17 of 25 read "no evidence", exit 3)."""
    fc.assert_never_healthy_and_outside(list(fc.scored_set(FRESH9)))


def test_fresh9_is_read_by_reach_held_out_whole() -> None:
    fc.assert_reach_held_whole("fresh9", untuned=len(FOLDERS))
