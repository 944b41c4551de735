"""`stormotel dashboards`: committed files are the build's output (a stale file fails), the chart
ships the very same bytes, and bad input gets a one-line error."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from stormotel.dashboards import build
from stormotel.dashboards.settings import Settings

from stormotel import exitcodes
from tests.cli import run_stormotel
from tests.dashboards.exprs import REPO

CHART = REPO / "helm" / "stormotel"


def _run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return run_stormotel("dashboards", *args, cwd=cwd)


def test_committed_files_are_up_to_date() -> None:
    files = build.generate(Settings())
    stale = [p for p, text in files.items()
             if (REPO / "dashboards" / p).read_bytes() != text.encode()]
    stale += [p for p, text in build.chart_files(files).items()
              if (CHART / p).read_bytes() != text.encode()]
    assert not stale, f"stale generated files {stale}: run `make dashboards` and commit"


def test_chart_files_are_byte_identical_to_dashboards() -> None:
    pairs = [(REPO / "dashboards" / p.name, CHART / "files" / "dashboards" / p.name)
             for p in (CHART / "files" / "dashboards").glob("*.json")]
    pairs.append((REPO / "dashboards" / "rules" / "stormotel-rules.yml",
                  CHART / "files" / "rules" / "stormotel-rules.yml"))
    assert len(pairs) == 3
    for source, shipped in pairs:
        assert source.read_bytes() == shipped.read_bytes(), shipped


def test_check_passes_on_the_repository() -> None:
    out = _run("--check")
    assert out.returncode == exitcodes.OK, out.stderr
    assert "up to date" in out.stderr


def test_check_names_a_stale_file(tmp_path: Path) -> None:
    out_dir, chart = tmp_path / "dash", tmp_path / "chart"
    shutil.copytree(CHART, chart)
    assert _run("--out", str(out_dir), "--chart", str(chart)).returncode == exitcodes.OK
    assert build.main(["--out", str(out_dir), "--chart", str(chart), "--check"]) == 0
    shipped = chart / "files" / "rules" / "stormotel-rules.yml"
    shipped.write_text(shipped.read_text().replace("> 0.95", "> 0.96"))
    out = _run("--out", str(out_dir), "--chart", str(chart), "--check")
    assert out.returncode == exitcodes.FINDINGS
    assert f"stale: {shipped}" in out.stderr
    # A rebuild with other thresholds is a different file set: --check with defaults flags it.
    assert build.main(["--out", str(out_dir), "--no-chart", "--critical-percent", "90"]) == 0
    assert "> 0.9)" in (out_dir / "rules" / "stormotel-rules.yml").read_text()
    assert build.main(["--out", str(out_dir), "--no-chart", "--check"]) == exitcodes.FINDINGS


def test_bad_input_is_one_line_without_traceback(tmp_path: Path) -> None:
    out = _run("--warning-percent", "97", "--critical-percent", "95", "--no-chart",
               "--out", str(tmp_path))
    assert out.returncode == exitcodes.USAGE
    assert "Traceback" not in out.stderr
    assert "warning percent < critical percent" in out.stderr
    out = _run("--chart", str(tmp_path), "--out", str(tmp_path / "o"))
    assert out.returncode == exitcodes.USAGE
    assert "not a Helm chart" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = _run("--no-chart", "--out", str(blocker / "sub"))
    assert out.returncode == exitcodes.SINK_FAILURE
    assert "Traceback" not in out.stderr


def test_help_explains_every_flag() -> None:
    out = _run("--help")
    assert out.returncode == 0
    for flag in ("--out", "--chart", "--no-chart", "--check", "--warning-percent",
                 "--critical-percent", "--estimate-margin", "--runbook-url"):
        assert flag in out.stdout
