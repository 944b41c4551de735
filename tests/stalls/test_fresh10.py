"""The tenth fresh set (tests/stalls/data/fresh10) scored by the suite, like fresh9 — HELD OUT
WHOLE.

24 real public cases from 16 projects gathered on 2026-11-29 (helper g10) by searches unlike the
earlier sets': MosaicML Composer's launcher ("Rank N crashed with exit code C."), Ray / Ray Train
deaths named by pid ("(RayTrainWorker pid=...)", ActorDiedError "pid:"), TensorFlow distributed
errors naming a task (/job:worker/replica:0/task:N) or a task the thread names, PyTorch
Lightning / HF accelerate launchers ("[rank: N] Child process with PID P terminated with code C",
torchelastic under ``accelerate launch``) and DDP hangs, and other frameworks (Megatron-LM,
torchtitan, WeNet). 14 carry a culprit label (8 from a message that names the rank per its
emitter's source, 6 from the thread); the other 10 are undecided. They were labelled and
committed (aaf1daf) before the tool ran and before any rule was written from those emitters'
source (helper rs10, at the same time), and the whole set is held out (no dev half, whatever the
id's hash says): it exists to measure those rules, so no rule may be written from it.

The labelled share is 58 %, under the 70 % the earlier held-whole sets reached: the stored
threads gave few Ray deaths whose pid is mapped to a rank and few labelled cases outside the
named frameworks, and undecided cases were kept rather than dropped to reach the share (four weak
ones were dropped before the tool ran; /work/notes/g10.md). The check below holds the share the
set has, so a later edit cannot silently lower it. The right / culprit-named figures per family
are the evaluation's (``eval_stalls.py --reach --per-case``; docs/stalls.md "fresh10",
/work/notes/g10.md), not asserted here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.stalls import fresh_checks as fc
from tests.stalls.test_case_corpus import EVAL

FRESH10 = EVAL.FRESH10_DIR
#: the case folders, labelled and committed before the tool ran (aaf1daf)
FOLDERS = fc.set_folders(FRESH10)
#: how every case is split: dated before rs10's rules, held out whatever the id's hash says
SPLIT = {"set_name": "fresh10", "before_rules": "2026-11-29k", "after_rules": None,
         "families": ("composer", "ray_pid", "tf_distributed", "lightning", "other"),
         "held_family": None, "held_whole": True}


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_each_case_is_labelled_before_rs10_and_held_out_whole(folder: Path) -> None:
    """Labelled from the thread or the emitter's source; nobody has read a case while writing a
    rule (none tuned on)."""
    fc.assert_culprit_case_split(folder, **SPLIT)


def test_the_set_is_new_material_and_keeps_its_labelled_share() -> None:
    """No thread of an earlier set; 14 of 24 culprit-labelled (at least half, see above)."""
    fc.assert_held_whole_set_is_new_and_culprit_bearing(FRESH10, SPLIT["families"],
                                                        labelled_tenths=5)


def test_scoring_it_crashes_nowhere_names_no_wrong_rank_confidently_and_never_says_healthy(
) -> None:
    """Measured with main's rules at 54bbee5: no crash or usage error, no wrong rank at high or
    medium, no "healthy" (18 of 24 read "no evidence", exit 3); outside the corpus's halves and
    ceilings, and read by the reach tables as fresh10/heldout only."""
    scored = list(fc.scored_set(FRESH10))
    fc.assert_every_case_ran(scored, len(FOLDERS))
    assert {r.case.id: r.confident_wrong for r in scored if r.confident_wrong} == {}
    fc.assert_never_healthy_and_outside(scored)
    fc.assert_reach_held_whole("fresh10", untuned=len(FOLDERS))
