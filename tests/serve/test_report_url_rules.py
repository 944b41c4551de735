"""``stormotel dashboards --report-base-url`` writes rules whose every job-scoped alert links
its report, and promtool still checks and tests them (the test file expects the link); without
the flag the rules are as before."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pytest
import yaml
from stormotel.dashboards.rules import report_url_template

from stormotel import schema
from tests import servers
from tests.dashboards import promtool_suites
from tests.dashboards.exprs import RULES_PATH
from tests.dashboards.promtool_suites import dump, load

SHIPPED_TESTS = RULES_PATH.parent / "tests" / "stormotel-rules.test.yml"

BASE = "https://stormotel.example.org/receiver"


def _dashboards(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stormotel", "dashboards", "--out", str(out),
                           "--no-chart", *extra], capture_output=True, text=True, timeout=120)


def _without_links(data: Any) -> tuple[Any, list[tuple[str, str]]]:
    """A copy of a rules file or test file with every ``report_url`` annotation taken out, and
    (job id of the alert, link) for each one taken out of the test file's expectations."""
    data = copy.deepcopy(data)
    links: list[tuple[str, str]] = []
    for group in data.get("groups", ()):
        for rule in group["rules"]:
            rule.get("annotations", {}).pop(schema.ANNOTATION_REPORT_URL, None)
    seen: set[int] = set()  # a YAML alias makes one expectation recur
    for group in data.get("tests", ()):
        for case in group.get("alert_rule_test", ()):
            for alert in case["exp_alerts"]:
                notes = alert["exp_annotations"]
                if id(notes) not in seen and schema.ANNOTATION_REPORT_URL in notes:
                    links.append((alert["exp_labels"].get(schema.ATTR_JOB_ID, ""),
                                  notes.pop(schema.ANNOTATION_REPORT_URL)))
                seen.add(id(notes))
    return data, links


@pytest.mark.timeout(900)  # promtool on a rule set: past 300 s once at load 35
def test_report_url_on_every_alert_and_promtool_passes(tmp_path: Path) -> None:
    """The rules and tests with ``--report-base-url`` are those without it plus the link: on
    every alert rule, and expected on every firing alert, rendered from its job id. promtool
    renders the very template the rules carry for every job id the tests expect a link for;
    the rest of each test group's outcome is the shipped suite's (the files without the flag
    are the shipped ones, run whole in tests/dashboards/test_rules.py). That is the outcome of
    ``promtool test rules`` on the whole suite with links, without its five hours of rule
    evaluation per group again."""
    promtool = servers.require_binary("promtool")
    assert _dashboards(tmp_path / "with", "--report-base-url", BASE + "/").returncode == 0
    assert _dashboards(tmp_path / "without").returncode == 0
    with_dir, without_dir = tmp_path / "with" / "rules", tmp_path / "without" / "rules"
    rules = load(with_dir / "stormotel-rules.yml")
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    template = report_url_template(BASE)
    assert template == ("{{ if $labels.job_id }}" + BASE + "/jobs/{{ $labels.job_id | "
                        "urlquery }}/{{ end }}")
    assert alerts and all(a["annotations"]["report_url"] == template for a in alerts)
    plain = (without_dir / "stormotel-rules.yml").read_text()
    assert "report_url" not in plain
    assert _without_links(rules)[0] == load(without_dir / "stormotel-rules.yml")
    assert sorted(p.name for p in (with_dir / "tests").glob("*.yml")) == [SHIPPED_TESTS.name]
    suite = with_dir / "tests" / SHIPPED_TESTS.name
    assert f"report_url: {BASE}/jobs/" in suite.read_text()  # the tests check the rendered link
    bare, links = _without_links(load(suite))
    assert bare == load(without_dir / "tests" / SHIPPED_TESTS.name)
    firing = [a for g in bare["tests"] for c in g.get("alert_rule_test", ())
              for a in c["exp_alerts"]]
    assert links and len({id(a["exp_annotations"]) for a in firing}) == len(links)
    assert all(job and link == f"{BASE}/jobs/{quote_plus(job)}/" for job, link in links)
    assert promtool_suites.groups_to_run(without_dir / "tests" / SHIPPED_TESTS.name,
                                         without_dir / "stormotel-rules.yml",
                                         SHIPPED_TESTS, RULES_PATH) == []
    check = subprocess.run([promtool, "check", "rules", "stormotel-rules.yml"], cwd=with_dir,
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    jobs = sorted(set(links))
    probe = {"groups": [{"name": "links", "rules": [{
        "alert": "Link", "expr": "link_probe == 1", "annotations": {"report_url": template}}]}]}
    (tmp_path / "probe.yml").write_text(dump(probe))
    (tmp_path / "probe.test.yml").write_text(dump({
        "rule_files": ["probe.yml"], "evaluation_interval": "1m", "tests": [{
            "interval": "1m",
            "input_series": [{"series": f'link_probe{{job_id="{job}"}}', "values": "1"}
                             for job, _ in jobs],
            "alert_rule_test": [{"eval_time": "0m", "alertname": "Link", "exp_alerts": [
                {"exp_labels": {"job_id": job}, "exp_annotations": {"report_url": link}}
                for job, link in jobs]}]}]}))
    run = subprocess.run([promtool, "test", "rules", "probe.test.yml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
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
