"""A watchdog timeout on coalesced work is a timeout, not bad input (pytorch#117682).

``WorkNCCL`` prints the element counts of work with no single size (coalesced ops, torch 2.2+)
as -1 in unsigned 64-bit: ``NumelIn=18446744073709551615``. The 18-digit bound that keeps
hostile numbers out skipped the whole line, and the log of a job that timed out read "no
evidence" (exit 3).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stormotel import exitcodes
from tests.stalls.helpers import analyze_log_text

LINE = ("[rank1]:[E ProcessGroupNCCL.cpp:545] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=2, OpType=COALESCED, NumelIn={n}, NumelOut={n}, "
        "Timeout(ms)=10000) ran for 10000 milliseconds before timing out.\n")


def _analyze(tmp_path: Path, text: str) -> tuple[int, dict[str, Any]]:
    return analyze_log_text(tmp_path, "rank1.log", text)


def test_the_unsigned_minus_one_count_keeps_the_timeout(tmp_path: Path) -> None:
    code, report = _analyze(tmp_path, LINE.format(n="18446744073709551615"))
    assert code == exitcodes.FINDINGS
    assert report["stall_findings"], report
    assert "number longer than 18 digits" not in json.dumps(report)


def test_a_longer_number_is_still_bad_input(tmp_path: Path) -> None:
    code, report = _analyze(tmp_path, LINE.format(n="1" * 25))
    assert code == exitcodes.SOURCE_FAILURE
    assert "number longer than 18 digits" in json.dumps(report)
