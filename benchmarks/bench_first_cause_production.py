"""First-cause accuracy on production-shaped jobs, per scrape interval and per path.

    .venv/bin/python benchmarks/bench_first_cause_production.py [--intervals 1,15,30,60]
        [--scenarios lead-400ms,lead-1s,...] [--repeats 1] [--json out.json]

Every scenario of tests/production/harness.py (plus an 8-rank job, the issue's headline case)
runs once per repeat: real ``stormotel track`` processes per rank started seconds apart, faults
planted at one absolute time, each rank with an archive and a Prometheus endpoint. One real
Prometheus per scrape interval scrapes every job at once. Each job is then analysed from its
archive and from each Prometheus with ``stormotel analyze`` and judged against the planted truth
(:func:`tests.production.harness.judge`): **wrong** = a wrong rank named at high/medium
confidence (the failure that matters most), **named** = the planted leader named at
high/medium, **tie/undecided** = neither (a stated tie, or nothing named). A job whose trackers
did not sample on the scenario's schedule while its truth played out
(:func:`tests.production.harness.off_schedule`, the suite's "environment too loaded" check: a
starved host changes what the evidence can show, so the planted truth no longer holds) is
counted apart, with its ranks, and kept out of the judged columns. Results go to
docs/benchmarks.md ("First cause on production-shaped jobs").
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import servers
from tests.production import harness

HEADLINE = harness.Scenario("8-ranks-lead-1s", (0.0, 0.7, 1.9, 2.6, 3.3, 4.1, 4.8, 5.6),
                            ("rank=5:first_spike@t=10s,delta=1GiB,lead=1s",), leader=5)


def run(intervals: list[int], names: list[str] | None, repeats: int, duration_s: float, *,
        chosen: list[harness.Scenario] | None = None,
        detail: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        ) -> list[dict[str, Any]]:
    """``chosen``: these scenarios instead of the harness's; ``detail``: more of each report
    into its row (benchmarks/bench_late_warmup_edges.py)."""
    scenarios = [s for s in chosen or (*harness.SCENARIOS, HEADLINE)
                 if not names or s.name in names]
    # Long enough after the faults for a few scrapes at the coarsest interval.
    scenarios = [replace(s, duration_s=duration_s) for s in scenarios]
    rows: list[dict[str, Any]] = []
    for rep in range(repeats):
        work = Path(tempfile.mkdtemp(prefix="bench-fc-"))
        ports = {s.name: [servers.free_port() for _ in s.offsets_s] for s in scenarios}
        targets = [f"127.0.0.1:{p}" for ps in ports.values() for p in ps]
        with _prometheis(work, targets, intervals) as proms:
            jobs = harness.start_jobs(scenarios, work, tag=f"-r{rep}", ports=ports)
            harness.wait_jobs(jobs, timeout_s=600)
            late = set(harness.late_ranks(jobs))
            tasks = []
            for job in jobs:
                if any(x.startswith(job.job_id + " ") for x in late):
                    print(f"skipped {job.job_id}: ranks started after their faults", flush=True)
                    continue
                tasks.append((job, "archive", None))
                tasks += [(job, f"prometheus {i}s", url) for i, url in proms.items()]

            def one(task: tuple[harness.RunningJob, str, str | None], work: Path = work,
                    rep: int = rep) -> dict[str, Any]:
                job, path, url = task
                out = work / f"{job.job_id}-{path.replace(' ', '-')}.json"
                if url is None:
                    code, report = harness.analyze_archive(job, out)
                else:
                    code, report = harness.analyze_prometheus(job, [url], out)
                v = harness.judge(job.scenario, code, report, must_name=True, check_gaps=False)
                top = report["cross_rank"]["first_cause_suspects"]
                return {"scenario": job.scenario.name, "path": path, "repeat": rep,
                        "wrong": v.wrong_sure, "named": v.named_sure,
                        "top": [(s["rank"], s["confidence"]) for s in top[:4]],
                        "off_schedule": harness.off_schedule(job), "report": str(out),
                        **(detail(report) if detail else {})}

            with ThreadPoolExecutor(max_workers=3) as pool:
                for row in pool.map(one, tasks):
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    return rows


class _prometheis:
    """One Prometheus per scrape interval, all scraping every target."""

    def __init__(self, work: Path, targets: list[str], intervals: list[int]) -> None:
        self.ctx = [(i, servers.prometheus(work / f"prom-{i}s", scrape_targets=targets,
                                           scrape_interval=f"{i}s")) for i in intervals]

    def __enter__(self) -> dict[int, str]:
        return {i: c.__enter__().url for i, c in self.ctx}

    def __exit__(self, *exc: object) -> None:
        for _, c in self.ctx:
            c.__exit__(None, None, None)


def table(rows: list[dict[str, Any]]) -> str:
    paths = sorted({r["path"] for r in rows}, key=lambda p: (p != "archive", len(p), p))
    lines = ["| path | analyses | wrong rank at high/medium | leader named (where planted) "
             "| tie / undecided | off schedule (not judged) |", "|---|---|---|---|---|---|"]
    for p in paths:
        every = [r for r in rows if r["path"] == p]
        sel = [r for r in every if not r.get("off_schedule")]
        planted = [r for r in sel if r["scenario"] not in ("healthy",)
                   and r["scenario"] not in ("leak", "fragmentation")]
        named = sum(r["named"] for r in planted)
        wrong = sum(r["wrong"] for r in sel)
        off = [r for r in every if r.get("off_schedule")]
        off_wrong = sum(r["wrong"] for r in off)
        lines.append(f"| {p} | {len(sel)} | {wrong} | {named}/{len(planted)} | "
                     f"{len(planted) - named - sum(r['wrong'] for r in planted)} | "
                     f"{len(off)}{f' ({off_wrong} wrong)' if off_wrong else ''} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--intervals", default="1,15,30,60")
    ap.add_argument("--scenarios", default="")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--duration", type=float, default=90.0,
                    help="seconds from the epoch to each job's end (default 90)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    started = time.time()
    rows = run([int(x) for x in args.intervals.split(",")],
               [x for x in args.scenarios.split(",") if x] or None, args.repeats, args.duration)
    print(table(rows))
    print(f"wall {time.time() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
