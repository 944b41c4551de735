"""What binding the companion to its JSON costs: the digest check per rank-hour, and at 1,024 ranks.

    .venv/bin/python benchmarks/bench_companion_digest.py --ranks 8 --hours 1 --hz 10

Ranks are written exactly as ``bench_archive_scale.py`` writes them (the tracker's ``Telemetry``
and :class:`~stormotel.archive_writer.CompactArchiveWriter`, a companion frame every 3,000
samples), into a temporary folder. For every rank file, each measured ``--repeat`` times (the
best kept, page cache warm, one process):

* ``plan, checked``: the companion reader's plan (``otlp_cols._plan``: inflate and parse every
  companion frame, check rank, file number, JSON range and tail) **with** the digest: read every
  compressed JSON byte a frame covers and hash it with the frame;
* ``plan, unchecked``: the same with the digest comparison skipped (the reader's cost before);
* ``digest alone``: read the covered JSON bytes and hash them (xxh3-128, and BLAKE2b-128 — the
  fallback without ``xxhash`` — for comparison);
* ``file, companion`` / ``file, JSON alone``: the whole file read into a Timeline through
  ``load_paths`` with the companion and without it.

The 1,024-rank figures are these per-rank-hour times x 1,024 (the check is per file and linear
in its bytes; the analyzer reads files in parallel workers, so wall time divides by them), not
a run of the 3.7 GB archive: writing that takes ~10 minutes of CPU here. Results in
docs/benchmarks.md ("The companion's digest check").
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _measure(path: Path, alone: Path, repeat: int, add: Callable[[str, float], None]) -> int:
    """Time one rank file each way (see the module docstring); its companion's frames."""
    import functools

    import xxhash
    from stormotel.analyzers.sources import load_paths, otlp_cols

    from stormotel import archive_format

    cols = archive_format.cols_path_for(path)
    plan = functools.partial(otlp_cols._plan, path, cols, 2**31, None)
    got = plan()
    assert got is not None and got[1] == b"", "every sample in a checked frame"
    add("plan, checked", _best(plan, repeat))
    real_digest = otlp_cols.frame_digest
    otlp_cols.frame_digest = lambda _b, f: f.header.digest  # type: ignore[assignment]
    try:
        add("plan, unchecked", _best(plan, repeat))
    finally:
        otlp_cols.frame_digest = real_digest
    add("digest alone, xxh3-128", _best(
        lambda: xxhash.xxh3_128(path.read_bytes()).digest(), repeat))
    add("digest alone, blake2b-128", _best(
        lambda: hashlib.blake2b(path.read_bytes(), digest_size=16).digest(), repeat))
    add("file, companion", _best(functools.partial(load_paths, [str(path)]), repeat))
    alone.mkdir(exist_ok=True)
    link = alone / path.name
    if not link.exists():
        os.link(path, link)
    add("file, JSON alone", _best(functools.partial(load_paths, [str(link)]), repeat))
    return len(got[0])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--hours", type=float, default=1.0)
    p.add_argument("--hz", type=float, default=10.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()

    from benchmarks.bench_archive_scale import write_rank
    from stormotel import archive_format, schema

    tmp = Path(tempfile.mkdtemp(prefix="stormotel-digest-bench-"))
    try:
        with ProcessPoolExecutor(args.workers) as pool:
            list(pool.map(write_rank, [(r, args.ranks, args.hours, args.hz, str(tmp))
                                       for r in range(args.ranks)]))
        files = sorted(tmp.rglob(f"*{schema.ARCHIVE_METRICS_SUFFIX}.zst"))
        rows: dict[str, float] = {}
        json_bytes = cols_bytes = frames = 0

        def add(name: str, seconds: float) -> None:
            rows[name] = rows.get(name, 0.0) + seconds

        for path in files:
            json_bytes += path.stat().st_size
            cols_bytes += archive_format.cols_path_for(path).stat().st_size
            frames += _measure(path, tmp / "json-alone", args.repeat, add)
        per = args.ranks * args.hours
        print(f"{args.ranks} ranks x {args.hours:g} h at {args.hz:g} Hz: {len(files)} files, "
              f"JSON {json_bytes / 2**20:.1f} MiB, companions {cols_bytes / 2**20:.1f} MiB, "
              f"{frames} frames; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(f"{'':28s} {'per rank-hour':>14s} {'x 1,024 CPU':>12s} "
              f"{'x 1,024 wall, ' + str(args.workers) + ' workers':>22s}")
        for name, seconds in rows.items():
            one = seconds / per
            print(f"{name:28s} {one * 1e3:11.1f} ms {one * 1024:10.2f} s "
                  f"{one * 1024 / args.workers:20.2f} s")
        check = (rows["plan, checked"] - rows["plan, unchecked"]) / per
        print(f"SUMMARY digest check: {check * 1e3:.1f} ms per rank-hour, "
              f"{check * 1024:.2f} s CPU at 1,024 ranks x 1 h "
              f"({check * 1024 / args.workers:.2f} s wall on {args.workers} workers)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
