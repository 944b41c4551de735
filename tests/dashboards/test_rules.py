"""The shipped rules file: promtool accepts it, promtool unit tests pass, and every alert is
tested firing and quiet, carries for/severity/summary/description/runbook, and has its section
in docs/runbook.md."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from stormotel.dashboards import rule_tests, rules

from stormotel import schema
from tests import servers
from tests.dashboards import promtool_suites
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


@pytest.mark.slow  # promtool, a Go binary, on the whole rule set
def test_promtool_unit_tests_pass(tmp_path: Path) -> None:
    """The shipped suite, one promtool run per test group against the rules that can return a
    sample from that group's inputs (tests/dashboards/promtool_suites.rules_reading: a rule
    whose every selector names a metric the group has no series of is empty at every step, so
    its outcome, and every other rule's, is the whole file's). promtool evaluates every rule
    at every 15 s step up to a group's last check: the analyzer-health and first-cause groups
    (~690 steps each) read 5-11 analyzer series of 37 rules. The healthy control reads every
    metric and runs against every rule; every rule is kept by some group."""
    runs, covered = promtool_suites.write_per_group(TESTS_PATH, RULES_PATH, tmp_path)
    every = {promtool_suites.rule_id(r) for g in yaml.safe_load(RULES_PATH.read_text())["groups"]
             for r in g["rules"]}
    assert covered == every, f"rules no test group evaluates over an input: {every - covered}"
    assert len(runs) == len(promtool_suites.load(TESTS_PATH)["tests"])
    for suite in runs:
        out = subprocess.run([_promtool(), "test", "rules", suite.name], capture_output=True,
                             text=True, timeout=300, cwd=tmp_path)
        assert out.returncode == 0, suite.name + "\n" + out.stdout + out.stderr
        assert "SUCCESS" in out.stdout


@pytest.mark.slow  # promtool, a Go binary, on the whole rule set
def test_promtool_unit_tests_catch_a_broken_rule(tmp_path: Path) -> None:
    """Guard against tests that cannot fail: weaken one alert and promtool must report it."""
    broken = RULES_PATH.read_text().replace("> 0.95", "> 0.99")
    assert broken != RULES_PATH.read_text()
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / rules.RULES_FILE).write_text(broken)
    (tmp_path / "rules" / "tests").mkdir()
    # Only the test groups that expect the weakened alert to fire: the others cannot see the
    # change (a quiet check of it, as in the healthy control, stays quiet when the threshold
    # rises: `> 0.99` holds only where `> 0.95` does), and the whole file is a minute of
    # promtool on a busy machine (run once, unbroken, above).
    suite = yaml.safe_load(TESTS_PATH.read_text())
    suite["tests"] = [t for t in suite["tests"]
                      if any(c["alertname"] == "StormotelGpuMemoryPressure" and c["exp_alerts"]
                             for c in t.get("alert_rule_test", ()))]
    assert suite["tests"]
    (tmp_path / "rules" / "tests" / TESTS_PATH.name).write_text(yaml.safe_dump(suite))
    out = subprocess.run([_promtool(), "test", "rules", TESTS_PATH.name], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path / "rules" / "tests")
    assert out.returncode != 0
    assert "StormotelGpuMemoryPressure" in out.stdout + out.stderr


def test_every_alert_is_tested_firing_and_quiet() -> None:
    names = {str(a["alert"]) for a in _shipped_alerts()}
    cases = rule_tests.rule_tests()["tests"]
    fired = {c["alertname"] for t in cases for c in t["alert_rule_test"] if c["exp_alerts"]}
    quiet = {c["alertname"] for t in cases for c in t["alert_rule_test"] if not c["exp_alerts"]}
    assert names == fired, f"alerts without a firing test: {names - fired}"
    assert names <= quiet, f"alerts without a quiet check: {names - quiet}"
    assert set(rule_tests.ALERT_NAMES_IN_HEALTHY) == names


@pytest.mark.parametrize("alert", _shipped_alerts(),
                         ids=lambda a: f"{a['alert']}-{a['labels']['severity']}")
def test_alert_carries_what_an_operator_needs(alert: dict[str, object]) -> None:
    annotations = alert["annotations"]
    assert isinstance(annotations, dict)
    assert re.fullmatch(r"\d+[smh]", str(alert["for"]))
    assert alert["labels"] == {"severity": alert["labels"]["severity"]}  # type: ignore[index]
    assert alert["labels"]["severity"] in ("warning", "critical")  # type: ignore[index]
    text = annotations["summary"] + annotations["description"]
    assert "$labels.job_id" in text
    if str(alert["alert"]) in PER_JOB:  # analyzer run health is per job, not per rank
        assert "$s.Labels.rank" in text or "Analyzer" in str(alert["alert"])
    else:
        assert "$labels.rank" in text, "a per-rank alert must name its rank"
    anchor = annotations["runbook_url"].rsplit("#", 1)[1]
    assert anchor == str(alert["alert"]).lower()


PER_JOB = {"StormotelAnalyzerFailing", "StormotelAnalyzerStale", "StormotelFirstCauseFinding"}


@pytest.mark.parametrize("alert", _shipped_alerts(),
                         ids=lambda a: f"{a['alert']}-{a['labels']['severity']}")
def test_alert_labels_alertmanager_can_route_on(alert: dict[str, object]) -> None:
    """Per-rank alerts carry the rank's identity and placement (namespace, cluster, host, GPU,
    and its GPU UUID and pod joined from the rank's info series), so Alertmanager groups them
    per job (``group_by: [alertname, cluster, namespace, job_id]``) into one page naming the
    ranks; the analyzer's run-health alerts are per job and keep namespace/cluster."""
    expr = str(alert["expr"])
    if str(alert["alert"]) in PER_JOB:
        assert "by (namespace, cluster, job_id)" in expr
    else:
        assert f"group_left (gpu_uuid, pod) {schema.REC_RANK_PLACEMENT}" in expr
        assert "or on (job_id, rank, local_rank, world_size, host, gpu, namespace, cluster)" \
            in expr


@pytest.mark.slow  # promtool, a Go binary, on the whole rule set
def test_custom_thresholds_generate_tests_that_pass_against_their_rules(tmp_path: Path) -> None:
    """`stormotel dashboards --warning-percent 50 --critical-percent 60 --estimate-margin 1.3
    --runbook-url ...`: the generated rule tests move with the flags and pass against the rules
    generated beside them (low thresholds: the healthy groups' usage must stay quiet under
    them too; tests/dashboards/test_build.py runs the 90/100 end through the CLI). promtool
    runs the groups the flags can change (tests/dashboards/promtool_suites.py: the pressure and
    peak alerts' groups, those reading every alert); a moved runbook URL is template-free text,
    checked there against what each group expects, and the rest is the shipped suite above."""
    from stormotel.dashboards import build

    out = tmp_path / "dashboards"
    assert build.main(["--out", str(out), "--no-chart", "--warning-percent", "50",
                       "--critical-percent", "60", "--estimate-margin", "1.3",
                       "--runbook-url", "https://wiki.example/stormotel"]) == 0
    rules_text = (out / "rules" / rules.RULES_FILE).read_text()
    assert "> 0.5)" in rules_text and "> 0.6)" in rules_text
    tests_dir = out / "rules" / "tests"
    keep = promtool_suites.groups_to_run(tests_dir / TESTS_PATH.name,
                                         out / "rules" / rules.RULES_FILE, TESTS_PATH, RULES_PATH)
    assert keep  # groups identical to the shipped suite's, on identical rules: passed above
    runs = promtool_suites.write_runs(tests_dir / TESTS_PATH.name,
                                      out / "rules" / rules.RULES_FILE, TESTS_PATH, RULES_PATH)
    assert len(runs) == len(keep)
    for suite in runs:
        run = subprocess.run([_promtool(), "test", "rules", suite.name], capture_output=True,
                             text=True, timeout=300, cwd=tests_dir)
        assert run.returncode == 0, run.stdout + run.stderr
    generated = (tests_dir / TESTS_PATH.name).read_text()
    assert "more than 50%" in generated and "margin 30%" in generated
    assert "https://wiki.example/stormotel#stormotelrankstoppedreporting" in generated


def test_one_name_two_severities() -> None:
    """Warning and critical of one condition share the alert name (standard inhibition)."""
    by_name: dict[str, set[str]] = {}
    for a in _shipped_alerts():
        by_name.setdefault(str(a["alert"]), set()).add(a["labels"]["severity"])  # type: ignore
    assert by_name["StormotelGpuMemoryPressure"] == {"warning", "critical"}
    assert by_name["StormotelGapDrift"] == {"warning", "critical"}
    assert not {n for n in by_name if n.endswith(("Warning", "Critical"))}


def test_analyzer_series_are_read_with_a_lookback() -> None:
    """Series the analyzer writes once per run leave Prometheus' 5-minute lookback between
    runs: every rule reading them uses last_over_time over a window."""
    for a in _shipped_alerts():
        expr = str(a["expr"])
        for name in re.findall(r"stormotel_analyzer_\w+", expr):
            for m in re.finditer(rf"{name}(\{{[^}}]*\}})?", expr):
                before = expr[:m.start()]
                assert before.endswith("last_over_time("), (a["alert"], name)


def test_every_alert_has_a_runbook_section() -> None:
    headings = {m.group(1).strip().lower()
                for m in re.finditer(r"^## (.+)$", RUNBOOK.read_text(), re.M)}
    missing = {str(a["alert"]) for a in _shipped_alerts()
               if str(a["alert"]).lower() not in headings}
    assert not missing, f"docs/runbook.md lacks sections for {missing}"


def test_the_documented_alertmanager_route_pages_once_per_job() -> None:
    """The route in docs/runbook.md parses, groups by job (one page per job and alert) and mutes
    a rank's warning while its critical of the same alert fires; every label it names is one
    the shipped alerts carry."""
    block = re.search(r"```yaml\n(route:.*?)```", RUNBOOK.read_text(), re.S)
    assert block, "docs/runbook.md lost its Alertmanager route"
    config = yaml.safe_load(block.group(1))
    route = config["route"]["routes"][0]
    assert route["group_by"] == ["alertname", "cluster", "namespace", "job_id"]
    inhibit = config["inhibit_rules"][0]
    assert inhibit["source_matchers"] == ['severity="critical"']
    assert inhibit["target_matchers"] == ['severity="warning"']
    assert schema.ATTR_RANK in inhibit["equal"] and "alertname" in inhibit["equal"]
    carried = {"alertname", "severity", *schema.IDENTITY_LABELS, *schema.PLACEMENT_LABELS}
    for rule in config["inhibit_rules"]:
        assert set(rule["equal"]) <= carried, rule["equal"]
