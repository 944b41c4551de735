"""``--html FILE``: one self-contained HTML page with per-rank memory charts and the findings.

For the researcher without Grafana: the file opens offline in any browser (no CDN, no fetch —
the page's Content-Security-Policy forbids it), and stays fast at 1,024 ranks × 36,000 samples
because the charts hold an envelope of all ranks plus the ranks the findings name, reduced to
min/max per pixel column (see :mod:`stormotel.analyzers.sinks.html.downsample`).

Plot library: uPlot 1.6.32 (MIT, 51 KB minified, vendored in ``html/assets`` with its licence).
It draws to canvas, renders ~100k points in tens of milliseconds, has bands (the envelope),
synced cursors across charts and draw hooks (edges, spans), and needs no build step. Heavier
libraries (Plotly ~3.5 MB, ECharts ~1 MB) would dominate the file size; hand-written canvas
would re-implement axes, time ticks, legends and cursor sync.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stormotel.analyzers.report import Report
from stormotel.analyzers.sinks.html.chart_data import ChartData, chart_data
from stormotel.analyzers.sinks.html.page import render_page
from stormotel.analyzers.timeline import Timeline

from stormotel.atomic import write_atomic

NAME = "html"


@dataclass(frozen=True)
class HtmlWritten:
    path: Path
    size_bytes: int
    charts: int
    named_ranks: list[int]


def render_html(timeline: Timeline, report: Report) -> tuple[str, ChartData]:
    """The page as text, and the chart data it embeds (for callers that report on it)."""
    charts = chart_data(timeline, report)
    return render_page(timeline, report, charts), charts


def describe(path: Path) -> str:
    """What a dry run would do."""
    return f"would write an HTML report to {path}"


def write_html_report(path: Path, timeline: Timeline, report: Report) -> HtmlWritten:
    """Write the page atomically (a half-written report is worse than none)."""
    text, charts = render_html(timeline, report)
    path = write_atomic(path, text)
    return HtmlWritten(path, path.stat().st_size, len(charts["charts"]),
                       list(charts["named_ranks"]))
