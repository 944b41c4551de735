"""``stormotel analyze`` against one or several Prometheus servers, and the ranks its report
names at high or medium confidence: what the HA-pair and late-scrape tests check in any order
of servers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli import run_stormotel_here

SURE = ("high", "medium")


def analyze(urls: list[str], job: str, start_s: float, end_s: float, out: Path,
            *extra: str) -> dict[str, Any]:
    """The JSON report of ``--prometheus`` each of ``urls`` in that order over the window
    (``extra``: more CLI arguments)."""
    args = [a for u in urls for a in ("--prometheus", u)] + list(extra)
    r = run_stormotel_here("analyze", *args, "--job-id", job, "--start", f"{start_s:.3f}",
                           "--end", f"{end_s:.3f}", "--format", "json", "-o", str(out))
    assert out.exists(), (r.returncode, r.stderr[-2000:])
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def sure_ranks(report: dict[str, Any]) -> list[int]:
    """Every rank named at high/medium: a suspect, or any incident's leader."""
    cross = report["cross_rank"]
    named = {s["rank"] for s in cross["first_cause_suspects"] if s["confidence"] in SURE}
    named |= {i["leader"] for i in cross.get("incidents", [])
              if i.get("leader") is not None and i.get("confidence") in SURE}
    return sorted(named)
