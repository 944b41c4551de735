"""CPU of ``analyze(timeline)`` alone at cluster scale, and a digest of its answer.

    .venv/bin/python benchmarks/bench_tsdb_scale.py --ranks 10000 --hours 1 \
        --save-timeline benchmarks/out/tl-10000x1h.pkl      # the input, read from a real VM
    .venv/bin/python benchmarks/bench_analyze_scale.py benchmarks/out/tl-10000x1h.pkl [--repeats 3]
    .venv/bin/python benchmarks/bench_analyze_scale.py --ranks 1024 --samples 3600
    .venv/bin/python benchmarks/bench_analyze_scale.py PICKLE --profile 25   # cProfile, top 25

The reading side (sources, the Timeline builder) is measured by ``bench_tsdb_scale.py``; this
script times what runs after the Timeline is built, so a change to the analysis can be judged
on its own: the input is a pickled Timeline (one read from a real VictoriaMetrics by
``bench_tsdb_scale.py --save-timeline``; a pickle you made yourself: loading one runs code) or the
planted-fault Timeline of ``bench_analyzer.py``. It prints the
CPU time (``time.process_time``, the fair number on a shared machine) and wall time of each
repeat, the best, the CPU per phase of the best repeat (first cause, gap analysis, the rest),
``report.to_json()``'s own CPU, and the sha256 of ``report.to_json()``'s text with the timing
field (``extra.analysis_seconds``) blanked: a speed-up must leave that digest unchanged.
Results go to docs/benchmarks.md ("analyze() alone at 10,000 ranks").
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import pickle
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormotel.analyzers import analyze as analyze_mod
from stormotel.analyzers.report import Report
from stormotel.analyzers.timeline import Timeline

TIMING = re.compile(r'"analysis_seconds": [-+.0-9eE]+')
#: The facade's calls timed as phases (names as imported into ``analyze.py``).
PHASES = {"analyze_first_cause": "first cause", "gap_analysis": "gap",
          "analyze_collectives": "collectives", "oom_forensics": "oom forensics",
          "attribute": "attribution"}


def load(args: argparse.Namespace) -> Timeline:
    if args.pickle:
        with open(args.pickle, "rb") as f:
            tl = pickle.load(f)
        if not isinstance(tl, Timeline):
            raise SystemExit(f"{args.pickle}: not a pickled Timeline")
        return tl
    from benchmarks.bench_analyzer import make_timeline

    return make_timeline(args.ranks, args.samples)


def digest(report: Report) -> str:
    """sha256 of the JSON report's own text, the one field that is a timing blanked."""
    text, n = TIMING.subn('"analysis_seconds": null', report.to_json())
    if n != 1:
        raise SystemExit("the report has no analysis_seconds field to blank")
    return hashlib.sha256(text.encode()).hexdigest()


@contextmanager
def phase_timers(cpu: dict[str, float]) -> Iterator[None]:
    """Wrap the facade's algorithm calls so each adds its CPU time to ``cpu`` (a nested call
    of the same phase, review_skew_hint's re-run of first cause, counts once)."""
    saved = {name: getattr(analyze_mod, name) for name in PHASES}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*a: Any, **k: Any) -> Any:
            t0 = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                cpu[PHASES[name]] += time.process_time() - t0
        return run

    for name, fn in saved.items():
        setattr(analyze_mod, name, timed(name, fn))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(analyze_mod, name, fn)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pickle", nargs="?", help="a pickled Timeline (else a planted-fault one)")
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--samples", type=int, default=3600)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="one more run under cProfile; print the top N by own time")
    args = ap.parse_args()
    best: tuple[float, float, dict[str, float]] | None = None
    report = None
    for i in range(args.repeats):
        # A fresh Timeline each time: what one run computes and caches on the series (median
        # interval, reported fields) must not make the next run look faster.
        tl = load(args)
        if i == 0:
            print(f"input: {len(tl.ranks)} ranks, {tl.total_samples():,} samples", flush=True)
        gc.collect()
        cpu: dict[str, float] = defaultdict(float)
        with phase_timers(cpu):
            w0, c0 = time.perf_counter(), time.process_time()
            report = analyze_mod.analyze(tl)
            c, w = time.process_time() - c0, time.perf_counter() - w0
        print(f"run {i + 1}: {c:.3f} s CPU, {w:.3f} s wall", flush=True)
        if best is None or c < best[0]:
            best = (c, w, dict(cpu))
    assert best is not None and report is not None
    c, w, cpu = best
    rest = c - sum(cpu.values())
    print(f"best: {c:.3f} s CPU, {w:.3f} s wall")
    print("phases (CPU s): " + ", ".join(f"{k} {v:.3f}" for k, v in cpu.items())
          + f", the rest {rest:.3f}")
    c0 = time.process_time()
    report.to_json()
    print(f"to_json: {time.process_time() - c0:.3f} s CPU")
    print(f"sha256: {digest(report)}")
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.runcall(analyze_mod.analyze, load(args))
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()
