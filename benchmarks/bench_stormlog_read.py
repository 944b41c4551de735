"""Reading one Stormlog JSON export on its real event layout: dict path vs typed decoding.

    .venv/bin/python benchmarks/bench_stormlog_read.py [--ranks 64] [--samples 3600]

The file holds ``ranks x samples`` events cloned from the real stormlog 0.4.x export in
tests/analyzers/data/stormlog_events_rank1.json (its ``metadata`` object included, ~1.4 KB per
event), with timestamps, counters and rank varied per event. Both readers run in one process on the
same bytes, CPU time, median of 3: the previous path (``orjson.loads`` → dict records →
``load_records``) and the typed one (``stormlog_fast.decode_events`` → ``load_records``), then
the end-to-end ``load_paths`` on the file. Results are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormotel.analyzers.sources import load_paths, stormlog, stormlog_fast
from stormotel.analyzers.sources.base import LoadContext
from stormotel.analyzers.sources.jsonio import loads

REAL = Path(__file__).resolve().parents[1] / "tests/analyzers/data/stormlog_events_rank1.json"


def make_export(ranks: int, samples: int) -> bytes:
    real = json.loads(REAL.read_bytes())
    template = next(e for e in real if e.get("allocator_allocated_bytes") is not None)
    events = []
    t0 = int(template["timestamp_ns"])
    for r in range(ranks):
        for i in range(samples):
            e = dict(template)
            e["rank"], e["local_rank"] = r, r % 8
            e["timestamp_ns"] = t0 + i * 100_000_000
            e["allocator_allocated_bytes"] = 2**33 + i * 4096 + r
            e["allocator_reserved_bytes"] = 2**34 + (i // 100) * 2**20
            e["device_used_bytes"] = 2**34 + 2**29 + i * 8192
            events.append(e)
    return json.dumps(events).encode()


def cpu(fn) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(3):
        c0 = time.process_time()
        fn()
        times.append(time.process_time() - c0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--samples", type=int, default=3600)
    args = p.parse_args()
    data = make_export(args.ranks, args.samples)
    n = args.ranks * args.samples
    print(f"{args.ranks} x {args.samples} events, {len(data) / 1e6:.0f} MB "
          f"({len(data) / n:.0f} B/event)")

    def dicts() -> None:
        stormlog.load_records(stormlog.records_from_json(loads(data), "x"), "x", LoadContext())

    def typed() -> None:
        events = stormlog_fast.decode_events(data)
        assert events is not None
        stormlog.load_records(events, "x", LoadContext())

    old, new = cpu(dicts), cpu(typed)
    print(f"  dict records (previous)  {old:6.2f} s CPU  {n / old:12,.0f} events/CPU-s")
    print(f"  typed structs            {new:6.2f} s CPU  {n / new:12,.0f} events/CPU-s  "
          f"({old / new:.1f}x)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.json"
        path.write_bytes(data)
        c0, w0 = time.process_time(), time.perf_counter()
        tl = load_paths([str(path)])
        print(f"  load_paths end to end   {time.process_time() - c0:6.2f} s CPU  "
              f"{time.perf_counter() - w0:6.2f} s wall  {tl.total_samples():,} samples")


if __name__ == "__main__":
    main()
