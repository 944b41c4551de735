"""The fifth fresh set (tests/stalls/data/fresh5) scored by the suite, like fresh4.

32 real public cases gathered on 2026-11-29 (helper f5; a round b of 9, gathered after the rules,
held out whole) by searches unlike the earlier sets':
NCCL transport / proxy / network failures in the WARN lines and the errors they raise (IB
completions, ibv_* calls, sockets, Proxy Service, P2P / SHM peer access); hangs at checkpoint
save, end of training and teardown (Accelerate save_state, FSDP / FSDP2 gathers, torchrec,
ColossalAI, nvFuser, NeMo); inference / RL frameworks with tensor-parallel NCCL groups (vLLM,
TensorRT-LLM, OpenRLHF). Labelled from the threads before the tool ran — no thread establishes a
culprit rank, so every label is "undecided" — and split into dev / held-out before any rule was
written: the case id's hash, plus the whole inference / RL family held out. Rules were written on
the dev half only (log_pg_error, nccl.ib.completion_error_text). The right / undecided figures
per half and family are the evaluation's (``eval_stalls.py --reach``, /work/notes/f5.md and
docs/stalls.md), not asserted here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.stalls import fresh_checks as fc
from tests.stalls.test_case_corpus import EVAL, _folders, _fresh_folders, _spec
from tests.stalls.test_case_corpus import test_case_is_well_formed as _well_formed

FRESH5 = EVAL.FRESH5_DIR
FAMILIES = ("nccl_transport", "save_shutdown", "inference_rl")
#: the family held out whole (inference / RL frameworks), whatever the hash says
HELD_FAMILY = "inference_rl"
#: no dev case's kept log is without a stall or failure message
NO_STALL_MESSAGE: frozenset[str] = frozenset()
#: confident answers on held-out cases the threads did not label: none measured; any new one
#: fails here
MEASURED_OPEN: set[str] = set()
#: held-out cases helper f6 read while writing rules for their messages (declared before any
#: rule was written; half and label unchanged): reported apart, in "fresh5/heldout (tuned on)"
TUNED_BY_F6 = frozenset({
    "vllm-44185-dp-speculative-shm-broadcast-enginecore",
    "vllm-6818-shm-broadcast-no-available-block-60-second",
    "tensorrt-llm-1039-attempt-to-use-communicator-allreduceplugin",
    "openrlhf-265-vllm-actor-broadcast-raylet-worker-died",
    "nccl-1515-socketstartconnect-prose-software-caused-abort",
})


def _fresh5() -> list[Path]:
    return sorted(p for p in FRESH5.iterdir() if p.is_dir())


@pytest.mark.parametrize("folder", _fresh5(), ids=lambda p: p.name)
def test_fresh5_case_is_well_formed_and_split_before_the_rules(folder: Path) -> None:
    _well_formed(folder)
    spec = _spec(folder)
    assert spec["set"] == "fresh5" and spec["real"]
    assert spec["tuned_on"] == (spec["id"] in TUNED_BY_F6)
    assert spec.get("tuned_by") == ("f6" if spec["tuned_on"] else None)
    assert spec["collected"] in ("2026-11-29e", "2026-11-29f", "2026-11-29g")
    assert spec["family"] in FAMILIES and spec["label_basis"] in ("thread", "source")
    # round b ("…f") was gathered after the two dev-half rules, round c ("…g") after f6's rules
    # (log_serving and two NCCL patterns): each is held out whole
    later_round = spec["collected"].endswith(("f", "g"))
    expected_half = "heldout" if spec["family"] == HELD_FAMILY or later_round else \
        EVAL.half_of(spec["id"])
    assert spec["half"] == expected_half
    case_md = (folder / "CASE.md").read_text()
    assert spec["established_by"] in case_md and spec["source"] in case_md
    if spec["expected"]["evidence_names_them"]:
        assert spec["label_basis"] == "source" and spec["expected"]["ranks"]


def test_fresh5_is_new_material() -> None:
    """No thread of the corpus or of an earlier fresh set, no id twice; enough cases per half."""
    specs = [_spec(f) for f in _fresh5()]
    older_dirs = [p for base in sorted(FRESH5.parent.glob("fresh*")) if base != FRESH5
                  for p in base.iterdir() if p.is_dir()]
    older = [_spec(f) for f in _folders() + _fresh_folders() + older_dirs]
    fc.assert_new_material(specs, older, min_cases=40, min_projects=12, min_dev=10)
    assert {s["family"] for s in specs} == set(FAMILIES)


@pytest.fixture(scope="module")
def fresh5_results() -> list[Any]:
    return EVAL.evaluate(EVAL.load_cases([FRESH5]))


def test_fresh5_never_crashes_nor_names_a_wrong_rank_confidently(
        fresh5_results: list[Any]) -> None:
    fc.assert_every_case_ran(fresh5_results, len(_fresh5()))
    assert not {r.case.id for r in fresh5_results
                if r.confident_wrong and r.case.half == "dev"}
    assert {r.case.id for r in fresh5_results if r.confident_wrong} == MEASURED_OPEN


def test_fresh5_is_never_healthy(fresh5_results: list[Any]) -> None:
    """Every case is a failing or hung job: "healthy" (exit 0) is the worst answer, on either
    half."""
    assert not [r.case.id for r in fresh5_results if r.exit_code == 0]


def test_fresh5_dev_half_is_never_healthy_nor_no_evidence(fresh5_results: list[Any]) -> None:
    """Every dev case whose log shows a stall or a failure gets a finding (exit 1), never
    "healthy" (0) or "no evidence" (3); and every dev answer is right."""
    fc.assert_dev_half_is_a_finding_and_right(fresh5_results, 10, NO_STALL_MESSAGE)


def test_fresh5_stays_out_of_the_halves_and_the_ceilings(fresh5_results: list[Any]) -> None:
    fc.assert_outside_the_halves_and_ceilings(fresh5_results)


def test_fresh5_is_read_by_reach_with_its_own_halves() -> None:
    dev, _ = fc.reach_halves("fresh5", [_spec(f) for f in _fresh5()])
    assert dev["(all)"]["confident_wrong"] == 0


def test_fresh5_cases_read_while_writing_rules_are_reported_apart() -> None:
    """The held-out cases f6 read are counted in their own row, never in the held-out figure."""
    tuned = fc.reach_row("fresh5/heldout (tuned on)")
    assert tuned["(all)"]["n"] == len(TUNED_BY_F6)
    assert tuned["(all)"]["confident_wrong"] == 0 and tuned["(all)"]["exit0"] == 0
