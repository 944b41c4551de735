"""``stormotel analyze --name-translation``: the incident dashboard the analyzer writes (a file
or through Grafana's API) selects the tracker's series as the TSDB stores them, the same
spelling ``stormotel dashboards --name-translation`` gives the shipped dashboards
(docs/prometheus3.md). Before, its panels always used the default strategy's names, so on a
Prometheus 3 with ``NoTranslation`` every panel of the board a page links to was empty.
The command runs through its entry point in this process (tests.cli.run_stormotel_here): the
board is under test here, not an interpreter's start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stormotel import exitcodes, schema
from tests.cli import run_stormotel_here

REPO = Path(__file__).resolve().parents[2]
#: A real stall log (tests/stalls/data/fresh): a file run whose finding names ranks, so the
#: board has suspects' panels.
LOGS = next((REPO / "tests/stalls/data/fresh").glob("pytorch-121606-*")) / "logs"


def _board(tmp_path: Path, *extra: str) -> str:
    out = tmp_path / f"board{len(extra)}.json"
    run = run_stormotel_here("analyze", "--logs", str(LOGS), "--incident-dashboard", str(out),
                             "-q", *extra)
    assert run.returncode == exitcodes.FINDINGS, run.stderr
    return out.read_text()


def _exprs(text: str) -> list[str]:
    board = json.loads(text)
    panels = [p for row in board["panels"] for p in [row, *row.get("panels", [])]]
    return [t["expr"] for p in panels for t in p.get("targets", []) if "expr" in t]


def test_default_board_selects_the_default_names(tmp_path: Path) -> None:
    exprs = "\n".join(_exprs(_board(tmp_path)))
    assert schema.stored_name(schema.DEVICE_USED) in exprs
    assert '__name__="hw.gpu.memory.usage"' not in exprs


@pytest.mark.parametrize("strategy", [s for s in schema.NAME_TRANSLATIONS
                                      if s != schema.DEFAULT_NAME_TRANSLATION])
def test_each_strategy_selects_its_own_names(tmp_path: Path, strategy: str) -> None:
    exprs = "\n".join(_exprs(_board(tmp_path, "--name-translation", strategy)))
    own = schema.stored_name(schema.DEVICE_USED, strategy)
    assert own in exprs, (strategy, own)
    default = schema.stored_name(schema.DEVICE_USED)
    assert f"{default}{{" not in exprs and f"{default})" not in exprs, strategy


def test_an_unknown_strategy_is_a_usage_error(tmp_path: Path) -> None:
    run = run_stormotel_here("analyze", "--logs", str(LOGS), "--name-translation", "Underscores")
    assert run.returncode == exitcodes.USAGE
    assert "--name-translation" in run.stderr and "Traceback" not in run.stderr
