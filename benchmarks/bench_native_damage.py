"""Damaged VictoriaMetrics native answers: how many decode without error to other numbers.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_native_damage.py --ranks 32 --minutes 120 \
        --per-class 40 --seeds 1 2 3

A real VictoriaMetrics (as the tests start it) gets a production-shaped job
(:func:`tests.fuzz.native_damage.job_series`: memory gauges in bytes, step and OOM counters,
15/30 s scrapes with jitter, staggered starts, a quarter of the targets gone early with a
staleness marker, one late rank), remote-written and flushed. The native answers the reader
would get (one per metric name and batch of 16 ranks) are damaged ``--per-class`` times per
field class (:data:`tests.fuzz.native_damage.CLASSES`) and kind — one flipped bit, a byte
set to another value, a cut at an offset of that field — per seed, and each outcome
counted: refused (the read goes through the JSON export, with a note), same (decoded to the
undamaged samples), silent (decoded to other samples or labels), crash (any other
exception). Prints the Markdown table for docs/benchmarks.md, the silent share for damage at
a uniformly drawn byte, and a JSON line of the totals.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import servers
from tests.fuzz import native_damage


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--minutes", type=int, default=120)
    ap.add_argument("--per-class", type=int, default=40)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    args = ap.parse_args()
    end = int(time.time() * 1000) - 60_000
    with tempfile.TemporaryDirectory() as tmp, \
            servers.victoriametrics(Path(tmp) / "vm") as vm:
        names = native_damage.load_job(vm.url, "bench-damage", args.ranks, args.minutes, end, 1)
        answers = native_damage.fetch_answers(vm.url, "bench-damage", names, args.ranks,
                                              end - (args.minutes + 1) * 60_000, end + 60_000)
    total = native_damage.Tally()
    t0 = time.perf_counter()
    for seed in args.seeds:
        total.counts.update(native_damage.campaign(answers, seed, args.per_class).counts)
    wall = time.perf_counter() - t0
    print(f"{len(answers)} answers, {sum(len(a.body) for a in answers):,} bytes, "
          f"{sum(len(a.clean) for a in answers)} series; seeds {args.seeds}, "
          f"{args.per_class} per class and kind\n")
    print(total.table())
    n = total.all()
    # damage falling on a uniformly drawn byte (as a flipped bit in transit would): each
    # class's silent rate weighted by its share of the answers' bytes
    sizes = Counter(c for a in answers for c in a.classes)
    weighted = {kind: sum(sizes[c] / sum(sizes.values()) * total.total("silent", kind, c)
                          / max(1, total.all(kind, c)) for c in sizes)
                for kind in native_damage.KINDS}
    print("\nsilent share, damage at a uniformly drawn byte: "
          + ", ".join(f"{k} {w:.1%}" for k, w in weighted.items()))
    print(json.dumps({"damaged": n, **{w: total.total(w) for w in native_damage.OUTCOMES},
                      "silent_share": round(total.total("silent") / n, 4),
                      **{f"silent_{k}": total.total("silent", k) for k in weighted},
                      **{f"byte_weighted_silent_{k}": round(w, 4) for k, w in weighted.items()},
                      "wall_s": round(wall, 1)}))


if __name__ == "__main__":
    main()
