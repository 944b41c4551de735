"""Which groups of a variant promtool suite must run (tests/dashboards/promtool_suites.py): a
change anywhere a group's checks can see runs that group, and nothing else is skipped."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from tests.dashboards.exprs import RULES_PATH
from tests.dashboards.promtool_suites import (
    dump,
    groups_to_run,
    load,
    rules_for,
    write_expecting,
    write_runs,
    write_subset,
)

SHIPPED_TESTS = RULES_PATH.parent / "tests" / "stormotel-rules.test.yml"


@functools.cache
def _suite() -> list[dict[str, Any]]:
    return load(SHIPPED_TESTS)["tests"]


def _variant(tmp_path: Path, edit_rule: Any = None, edit_suite: Any = None) -> list[int]:
    rules, suite = load(RULES_PATH), load(SHIPPED_TESTS)
    for rule in (r for g in rules["groups"] for r in g["rules"]):
        if edit_rule:
            edit_rule(rule)
    if edit_suite:
        edit_suite(suite)
    (tmp_path / "r.yml").write_text(dump(rules))
    (tmp_path / "t.yml").write_text(dump(suite))
    return groups_to_run(tmp_path / "t.yml", tmp_path / "r.yml", SHIPPED_TESTS, RULES_PATH)


def _naming(alert: str) -> set[int]:
    return {i for i, g in enumerate(_suite())
            if any(c["alertname"] == alert for c in g.get("alert_rule_test", ()))}


def _reading_alerts() -> set[int]:
    return {i for i, g in enumerate(_suite())
            if any("ALERTS" in t["expr"] for t in g.get("promql_expr_test", ()))}


def test_the_shipped_suite_itself_needs_no_rerun(tmp_path: Path) -> None:
    assert _variant(tmp_path) == []


def test_a_changed_recording_rule_runs_every_group(tmp_path: Path) -> None:
    def edit(rule: dict[str, Any]) -> None:
        if rule.get("record") == "stormotel:rank_active:bool":
            rule["expr"] = rule["expr"].replace("[2m]", "[3m]")
    assert _variant(tmp_path, edit) == list(range(len(_suite())))


def test_a_changed_alert_runs_the_groups_naming_it_and_those_reading_alerts(
        tmp_path: Path) -> None:
    def edit(rule: dict[str, Any]) -> None:
        if rule.get("alert") == "StormotelRankStalled":
            rule["for"] = "6m"
    run = set(_variant(tmp_path, edit))
    assert _naming("StormotelRankStalled") and _reading_alerts()
    assert run == _naming("StormotelRankStalled") | _reading_alerts()
    assert len(run) < len(_suite())


def test_changed_annotations_run_only_the_groups_where_that_alert_fires(tmp_path: Path) -> None:
    def edit(rule: dict[str, Any]) -> None:
        if rule.get("alert") == "StormotelRankStalled":
            rule["annotations"]["summary"] += "!"
    firing = {i for i, g in enumerate(_suite()) for c in g.get("alert_rule_test", ())
              if c["alertname"] == "StormotelRankStalled" and c["exp_alerts"]}
    assert firing and firing < _naming("StormotelRankStalled")  # the healthy control: quiet
    assert set(_variant(tmp_path, edit)) == firing


def test_a_changed_group_or_evaluation_interval_runs(tmp_path: Path) -> None:
    def one_group(suite: dict[str, Any]) -> None:
        suite["tests"][3]["input_series"][0]["values"] += " 1"
    assert _variant(tmp_path, edit_suite=one_group) == [3]

    def interval(suite: dict[str, Any]) -> None:
        suite["evaluation_interval"] = "1m"
    assert _variant(tmp_path, edit_suite=interval) == list(range(len(_suite())))


def test_the_subset_keeps_the_rule_files_and_the_chosen_groups(tmp_path: Path) -> None:
    out = write_subset(SHIPPED_TESTS, [1, 4], tmp_path / "s.yml")
    suite, shipped = load(out), load(SHIPPED_TESTS)
    assert suite["rule_files"] == shipped["rule_files"]
    assert suite["evaluation_interval"] == shipped["evaluation_interval"]
    assert suite["tests"] == [shipped["tests"][1], shipped["tests"][4]]


def _move_runbook(rule: dict[str, Any]) -> None:
    notes = rule.get("annotations", {}) if "alert" in rule else {}
    if "wiki.example" not in notes.get("runbook_url", "wiki.example"):  # YAML aliases recur
        notes["runbook_url"] = notes["runbook_url"].replace("https://", "https://wiki.example/")


def _expect_moved_runbook(suite: dict[str, Any]) -> None:
    for group in suite["tests"]:
        for case in group.get("alert_rule_test", ()):
            for alert in case["exp_alerts"]:
                _move_runbook({"alert": case["alertname"], **{
                    "annotations": alert["exp_annotations"]}})


def test_a_moved_runbook_url_expected_where_it_moved_changes_no_outcome(
        tmp_path: Path) -> None:
    """A template-free annotation renders to its own text: moved in the rules and in the
    checks alike, every group's outcome is the shipped one's."""
    assert _variant(tmp_path, _move_runbook, _expect_moved_runbook) == []


def test_a_moved_runbook_url_the_checks_do_not_expect_runs_every_firing_group(
        tmp_path: Path) -> None:
    firing = [i for i, g in enumerate(_suite())
              if any(c["exp_alerts"] for c in g.get("alert_rule_test", ()))]
    assert firing
    assert _variant(tmp_path, _move_runbook) == firing


def _silent() -> set[int]:
    return {i for i, g in enumerate(_suite())
            if not any(c["exp_alerts"] for c in g.get("alert_rule_test", ()))
            and not any(t["exp_samples"] for t in g.get("promql_expr_test", ())
                        if "ALERTS" in t["expr"])}


def _threshold(alert: str, before: str, after: str, **also: str) -> Any:
    def edit(rule: dict[str, Any]) -> None:
        if rule.get("alert") == alert and f"> {before})" in rule["expr"]:
            rule["expr"] = rule["expr"].replace(f"> {before})", f"> {after})")
            rule.update(also)
    return edit


def test_a_raised_threshold_leaves_the_silent_groups_to_the_shipped_run(tmp_path: Path) -> None:
    """The pressure alert's warning at 90 % instead of 80 %: it holds where it held or less,
    so a group expecting silence everywhere (the healthy control) stays silent; the groups
    naming the alert, or reading ALERTS with an expectation, still run."""
    silent = _silent()
    assert silent & _reading_alerts()  # the healthy control reads ALERTS and is silent
    run = set(_variant(tmp_path, _threshold("StormotelGpuMemoryPressure", "0.8", "0.9")))
    assert run == (_naming("StormotelGpuMemoryPressure") | _reading_alerts()) - silent
    assert run


def test_a_lowered_threshold_or_another_change_beside_it_runs_the_silent_groups(
        tmp_path: Path) -> None:
    naming = _naming("StormotelGpuMemoryPressure") | _reading_alerts()
    lowered = _threshold("StormotelGpuMemoryPressure", "0.8", "0.7")
    assert set(_variant(tmp_path, lowered)) == naming
    sooner = _threshold("StormotelGpuMemoryPressure", "0.8", "0.9", **{"for": "1m"})
    assert set(_variant(tmp_path, sooner)) == naming


def test_a_raised_threshold_outside_a_plain_filter_runs_the_silent_groups(
        tmp_path: Path) -> None:
    """AnalyzerStale's ``> 7200`` sits beside an ``or`` and a ``count(…) > 0`` gate: raising
    a number there is not known to let fewer through, so the silent groups run."""
    def edit(rule: dict[str, Any]) -> None:
        if rule.get("alert") == "StormotelAnalyzerStale":
            rule["expr"] = rule["expr"].replace("> 7200", "> 7300")
    assert set(_variant(tmp_path, edit)) == \
        _naming("StormotelAnalyzerStale") | _reading_alerts()


_RECORDED = re.compile(r"stormotel:\w+:\w+")


def _kept(path: Path) -> list[dict[str, Any]]:
    return [r for g in load(path)["groups"] for r in g["rules"]]


def test_the_rules_an_alert_sees_are_its_own_and_every_recording_rule_they_read(
        tmp_path: Path) -> None:
    """``rules_for``: the named alerts, and every recording rule named in a kept rule's text
    (the closure: nothing a kept rule reads is left out), in the file's order."""
    every = _kept(RULES_PATH)
    alerts = sorted({str(r["alert"]) for r in every if "alert" in r})
    for name in alerts:
        kept = _kept(rules_for(RULES_PATH, {name}, False, tmp_path / f"{name}.yml"))
        assert {str(r["alert"]) for r in kept if "alert" in r} == {name}
        records = {str(r["record"]) for r in kept if "record" in r}
        read = {m for r in kept for m in _RECORDED.findall(dump(r))}
        assert read <= records, (name, read - records)
        order = [every.index(r) for r in kept]
        assert order == sorted(order)
    pressure = {str(r.get("record")) for r in _kept(rules_for(
        RULES_PATH, {"StormotelGpuMemoryPressure"}, False, tmp_path / "p.yml"))}
    assert {"stormotel:rank_memory_pressure:ratio", "stormotel:gpu_memory_in_use:ratio",
            "stormotel:rank_placement:info"} <= pressure
    assert "stormotel:rank_silent:bool" not in pressure
    seen_by_all = _kept(rules_for(RULES_PATH, set(), True, tmp_path / "all.yml"))
    assert [str(r["alert"]) for r in seen_by_all if "alert" in r] == \
        [str(r["alert"]) for r in every if "alert" in r]


def test_a_group_run_for_one_changed_alert_keeps_only_the_checks_that_see_it(
        tmp_path: Path) -> None:
    """The pressure alert at 90 % instead of 80 %: the groups naming it that expect it to fire
    run whole; the healthy control reads ALERTS expecting nothing and names every alert, so it
    runs with only the pressure alert's checks and its ALERTS checks, against the pressure
    alert and what it reads."""
    rules, suite = load(RULES_PATH), load(SHIPPED_TESTS)
    for rule in (r for g in rules["groups"] for r in g["rules"]):
        _threshold("StormotelGpuMemoryPressure", "0.8", "0.7")(rule)
    (tmp_path / "r.yml").write_text(dump(rules))
    (tmp_path / "t.yml").write_text(dump(suite))
    groups = groups_to_run(tmp_path / "t.yml", tmp_path / "r.yml", SHIPPED_TESTS, RULES_PATH)
    runs = write_runs(tmp_path / "t.yml", tmp_path / "r.yml", SHIPPED_TESTS, RULES_PATH)
    assert 0 in groups and len(runs) == len(groups)
    healthy = next(p for p in runs if load(p)["tests"][0]["name"] == _suite()[0]["name"])
    checks = load(healthy)["tests"][0]
    assert {c["alertname"] for c in checks["alert_rule_test"]} == {"StormotelGpuMemoryPressure"}
    assert checks["promql_expr_test"] and all(
        "ALERTS" in t["expr"] for t in checks["promql_expr_test"])
    kept = _kept(tmp_path / load(healthy)["rule_files"][0])
    assert {str(r["alert"]) for r in kept if "alert" in r} == {"StormotelGpuMemoryPressure"}
    assert "> 0.7)" in dump(kept)  # the variant's rule, not the shipped one


def test_the_expecting_runs_keep_each_check_that_expects_something_and_what_it_reads(
        tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    suite = tmp_path / "tests" / SHIPPED_TESTS.name
    suite.write_text(SHIPPED_TESTS.read_text())
    runs = write_expecting(suite, RULES_PATH)
    expecting = [g for g in _suite() if any(c["exp_alerts"] for c in g.get("alert_rule_test", ()))
                 or any(t["exp_samples"] for t in g.get("promql_expr_test", ()))]
    assert len(runs) == len(expecting) < len(_suite())
    for path, shipped in zip(runs, expecting, strict=True):
        group = load(path)["tests"][0]
        assert group["input_series"] == shipped["input_series"]
        assert group.get("alert_rule_test", []) == [
            c for c in shipped.get("alert_rule_test", ()) if c["exp_alerts"]]
        assert group.get("promql_expr_test", []) == [
            t for t in shipped.get("promql_expr_test", ()) if t["exp_samples"]]
        kept = {str(r.get("record") or r.get("alert"))
                for r in _kept(path.parent / load(path)["rule_files"][0])}
        for t in group.get("promql_expr_test", ()):
            assert set(_RECORDED.findall(t["expr"])) <= kept, t["expr"]
        assert {c["alertname"] for c in group.get("alert_rule_test", ())} <= kept
