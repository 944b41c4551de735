"""The shipped rules file: promtool accepts it, promtool unit tests pass, and every alert is
tested firing and quiet, carries for/severity/summary/description/runbook, and has its section
in docs/runbook.md."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from dashboards import rule_tests, rules
from tests import servers
from tests.dashboards.exprs import REPO, RULES_PATH

TESTS_PATH = REPO / "dashboards" / "rules" / "tests" / rule_tests.TESTS_FILE
RUNBOOK = REPO / "docs" / "runbook.md"


def _promtool() -> str:
    return servers.require_binary("promtool")


def _shipped_alerts() -> list[dict[str, object]]:
    data = yaml.safe_load(RULES_PATH.read_text())
    return [r for g in data["groups"] for r in g["rules"] if "alert" in r]


def test_promtool_check_rules_accepts_the_shipped_file() -> None:
    out = subprocess.run([_promtool(), "check", "rules", str(RULES_PATH)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    n = sum(len(g["rules"]) for g in yaml.safe_load(RULES_PATH.read_text())["groups"])
    assert f"SUCCESS: {n} rules found" in out.stdout


def test_promtool_unit_tests_pass() -> None:
    out = subprocess.run([_promtool(), "test", "rules", TESTS_PATH.name], capture_output=True,
                         text=True, timeout=60, cwd=TESTS_PATH.parent)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_promtool_unit_tests_catch_a_broken_rule(tmp_path: Path) -> None:
    """Guard against tests that cannot fail: weaken one alert and promtool must report it."""
    broken = RULES_PATH.read_text().replace("> 95", "> 99", 1)
    assert broken != RULES_PATH.read_text()
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / rules.RULES_FILE).write_text(broken)
    (tmp_path / "rules" / "tests").mkdir()
    shutil.copy(TESTS_PATH, tmp_path / "rules" / "tests" / TESTS_PATH.name)
    out = subprocess.run([_promtool(), "test", "rules", TESTS_PATH.name], capture_output=True,
                         text=True, timeout=60, cwd=tmp_path / "rules" / "tests")
    assert out.returncode != 0
    assert "StormotelMemoryCritical" in out.stdout + out.stderr


def test_every_alert_is_tested_firing_and_quiet() -> None:
    names = {str(a["alert"]) for a in _shipped_alerts()}
    cases = rule_tests.rule_tests()["tests"]
    fired = {c["alertname"] for t in cases for c in t["alert_rule_test"] if c["exp_alerts"]}
    quiet = {c["alertname"] for t in cases for c in t["alert_rule_test"] if not c["exp_alerts"]}
    assert names == fired, f"alerts without a firing test: {names - fired}"
    assert names <= quiet, f"alerts without a quiet check: {names - quiet}"
    assert set(rule_tests.ALERT_NAMES_IN_HEALTHY) == names


@pytest.mark.parametrize("alert", _shipped_alerts(), ids=lambda a: str(a["alert"]))
def test_alert_carries_what_an_operator_needs(alert: dict[str, object]) -> None:
    annotations = alert["annotations"]
    assert isinstance(annotations, dict)
    assert re.fullmatch(r"\d+[smh]", str(alert["for"]))
    assert alert["labels"] == {"severity": alert["labels"]["severity"]}  # type: ignore[index]
    assert alert["labels"]["severity"] in ("warning", "critical")  # type: ignore[index]
    text = annotations["summary"] + annotations["description"]
    assert "$labels.job_id" in text
    if "by (job_id)" not in str(alert["expr"]):  # job-level analyzer alerts have no rank
        assert "$labels.rank" in text
    anchor = annotations["runbook_url"].rsplit("#", 1)[1]
    assert anchor == str(alert["alert"]).lower()


def test_every_alert_has_a_runbook_section() -> None:
    headings = {m.group(1).strip().lower()
                for m in re.finditer(r"^## (.+)$", RUNBOOK.read_text(), re.M)}
    missing = {str(a["alert"]) for a in _shipped_alerts()
               if str(a["alert"]).lower() not in headings}
    assert not missing, f"docs/runbook.md lacks sections for {missing}"
