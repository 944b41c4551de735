"""Every PromQL expression stormotel ships, pulled out of the generated files.

The files (dashboard JSON, rules YAML) are what operators install, so tests read expressions from
them rather than from the Python that wrote them; Grafana's variables and interval macros are
substituted the way Grafana would before the query reaches Prometheus.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from stormotel.dashboards import rules

REPO = Path(__file__).resolve().parents[2]
DASHBOARD_DIR = REPO / "dashboards"
RULES_PATH = DASHBOARD_DIR / "rules" / rules.RULES_FILE
_LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$")
_VAR = re.compile(r"\$\{?([A-Za-z_]\w*)\}?")  # not label_replace's "$1"


@dataclass(frozen=True)
class Expr:
    where: str  # e.g. "stormotel-overview.json panel 'Headroom' target A"
    expr: str
    must_return: bool = True  # False for full alert expressions (healthy data may not fire)


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARD_DIR.glob("*.json"))


def dashboard_exprs(board: Mapping[str, Any], name: str) -> Iterator[Expr]:
    """Panel targets and query variables of one dashboard JSON."""
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            # DCGM joins return series only where dcgm-exporter runs: tests/job/test_dcgm_join.py
            # runs them against one; here they must parse and evaluate.
            yield Expr(f"{name} panel {panel['title']!r} target {target['refId']}",
                       target["expr"], must_return="DCGM_FI_DEV_" not in target["expr"])
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            yield Expr(f"{name} variable {var['name']}", var["query"])
    for ann in board["annotations"]["list"]:
        if "expr" in ann:
            yield Expr(f"{name} annotation {ann['name']!r}", ann["expr"])


def rule_exprs(path: Path = RULES_PATH) -> Iterator[Expr]:
    """Recording rules (must return series, except per-rank *problem* series, empty on a healthy
    job), each alert's signal (must return series) and the full alert expression (must parse and
    evaluate). Alerts come in the order ``rules.alerts`` lists them (one name may carry two
    severities)."""
    data = yaml.safe_load(path.read_text())
    cfg = rules.Settings()
    always = {r.record: r.always
              for r in (*rules.recording_rules(cfg), *rules.dcgm_recording_rules())}
    signals = iter(rules.alerts(cfg))
    for group in data["groups"]:
        for rule in group["rules"]:
            if "record" in rule:
                yield Expr(f"record {rule['record']}", rule["expr"],
                           must_return=always[rule["record"]])
            else:
                alert = next(signals)
                assert alert.name == rule["alert"]
                where = f"alert {rule['alert']} ({rule['labels']['severity']})"
                yield Expr(where, rule["expr"], must_return=False)
                yield Expr(f"{where} signal", alert.signal)


def all_exprs() -> list[Expr]:
    out: list[Expr] = []
    for path in dashboard_files():
        out += dashboard_exprs(json.loads(path.read_text()), path.name)
    return out + list(rule_exprs())


def to_promql(expr: str, variables: Mapping[str, str]) -> str:
    """Substitute Grafana variables/macros; turn ``label_values(sel, label)`` into PromQL."""
    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in variables:
            raise KeyError(f"no test value for Grafana variable ${name} in {expr!r}")
        return variables[name]

    out = _VAR.sub(sub, expr)
    lv = _LABEL_VALUES.match(out)
    if lv:
        out = f"count by ({lv['label']}) ({lv['selector']})"
    return out
