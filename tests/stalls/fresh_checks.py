"""What every fresh set's test module (test_fresh2, test_fresh3, test_fresh4) checks alike.

Each set holds to the rule above all (no crash, no wrong rank at high or medium), stays out of
the corpus's halves and ceilings, and is read by ``eval_stalls --reach`` with its own halves. The
reach run evaluates every set at once, so it runs once per test run and the modules share its
answer (it ran once per module before, then once per pytest-xdist worker: ~4.5 s of CPU each).
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.stalls.test_case_corpus import EVAL, _folders, _fresh_folders, _spec
from tests.stalls.test_case_corpus import test_case_is_well_formed as _well_formed


def older_than(set_dir: Path) -> list[dict[str, Any]]:
    """The specs of the corpus, of fresh set one and of every fresh set but ``set_dir``'s."""
    older_dirs = [p for base in sorted(set_dir.parent.glob("fresh*")) if base != set_dir
                  for p in base.iterdir() if p.is_dir()]
    return [_spec(f) for f in _folders() + _fresh_folders() + older_dirs]


def assert_new_material(specs: list[dict[str, Any]], older: list[dict[str, Any]], *,
                        min_cases: int, min_projects: int, min_dev: int = 10,
                        min_heldout: int = 10) -> None:
    """No thread or id of the older sets, no id twice, enough projects and cases per half."""
    assert len(specs) >= min_cases and len({s["id"] for s in specs}) == len(specs)
    assert not {s["source"] for s in specs} & {s["source"] for s in older}
    assert not {s["id"] for s in specs} & {s["id"] for s in older}
    assert len({s["project"] for s in specs}) >= min_projects
    halves = [s["half"] for s in specs]
    assert halves.count("dev") >= min_dev and halves.count("heldout") >= min_heldout


def assert_culprit_case_split(folder: Path, *, set_name: str, before_rules: str,
                              after_rules: str | None, families: tuple[str, ...],
                              held_family: str | None, held_whole: bool = False,
                              tuned: frozenset[str] = frozenset(),
                              tuned_by: str | None = None) -> None:
    """A culprit-bearing set's case (fresh6, fresh7, fresh8): well formed, labelled from its
    thread or its emitter's source, and split before the rules — its family held out whole, a
    round gathered after the rules (``after_rules``) held out whole, the rest by the id's hash;
    or, for a set gathered to measure rules written from the emitters' source (fresh8,
    ``held_whole``), every case held out whatever its hash. ``tuned``: the held-out cases a
    later helper (``tuned_by``) read while writing a rule — marked, half and label unchanged."""
    _well_formed(folder)
    spec = _spec(folder)
    assert spec["set"] == set_name and spec["real"]
    assert spec["tuned_on"] == (spec["id"] in tuned)
    assert spec.get("tuned_by") == (tuned_by if spec["tuned_on"] else None)
    assert spec["collected"] in (before_rules, after_rules)
    assert spec["family"] in families and spec["label_basis"] in ("thread", "source")
    late = after_rules is not None and spec["collected"] == after_rules
    expected_half = "heldout" if held_whole or spec["family"] == held_family or late else \
        EVAL.half_of(spec["id"])
    assert spec["half"] == expected_half
    case_md = (folder / "CASE.md").read_text()
    assert spec["established_by"] in case_md and spec["source"] in case_md
    ranks = spec["expected"]["ranks"]
    # a culprit label carries a rank-naming kind, an undecided one names nobody
    assert (ranks is None) == (spec["expected"]["kinds"] == ["undecided"])
    if spec["expected"]["evidence_names_them"]:
        assert spec["label_basis"] == "source" and ranks


def set_folders(set_dir: Path) -> list[Path]:
    """The case folders of one fresh set, in id order."""
    return sorted(p for p in set_dir.iterdir() if p.is_dir())


def assert_held_whole_set_is_new_and_culprit_bearing(set_dir: Path,
                                                     families: tuple[str, ...],
                                                     labelled_tenths: int = 7, *,
                                                     min_cases: int = 24,
                                                     min_projects: int = 12) -> None:
    """A set held out whole (fresh8 to fresh14): no thread of the corpus or of an earlier
    fresh set, no id twice, at least ``min_cases`` cases (24 unless the set's module says why
    it gathered fewer) from ``min_projects`` projects (12 likewise), every family with at least
    three cases, no dev half; at least ``labelled_tenths`` tenths of the set (70 % unless the
    set's module says why it gathered fewer) carry a culprit label (its reason to exist)."""
    specs = [_spec(f) for f in set_folders(set_dir)]
    assert_new_material(specs, older_than(set_dir), min_cases=min_cases,
                        min_projects=min_projects, min_dev=0, min_heldout=min_cases)
    assert not [s["id"] for s in specs if s["half"] != "heldout"]
    for family in families:
        assert sum(s["family"] == family for s in specs) >= 3, family
    labelled = sum(s["expected"]["ranks"] is not None for s in specs)
    assert 10 * labelled >= labelled_tenths * len(specs), (labelled, len(specs))


@functools.cache
def scored_set(set_dir: Path) -> tuple[Any, ...]:
    """One set scored once per test process (every case through the CLI, in-process)."""
    return tuple(EVAL.evaluate(EVAL.load_cases([set_dir])))


def assert_never_healthy_and_outside(results: list[Any]) -> None:
    """Every case is a failing or hung job: "healthy" (exit 0) is the worst answer; like every
    fresh set, it feeds neither the corpus's halves nor the ceilings."""
    assert [r.case.id for r in results if r.exit_code == 0] == []
    assert_outside_the_halves_and_ceilings(results)


def assert_reach_held_whole(name: str, untuned: int, tuned: int = 0) -> None:
    """The reach tables read a set held out whole: no dev row, its untouched held-out cases in
    ``<name>/heldout`` and those a later helper read in ``<name>/heldout (tuned on)``, neither
    with an exit 0 nor a confident wrong answer."""
    per_set = _reach()["per_set"]
    assert f"{name}/dev" not in per_set  # no dev half: the reach tables have no row for it
    rows = {"heldout": untuned, "heldout (tuned on)": tuned}
    for row, n in rows.items():
        if not n:
            assert f"{name}/{row}" not in per_set
            continue
        counts = per_set[f"{name}/{row}"]["(all)"]
        assert counts["n"] == n
        assert counts["exit0"] == 0 and counts["confident_wrong"] == 0


def held_whole_split(set_name: str, collected: str, families: tuple[str, ...]) -> dict[str, Any]:
    """The split of a set held out whole (fresh12 on): every case dated ``collected`` (before the
    rules from source), one of ``families``, held out whatever its id's hash says, none tuned
    on - the keyword arguments of :func:`assert_culprit_case_split`."""
    return {"set_name": set_name, "before_rules": collected, "after_rules": None,
            "families": families, "held_family": None, "held_whole": True}


def assert_held_whole_set_scores_safely(set_dir: Path, name: str) -> None:
    """Every case of a set held out whole runs (no usage error, no crash), none gets a wrong
    rank at high or medium, none reads "healthy"; it feeds neither the corpus's halves nor the
    ceilings, and the reach tables read it as ``<name>/heldout`` only."""
    results = list(scored_set(set_dir))
    assert_every_case_ran(results, len(set_folders(set_dir)))
    assert {r.case.id: r.confident_wrong for r in results if r.confident_wrong} == {}
    assert_never_healthy_and_outside(results)
    assert_reach_held_whole(name, untuned=len(results))


def held_whole_tests(set_dir: Path, name: str, collected: str, families: tuple[str, ...],
                     labelled_tenths: int, *, min_cases: int = 24, min_projects: int = 12
                     ) -> tuple[Callable[[], None], Callable[[], None], Callable[[Path], None]]:
    """The three tests of a set held out whole (fresh13 on), for its module to bind to
    ``test_*`` names, so each new set's module holds its own story and numbers, not a copy of
    the last one's body: every case scored safely, the threads new and as culprit-bearing as
    the module says, every case well formed and held out."""
    split = held_whole_split(name, collected, families)

    def scores_safely() -> None:
        """Main's rules on every case, through the CLI: no crash, no "healthy", no wrong rank
        at high or medium."""
        assert_held_whole_set_scores_safely(set_dir, name)

    def new_and_culprit_bearing() -> None:
        """No thread of an earlier set, the cases and projects and the labelled share the set's
        module states, 3 cases a family."""
        assert_held_whole_set_is_new_and_culprit_bearing(set_dir, families, labelled_tenths,
                                                         min_cases=min_cases,
                                                         min_projects=min_projects)

    @pytest.mark.parametrize("folder", set_folders(set_dir), ids=lambda p: p.name)
    def case_split(folder: Path) -> None:
        """Well formed, dated before the rules, held out whatever its hash says, tuned on by
        nobody."""
        assert_culprit_case_split(folder, **split)

    return scores_safely, new_and_culprit_bearing, case_split


def assert_every_case_ran(results: list[Any], cases: int) -> None:
    """Every case scored as a fresh one, none a usage error or a crash."""
    assert len(results) == cases
    assert all(r.case.fresh for r in results)
    assert not [r.case.id for r in results if r.exit_code in (2, EVAL.EXIT_INTERNAL)]


def assert_dev_half_is_a_finding_and_right(results: list[Any], min_dev: int,
                                           no_stall_message: frozenset[str] = frozenset()
                                           ) -> None:
    """Every dev case (but those whose kept log holds no stall message) gets a finding, exit 1,
    and every dev answer is right."""
    dev = [r for r in results if r.case.half == "dev"]
    assert len(dev) >= min_dev
    assert {r.case.id: r.exit_code for r in dev
            if r.exit_code != 1 and r.case.id not in no_stall_message} == {}
    assert all(r.outcome == "right" for r in dev), [r.case.id for r in dev
                                                     if r.outcome != "right"]


def assert_outside_the_halves_and_ceilings(results: list[Any]) -> None:
    assert EVAL.groups(results, "all") == {}
    assert EVAL.measured_patterns(results) == {}


#: The run's folder shared by its pytest-xdist workers (the parent of their base temp dirs, as in
#: tests/cpu_lock.py), set by tests/stalls/conftest.py; None outside xdist.
SHARED_DIR: Path | None = None


@functools.cache
def _reach() -> dict[str, Any]:
    """``eval_stalls --reach --half all``'s tables, computed once per run: the first worker to
    ask runs it under a file lock and leaves its JSON in :data:`SHARED_DIR`; the others wait
    on the lock and read that file. Within one run the corpus and the code are the same, so
    the answer is too (it was always read back from the JSON the evaluation wrote)."""
    if SHARED_DIR is None:
        return _evaluate_reach()
    shared = SHARED_DIR / "eval-stalls-reach.json"
    with open(SHARED_DIR / "eval-stalls-reach.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not shared.exists():
            partial = shared.with_suffix(f".{os.getpid()}.tmp")
            partial.write_text(json.dumps(_evaluate_reach()))
            partial.replace(shared)
    reach: dict[str, Any] = json.loads(shared.read_text())
    return reach


def _evaluate_reach() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "eval.json"
        assert EVAL.main(["--reach", "--json", str(out), "--half", "all"]) == 0
        reach: dict[str, Any] = json.loads(out.read_text())["reach"]
    return reach


def reach_row(name: str) -> dict[str, Any]:
    """One set's rows of the reach tables (e.g. ``fresh5/heldout (tuned on)``)."""
    row: dict[str, Any] = _reach()["per_set"][name]
    return row


def reach_halves(name: str, specs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The set's dev and held-out rows of the reach tables, each counting its half's cases."""
    per_set = _reach()["per_set"]
    dev, held = per_set[f"{name}/dev"], per_set[f"{name}/heldout"]
    assert dev["(all)"]["n"] == sum(s["half"] == "dev" for s in specs)
    # held-out cases a later helper read while writing rules are counted in their own row
    assert held["(all)"]["n"] == sum(s["half"] == "heldout" and not s["tuned_on"] for s in specs)
    return dev, held
