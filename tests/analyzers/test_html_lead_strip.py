"""The HTML report at scrape resolution: every rank steps up at one scrape, so the memory charts
draw the leader under another rank's line. The "leader and followers" section draws a lead-time
strip (each rank's first rise and the interval it rose in) and lists the followers too; checked
on a real analysis of a 15 s scrape job in VictoriaMetrics, and in headless Chromium."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests import servers
from tests.headless import chromium_path, open_page
from tests.job import planted

LEADER_RED = (0xD6, 0x27, 0x28)


def _bars(html: str) -> dict[str, tuple[float, float]]:
    """(start, end) x of each row's interval bar in the strip, by its label."""
    svg = re.search(r'<svg class="lead-strip".*?</svg>', html, re.S)
    assert svg, "no lead-time strip in the page"
    labels = re.findall(r">((?:leader|follower|tied) rank \d+)</text>", svg[0])
    rects = re.findall(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', svg[0])
    assert len(labels) == len(rects)
    return {lab: (float(x), float(x) + float(w)) for lab, (x, w) in zip(labels, rects,
                                                                       strict=True)}


@pytest.fixture(scope="module")
def scrape_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, planted.Planted]:
    """A 4-rank job scraped every 15 s: rank 2 rose 20 s before the others."""
    work = tmp_path_factory.mktemp("strip")
    with servers.victoriametrics(work / "vm") as vm:
        job = "scrape-15s"
        p, data = planted.make(job_id=job, interval_ms=15000, lead_s=20, minutes=20)
        planted.write(vm.url + "/api/v1/write", job, data, alias_rank=None)
        planted.wait_visible(vm.url, job, len(data))
        html = work / "report.html"
        run = subprocess.run([sys.executable, "-m", "stormotel", "analyze", "--prometheus",
                              vm.url, "--job-id", job, "--start", str(p.start_ms / 1000),
                              "--end", str(p.end_ms / 1000 + 1), "--html", str(html)],
                             capture_output=True, text=True, timeout=180)
        assert run.returncode == 1, run.stderr
    return html, p


@pytest.mark.slow
def test_strip_sets_the_leader_apart_and_lists_every_follower(scrape_report) -> None:
    html_path, p = scrape_report
    html = html_path.read_text()
    bars = _bars(html)
    leader = bars.pop(f"leader rank {p.fault_rank}")
    assert sorted(bars) == [f"follower rank {r}" for r in (0, 1, 3)]
    # The leader's interval ends before any follower's begins: visibly first.
    assert all(leader[1] < start for start, _end in bars.values()), (leader, bars)
    table = html.split("First cause: leader and followers")[1].split("<h2>")[0]
    assert table.count('<tr class="follower">') == 3 and table.count('<tr class="leader">') == 1


@pytest.mark.slow  # headless Chromium
def test_strip_renders_in_chromium_with_the_leader_drawn(scrape_report) -> None:
    if chromium_path() is None:
        pytest.skip("chromium not installed (scripts/bootstrap.sh servers)")
    from PIL import Image

    html_path, _p = scrape_report
    result = open_page(html_path, width=1200)
    assert result.rendered and result.console_errors == [] and result.exceptions == []
    png = np.asarray(Image.open(io.BytesIO(result.screenshot_png)).convert("RGB"),
                     dtype=np.int16)
    below_charts = int(max(y + h for _x, y, _w, h in result.canvases)) + 20
    region = png[below_charts:below_charts + 300]
    red = (np.abs(region - np.array(LEADER_RED)).max(axis=2) < 30).sum()
    orange = (np.abs(region - np.array((0xFF, 0x7F, 0x0E))).max(axis=2) < 30).sum()
    assert red > 20 and orange > 60, (red, orange)  # the leader's tick and the followers'
