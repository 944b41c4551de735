"""HTML report benchmark: file size, time to write, and time to open and draw in headless Chromium.

    .venv/bin/python benchmarks/bench_html_report.py --ranks 1024 --samples 36000
    .venv/bin/python benchmarks/bench_html_report.py --ranks 8 --samples 36000

The job is the tests' production-shaped mix (tests/analyzers/test_html_report.py ``big_job``):
rank 3 rises first, steps and a collective on every rank, a one-sample 5 GiB spike on rank 7.
"Load" is Chromium's own clock from navigation start to the end of the chart script
(``performance.now()`` when the page sets ``data-rendered``), plus the wall time the test
harness saw from ``Page.navigate`` to that flag. Results go in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.sinks.html_report import write_html_report

from tests.analyzers.test_html_report import big_job
from tests.headless import open_page


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--samples", type=int, default=36000)
    args = ap.parse_args()
    tl = big_job(args.ranks, args.samples)
    report = analyze(tl)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.html"
        t0 = time.perf_counter()
        written = write_html_report(path, tl, report)
        write_s = time.perf_counter() - t0
        page = open_page(path)
    print(json.dumps({
        "ranks": args.ranks, "samples_per_rank": args.samples,
        "html_bytes": written.size_bytes, "write_s": round(write_s, 2),
        "named_ranks": written.named_ranks, "points_drawn": page.report.get("points"),
        "chart_script_ms": round(page.report.get("renderMs", 0)),
        "navigation_to_drawn_ms": round(page.report.get("doneAtMs", 0)),
        "harness_wall_s": round(page.wall_load_s, 2),
        "console_errors": len(page.console_errors) + len(page.exceptions),
        "network_requests": len(page.network_requests)}))


if __name__ == "__main__":
    main()
