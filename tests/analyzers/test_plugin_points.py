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

import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from stormotel import exitcodes
from tests.servers import loopback_client

REPO = Path(__file__).resolve().parents[2]
LAYOUT = REPO / "docs" / "layout.md"
ARCHIVE = REPO / "tests" / "analyzers" / "data" / "demo_warmup_steps"
#: The issue's bound for each plug-in kind (docs/layout.md may claim less, never more).
BOUNDS = {"an algorithm with findings": 3, "a sink with a flag": 2, "a TSDB source": 2,
          "a stall-log kind": 2}


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


def register(path: Path, table: str, import_line: str, entry: str, *, last: bool = False
             ) -> None:
    """Add ``entry`` as the table's first line (``last``: its last) and its import after
    ``__future__``."""
    text = path.read_text(encoding="utf-8")
    where = (rf"^({re.escape(table)}\b[^=\n]*= [\[({{]\n(?:.*\n)*?)(?=[)\]}}]\n)" if last
             else rf"^({re.escape(table)}\b[^=\n]*= [\[({{]\n)")
    text, n = re.compile(where, re.M).subn(lambda m: f"{m.group(1)}    {entry},\n", text, count=1)
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


THROWAWAY_SINK = '''"""Throwaway (test_plugin_points.py): each finding as one CSV row."""

from __future__ import annotations

import csv
from typing import TextIO

from stormotel.analyzers.sinks.base import BaseSink


class ThrowawaySink(BaseSink):
    """``--throwaway-csv FILE``: family, kind, ranks, severity of every finding."""

    name = "throwaway_csv"
    option = "sinks.extra.throwaway_csv"
    per_job = True

    def rows(self) -> list[list[str]]:
        return [[f.family, f.kind, " ".join(map(str, f.ranks)), f.severity]
                for f in self.ctx.report.findings()]

    def plan(self, out: TextIO) -> str:
        print(f"# would write {len(self.rows())} finding row(s) to {self.target}", file=out)
        return ""

    def write(self) -> str:
        rows = self.rows()
        with open(self.target, "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows(rows)
        return f"rows={len(rows)}"
'''


def sink_plugin() -> Plugin:
    def reg(site: Path) -> None:
        register(registration_point(site, "SINKS"), "SINKS", "from pathlib import Path",
                 '"throwaway_csv": SinkEntry("stormotel.analyzers.sinks.throwaway_sink:'
                 'ThrowawaySink", flags=(PluginFlag("--throwaway-csv", type=Path, '
                 'metavar="FILE", help="each finding as one CSV row"),))', last=True)

    return Plugin({"stormotel/analyzers/sinks/throwaway_sink.py": THROWAWAY_SINK}, reg)


THROWAWAY_SOURCE = '''"""Throwaway (test_plugin_points.py): device memory from a plain gauge
``NAME{job_id, rank}`` in bytes, read through the Prometheus query API (``--throwaway-metric``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from stormotel.analyzers.options import JobOptions, PluginFlag
from stormotel.analyzers.sources.protocol import LoadOutcome, Progress, QueryWindow, TsdbSource

if TYPE_CHECKING:
    import httpx

    from stormotel.analyzers.http import Deadline
    from stormotel.analyzers.timeline import Timeline


class ThrowawaySource(TsdbSource):
    flags: ClassVar[tuple[PluginFlag, ...]] = (
        PluginFlag("--throwaway-metric", metavar="NAME", help="read this gauge as device memory"),)

    @classmethod
    def selected(cls, job: JobOptions) -> bool:
        return bool(job.tsdb.extra.get("throwaway_metric"))

    def load(self, client: httpx.Client, qw: QueryWindow, deadline: Deadline | None,
             progress: Progress) -> tuple[Timeline, LoadOutcome]:
        import numpy as np

        from stormotel.analyzers.timeline import TimelineBuilder

        name = self.job.tsdb.extra["throwaway_metric"]
        outcome = LoadOutcome(step_s=qw.step_s or 1.0)
        builder = TimelineBuilder()
        for url in self.job.tsdb.prometheus:
            answer = client.get(f"{url.rstrip('/')}/api/v1/query_range", params={
                "query": f\'{name}{{job_id="{qw.job_id}"}}\', "start": qw.start_ns / 1e9,
                "end": qw.end_ns / 1e9, "step": outcome.step_s})
            answer.raise_for_status()
            outcome.queries += 1
            outcome.endpoints_ok.append(url)
            for series in answer.json()["data"]["result"]:
                values = np.array(series["values"], dtype=np.float64)
                builder.add_samples(int(series["metric"]["rank"]),
                                    (values[:, 0] * 1e9).astype(np.int64),
                                    device_used=values[:, 1])
        timeline = builder.build(job_id=qw.job_id)
        timeline.notes.append(f"throwaway source: {name}, {outcome.queries} queries")
        return timeline, outcome
'''


def source_plugin() -> Plugin:
    def reg(site: Path) -> None:
        register(registration_point(site, "TSDB_SOURCES"), "TSDB_SOURCES",
                 "from stormotel.analyzers.sources.throwaway_tsdb import ThrowawaySource",
                 "ThrowawaySource")

    return Plugin({"stormotel/analyzers/sources/throwaway_tsdb.py": THROWAWAY_SOURCE}, reg)


THROWAWAY_SCANNER = '''"""Throwaway (test_plugin_points.py): ``THROWAWAY-STALL rank R`` names R."""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls.log_failures import Found
from stormotel.analyzers.stalls.log_finding import log_finding

KIND = "throwaway_stall"
LINE = re.compile(r"THROWAWAY-STALL rank (\\d+)")


class Scanner:
    def __init__(self, ctx: Any) -> None:
        self.found: list[Found] = []

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        m = LINE.search(seg)
        if m:
            self.found.append(Found(KIND, no, int(m.group(1)), None, seg.strip(), {},
                                    "throwaway.stall"))

    def finish(self, text: str) -> list[Found]:
        return self.found


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    mine = [e for e in events if e.kind == KIND]
    return [log_finding("straggler", [e.rank], "throwaway", "low", "throwaway.stall",
                        f"rank {e.rank} said THROWAWAY-STALL", ["none"], [e]) for e in mine[:1]]
'''


def scanner_plugin() -> Plugin:
    def reg(site: Path) -> None:
        table = "KINDS: tuple[LogKind"  # stalls/paste.py has a KINDS table of its own
        register(registration_point(site, table), table,
                 "from stormotel.analyzers.stalls import throwaway_log",
                 'LogKind("throwaway", throwaway_log.Scanner, throwaway_log.findings)',
                 last=True)

    return Plugin({"stormotel/analyzers/stalls/throwaway_log.py": THROWAWAY_SCANNER}, reg)


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


def test_a_sink_with_a_flag_touches_what_the_table_says(
        claims: dict[str, int], tmp_path: Path) -> None:
    site = installed_copy(tmp_path)
    plugin = sink_plugin()
    assert plugin.apply(site) <= claims["a sink with a flag"], plugin.files_changed
    assert "stormotel/analyzers/sinks/throwaway_sink.py" in plugin.files_changed

    helped = run_analyze(site, "--help")
    assert helped.returncode == 0 and "--throwaway-csv FILE" in helped.stdout, helped.stderr
    # Asked for by its flag: the file holds one row per finding of the report.
    path = tmp_path / "findings.csv"
    out = run_analyze(site, str(ARCHIVE), "--format", "json", "--throwaway-csv", str(path))
    assert out.returncode == exitcodes.FINDINGS, out.stderr
    report = json.loads(out.stdout)
    rows = list(csv.reader(path.open(encoding="utf-8")))
    gaps = {(g["classification"], str(g["rank"])) for g in report["gap_findings"]}
    assert gaps and gaps <= {(kind, ranks) for _, kind, ranks, _ in rows}, (gaps, rows)
    suspects = [s["rank"] for s in report["cross_rank"]["first_cause_suspects"]]
    assert [r[2] for r in rows if r[0] == "first_cause"] == [" ".join(map(str, suspects))]
    # Under --dry-run it plans the same rows and writes nothing; without the flag, no file.
    planned = tmp_path / "planned.csv"
    plan = run_analyze(site, str(ARCHIVE), "--quiet", "--dry-run", "--throwaway-csv",
                       str(planned))
    assert f"# would write {len(rows)} finding row(s) to {planned}" in plan.stdout, plan.stdout
    assert not planned.exists()


def _vm_import(url: str, text: str, query: str, want: int) -> None:
    """Import Prometheus text lines into VictoriaMetrics and wait until ``query`` counts
    ``want`` series (freshly imported data becomes searchable within about a second)."""
    client = loopback_client()
    client.post(f"{url}/api/v1/import/prometheus", content=text, timeout=30).raise_for_status()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        client.get(f"{url}/internal/force_flush", timeout=30)
        got = client.get(f"{url}/api/v1/series", params={"match[]": query}, timeout=30).json()
        if len(got["data"]) >= want:
            return
        time.sleep(0.5)
    raise AssertionError(f"VictoriaMetrics never held {want} series of {query}")


def test_a_tsdb_source_touches_what_the_table_says(
        claims: dict[str, int], tmp_path: Path, victoriametrics_server: Any) -> None:
    """A real TSDB on loopback (VictoriaMetrics, through the Prometheus query API) holds a plain
    gauge no built-in source reads; the throwaway source, selected by its own flag, reads it."""
    site = installed_copy(tmp_path)
    plugin = source_plugin()
    assert plugin.apply(site) <= claims["a TSDB source"], plugin.files_changed
    assert "stormotel/analyzers/sources/throwaway_tsdb.py" in plugin.files_changed

    url = victoriametrics_server.url
    t0 = int(time.time()) - 300
    gib = 2**30
    lines = [f'throwaway_used_bytes{{job_id="tw",rank="{rank}"}} '
             f"{(10 + (9 if rank == 1 and s >= 30 else 0)) * gib} {(t0 + s) * 1000}"
             for rank in (0, 1) for s in range(61)]
    _vm_import(url, "\n".join(lines) + "\n", 'throwaway_used_bytes{job_id="tw"}', 2)

    window = ["--prometheus", url, "--job-id", "tw", "--start", str(t0), "--end", str(t0 + 60),
              "--format", "json", "--quiet"]
    out = run_analyze(site, *window, "--throwaway-metric", "throwaway_used_bytes")
    assert out.returncode in (exitcodes.OK, exitcodes.FINDINGS), out.stderr
    report = json.loads(out.stdout)
    assert report["participating_ranks"] == [0, 1], report["participating_ranks"]
    assert any(n.startswith("throwaway source: throwaway_used_bytes, 1 queries")
               for n in report["cross_rank"]["notes"] + report.get("notes", [])), report
    # Without its flag the same window is read by the built-in source: no stormotel series.
    control = run_analyze(site, *window)
    assert control.returncode == exitcodes.SOURCE_FAILURE, control.stderr
    # Its flag without a TSDB to read is a usage error naming it, like --dcgm's.
    alone = run_analyze(site, str(ARCHIVE), "--throwaway-metric", "throwaway_used_bytes")
    assert alone.returncode == exitcodes.USAGE, alone.stderr
    assert "--throwaway-metric needs --prometheus URL" in alone.stderr


def test_a_stall_log_kind_touches_what_the_table_says(
        claims: dict[str, int], tmp_path: Path) -> None:
    site = installed_copy(tmp_path)
    plugin = scanner_plugin()
    assert plugin.apply(site) <= claims["a stall-log kind"], plugin.files_changed
    assert "stormotel/analyzers/stalls/throwaway_log.py" in plugin.files_changed

    log = tmp_path / "worker.log"
    log.write_text("[rank0]: step 10 loss 2.1\n[rank2]: THROWAWAY-STALL rank 3 waited 600 s\n"
                   "[rank1]: step 10 loss 2.2\n", encoding="utf-8")
    out = run_analyze(site, "--logs", str(log), "--world-size", "4", "--format", "json")
    assert out.returncode == exitcodes.FINDINGS, out.stderr
    found = [f for f in json.loads(out.stdout)["stall_findings"]
             if f["evidence"].get("pattern") == "throwaway.stall"]
    assert [f["ranks"] for f in found] == [[3]], found
    assert "THROWAWAY-STALL rank 3" in found[0]["evidence"]["lines"][0]["text"]


def test_the_table_is_read_from_the_docs() -> None:
    """The parser reads what the docs say (a table it cannot read would pass vacuously)."""
    table = plugin_table("x\n\n| plug-in | files | what |\n|---|---|---|\n| a sink | 2 | m |\n"
                         "| an algorithm with findings | 3 | m |\n\nafter\n")
    assert table == {"a sink": 2, "an algorithm with findings": 3}
