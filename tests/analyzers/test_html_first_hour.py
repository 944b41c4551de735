"""The HTML report as a person reads a Prometheus-scraped job: step lines at the scrape
resolution (stated), silences drawn as labelled gaps and never bridged, severity and confidence
in words that agree; the file is readable by the team (umask), and a write error names the path
the user gave."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.report import GapFinding
from stormotel.analyzers.sinks.html.chart_data import chart_data, severity_words
from stormotel.analyzers.sinks.html.page import render_page
from stormotel.analyzers.sinks.html_report import write_html_report
from stormotel.analyzers.timeline import Markers, RankIdentity, RankSeries, Timeline

from tests.analyzers.otlp_fixtures import write_archive
from tests.analyzers.synth import healthy, plant_gap_drift, seed_example

GIB = float(1 << 30)
T0 = 1_700_000_000_000_000_000
SCRAPE = 15_000_000_000  # 15 s scrapes


def scraped_job() -> Timeline:
    """Two ranks scraped every 15 s for 10 minutes; rank 1 is silent from minute 4 to 6 (a
    restart), rank 0 steps up 2 GiB at minute 8, one scrape before rank 1."""
    t = T0 + np.arange(41, dtype=np.int64) * SCRAPE
    out = {}
    for r in (0, 1):
        reserved = np.full(t.shape, 8 * GIB)
        reserved[32 + r:] += 2 * GIB
        keep = np.ones(t.shape, bool)
        if r == 1:
            keep[16:24] = False
        ident = RankIdentity(rank=r, job_id="scraped", world_size=2, host="node-a", gpu=str(r))
        out[r] = RankSeries(ident, t[keep], {"reserved": reserved[keep],
                                             "allocated": 0.9 * reserved[keep],
                                             "device_used": reserved[keep] + GIB},
                            Markers.empty())
    return Timeline(ranks=out, job_id="scraped", world_size=2)


def test_lines_hold_between_scrapes_and_break_at_a_silence() -> None:
    tl = scraped_job()
    report = analyze(tl)
    data = chart_data(tl, report)
    assert data["resolution_seconds"] == 15.0
    x = np.array(data["x"])
    reserved = next(c for c in data["charts"] if c["field"] == "reserved")
    line1 = np.array([np.nan if v is None else v for v in reserved["lines"][1]["y"]])
    silent = (x > (T0 + 15.5 * SCRAPE) / 1e9) & (x < (T0 + 23.5 * SCRAPE) / 1e9)
    assert np.isnan(line1[silent]).all()  # not bridged across the restart
    scraped = (x > (T0 + 1 * SCRAPE) / 1e9) & (x < (T0 + 14 * SCRAPE) / 1e9)
    assert not np.isnan(line1[scraped]).any()  # held between scrapes: no dots, no ramps
    gaps = [g for g in data["regions"] if g["kind"] == "no_data"]
    assert [g["rank"] for g in gaps] == [1]
    assert gaps[0]["label"].startswith("rank 1: no samples for ")
    # The region is the silence itself: from just after the last scrape to the next one.
    assert (T0 + 15 * SCRAPE) / 1e9 <= gaps[0]["t0"] <= (T0 + 16.5 * SCRAPE) / 1e9
    assert (T0 + 23 * SCRAPE) / 1e9 <= gaps[0]["t1"] <= (T0 + 24.5 * SCRAPE) / 1e9
    page = render_page(tl, report, data)
    assert "Lines are steps" in page and "resolution is 15.0 s" in page
    assert "no data: no sample for longer than 3 sampling intervals" in page


def test_severity_and_confidence_agree_in_words() -> None:
    assert severity_words("critical", 0.48) == (
        "critical if real — low confidence (0.48): check before acting")
    assert severity_words("critical", 0.93) == "critical, high confidence (0.93)"
    tl = scraped_job()
    report = analyze(tl)
    report.gap_findings.append(GapFinding(
        rank=1, classification="persistent_drift", severity="critical", confidence=0.48,
        evidence={}, remediation=[], start_ns=T0, end_ns=T0 + 10 * SCRAPE))
    data = chart_data(tl, report)
    page = render_page(tl, report, data)
    assert "critical if real — low confidence (0.48)" in page
    drift = next(r for r in data["regions"] if r["kind"] == "gap_critical")
    assert "low confidence" in drift["label"]


def _write_with_umask(umask: int, path: Path) -> subprocess.CompletedProcess[str]:
    code = (f"import os, sys; os.umask({umask}); from tests.analyzers.test_html_first_hour import "
            "scraped_job; from stormotel.analyzers.analyze import analyze; "
            "from stormotel.analyzers.sinks.html_report import write_html_report; "
            "tl = scraped_job(); write_html_report(__import__('pathlib').Path(sys.argv[1]), tl, "
            "analyze(tl))")
    root = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, "-c", code, str(path)], cwd=root, capture_output=True,
                          text=True, timeout=120)


def test_report_files_follow_the_umask(tmp_path: Path) -> None:
    for umask, mode in ((0o022, 0o644), (0o027, 0o640)):
        path = tmp_path / f"report-{umask:o}.html"
        out = _write_with_umask(umask, path)
        assert out.returncode == 0, out.stderr
        assert (path.stat().st_mode & 0o777) == mode, oct(path.stat().st_mode)


def test_a_write_error_names_the_users_path(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    target = blocker / "report.html"
    tl = scraped_job()
    try:
        write_html_report(target, tl, analyze(tl))
    except OSError as e:
        assert str(target) in str(e) and ".tmp" not in str(e), str(e)
    else:
        raise AssertionError("writing under a file must fail")
    archive = write_archive(tmp_path / "job", seed_example())
    out = subprocess.run([sys.executable, "-m", "stormotel", "analyze", str(archive), "--html",
                          str(target)], capture_output=True, text=True, timeout=120,
                         env={**os.environ})
    assert out.returncode == 4, out.stderr  # the analysis ran; writing the page failed
    assert str(target) in out.stderr and ".tmp" not in out.stderr, out.stderr


def _verdict_line(page: str) -> str:
    start = page.index('<p class="verdict">') + len('<p class="verdict">')
    return page[start:page.index("</p>", start)]


def test_the_pages_first_line_is_the_text_summarys_lead(tmp_path: Path) -> None:
    """The README's first example, a one-rank leak: ``stormotel analyze DIR`` leads with
    ``Lead: leak: rank 0 ...``, and the HTML page of the same run led with "First cause
    undecided: ... needs at least two ranks" — true of the first-cause rule, the opposite of
    the answer. The page now leads with the same sentence, then the first-cause one."""
    data = healthy(1, 300, seed=2)
    plant_gap_drift(data[0], 1024 * 2**20)
    archive = write_archive(tmp_path / "leak", data, job_id="leak-1", world_size=1)
    page = tmp_path / "report.html"
    out = subprocess.run([sys.executable, "-m", "stormotel", "analyze", str(archive), "--html",
                          str(page)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr  # findings
    lead = next(line for line in out.stdout.splitlines() if line.startswith("Lead: "))
    assert lead.startswith("Lead: leak: rank 0 grows"), out.stdout
    verdict = _verdict_line(page.read_text(encoding="utf-8"))
    assert verdict.startswith("Leak: rank 0 grows"), verdict
    assert lead.removeprefix("Lead: leak")[:40] in verdict, (lead, verdict)
    assert "First cause undecided" in verdict  # still said, after the answer


def test_a_first_cause_answer_is_said_once() -> None:
    """When the lead is the first cause itself, the page's line is the first-cause sentence
    alone (not the same answer twice)."""
    tl = scraped_job()
    report = analyze(tl)
    report.gap_findings.clear()
    verdict = _verdict_line(render_page(tl, report, chart_data(tl, report)))
    assert verdict == "Rank 0 went first (high confidence), 15.0 s before the others", verdict
