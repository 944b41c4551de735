"""The HTML report: downsampling keeps spikes, the CLI writes it, real Chromium draws it offline.

The browser tests open the file from a file:// URL in headless Chromium over the DevTools pipe
(tests/headless.py) and check what a person would see: no console errors or exceptions, no
network request of any kind, the charts drawn, and a screenshot whose chart area is not blank.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.sinks.html.chart_data import chart_data, named_ranks
from stormotel.analyzers.sinks.html.downsample import Buckets, bucket_stats, envelope
from stormotel.analyzers.sinks.html.page import render_page
from stormotel.analyzers.sinks.html_report import write_html_report
from stormotel.analyzers.timeline import Markers, RankIdentity, RankSeries, Timeline

from tests.analyzers.otlp_fixtures import write_archive
from tests.analyzers.synth import seed_example
from tests.cli import run_stormotel_here
from tests.headless import chromium_path, open_page

MIB = float(1 << 20)
GIB = 1024 * MIB
T0 = 1_700_000_000_000_000_000
INTERVAL = 100_000_000

needs_chromium = pytest.mark.skipif(chromium_path() is None,
                                    reason="chromium not installed (scripts/bootstrap.sh servers)")


def big_job(ranks: int, samples: int, seed: int = 1) -> Timeline:
    """Production-shaped: rank 3 rises first, every rank has steps and a collective spike, one
    one-sample spike on rank 7 that downsampling must not lose."""
    rng = np.random.default_rng(seed)
    t = T0 + np.arange(samples, dtype=np.int64) * INTERVAL
    rise = samples // 3
    out: dict[int, RankSeries] = {}
    steps = np.arange(0, samples, max(1, samples // 40))
    for r in range(ranks):
        reserved = np.full(samples, 8 * GIB)
        reserved[rise + (0 if r == 3 else 2):] += 2 * GIB
        alloc = 0.8 * reserved + rng.normal(0, 4 * MIB, samples)
        used = reserved + 600 * MIB + rng.normal(0, 2 * MIB, samples)
        if r == 7 % ranks:
            used[samples // 2] += 5 * GIB  # one sample: must survive as a visible spike
        starts = t[steps]
        ends = np.append(starts[1:], t[-1])
        names = np.array([f"step {i}" for i in range(len(steps))] + ["nccl:all_reduce"], object)
        kinds = np.array(["step"] * len(steps) + ["collective"], object)
        m = Markers(np.append(starts, t[samples // 2]), np.append(ends, t[samples // 2 + 3]),
                    names, kinds)
        ident = RankIdentity(rank=r, job_id="html", world_size=ranks, host=f"node-{r // 8}",
                             gpu=str(r % 8))
        out[r] = RankSeries(ident, t, {"allocated": alloc, "reserved": reserved,
                                       "device_used": used,
                                       "device_total": np.full(samples, 80 * GIB)}, m)
    return Timeline(ranks=out, job_id="html", world_size=ranks)


def test_bucket_stats_keep_a_one_sample_spike():
    t = T0 + np.arange(36_000, dtype=np.int64) * INTERVAL
    v = np.full(36_000, 1 * GIB)
    v[12_345] = 9 * GIB
    v[20_000] = np.nan
    stats = bucket_stats(t, v, Buckets(int(t[0]), int(t[-1]), 1200))
    assert np.nanmax(stats.hi) == 9 * GIB  # a mean would have flattened it to ~1.3 GiB
    assert np.nanmin(stats.lo) == 1 * GIB
    assert np.isfinite(stats.mean).all()


def test_envelope_is_min_median_max_across_ranks():
    tl = big_job(5, 100)
    series = [tl.ranks[r] for r in range(5)]
    for r, s in enumerate(series):  # rank r holds r GiB reserved everywhere
        s.values["reserved"][:] = r * GIB
    env = envelope(series, "reserved", Buckets(T0, int(series[0].t_ns[-1]), 10))
    assert env.ranks_reporting == 5
    assert set(env.lo.tolist()) == {0.0} and set(env.hi.tolist()) == {4 * GIB}
    assert set(env.median.tolist()) == {2 * GIB}


def test_chart_data_names_the_leader_first_and_stays_small():
    tl = big_job(64, 3000)
    report = analyze(tl)
    assert report.cross_rank.first_cause_suspects[0].rank == 3
    data = chart_data(tl, report)
    assert data["named_ranks"][0] == 3 and len(data["named_ranks"]) <= 8
    assert [c["field"] for c in data["charts"]] == ["allocated", "reserved", "device_used", "gap"]
    assert len(data["x"]) == 2 * 1200
    kinds = {e["kind"] for e in data["events"]}
    assert {"onset", "leader"} <= kinds
    assert any(s["kind"] == "step" for s in data["spans"])
    assert any(s["kind"] == "collective" for s in data["spans"])
    used = next(c for c in data["charts"] if c["field"] == "device_used")
    assert max(v for v in used["hi"] if v is not None) > 8 * 1024 + 600 + 4 * 1024  # the spike


def test_small_job_draws_every_rank():
    tl = big_job(4, 200)
    assert sorted(named_ranks(analyze(tl), tl)) == [0, 1, 2, 3]


def test_cli_writes_html_next_to_the_text_summary(tmp_path):
    archive = write_archive(tmp_path / "job-otlp", seed_example())
    out = tmp_path / "sub" / "report.html"
    p = run_stormotel_here("analyze", str(archive), "--html", str(out))  # the page, not a start
    assert "Traceback" not in p.stderr
    assert p.returncode == 1, p.stderr
    assert "Top first-cause suspect: rank 2" in p.stdout
    assert f"wrote {out}" in p.stderr
    text = out.read_text()
    assert "Rank 2 went first" in text
    # Offline by construction: no external URL in any src/href, and a CSP that forbids fetches.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "default-src 'none'" in text


def test_cli_html_unwritable_is_a_sink_failure(tmp_path):
    archive = write_archive(tmp_path / "job-otlp", seed_example())
    blocker = tmp_path / "file"
    blocker.write_text("x")
    p = run_stormotel_here("analyze", str(archive), "--html", str(blocker / "report.html"))
    assert "Traceback" not in p.stderr
    assert p.returncode == 4 and "cannot write output" in p.stderr


def colored_fraction(png: bytes, box: list[float]) -> float:
    """Share of saturated pixels inside one plot: axes, grid and text are gray, data is not."""
    from PIL import Image

    x, y, w, h = (int(v) for v in box)
    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)
    crop = rgb[y:y + h, x:x + w]
    assert crop.size, f"plot {box} lies outside the screenshot"
    return float(((crop.max(axis=2) - crop.min(axis=2)) > 40).mean())


def _check_page(path: Path) -> dict[str, object]:
    result = open_page(path)
    assert result.rendered, "the charts never finished drawing"
    assert result.console_errors == [] and result.exceptions == []
    assert result.network_requests == []
    assert result.report["charts"] == 4
    plots = [c for c in result.canvases if c[2] > 300 and c[3] > 100]
    assert len(plots) == 4
    for box in plots:
        share = colored_fraction(result.screenshot_png, box)
        assert share > 0.003, f"plot at {box} looks empty ({share:.4f} coloured pixels)"
    return {"report": result.report, "wall_load_s": result.wall_load_s}


@pytest.mark.slow  # headless Chromium
def test_the_screenshot_check_can_fail_on_an_empty_plot(tmp_path: Path) -> None:
    """Charts whose series hold no values draw axes and grid only: the check must call that
    empty (so a page whose data never reached the plots fails the tests above)."""
    if chromium_path() is None:
        pytest.skip("chromium not installed")
    tl = big_job(2, 100)
    report = analyze(tl)
    data = chart_data(tl, report)
    blank = [None] * len(data["x"])
    for c in data["charts"]:
        c["lo"] = c["median"] = c["hi"] = blank
        for line in c["lines"]:
            line["y"] = blank
    data["events"], data["regions"], data["spans"] = [], [], []
    path = tmp_path / "blank.html"
    path.write_text(render_page(tl, report, data))
    result = open_page(path)
    assert result.rendered and result.console_errors == []
    plots = [c for c in result.canvases if c[2] > 300 and c[3] > 100]
    assert len(plots) == 4
    assert all(colored_fraction(result.screenshot_png, b) < 0.002 for b in plots)


@needs_chromium
@pytest.mark.slow
def test_report_opens_offline_in_chromium_8_ranks(tmp_path):
    tl = big_job(8, 3600)
    path = tmp_path / "r8.html"
    write_html_report(path, tl, analyze(tl))
    _check_page(path)


@needs_chromium
@pytest.mark.slow
def test_report_opens_offline_in_chromium_1024_ranks(tmp_path):
    tl = big_job(1024, 3600)
    path = tmp_path / "r1024.html"
    written = write_html_report(path, tl, analyze(tl))
    assert written.size_bytes < 3_000_000
    got = _check_page(path)
    assert got["report"]["points"] < 200_000  # an envelope, not 1,024 lines
