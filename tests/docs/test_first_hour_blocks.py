"""Documented commands a newcomer runs in the first hour that ``test_doc_blocks.py`` does not run:
their block is marked ``cluster``/``check`` because another line of it needs a GPU or writes
into the checkout, so these lines were only flag-checked. Each is taken from the doc's own
block (a reworded doc changes what runs here, a removed line fails the lookup) and run as
written, with the documented outcome asserted (first-hour audit, session 21, helper fa).

CPU (measured on the 2-core box): the quickstart's simulated incident 0.8 s + its analysis
0.8 s; ``dashboards --out ... --no-chart`` 0.7 s. Wall: ~14 s (the run is 10 s of real time).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.doc_blocks import REPO, blocks, shell_source, stormotel_invocations


def documented(doc: str, contains: str) -> tuple[str, list[str]]:
    """The one ``stormotel`` invocation of ``doc`` whose words include ``contains``."""
    found = [(cmd, args) for b in blocks(REPO / doc) if b.kind == "shell"
             for cmd, args in stormotel_invocations(shell_source(b.text))
             if contains in " ".join([cmd, *args])]
    assert len(found) == 1, f"{doc}: expected one documented command with {contains!r}: {found}"
    return found[0]


def stormotel(args: list[str], cwd: Path, timeout: float = 120
              ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stormotel", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow  # 10 s of real time: the command's own --duration
def test_quickstart_fake_incident_without_a_gpu(tmp_path: Path) -> None:
    """docs/quickstart.md, "Without touching the training code": the simulated spike, then the
    analysis of what it wrote names it."""
    cmd, args = documented("docs/quickstart.md", "--sampler simulated --duration 10")
    out = stormotel([cmd, *args], tmp_path)
    assert out.returncode == 0, out.stderr
    jobs = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    assert len(jobs) == 1, jobs
    analysis = stormotel(["analyze", str(jobs[0])], tmp_path)
    assert analysis.returncode == 1, analysis.stderr  # findings: the planted spike
    assert "transient_spike" in analysis.stdout and "rank 0" in analysis.stdout, analysis.stdout


def test_dashboards_with_other_thresholds(tmp_path: Path) -> None:
    """docs/dashboards.md: ``--out DIR --no-chart --warning-percent 75 --critical-percent 90``
    writes the two dashboards, the rules and their tests, with the thresholds given (the doc's
    ``/tmp/d`` is this test's own folder)."""
    cmd, args = documented("docs/dashboards.md", "--no-chart")
    assert args[args.index("--out") + 1] == "/tmp/d"
    args[args.index("--out") + 1] = str(tmp_path / "d")
    out = stormotel([cmd, *args], tmp_path)
    assert out.returncode == 0, out.stderr
    d = tmp_path / "d"
    assert sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()) == [
        "rules/stormotel-rules.yml", "rules/tests/stormotel-rules.test.yml",
        "stormotel-overview.json", "stormotel-rank.json"]
    rules = (d / "rules" / "stormotel-rules.yml").read_text(encoding="utf-8")
    assert "stormotel:rank_memory_pressure:ratio > 0.75" in rules
    assert "stormotel:rank_memory_pressure:ratio > 0.9)" in rules
    assert not (tmp_path / "helm").exists()  # --no-chart: nothing beside it
