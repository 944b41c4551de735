"""Late, staggered warm-ups timed by the trackers' first-rise edges, on REAL processes.

    STORMOTEL_TEST_LEAD_IN_S=0 .venv/bin/python benchmarks/bench_late_warmup_edges.py \
        [--intervals 15,60] [--duration 200] [--json out.json]

Helper bc2 found, on synthetic jobs, that a model load beginning 0-60 s after each tracker's
start, timed by the first-rise edge gauge (FirstRiseDetector's baseline is the first 20 samples,
so a load after 2 s fires an edge at the load's exact time), was named an incident at high
where the same load seen through samples alone was excused. This runs it with real
``stormotel track`` processes (the simulated device) scraped by real Prometheus servers, and
``stormotel analyze --prometheus`` (and the archives) over each job: every rank's model load (a
6 GiB allocated step that stays; planted as a ``first_spike`` owned by that rank with a lead
past the job's end, so no other rank follows it) begins 25-90 s after its tracker started,
staggered 5-40 s per rank; healthy jobs (nothing after it) and the same with a real
incident planted later (``first_spike``, 2 GiB, followers 1 s behind). Rows as
benchmarks/bench_first_cause_production.py prints them, plus every answer (rank, confidence,
incident kind). Results: docs/benchmarks.md, "Late staggered warm-ups timed by edges".
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import bench_first_cause_production as bench
from tests.production import harness

#: Seconds after each tracker's start at which its model load begins, per job size.
DELAYS_S: dict[int, tuple[float, ...]] = {
    2: (30.0, 55.0),
    4: (25.0, 40.0, 62.0, 88.0),
    8: (26.0, 31.0, 39.0, 47.0, 58.0, 66.0, 78.0, 90.0),
}
OFFSETS_S: dict[int, tuple[float, ...]] = {
    2: (0.0, 3.0), 4: (0.0, 2.5, 1.0, 4.5), 8: (0.0, 0.7, 1.9, 2.6, 3.3, 4.1, 4.8, 5.6)}
INCIDENT_AT_S = 130.0


def _loads(world: int) -> tuple[str, ...]:
    """Each rank's own load at its tracker's start + delay (the epoch is the first launch)."""
    return tuple(f"rank={r}:first_spike@t={off + d:.1f}s,delta=6GiB,lead=100000s"
                 for r, (off, d) in enumerate(zip(OFFSETS_S[world], DELAYS_S[world],
                                                  strict=True)))


def scenarios() -> list[harness.Scenario]:
    out = [harness.Scenario(f"late-warmups-{w}", OFFSETS_S[w], _loads(w)) for w in (2, 4, 8)]
    for w, leader in ((4, 2), (8, 5)):
        incident = f"rank={leader}:first_spike@t={INCIDENT_AT_S:g}s,delta=2GiB,lead=1s"
        out.append(harness.Scenario(f"late-warmups-{w}-incident", OFFSETS_S[w],
                                    (*_loads(w), incident), leader=leader))
    return out


def _answers(report: dict[str, Any]) -> dict[str, Any]:
    cross = report["cross_rank"]
    return {"suspects": [(s["rank"], s["confidence"]) for s in cross["first_cause_suspects"]],
            "incidents": [(i.get("kind"), i.get("leader"), i.get("confidence"))
                          for i in cross.get("incidents", [])],
            "notes": cross.get("notes", [])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--intervals", default="15,60")
    ap.add_argument("--duration", type=float, default=200.0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if harness.LEAD_IN_S != 0:
        sys.exit("set STORMOTEL_TEST_LEAD_IN_S=0: the loads are timed from each tracker's start")
    started = time.time()
    rows = bench.run([int(x) for x in args.intervals.split(",")], None, 1, args.duration,
                     chosen=scenarios(), detail=_answers)
    print(bench.table(rows))
    print(f"wall {time.time() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
