"""The labelled stuck-job corpus is well-formed, and the analyzer survives every case in it.

The corpus (tests/stalls/data/cases/ and the 14 older tests/stalls/data/real/ cases) is what the
stall rules are measured on (benchmarks/eval_stalls.py); a malformed case, a case in the wrong
half or a missing evidence file would silently skew those figures. What must hold whatever the
rules say is checked here: every case runs through `stormotel analyze` without crashing (exit
70). How often the verdicts are right is the evaluation's job, not this file's.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests/stalls/data/cases"
REAL = ROOT / "tests/stalls/data/real"
#: the fresh set: real cases from other searches, labelled before the tool ran, reported apart
FRESH = ROOT / "tests/stalls/data/fresh"
#: the corpus must hold at least this many real cases the rules were not written on.
MIN_REAL_UNTUNED = 40
#: <project>-<issue number>-<slug>, or <project>-fixture-<slug> for a repository's test data
ID = re.compile(r"^[a-z0-9][a-z0-9-]*-([0-9]+|fixture)-[a-z0-9][a-z0-9-]*$")
TOP_KEYS = {"id", "project", "source", "real", "half", "evidence", "world_size", "expected",
            "established_by", "tuned_on"}
EXPECTED_KEYS = {"ranks", "evidence_names_them", "kinds", "category"}
#: keys a case may add: `collected`, the date a later set of cases was gathered (so a set nobody
#: tuned on stays recognisable after it is merged into the corpus), with a letter after the date
#: for a further round gathered the same day (`2026-11-27b`); `set`: "fresh" for the fresh set
#: (tests/stalls/data/fresh, reported apart by `eval_stalls.py --reach`)
#: `label_basis`: "source" when the message itself names the culprit per its emitter's source,
#: "thread" when the thread established it (fresh3 onward)
#: `tuned_by`: the helper that read a fresh set's held-out case while writing rules (it then has
#: "tuned_on": true, keeps its half and label, and is reported apart)
OPTIONAL_KEYS = {"collected", "set", "label_basis", "family", "tuned_by"}


def _load_eval() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "eval_stalls", ROOT / "benchmarks/eval_stalls.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["eval_stalls"] = module
    spec.loader.exec_module(module)
    return module


EVAL = _load_eval()


def _folders() -> list[Path]:
    return sorted(p for base in (CASES, REAL) for p in base.iterdir() if p.is_dir())


def _fresh_folders() -> list[Path]:
    return sorted(p for p in FRESH.iterdir() if p.is_dir())


def _spec(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "expect.json").read_text())


@pytest.mark.parametrize("folder", _folders() + _fresh_folders(), ids=lambda p: p.name)
def test_case_is_well_formed(folder: Path) -> None:
    assert (folder / "CASE.md").is_file(), "CASE.md missing"
    assert (folder / "expect.json").is_file(), "expect.json missing"
    spec = _spec(folder)
    assert TOP_KEYS <= set(spec) <= TOP_KEYS | OPTIONAL_KEYS, set(spec) ^ TOP_KEYS
    if "collected" in spec:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}[a-z]?", spec["collected"]), spec["collected"]
    # the fresh set lives in its own folder, and only there, marked and dated
    assert (spec.get("set") == "fresh") == (folder.parent == FRESH), spec.get("set")
    if folder.parent == FRESH:
        assert spec["real"] and not spec["tuned_on"] and "collected" in spec
    assert spec["id"] == folder.name and ID.match(spec["id"]), spec["id"]
    assert spec["source"].startswith("https://"), spec["source"]
    assert spec["source"] in (folder / "CASE.md").read_text(), "CASE.md must link the source"
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", spec["project"]), spec["project"]
    assert isinstance(spec["real"], bool) and isinstance(spec["tuned_on"], bool)
    assert spec["world_size"] is None or (isinstance(spec["world_size"], int)
                                          and spec["world_size"] >= 1)
    assert isinstance(spec["established_by"], str) and spec["established_by"].strip()
    expected = spec["expected"]
    assert set(expected) == EXPECTED_KEYS, set(expected) ^ EXPECTED_KEYS
    ranks = expected["ranks"]
    assert ranks is None or (ranks and all(isinstance(r, int) and r >= 0 for r in ranks))
    assert isinstance(expected["evidence_names_them"], bool)
    if ranks is None:
        assert not expected["evidence_names_them"], "no culprit cannot be named by evidence"
    if ranks and spec["world_size"]:
        assert max(ranks) < spec["world_size"]
    assert expected["kinds"] and all(isinstance(k, str) for k in expected["kinds"])
    evidence = spec["evidence"]
    assert set(evidence) == {"logs", "flight_recorder"}
    assert evidence["logs"] or evidence["flight_recorder"], "a case needs evidence"
    for rel in evidence["logs"] or []:
        path = folder / rel
        assert path.is_file() and path.stat().st_size > 0, f"missing evidence {rel}"
    if evidence["flight_recorder"]:
        assert (folder / evidence["flight_recorder"]).exists()


@pytest.mark.parametrize("folder", _folders() + _fresh_folders(), ids=lambda p: p.name)
def test_half_follows_the_hash_rule(folder: Path) -> None:
    spec = _spec(folder)
    if spec["tuned_on"]:
        # the older cases the rules were written on are dev whatever their hash
        assert spec["half"] == "dev"
        return
    digest = int(hashlib.sha256(spec["id"].encode()).hexdigest()[:8], 16)
    assert spec["half"] == ("dev" if digest % 2 == 0 else "heldout")
    assert spec["half"] == EVAL.half_of(spec["id"])


def test_ids_are_unique_and_the_corpus_is_large_enough() -> None:
    specs = [_spec(f) for f in _folders()]
    ids = [s["id"] for s in specs]
    assert len(ids) == len(set(ids))
    # a fresh case is no corpus case (same thread, same id): it measures what the corpus cannot
    fresh = [_spec(f) for f in _fresh_folders()]
    assert len(fresh) >= 15
    assert not {s["id"] for s in fresh} & set(ids)
    assert not {s["source"] for s in fresh} & {s["source"] for s in specs}
    untuned_real = [s for s in specs if s["real"] and not s["tuned_on"]]
    assert len(untuned_real) >= MIN_REAL_UNTUNED, len(untuned_real)
    # both halves are populated, so a held-out figure exists at all
    assert {s["half"] for s in untuned_real} == {"dev", "heldout"}
    assert all(s["tuned_on"] for s in specs if s["id"] in {p.name for p in REAL.iterdir()})


def _report(*findings: dict[str, Any]) -> str:
    return json.dumps({"stall_findings": list(findings)})


def _finding(ranks: list[int], kind: str = "rank_failure", confidence: str = "high",
             consequence_of: int | None = None, pattern: str | None = None) -> dict[str, Any]:
    evidence = {"pattern": pattern} if pattern else {}
    return {"kind": kind, "ranks": ranks, "confidence": confidence,
            "consequence_of": consequence_of, "evidence": evidence}


def _case(ranks: list[int] | None, names: bool = True) -> Any:
    return EVAL.Case(Path("."), {
        "id": "x-1-y", "project": "a/b", "source": "https://example.org", "real": True,
        "half": "dev", "evidence": {"logs": ["l"], "flight_recorder": None},
        "world_size": None, "tuned_on": False, "established_by": "test",
        "expected": {"ranks": ranks, "evidence_names_them": names, "kinds": ["x"],
                     "category": None}})


def test_scoring_follows_the_corpus_rule() -> None:
    score = EVAL.score
    # the answer is the first ROOT finding: a consequence listed first is skipped
    r = score(_case([3]), 1, _report(_finding([5], consequence_of=1), _finding([3])), "")
    assert (r.outcome, r.answer_ranks) == ("right", [3])
    r = score(_case([3]), 1, _report(_finding([3, 4], pattern="p.x")), "")
    assert (r.outcome, r.pattern) == ("wrong", "p.x")
    assert r.confident_wrong == [{"kind": "rank_failure", "confidence": "high", "ranks": [4]}]
    # undecided is right only when the evidence cannot name the culprit
    assert score(_case([3]), 1, _report(_finding([], kind="undecided")), "").outcome \
        == "undecided"
    assert score(_case([3], names=False), 1, _report(_finding([], "undecided")), "").outcome \
        == "right"
    assert score(_case(None), 0, "", "").outcome == "right"
    r = score(_case(None), 1, _report(_finding([2], confidence="low")), "")
    assert r.outcome == "wrong" and r.confident_wrong == []
    assert r.pattern == EVAL.NO_PATTERN


@pytest.fixture(scope="module")
def results() -> list[Any]:
    return EVAL.evaluate(EVAL.load_cases(list(EVAL.DEFAULT_CASE_DIRS)))


def test_no_case_crashes_the_analyzer(results: list[Any]) -> None:
    assert len(results) == len(_folders())
    crashed = {r.case.id: r.stderr_tail for r in results if r.exit_code == EVAL.EXIT_INTERNAL}
    assert not crashed, crashed
    # exit 2 would mean the evaluation called the CLI wrongly, not a verdict
    assert not [r.case.id for r in results if r.exit_code == 2]


def test_summary_reports_each_half_and_pattern(results: list[Any], tmp_path: Path) -> None:
    groups = EVAL.groups(results, "all")
    assert {"real/dev", "real/heldout"} <= set(groups)
    for summary in groups.values():
        assert sum(summary["totals"].values()) == summary["cases"]
        assert sum(p["n"] for p in summary["by_pattern"].values()) == summary["cases"]
    text = EVAL.render("real/dev", groups["real/dev"])
    assert "answer pattern" in text and "confident wrong ranks" in text


def test_no_confident_wrong_rank_on_any_real_case(results: list[Any]) -> None:
    """The rule above all: no root finding at high or medium names a rank the source did not
    establish, in either half."""
    wrong = {r.case.id: r.confident_wrong for r in results if r.case.real and r.confident_wrong}
    assert not wrong, wrong


def test_confidence_ceilings_are_what_the_heldout_half_measures(results: list[Any]) -> None:
    """analyzers/stalls/ceilings.py is generated from this evaluation: a rule change that moves
    a held-out answer must regenerate it (``eval_stalls.py --write-ceilings``), so `high` is
    never kept for a pattern whose measured precision no longer allows it."""
    assert EVAL.CEILINGS_MODULE.read_text() == EVAL.ceilings_source(results), (
        "stale: run .venv/bin/python benchmarks/eval_stalls.py --write-ceilings")
    for pattern in EVAL.high_allowed(EVAL.measured_patterns(results)):
        m = EVAL.measured_patterns(results)[pattern]
        assert m["n"] >= EVAL.MIN_MEASURED and m["right"] / m["n"] >= EVAL.HIGH_PRECISION


@pytest.fixture(scope="module")
def fresh_results() -> list[Any]:
    return EVAL.evaluate(EVAL.load_cases([EVAL.FRESH_DIR]))


def test_fresh_set_never_crashes_nor_names_a_wrong_rank_confidently(
        fresh_results: list[Any]) -> None:
    """The rule above all holds on cases nobody tuned on: no crash, no root finding at high or
    medium naming a rank the thread did not establish. (How often the fresh set is right is the
    evaluation's figure, in docs/stalls.md — not asserted here.)"""
    assert fresh_results and all(r.case.fresh for r in fresh_results)
    assert not [r.case.id for r in fresh_results if r.exit_code in (2, EVAL.EXIT_INTERNAL)]
    wrong = {r.case.id: r.confident_wrong for r in fresh_results if r.confident_wrong}
    assert not wrong, wrong


def test_fresh_cases_stay_out_of_the_halves_and_the_ceilings(fresh_results: list[Any]) -> None:
    assert EVAL.groups(fresh_results, "all") == {}
    assert EVAL.measured_patterns(fresh_results) == {}


def test_reach_counts_per_family_and_holds_each_family_out(tmp_path: Path) -> None:
    """Families come from the kept evidence; holding a family out re-measures the ceilings
    without it: a pattern whose `high` rests only on that family's cases loses it there."""
    import stall_reach

    def case(cid: str, text: str, half: str, ranks: list[int]) -> Any:
        (tmp_path / cid).mkdir()
        (tmp_path / cid / "w.log").write_text(text)
        spec = {"id": cid, "project": "a/b", "source": "https://example.org", "real": True,
                "half": half, "evidence": {"logs": ["w.log"], "flight_recorder": None},
                "world_size": None, "tuned_on": False, "established_by": "test",
                "expected": {"ranks": ranks, "evidence_names_them": True, "kinds": ["x"],
                             "category": None}}
        return EVAL.Case(tmp_path / cid, spec)

    hv = "One or more tensors were submitted ... Missing ranks:\n1: [t]\n"
    wd = "[Rank 0] Watchdog caught collective operation timeout\n"
    cases = [case(f"h{i}", hv, "heldout", [1]) for i in range(3)] + \
        [case(f"w{i}", wd, "heldout", [2]) for i in range(3)]
    assert [stall_reach.family_of(c) for c in cases] == \
        ["horovod.stall"] * 3 + ["torch.nccl_watchdog"] * 3
    # horovod answers right at high (its pattern earned it), watchdog answers wrong at medium
    results = [EVAL.score(c, 1, _report(_finding([1], "straggler", "high",
                                                 pattern="horovod.stall_report")), "")
               for c in cases[:3]]
    results += [EVAL.score(c, 1, _report(_finding([3], "straggler", "medium",
                                                  pattern="torch.x")), "") for c in cases[3:]]
    per_set = stall_reach.per_family(results)
    assert per_set["heldout"]["horovod.stall"]["right"] == 3
    assert per_set["heldout"]["torch.nccl_watchdog"]["confident_wrong"] == 3
    held = stall_reach.family_heldout(results, EVAL.measured_patterns, EVAL.high_allowed,
                                      frozenset())
    assert held["horovod.stall"]["high_patterns_lost"] == ["horovod.stall_report"]
    assert held["horovod.stall"]["high_answers"] == 0  # capped at medium without its family
    assert held["torch.nccl_watchdog"]["high_answers"] == 0
    assert held["torch.nccl_watchdog"]["confident_wrong"] == 3
