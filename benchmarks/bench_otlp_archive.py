"""Reading the tracker's own archive: dict walker, typed structs and arrays, side by side.

    .venv/bin/python benchmarks/bench_otlp_archive.py [--lines-samples 2000] [--hour 36000]
        [--ranks 64] [--before REV]

The inputs are what the tracker really writes (simulated sampler, every instrument, driven at the
tracker's real tick): ``lines`` format (one ~14 KB SDK request per sample) and ``compact`` format
(one request per 10 samples, zstd). Each row decodes the same bytes with the generic walker
(``read_json_lines_generic``: orjson dicts), the typed decoder (``read_json_lines(arrays=False)``:
msgspec structs, GC paused) and the default (``read_json_lines``: the compact archive's array
path where a file qualifies), in one process, CPU time, median of 3.

``--ranks N`` also loads N compact rank files end to end through ``load_paths`` (worker
processes included), each written the way the tracker writes it (one zstd frame, a block flushed
per line), in a fresh interpreter; ``--before REV`` loads the same files with the code of git
revision REV first (checked out into a temporary folder laid out as installed), both in one
run on the same files; ``--profile`` adds a cProfile of one rank-hour through ``load_paths``
for each. Exits non-zero if any rank is missing.
Results and the command are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import zstandard
from stormotel.analyzers.sources.base import LoadContext
from stormotel.analyzers.sources.otlp_archive import OtlpFileReader

from stormotel.archive_writer import _ZstdFile
from stormotel.config import ExportConfig, IdentityConfig
from stormotel.tracker import MemoryTracker

REPO = Path(__file__).resolve().parents[1]


def tracker_archive(fmt: str, samples: int, workdir: Path) -> bytes:
    """The metrics archive bytes (decompressed) of a tracker that took ``samples`` samples."""
    tracker = MemoryTracker(sampler="simulated", sampling_interval=3600, env={},
                            identity=IdentityConfig(job_id=f"b-{fmt}", rank=0),
                            export=ExportConfig(archive_dir=workdir, archive_format=fmt))
    tracker.start_tracking()
    dest = tracker.telemetry.destinations[0] if tracker.telemetry else None
    writer = getattr(dest, "archive", None)
    for i in range(1, samples):
        tracker._tick()
        if writer is not None and i % 10 == 0:
            writer.flush(context=i % 100 == 0)
    tracker.stop_tracking()
    out = b""
    for f in sorted((workdir / f"b-{fmt}").glob("rank-0*metrics.jsonl*")):
        raw = f.read_bytes()
        out += zstandard.ZstdDecompressor().decompressobj(read_across_frames=True) \
            .decompress(raw) \
            if f.name.endswith(".zst") else raw
    return out


def decode_cpu(data: bytes, read: Callable[[OtlpFileReader, bytes], None]) -> tuple[float, int]:
    times, n = [], 0
    for _ in range(3):
        ctx = LoadContext()
        reader = OtlpFileReader(ctx, "rank-0.metrics.jsonl")
        c0 = time.process_time()
        read(reader, data)
        n = reader.flush()
        times.append(time.process_time() - c0)
    return statistics.median(times), n


READERS: dict[str, Callable[[OtlpFileReader, bytes], None]] = {
    "dict walker": lambda r, d: r.read_json_lines_generic(d),
    "typed structs": lambda r, d: r.read_json_lines(d, arrays=False),
    "default (arrays)": lambda r, d: r.read_json_lines(d),
}

#: Run in a fresh interpreter: ``load_paths`` over a folder, CPU of the process and its workers.
_LOAD = """
import json, os, sys, time
from stormotel.analyzers.sources import load_paths
c0, w0, k0 = time.process_time(), time.perf_counter(), os.times()
tl = load_paths([sys.argv[1]])
k1 = os.times()
cpu = time.process_time() - c0 + (k1.children_user - k0.children_user) + \\
    (k1.children_system - k0.children_system)
print(json.dumps({"wall": time.perf_counter() - w0, "cpu": cpu,
                  "samples": tl.total_samples(), "ranks": len(tl.ranks)}))
"""


#: Run in a fresh interpreter: one rank-hour through ``load_paths``, CPU unprofiled (best of 3),
#: then the ten costliest functions (own time) under cProfile.
_PROFILE = """
import cProfile, io, pstats, sys, time
from stormotel.analyzers.sources import load_paths
cpu = []
for _ in range(3):
    c0 = time.process_time()
    tl = load_paths([sys.argv[1]])
    cpu.append(time.process_time() - c0)
prof = cProfile.Profile()
prof.runcall(load_paths, [sys.argv[1]])
out = io.StringIO()
stats = pstats.Stats(prof, stream=out)
stats.sort_stats("tottime").print_stats(10)
print(f"{min(cpu):.3f} s CPU unprofiled, {stats.total_tt:.3f} s profiled, "
      f"{tl.total_samples()} samples")
print("\\n".join(line for line in out.getvalue().splitlines()[6:] if line.strip()))
"""


def write_job(compact: bytes, ranks: int, folder: Path) -> None:
    """``ranks`` compact rank files (the one rank's lines, rank relabelled), each written as the
    tracker's archive writer writes it: one zstd frame, a block flushed after every line."""
    rank_attr = b'{"key":"rank","value":{"stringValue":"0"}}'
    world_attr = b'{"key":"world_size","value":{"stringValue":"1"}}'
    assert rank_attr in compact and world_attr in compact
    # A 64-rank job says world_size=64: with the recorded world size of 1, every rank but 0
    # would be dropped as outside the world and the timing would cover one rank's Timeline.
    compact = compact.replace(world_attr, world_attr.replace(b'"1"', f'"{ranks}"'.encode()))
    folder.mkdir()
    for r in range(ranks):
        body = compact.replace(rank_attr, rank_attr.replace(b'"0"', f'"{r}"'.encode()))
        out = _ZstdFile(folder / f"rank-{r}.00000.metrics.jsonl.zst", level=3)
        for line in body.splitlines(keepends=True):
            out.write(line)
        out.close()


def in_child(program: str, path: Path, pythonpath: str | None) -> str:
    """Run ``program`` on ``path`` in a fresh interpreter (``pythonpath``: another revision)."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, "-c", program, str(path)], env=env, check=True,
                          capture_output=True, text=True, cwd=path.parent).stdout


def installed_layout(rev: str, dest: Path) -> Path:
    """The package tree of git revision ``rev`` as a wheel installs it (see scripts/typecheck.py):
    ``stormotel`` with ``analyzers/`` and ``dashboards/`` inside; returns the folder for
    PYTHONPATH."""
    src, root = dest / "src", dest / "site"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], cwd=REPO, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    package = root / "stormotel"
    package.mkdir(parents=True)
    for child in (src / "stormotel").iterdir():
        (package / child.name).symlink_to(child)
    for name in ("analyzers", "dashboards"):
        (package / name).symlink_to(src / name, target_is_directory=True)
    return str(root)


def end_to_end(compact: bytes, ranks: int, workdir: Path, before: str | None,
               profile: bool) -> None:
    """``load_paths`` over ``ranks`` compact files, now and (``before``) at another revision."""
    folder = workdir / "job"
    write_job(compact, ranks, folder)
    size = sum(f.stat().st_size for f in folder.iterdir())
    print(f"end to end: {ranks} compact rank files as the tracker writes them, "
          f"{size / 1e6:.0f} MB on disk; load average {os.getloadavg()[0]:.1f} at start")
    runs = {"now": None} if before is None else {
        f"before ({before})": installed_layout(before, workdir / "before"), "now": None}
    results: dict[str, dict[str, float]] = {}
    for label, path in runs.items():
        results[label] = r = json.loads(in_child(_LOAD, folder, path).splitlines()[-1])
        print(f"  {label:<20} {r['wall']:6.1f} s wall  {r['cpu']:6.1f} s CPU (with workers)  "
              f"{int(r['samples']):,} samples in {int(r['ranks'])} ranks")
    print(f"  load average {os.getloadavg()[0]:.1f} at end")
    if profile:
        one = next(iter(sorted(folder.iterdir())))
        for label, path in runs.items():
            print(f"one rank-hour ({one.name}), {label}:")
            print(in_child(_PROFILE, one, path))
    missing = [label for label, r in results.items() if r["ranks"] != ranks]
    if missing:
        raise SystemExit(f"{', '.join(missing)}: not all {ranks} ranks loaded: not the goal's "
                         "timing")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lines-samples", type=int, default=2000)
    p.add_argument("--hour", type=int, default=36_000, help="compact samples (1 h at 10 Hz)")
    p.add_argument("--ranks", type=int, default=0,
                   help="also load this many compact rank files end to end (64 = the goal)")
    p.add_argument("--before", metavar="REV",
                   help="with --ranks: also load them with the code of this git revision")
    p.add_argument("--profile", action="store_true",
                   help="with --ranks: cProfile one rank-hour through load_paths (and --before)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        inputs = {"lines": tracker_archive("lines", args.lines_samples, Path(tmp)),
                  "compact": tracker_archive("compact", args.hour, Path(tmp))}
    for fmt, data in inputs.items():
        lines = data.count(b"\n")
        print(f"{fmt} archive: {len(data) / 1e6:.1f} MB, {lines} lines, "
              f"{len(data) / lines / 1e3:.1f} KB/line")
        row = {}
        for name, read in READERS.items():
            cpu, n = decode_cpu(data, read)
            row[name] = cpu
            print(f"  {name:<18} {cpu:7.3f} s CPU  {n} samples  {n / cpu:10,.0f} samples/CPU-s"
                  f"  64 ranks x {n} samples: {64 * cpu:6.1f} CPU-s")
        first = next(iter(row.values()))
        print("  speed-up over the dict walker: " +
              ", ".join(f"{name} {first / cpu:.1f}x" for name, cpu in row.items()))
    if args.ranks:
        with tempfile.TemporaryDirectory() as tmp:
            end_to_end(inputs["compact"], args.ranks, Path(tmp), args.before, args.profile)


if __name__ == "__main__":
    main()
