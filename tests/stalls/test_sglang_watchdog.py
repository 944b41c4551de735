"""sglang's scheduler watchdog lines are a stall with no culprit named: undecided, never
"no evidence" (the held-out sglang#3752 log read exit 3 before)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stormotel import exitcodes
from tests.stalls.helpers import analyze_log_text

LINES = "".join(f"[2025-03-09 00:57:15 TP{r}] Watchdog timeout (self.watchdog_timeout=300)\n"
                for r in (4, 6, 1, 2, 5, 7, 3, 0))


def _analyze(tmp_path: Path, text: str) -> tuple[int, dict[str, Any]]:
    return analyze_log_text(tmp_path, "server.log", text)


def test_every_tp_rank_timing_out_is_undecided_and_names_nobody(tmp_path: Path) -> None:
    code, report = _analyze(tmp_path, LINES)
    assert code == exitcodes.FINDINGS
    [finding] = report["stall_findings"]
    assert "sglang" in json.dumps(finding)
    assert finding.get("confidence") in ("low", None), finding
    text = json.dumps(finding)
    assert "straggler" not in text


def test_a_log_without_the_line_stays_no_evidence(tmp_path: Path) -> None:
    code, _ = _analyze(tmp_path, "[2025-03-09 00:57:15 TP0] Prefill batch. #new-seq: 1\n")
    assert code == exitcodes.SOURCE_FAILURE
