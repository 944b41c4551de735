"""docs/layout.md's plug-in table is what a change really touches (issue 35, item 5).

For each row of the table, a throwaway plug-in of that kind is added to a temporary copy of the
package laid out as installed (``stormotel/`` with ``analyzers/`` and ``dashboards/`` inside):
its new module, and its registration line at the registration point the code has now (found by
the table's name, wherever it lives). Every file of the copy is hashed before and after, so the
count is what changed, not what the test meant to change; then the throwaway is run through
``stormotel analyze`` in a subprocess that imports the copy, and must show where a user looks.
A reader that still branches on the family (a verdict that leaves a new family out, a sentence
made for another family) fails the run check; a plug-in point that needs one more file fails
the count.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from stormotel import exitcodes

REPO = Path(__file__).resolve().parents[2]
LAYOUT = REPO / "docs" / "layout.md"
ARCHIVE = REPO / "tests" / "analyzers" / "data" / "demo_warmup_steps"
#: The issue's bound for each plug-in kind (docs/layout.md may claim less, never more).
BOUNDS = {"an algorithm with findings": 3}


def plugin_table(text: str) -> dict[str, int]:
    """The ``| plug-in | files | …`` table: plug-in → the files it claims a change touches."""
    rows: dict[str, int] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:2] != ["plug-in", "files"]:
            continue
        for row in lines[i + 2:]:
            if not row.startswith("|"):
                break
            kind, files = (c.strip() for c in row.strip().strip("|").split("|")[:2])
            rows[kind] = int(files)
    return rows


def installed_copy(root: Path) -> Path:
    """The package as a wheel installs it, copied (not linked) so changes stay in the copy."""
    site = root / "site"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "stormotel", site / "stormotel", ignore=ignore)
    for name in ("analyzers", "dashboards"):
        shutil.copytree(REPO / name, site / "stormotel" / name, ignore=ignore)
    return site


def _hashes(site: Path) -> dict[str, str]:
    return {str(p.relative_to(site)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(site.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def registration_point(site: Path, name: str) -> Path:
    """The one module that defines the table ``name`` (``NAME: … = (`` or ``NAME = (``)."""
    pattern = re.compile(rf"^{re.escape(name)}\b[^=\n]*= [\[({{]", re.M)
    found = [p for p in (site / "stormotel" / "analyzers").rglob("*.py")
             if pattern.search(p.read_text(encoding="utf-8"))]
    assert len(found) == 1, f"{name} is defined in {found}, expected one module"
    return found[0]


def register(path: Path, table: str, import_line: str, entry: str) -> None:
    """Add ``entry`` as the table's first line and its import after ``__future__``."""
    text = path.read_text(encoding="utf-8")
    table_open = re.compile(rf"^({re.escape(table)}\b[^=\n]*= [\[(]\n)", re.M)
    text, n = table_open.subn(rf"\g<1>    {entry},\n", text, count=1)
    assert n == 1, f"{table} in {path} is not a one-entry-per-line table"
    text = text.replace("from __future__ import annotations\n",
                        f"from __future__ import annotations\n\n{import_line}\n", 1)
    path.write_text(text, encoding="utf-8")


@dataclass
class Plugin:
    """One throwaway plug-in: its new modules and its registration."""

    added: dict[str, str]
    register: Callable[[Path], None]
    files_changed: list[str] = field(default_factory=list)

    def apply(self, site: Path) -> int:
        before = _hashes(site)
        for rel, text in self.added.items():
            (site / rel).write_text(text, encoding="utf-8")
        self.register(site)
        after = _hashes(site)
        self.files_changed = sorted(k for k in after if before.get(k) != after[k])
        assert not set(before) - set(after), "a plug-in removed files"
        return len(self.files_changed)


def run_analyze(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m stormotel analyze`` importing the copy (checked: it prints its own path)."""
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    where = subprocess.run([sys.executable, "-c", "import stormotel.analyzers as a; "
                            "print(a.__file__)"], env=env, cwd=site.parent, text=True,
                           capture_output=True, check=True, timeout=60)
    assert where.stdout.startswith(str(site)), f"the copy is not what runs: {where.stdout}"
    return subprocess.run([sys.executable, "-m", "stormotel", "analyze", *args], env=env,
                          cwd=site.parent, text=True, capture_output=True, timeout=300)


THROWAWAY_ALGORITHM = '''"""Throwaway (test_plugin_points.py): names the lowest rank with data."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from stormotel.analyzers.algorithms.plugin import AlgorithmInput
from stormotel.analyzers.findings import Finding, FindingFamily
from stormotel.analyzers.report import Report


class ThrowawayFamily(FindingFamily):
    name = "throwaway"
    importance = 6


THROWAWAY = ThrowawayFamily()


@dataclass(frozen=True)
class ThrowawaySection:
    rank: int
    start_ns: int
    end_ns: int

    def extra_entries(self) -> dict[str, Any]:
        return {"throwaway": {"rank": self.rank}}

    def has_findings(self) -> bool:
        return True

    def findings(self, report: Report) -> Iterator[Finding]:
        yield Finding(THROWAWAY, "throwaway_kind", (self.rank,), "warning", "medium",
                      self.start_ns, self.end_ns, 0, True, self, report)

    def summary_lines(self, report: Report) -> list[str]:
        return [f"Throwaway section: rank {self.rank}"]


def section(inp: AlgorithmInput) -> ThrowawaySection | None:
    ranks = [r for r in inp.timeline.rank_ids if len(inp.timeline.ranks[r])]
    if not ranks:
        return None
    series = inp.timeline.ranks[ranks[0]]
    return ThrowawaySection(ranks[0], int(series.t_ns[0]), int(series.t_ns[-1]))
'''


def algorithm_plugin() -> Plugin:
    def reg(site: Path) -> None:
        register(registration_point(site, "SECTION_ALGORITHMS"), "SECTION_ALGORITHMS",
                 "from stormotel.analyzers.algorithms import throwaway", "throwaway.section")

    return Plugin({"stormotel/analyzers/algorithms/throwaway.py": THROWAWAY_ALGORITHM}, reg)


@pytest.fixture(scope="module")
def claims() -> dict[str, int]:
    table = plugin_table(LAYOUT.read_text(encoding="utf-8"))
    assert table, "docs/layout.md has no | plug-in | files | table"
    return table


def test_the_table_claims_no_more_than_the_issue_allows(claims: dict[str, int]) -> None:
    for kind, bound in BOUNDS.items():
        assert kind in claims, f"docs/layout.md's plug-in table has no row {kind!r}"
        assert claims[kind] <= bound, (kind, claims[kind])


def test_an_algorithm_with_findings_touches_what_the_table_says(
        claims: dict[str, int], tmp_path: Path) -> None:
    site = installed_copy(tmp_path)
    plugin = algorithm_plugin()
    touched = plugin.apply(site)
    assert touched <= claims["an algorithm with findings"], plugin.files_changed
    assert "stormotel/analyzers/algorithms/throwaway.py" in plugin.files_changed

    # The report's JSON keeps the section's key; the finding is a finding (exit 1).
    out = run_analyze(site, str(ARCHIVE), "--format", "json", "--html", str(tmp_path / "r.html"))
    assert out.returncode == exitcodes.FINDINGS, out.stderr
    report = json.loads(out.stdout)
    rank = report["extra"]["throwaway"]["rank"]
    assert rank == min(report["participating_ranks"])
    assert (tmp_path / "r.html").stat().st_size > 0
    # The text summary: its own lines, and the verdict names it (no family left out).
    text = run_analyze(site, str(ARCHIVE))
    assert text.returncode == exitcodes.FINDINGS, text.stderr
    assert f"Throwaway section: rank {rank}" in text.stdout
    verdict = text.stdout.strip().splitlines()[-1]
    assert verdict.startswith("Verdict: FINDINGS") and "throwaway_kind (warning)" in verdict
    # The Grafana sink's plan: one annotation over its span, in its own words.
    plan = run_analyze(site, str(ARCHIVE), "--quiet", "--dry-run", "--grafana-url",
                       "http://127.0.0.1:9")
    assert plan.returncode == exitcodes.FINDINGS, plan.stderr
    bodies = [json.loads(line) for line in plan.stdout.splitlines() if line.startswith("{")]
    mine = [b for b in bodies if "throwaway_kind" in b["tags"]]
    assert len(mine) == 1, bodies
    assert mine[0]["text"].startswith(f"stormotel: throwaway_kind (warning) on rank(s) {rank}")
    assert f"rank={rank}" in mine[0]["tags"] and mine[0]["timeEnd"] > mine[0]["time"]


def test_the_table_is_read_from_the_docs() -> None:
    """The parser reads what the docs say (a table it cannot read would pass vacuously)."""
    table = plugin_table("x\n\n| plug-in | files | what |\n|---|---|---|\n| a sink | 2 | m |\n"
                         "| an algorithm with findings | 3 | m |\n\nafter\n")
    assert table == {"a sink": 2, "an algorithm with findings": 3}
