"""``stormotel dashboards --report-base-url`` writes rules whose every job-scoped alert links
its report, and promtool still checks and tests them (the test file expects the link); without
the flag the rules are as before."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests import servers
from tests.dashboards import promtool_suites
from tests.dashboards.exprs import RULES_PATH

SHIPPED_TESTS = RULES_PATH.parent / "tests" / "stormotel-rules.test.yml"

BASE = "https://stormotel.example.org/receiver"


def _dashboards(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stormotel", "dashboards", "--out", str(out),
                           "--no-chart", *extra], capture_output=True, text=True, timeout=120)


@pytest.mark.timeout(900)  # promtool on the whole rule set: past 300 s once at load 35
def test_report_url_on_every_alert_and_promtool_passes(tmp_path: Path) -> None:
    promtool = servers.require_binary("promtool")
    assert _dashboards(tmp_path / "with", "--report-base-url", BASE + "/").returncode == 0
    assert _dashboards(tmp_path / "without").returncode == 0
    rules = yaml.safe_load((tmp_path / "with/rules/stormotel-rules.yml").read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    assert alerts and all(a["annotations"]["report_url"] ==
                          "{{ if $labels.job_id }}" + BASE + "/jobs/{{ $labels.job_id | "
                          "urlquery }}/{{ end }}" for a in alerts)
    plain = (tmp_path / "without/rules/stormotel-rules.yml").read_text()
    assert "report_url" not in plain
    tests = (tmp_path / "with/rules/tests").glob("*.yml")
    expected = "".join(p.read_text() for p in tests)
    assert f"report_url: {BASE}/jobs/" in expected  # the tests check the rendered link
    for d in ("with",):  # without the flag: tests/dashboards/test_rules.py
        rules_dir = tmp_path / d / "rules"
        check = subprocess.run([promtool, "check", "rules", "stormotel-rules.yml"],
                               cwd=rules_dir, capture_output=True, text=True, timeout=60)
        assert check.returncode == 0, check.stdout + check.stderr
        # Only the groups where a rendered link can show (an alert firing); the quiet ones
        # (the healthy control, DCGM) are the shipped suite's against the same expressions and
        # pass in tests/dashboards/test_rules.py (tests/dashboards/promtool_suites.py).
        suite = rules_dir / "tests" / "stormotel-rules.test.yml"
        assert sorted(p.name for p in (rules_dir / "tests").glob("*.yml")) == [suite.name]
        keep = promtool_suites.groups_to_run(suite, rules_dir / "stormotel-rules.yml",
                                             SHIPPED_TESTS, RULES_PATH)
        firing = [i for i, g in enumerate(yaml.safe_load(suite.read_text())["tests"])
                  if any(c["exp_alerts"] for c in g.get("alert_rule_test", ()))]
        assert keep == firing, (keep, firing)
        subset = promtool_suites.write_subset(suite, keep, suite.parent / "firing.test.yml")
        run = subprocess.run([promtool, "test", "rules", subset.name], cwd=rules_dir / "tests",
                             capture_output=True, text=True, timeout=850)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


def test_a_base_that_is_not_a_url_is_a_usage_error(tmp_path: Path) -> None:
    r = _dashboards(tmp_path, "--report-base-url", "receiver:9810")
    assert r.returncode == 2 and "not an http(s) URL" in r.stderr


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_job_ids_are_escaped_in_the_link(tmp_path: Path) -> None:
    """A job id with a space, a slash and a plus renders as one decodable path segment."""
    from urllib.parse import unquote_plus

    from stormotel.dashboards.rules import report_url_template

    rule = {"groups": [{"name": "t", "rules": [{
        "alert": "T", "expr": "up == 1", "labels": {"severity": "warning"},
        "annotations": {"report_url": report_url_template(BASE)}}]}]}
    (tmp_path / "r.yml").write_text(yaml.safe_dump(rule))
    job = "a b/c+d"
    test = {"rule_files": ["r.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": [{"series": f'up{{job_id="{job}"}}', "values": "1"}],
        "alert_rule_test": [{"eval_time": "0m", "alertname": "T", "exp_alerts": [{
            "exp_labels": {"severity": "warning", "job_id": job},
            "exp_annotations": {"report_url": f"{BASE}/jobs/a+b%2Fc%2Bd/"}}]}]}]}
    (tmp_path / "t.yml").write_text(yaml.safe_dump(test))
    run = subprocess.run(["promtool", "test", "rules", "t.yml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert unquote_plus("a+b%2Fc%2Bd") == job
