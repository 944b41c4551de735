"""sglang's scheduler watchdog lines are a stall with no culprit named: undecided, never
"no evidence" (the held-out sglang#3752 log read exit 3 before)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from stormotel import exitcodes

LINES = "".join(f"[2025-03-09 00:57:15 TP{r}] Watchdog timeout (self.watchdog_timeout=300)\n"
                for r in (4, 6, 1, 2, 5, 7, 3, 0))


def _analyze(tmp_path: Path, text: str) -> tuple[int, dict]:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "server.log").write_text(text)
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "stormotel", "analyze", "--logs", str(logs),
                           "--format", "json", "--output", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(out.read_text())


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
