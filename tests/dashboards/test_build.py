"""`stormotel dashboards`: committed files are the build's output (a stale file fails), the chart
ships the very same bytes, and bad input gets a one-line error."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from stormotel.dashboards import build
from stormotel.dashboards.settings import Settings

from stormotel import exitcodes
from tests import servers
from tests.cli import run_stormotel, run_stormotel_here
from tests.dashboards import promtool_suites
from tests.dashboards.exprs import REPO, RULES_PATH

SHIPPED_RULES = RULES_PATH
SHIPPED_TESTS = RULES_PATH.parent / "tests" / "stormotel-rules.test.yml"

CHART = REPO / "helm" / "stormotel"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    """``stormotel dashboards ARGS…`` through the CLI's entry point in this process (the same
    parsing, exit code and stderr); a fresh interpreter's start is
    test_check_passes_on_the_repository's and the make recipe's test."""
    return run_stormotel_here("dashboards", *args)


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
    out = run_stormotel("dashboards", "--check", cwd=REPO)
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


@pytest.mark.slow  # promtool, a Go binary, on the whole rule set (50/60 with a margin and a
# runbook is tests/dashboards/test_rules.py's, through build.main)
@pytest.mark.parametrize("flags", [
    ("--warning-percent", "90", "--critical-percent", "100"),
], ids=["90-100"])
def test_generated_rule_tests_pass_with_custom_settings(tmp_path: Path,
                                                        flags: tuple[str, ...]) -> None:
    """What a user deploys with their own thresholds: the generated promtool tests pass
    against the generated rules (they used to expect the defaults' 80/95 % texts). Only the
    groups whose outcome the thresholds can change run here (the pressure alert's groups and
    those reading every alert); the others are the shipped suite's, against identical rules,
    and pass in tests/dashboards/test_rules.py (tests/dashboards/promtool_suites.py)."""
    out = _run("--out", str(tmp_path), *flags)
    assert out.returncode == exitcodes.OK, out.stderr
    tests_dir = tmp_path / "rules" / "tests"
    suite = tests_dir / "stormotel-rules.test.yml"
    keep = promtool_suites.groups_to_run(suite, tmp_path / "rules" / "stormotel-rules.yml",
                                         SHIPPED_TESTS, SHIPPED_RULES)
    assert keep  # the thresholds move the pressure alert: its groups run
    runs = promtool_suites.write_runs(suite, tmp_path / "rules" / "stormotel-rules.yml",
                                      SHIPPED_TESTS, SHIPPED_RULES)
    assert len(runs) == len(keep)
    for one in runs:
        run = subprocess.run([servers.require_binary("promtool"), "test", "rules",
                              one.name], capture_output=True, text=True,
                             timeout=120, cwd=tests_dir)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    pct = flags[1]
    assert f"(more than {pct}%)" in (tests_dir / "stormotel-rules.test.yml").read_text()


def test_out_elsewhere_leaves_the_checkouts_chart_alone(tmp_path: Path) -> None:
    """`--out DIR` with custom thresholds used to rewrite helm/stormotel/files/ of the
    checkout as well; the chart is regenerated only with the checkout's own dashboards/."""
    before = {p: p.read_bytes() for p in CHART.rglob("*") if p.is_file()}
    out = _run("--out", str(tmp_path), "--critical-percent", "90")
    assert out.returncode == exitcodes.OK, out.stderr
    assert str(CHART) not in out.stderr
    assert {p: p.read_bytes() for p in CHART.rglob("*") if p.is_file()} == before


def test_make_dashboards_refreshes_the_charts_files_too() -> None:
    """README: `make dashboards` regenerates dashboards/ *and* copies them into
    helm/stormotel/files/. The recipe once passed `--out dashboards/`, which (rightly, for
    custom outputs) leaves the chart alone: the chart went stale while the README said it was
    refreshed. Run the recipe make would run, with --check, and count the files it covers."""
    import shlex
    import subprocess
    import sys

    from stormotel.dashboards.build import REPO_CHART

    recipe = subprocess.run(["make", "-n", "-s", "dashboards", f"PY={sys.executable}"],
                            cwd=REPO_CHART.parents[1], capture_output=True, text=True,
                            timeout=60)
    assert recipe.returncode == 0, recipe.stderr
    line = next(ln for ln in recipe.stdout.splitlines() if "stormotel dashboards" in ln)
    argv = shlex.split(line, comments=True)
    covered = subprocess.run([*argv, "--check"], cwd=REPO_CHART.parents[1],
                             capture_output=True, text=True, timeout=120)
    no_chart = subprocess.run([*argv, "--check", "--no-chart"], cwd=REPO_CHART.parents[1],
                              capture_output=True, text=True, timeout=120)
    count = [int(next(w for w in r.stderr.split("up to date: ")[1].split() if w.isdigit()))
             for r in (covered, no_chart)]
    assert covered.returncode == 0, covered.stderr
    assert count[0] > count[1], (
        f"`make dashboards` covers {count[0]} files, the same as --no-chart ({count[1]}): "
        "the chart's files/ are not refreshed")
