"""The fourteenth fresh set (tests/stalls/data/fresh14) scored by the suite — HELD OUT WHOLE.

Its point is the measure the brief cares about most: on fresh real threads, how often does
the tool name the culprit rank, and is it ever confidently wrong? Earlier sets were gathered
per family and ended mostly without a culprit label (fresh13: 7 of 24), so they measure
caution, not reach; this one was gathered culprit-labelled first (helper g14, 2026-11-30): a
case was kept only when its thread (a maintainer, the reporter's follow-up, a reproduction
that fails a chosen rank on purpose) or the emitter's documented format establishes which rank
was the culprit, or — for at most a fifth of the set — that none can be named.

13 real cases from 6 projects, 11 with a culprit (85 %): ranks whose own GPU raised an
uncorrectable ECC error or an illegal instruction (`device_error`, with two undecided traps: an
ECC crash that prints no rank, and one whose tracebacks come from two ranks), Horovod's
rank-tagged output and stall inspector, including two reproductions that fail rank 2 on
purpose (`horovod_rank_tags`), and one rank that dies silently, reads a checkpoint for hours or
enters a collective alone while the others wait (`one_rank_stops`). The searches for
culprit-bearing threads kept returning threads earlier sets hold (580 sources), so the set is
smaller than the 24 cases / 12 projects of fresh8 to fresh13; the checks below hold what it has.

The labels were committed (5dc809a) before stormotel ran on any case; the whole set is held out
(no dev half, whatever the id's hash says) and no rule may be written from it. The per-family
figures are the evaluation's (``eval_stalls.py --reach --per-case``; docs/stalls.md "fresh14",
/work/notes/g14.md), not asserted here.
"""

from __future__ import annotations

from tests.stalls import fresh_checks as fc
from tests.stalls.test_case_corpus import EVAL

# 11 of 13 labelled; 13 cases from 6 projects (see the docstring)
(test_scoring_crashes_nowhere_and_is_never_healthy_or_confidently_wrong,
 test_threads_are_new_and_most_cases_name_a_culprit,
 test_case_dated_before_any_run_labelled_from_thread_or_source) = fc.held_whole_tests(
    EVAL.FRESH14_DIR, "fresh14", "2026-11-30d",
    ("device_error", "horovod_rank_tags", "one_rank_stops"),
    labelled_tenths=8, min_cases=13, min_projects=6)
