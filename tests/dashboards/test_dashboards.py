"""Dashboard structure: variables, annotations, units, legends and thresholds; PromQL spelled only
from schema names; the incident dashboard pins its job and suspects."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from stormotel.dashboards import promql
from stormotel.dashboards.common import to_json
from stormotel.dashboards.incident import incident_dashboard, incident_uid
from stormotel.dashboards.settings import Settings

from stormotel import schema
from tests.dashboards import exprs

BOARDS = {p.name: json.loads(p.read_text()) for p in exprs.dashboard_files()}
KNOWN_SERIES = ({name for m in schema.ALL_METRICS for name in m.prom_series}
                | {getattr(schema, n) for n in dir(schema) if n.startswith(("AN_", "REC_"))
                   and isinstance(getattr(schema, n), str)}
                | {schema.RANK_INFO.prom, schema.DCGM_FB_USED, schema.DCGM_FB_FREE,
                   schema.DCGM_FB_RESERVED, schema.DCGM_LABEL_UUID,
                   schema.DCGM_LABEL_GPU_INSTANCE, *schema.RANK_INFO_LABELS})
PROMQL_WORDS = {"by", "on", "and", "or", "unless", "max", "min", "sum", "count", "topk",
                "bottomk", "rate", "increase", "deriv", "predict_linear", "max_over_time",
                "time", "group", "label_values", "ignoring", "offset", "last_over_time",
                "clamp_min", "label_replace", "group_left", "changes", "count_over_time"}
_IDENT = re.compile(r"(?<![\w\"$:.])([a-zA-Z_:][\w:]*)\s*(?=[{\[(]|\s*$|\s*[)/*+\-<>=])")


def _panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in board["panels"] if p["type"] != "row"]


def test_two_dashboards_are_shipped() -> None:
    assert set(BOARDS) == {"stormotel-overview.json", "stormotel-rank.json"}
    assert {b["uid"] for b in BOARDS.values()} == {"stormotel-overview", "stormotel-rank"}


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_variables_and_findings_annotation(name: str) -> None:
    board = BOARDS[name]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert list(variables) == ["datasource", "job_id", "rank", "host"]
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["rank"]["multi"] is (name == "stormotel-overview.json")
    assert variables["rank"]["query"].startswith(f"label_values({schema.DEVICE_USED.prom}")
    tags = [a for a in board["annotations"]["list"] if a.get("type") == "tags"]
    assert len(tags) == 1 and tags[0]["tags"][0] == schema.ANNOTATION_TAG
    assert "job_id=$job_id" in tags[0]["tags"]
    link, = board["links"]
    assert link["tags"] == [schema.ANNOTATION_TAG] and link["includeVars"] and link["keepTime"]
    assert schema.ANNOTATION_TAG in board["tags"]  # so the link finds every stormotel board


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_panel_has_unit_legend_and_datasource(name: str) -> None:
    for panel in _panels(BOARDS[name]):
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
        assert panel["description"], panel["title"]
        for target in panel["targets"]:
            assert target["legendFormat"], (panel["title"], target["refId"])
        if panel["type"] == "timeseries":
            assert panel["options"]["legend"]["displayMode"] == "table"


def test_percent_panel_thresholds_are_the_alert_thresholds() -> None:
    cfg = Settings()
    panel = next(p for p in _panels(BOARDS["stormotel-overview.json"])
                 if p["title"] == "Device memory used %")
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["value"] for s in steps] == [None, cfg.warning_percent, cfg.critical_percent]
    assert cfg.warning_percent == schema.DEFAULT_THRESHOLDS[schema.THRESHOLD_WARNING]
    assert panel["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"]["mode"] == "dashed"
    assert panel["fieldConfig"]["defaults"]["unit"] == "percent"


def test_overview_covers_what_the_issue_lists() -> None:
    titles = {p["title"] for p in _panels(BOARDS["stormotel-overview.json"])}
    for wanted in ("Device memory used vs limit", "Allocator reserved / allocated",
                   "Gap: device used − allocator reserved", "Headroom", "Top ranks by gap growth",
                   "OOMs", "Threshold crossings", "Samples per second",
                   "Dropped samples per second", "First-cause suspects",
                   "Estimated vs actual peak", "Actual peak / estimate"):
        assert wanted in titles


def test_promql_uses_only_schema_names() -> None:
    unknown: set[str] = set()
    for e in exprs.all_exprs():
        # A __name__ regex is spelled from the schema (schema.DCGM_FB_NAME_RE): its pieces are
        # not series names.
        expr = re.sub(r'__name__=~"\(\?i\)DCGM_FI_DEV_[^"]*"', "", e.expr)
        for name in _IDENT.findall(expr):
            if name not in PROMQL_WORDS and name not in schema.IDENTITY_LABELS and \
                    name not in schema.PLACEMENT_LABELS and \
                    name not in (schema.ATTR_LEVEL, schema.ATTR_REASON, schema.ATTR_DESTINATION,
                                 schema.ATTR_EDGE,
                                 schema.ANALYZER_LABEL_KIND, schema.ANALYZER_LABEL_SEVERITY,
                                 schema.ANALYZER_LABEL_CONFIDENCE) and name not in KNOWN_SERIES:
                unknown.add(f"{name} in {e.where}")
    assert not unknown, sorted(unknown)


def test_or_zero_matches_on_identity_only() -> None:
    expr = promql.or_zero(promql.rate_by(schema.SAMPLES_DROPPED, "5m", "", [schema.ATTR_REASON]),
                          "5m")
    assert f"or on ({promql.IDENTITY})" in expr
    assert schema.SAMPLES.prom in expr


def test_incident_dashboard_pins_job_and_suspects() -> None:
    start = datetime(2026, 11, 21, 4, 0, tzinfo=UTC)
    board = json.loads(to_json(incident_dashboard("run-7", [2, 5], start=start,
                                                  end=datetime(2026, 11, 21, 5, 0))))
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["job_id"]["current"]["value"] == "run-7"
    assert variables["rank"]["current"]["value"] == ["2", "5"]
    assert board["time"] == {"from": "2026-11-21T04:00:00.000Z", "to": "2026-11-21T05:00:00.000Z"}
    tags = next(a for a in board["annotations"]["list"] if a.get("type") == "tags")["tags"]
    assert tags == [schema.ANNOTATION_TAG, "job_id=run-7"]
    assert board["uid"] == "stormotel-incident-run-7"
    titles = [p["title"] for p in board["panels"]]
    assert titles[0] == "Incident" and "First-cause suspects" in titles
    assert "2, 5" in board["panels"][0]["options"]["content"]


def test_incident_uid_is_stable_short_and_distinct() -> None:
    long_a, long_b = "x" * 60 + "a", "x" * 60 + "b"
    assert incident_uid(long_a) == incident_uid(long_a)
    assert incident_uid(long_a) != incident_uid(long_b)
    assert all(len(incident_uid(j)) <= 40 for j in (long_a, "run/7 ü", "---"))
    assert re.fullmatch(r"[A-Za-z0-9_-]+", incident_uid("run/7 ü"))
    with pytest.raises(ValueError, match="job_id"):
        incident_dashboard("", [1])


def test_one_oom_is_one_bar(tmp_path: Path) -> None:
    """The OOM panel, evaluated by promtool minute by minute: rank 1's counter goes 0 → 1 and
    rank 2's first OOM appears as a new series at 1 (OTel counters appear on their first
    increment); each shows exactly one bar of height 1, in the minute it happened."""
    import subprocess

    import yaml

    from tests import servers

    panel = next(p for p in _panels(BOARDS["stormotel-overview.json"]) if p["title"] == "OOMs")
    expr = exprs.to_promql(panel["targets"][0]["expr"],
                           {"job_id": ".*", "rank": ".*", "host": ".*", "__interval": "1m",
                            "__rate_interval": "2m"})
    ident = {schema.ATTR_JOB_ID: "j", schema.ATTR_LOCAL_RANK: "0", schema.ATTR_WORLD_SIZE: "3",
             schema.ATTR_HOST: "h", schema.ATTR_GPU: "0"}

    def series(name: str, rank: int, values: str) -> dict[str, str]:
        labels = ", ".join(f'{k}="{v}"' for k, v in {**ident, "rank": str(rank)}.items())
        return {"series": f"{name}{{{labels}}}", "values": values}

    inputs = [series(schema.SAMPLES.prom, r, "0+60x30") for r in (1, 2)]
    inputs += [series(schema.OOMS.prom, 1, "0x9 1x20"), series(schema.OOMS.prom, 2, "_x10 1x20")]
    # One query per minute for both ranks: the expected bars (1 only at minute 10).
    tests = [{"expr": expr, "eval_time": f"{m}m", "exp_samples": [
        {"labels": "{" + ", ".join(f'{k}="{v}"' for k, v in
                                   sorted({**ident, "rank": str(r)}.items())) + "}",
         "value": 1 if m == 10 else 0} for r in (1, 2)]} for m in range(5, 20)]
    doc = {"evaluation_interval": "1m", "tests": [
        {"interval": "1m", "input_series": inputs, "promql_expr_test": tests}]}
    (tmp_path / "oom.test.yml").write_text(yaml.safe_dump(doc, width=10_000))
    out = subprocess.run([servers.require_binary("promtool"), "test", "rules", "oom.test.yml"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_since_last_analyzer_success_says_never_without_data() -> None:
    panel = next(p for p in _panels(BOARDS["stormotel-overview.json"])
                 if p["title"] == "Since last analyzer success")
    assert panel["fieldConfig"]["defaults"]["noValue"] == "never"
    assert "last_over_time(" in panel["targets"][0]["expr"]


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_the_boards_ask_for_the_tags_the_grafana_sink_writes(name: str) -> None:
    """A board's findings query has ``matchAny`` off: a finding shows only when it carries
    every tag the board asks for. With the board's variables set to a finding's job and rank,
    the sink's annotation of that finding has them all; another job's or rank's has not."""
    from stormotel.analyzers.report import CrossRank, Report, Suspect
    from stormotel.analyzers.sinks import grafana

    t0 = 1_795_000_000_000_000_000
    report = Report(job_id="run-7", world_size=4, participating_ranks=[0, 1, 2, 3],
                    missing_ranks=[], window_start_ns=t0 - 60 * 10**9, window_end_ns=t0,
                    cross_rank=CrossRank(cluster_onset_ns=t0, first_cause_suspects=[
                        Suspect(2, "high", t0 - 10**9, 10**9, 2**30)]))
    ann, = (a for a in grafana.annotations_for(report) if "first_cause" in a.tags)
    query = next(a for a in BOARDS[name]["annotations"]["list"] if a.get("type") == "tags")
    assert query["matchAny"] is False and query["target"]["matchAny"] is False

    def asked(job: str, rank: str) -> set[str]:
        """The board's tags with its job and rank variables set."""
        values = {f"${schema.ATTR_JOB_ID}": job, f"${schema.ATTR_RANK}": rank}
        tags = set()
        for tag in query["tags"]:
            key, eq, value = tag.partition("=")
            tags.add(f"{key}={values.get(value, value)}" if eq else tag)
        return tags

    assert asked("run-7", "2") <= set(ann.tags)
    assert not asked("run-8", "2") <= set(ann.tags)
    if name == "stormotel-rank.json":  # the drill-down shows one rank's findings only
        assert not asked("run-7", "3") <= set(ann.tags)
