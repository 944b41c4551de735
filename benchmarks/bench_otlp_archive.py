"""Reading the tracker's own archive: previous dict walker vs typed decoding, side by side.

    .venv/bin/python benchmarks/bench_otlp_archive.py [--lines-samples 2000] [--hour 36000]

The inputs are what the tracker really writes (simulated sampler, every instrument, driven at the
tracker's real tick): ``lines`` format (one ~14 KB SDK request per sample) and ``compact`` format
(one request per 10 samples, zstd). Each row decodes the same bytes with the generic walker
(``read_json_lines_generic``, the previous implementation: orjson dicts) and the typed decoder
(``read_json_lines``: msgspec structs, GC paused), in one process, CPU time, median of 3.
Results and the command are in docs/benchmarks.md ("Reading OTLP archives").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import zstandard
from stormotel.analyzers.sources.base import LoadContext
from stormotel.analyzers.sources.otlp_archive import OtlpFileReader

from stormotel.tracker import MemoryTracker


def tracker_archive(fmt: str, samples: int, workdir: Path) -> bytes:
    """The metrics archive bytes (decompressed) of a tracker that took ``samples`` samples."""
    tracker = MemoryTracker(sampler="simulated", sampling_interval=3600, job_id=f"b-{fmt}",
                            rank=0, env={}, archive_dir=workdir, archive_format=fmt)
    tracker.start_tracking()
    dest = tracker.telemetry.destinations[0] if tracker.telemetry else None
    writer = getattr(dest, "archive", None)
    for i in range(1, samples):
        tracker._tick()
        if writer is not None and i % 10 == 0:
            writer.flush(context=i % 100 == 0)
    tracker.stop_tracking()
    out = b""
    for f in sorted((workdir / f"b-{fmt}").glob("rank-0*metrics*")):
        raw = f.read_bytes()
        out += zstandard.ZstdDecompressor().decompressobj().decompress(raw) \
            if f.name.endswith(".zst") else raw
    return out


def decode_cpu(data: bytes, method: str) -> tuple[float, int]:
    times, n = [], 0
    for _ in range(3):
        ctx = LoadContext()
        reader = OtlpFileReader(ctx, "rank-0.metrics.jsonl")
        c0 = time.process_time()
        getattr(reader, method)(data)
        n = reader.flush()
        times.append(time.process_time() - c0)
    return statistics.median(times), n


def end_to_end(compact: bytes, ranks: int, workdir: Path) -> None:
    """``load_paths`` over ``ranks`` compact files (the one rank's bytes, rank relabelled)."""
    import os

    from stormotel.analyzers.sources import load_paths

    folder = workdir / "job"
    folder.mkdir()
    rank_attr = b'{"key":"rank","value":{"stringValue":"0"}}'
    world_attr = b'{"key":"world_size","value":{"stringValue":"1"}}'
    assert rank_attr in compact and world_attr in compact
    # A 64-rank job says world_size=64: with the recorded world size of 1, every rank but 0
    # would be dropped as outside the world and the timing would cover one rank's Timeline.
    compact = compact.replace(world_attr, world_attr.replace(b'"1"', f'"{ranks}"'.encode()))
    z = zstandard.ZstdCompressor(level=3)
    for r in range(ranks):
        body = compact.replace(rank_attr, rank_attr.replace(b'"0"', f'"{r}"'.encode()))
        (folder / f"rank-{r}.00000.metrics.jsonl.zst").write_bytes(z.compress(body))
    size = sum(f.stat().st_size for f in folder.iterdir())
    c0, w0 = time.process_time(), time.perf_counter()
    ch0 = os.times()
    tl = load_paths([str(folder)])
    ch1 = os.times()
    wall = time.perf_counter() - w0
    cpu = time.process_time() - c0 + (ch1.children_user - ch0.children_user) + \
        (ch1.children_system - ch0.children_system)
    print(f"end to end: {ranks} compact rank files, {size / 1e6:.0f} MB on disk, "
          f"{tl.total_samples():,} samples in {len(tl.ranks)} ranks: {wall:.1f} s wall, "
          f"{cpu:.1f} s CPU (with workers)")
    if len(tl.ranks) != ranks:
        raise SystemExit(f"only {len(tl.ranks)} of {ranks} ranks loaded: not the goal's timing")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lines-samples", type=int, default=2000)
    p.add_argument("--hour", type=int, default=36_000, help="compact samples (1 h at 10 Hz)")
    p.add_argument("--ranks", type=int, default=0,
                   help="also load this many compact rank files end to end (64 = the goal)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        inputs = {"lines": tracker_archive("lines", args.lines_samples, Path(tmp)),
                  "compact": tracker_archive("compact", args.hour, Path(tmp))}
    for fmt, data in inputs.items():
        lines = data.count(b"\n")
        print(f"{fmt} archive: {len(data) / 1e6:.1f} MB, {lines} lines, "
              f"{len(data) / lines / 1e3:.1f} KB/line")
        row = {}
        for method in ("read_json_lines_generic", "read_json_lines"):
            cpu, n = decode_cpu(data, method)
            row[method] = cpu
            print(f"  {method:<24} {cpu:7.2f} s CPU  {n} samples  {n / cpu:10,.0f} samples/CPU-s"
                  f"  64 ranks x {n} samples: {64 * cpu:6.1f} CPU-s")
        print(f"  speed-up {row['read_json_lines_generic'] / row['read_json_lines']:.1f}x")
    if args.ranks:
        with tempfile.TemporaryDirectory() as tmp:
            end_to_end(inputs["compact"], args.ranks, Path(tmp))


if __name__ == "__main__":
    main()
