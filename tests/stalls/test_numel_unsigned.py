"""A watchdog timeout on coalesced work is a timeout, not bad input (pytorch#117682).

``WorkNCCL`` prints the element counts of work with no single size (coalesced ops, torch 2.2+)
as -1 in unsigned 64-bit: ``NumelIn=18446744073709551615``. The 18-digit bound that keeps
hostile numbers out skipped the whole line, and the log of a job that timed out read "no
evidence" (exit 3).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from stormotel import exitcodes

LINE = ("[rank1]:[E ProcessGroupNCCL.cpp:545] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=2, OpType=COALESCED, NumelIn={n}, NumelOut={n}, "
        "Timeout(ms)=10000) ran for 10000 milliseconds before timing out.\n")


def _analyze(tmp_path: Path, numel: str) -> tuple[int, dict]:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank1.log").write_text(LINE.format(n=numel))
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "stormotel", "analyze", "--logs", str(logs),
                           "--format", "json", "--output", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(out.read_text())


def test_the_unsigned_minus_one_count_keeps_the_timeout(tmp_path: Path) -> None:
    code, report = _analyze(tmp_path, "18446744073709551615")
    assert code == exitcodes.FINDINGS
    assert report["stall_findings"], report
    assert "number longer than 18 digits" not in json.dumps(report)


def test_a_longer_number_is_still_bad_input(tmp_path: Path) -> None:
    code, report = _analyze(tmp_path, "1" * 25)
    assert code == exitcodes.SOURCE_FAILURE
    assert "number longer than 18 digits" in json.dumps(report)
