"""Tracker cost: per-sample cost of each sampler and of a full tracker tick, and the overhead of
a 10 Hz tracker on a small CPU training loop.

    .venv/bin/python benchmarks/bench_tracker.py [--samples 2000] [--steps 300] [--json out.json]

Results and the exact command are recorded in docs/benchmarks.md ("Tracker"). The CUDA and NVML
rows appear only where a GPU is present (otherwise they say why they were skipped).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormotel.config import ExportConfig, IdentityConfig
from stormotel.samplers import SamplerUnavailable, make_sampler
from stormotel.tracker import MemoryTracker


def _per_call_us(fn: Callable[[], Any], n: int) -> dict[str, float]:
    for _ in range(min(50, n)):
        fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    times.sort()
    return {"median_us": times[len(times) // 2] / 1e3,
            "p99_us": times[int(len(times) * 0.99)] / 1e3}


def sampler_costs(n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("simulated", "cuda", "nvml"):
        try:
            sampler = make_sampler(name, 0)
        except SamplerUnavailable as e:
            out[name] = {"skipped": str(e)}
            continue
        out[name] = _per_call_us(sampler.sample, n)
        sampler.close()
    return out


def tick_costs(n: int, workdir: Path) -> dict[str, Any]:
    """A full sample as the sampling thread does it: read, ring, detectors, per-sample export."""
    out: dict[str, Any] = {}
    setups: dict[str, dict[str, Any]] = {
        "tick, prometheus only (no per-sample export)": {"prometheus_port": 0,
                                                          "prometheus_addr": "127.0.0.1"},
        "tick, archive (one OTLP JSON line per sample)": {"archive_dir": workdir / "a",
                                                          "archive_format": "lines"},
    }
    for label, kwargs in setups.items():
        tracker = MemoryTracker(sampler="simulated", sampling_interval=3600, env={},
                                identity=IdentityConfig(job_id="bench"),
                                export=ExportConfig(**kwargs))
        tracker.start_tracking()  # the thread sleeps an hour; we drive ticks ourselves
        out[label] = _per_call_us(tracker._tick, n)
        if "archive" in label:
            def step_and_mark(t: MemoryTracker = tracker) -> None:
                with t.step(), t.mark("nccl:all_reduce"):
                    pass
            out["step()+mark() spans, archive on"] = _per_call_us(step_and_mark, n)
        tracker.stop_tracking()
        if tracker.archive_files:
            lines = tracker.archive_files[0].read_text().splitlines()
            out[label]["archive_bytes_per_line"] = round(sum(map(len, lines)) / len(lines))
    out["step()+mark() spans, archive on, 50 ms sampler at 10 Hz"] = _slow_sampler_steps(
        min(n, 300), workdir)
    return out


def _slow_sampler_steps(n: int, workdir: Path) -> dict[str, float]:
    """Step/mark cost while the sampler takes 50 ms per call (NVML under load): boundaries read
    the latest sample, so this should match the fast-sampler row."""
    from stormotel.samplers.simulated import SimulatedSampler

    class Slow(SimulatedSampler):
        def sample(self):  # type: ignore[no-untyped-def]
            time.sleep(0.05)
            return super().sample()

    tracker = MemoryTracker(sampler=Slow(rank=0), sampling_interval=0.1, env={},
                            identity=IdentityConfig(job_id="bench-slow"),
                            export=ExportConfig(archive_dir=workdir / "slow"))
    tracker.start_tracking()

    def step_and_mark() -> None:
        with tracker.step(), tracker.mark("nccl:all_reduce"):
            pass

    try:
        return _per_call_us(step_and_mark, n)
    finally:
        tracker.stop_tracking()


def archive_cpu_per_sample(n: int, workdir: Path, windows_per_format: int = 5
                           ) -> dict[str, Any]:
    """Process CPU (every thread) per archived sample, both formats side by side in one run.

    The sampling thread's tick and the compact writer's batches are driven by hand at the 10 Hz
    cadence (a line every 10 samples = 1 s, the SDK context every 100 = 10 s), so the figure
    covers all the work a sample causes, wherever it runs. The median of five windows of ``n``
    samples (and their min and max) after a warm-up: one window on a shared machine is noise.
    ``compact-no-columns`` is the compact format without its columnar companion: the difference
    is the companion's cost (its frames end every 3,000 samples: give ``n`` >= 3,000).
    """
    import dataclasses

    import zstandard

    out: dict[str, Any] = {}
    for fmt in ("lines", "compact", "compact-no-columns"):
        tracker = MemoryTracker(sampler="simulated", sampling_interval=3600, env={},
                                identity=IdentityConfig(job_id=f"cpu-{fmt}"),
                                export=ExportConfig(archive_dir=workdir / "cpu",
                                                    archive_format=fmt.split("-")[0]))
        tracker.start_tracking()
        dest = tracker.telemetry.destinations[0] if tracker.telemetry else None
        writer = getattr(dest, "archive", None)
        if fmt == "compact-no-columns":  # before its first batch opens a file
            writer.limits = dataclasses.replace(writer.limits, columns=False)

        def run(count: int, tracker: MemoryTracker = tracker, writer: Any = writer) -> float:
            c0 = time.process_time()
            for i in range(1, count + 1):
                tracker._tick()
                if writer is not None and i % 10 == 0:
                    writer.flush(context=i % 100 == 0)
            return (time.process_time() - c0) / count * 1e6

        run(min(n, 200))  # warm-up: first collection, first file, caches
        windows = sorted(run(n) for _ in range(windows_per_format))  # a loaded host: spread
        cpu_us = statistics.median(windows)
        tracker.stop_tracking()
        files = sorted((workdir / "cpu" / f"cpu-{fmt}").glob("rank-0*metrics*"))
        size = sum(f.stat().st_size for f in files)
        # size: what is on disk (the compact format's columnar companion included); raw: the
        # JSON lines inflated (the companion is not JSON)
        raw = sum(len(zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
                      .decompress(f.read_bytes()))
                  if f.name.endswith(".zst") else f.stat().st_size for f in files
                  if ".cols." not in f.name)
        samples = tracker.stats["samples"]
        out[fmt] = {"cpu_us_per_sample": cpu_us, "cpu_us_per_sample_min": windows[0],
                    "cpu_us_per_sample_max": windows[-1], "bytes_per_sample": size / samples,
                    "raw_bytes_per_sample": raw / samples,
                    "mb_per_rank_hour_10hz": size / samples * 36_000 / 1e6}
    return out


def all_destinations(n: int, workdir: Path, windows: int = 5,
                     sampler: str = "simulated") -> dict[str, Any]:
    """Every destination on at once: Prometheus endpoint (scraped), OTLP/HTTP to a receiver on
    loopback, and the compact archive. The sampling thread's own CPU per sample
    (``time.thread_time`` around each tick, median), the whole process's CPU per sample (every
    thread: OTLP pushes, scrapes, archive batches) and the training thread's ``step()`` /
    ``mark()`` cost. Ticks are driven by hand, so each one's thread CPU is this thread's alone."""
    import subprocess

    # The receiver and the scraper are other processes, as a collector and Prometheus are: the
    # process CPU figure is then the tracker's alone.
    receiver = subprocess.Popen(
        [sys.executable, "-c", _RECEIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, cwd=Path(__file__).resolve().parents[1])
    try:
        assert receiver.stdout is not None
        receiver_url = receiver.stdout.readline().strip()
        tracker = MemoryTracker(device=None if sampler == "simulated" else 0, sampler=sampler,
                                sampling_interval=3600, env={},
                                identity=IdentityConfig(job_id="all"),
                                export=ExportConfig(archive_dir=workdir / "all",
                                                    otlp_endpoint=receiver_url,
                                                    otlp_interval_s=3600, prometheus_port=0,
                                                    prometheus_addr="127.0.0.1"))
        tracker.start_tracking()
        assert sorted(tracker.destinations) == ["archive", "otlp", "prometheus"], \
            tracker.destinations
        address = tracker.prometheus_address
        assert address is not None
        url = f"http://127.0.0.1:{address[1]}/metrics"
        assert tracker.telemetry is not None
        by_name = {d.name: d for d in tracker.telemetry.destinations}
        writer = by_name["archive"].archive
        otlp_reader = by_name["otlp"].reader

        def window(count: int) -> tuple[list[int], float]:
            """Per-tick thread CPU (ns) and process CPU per sample (us) over ``count`` ticks with
            the side work of a 10 Hz tracker at its cadence: an archive batch every 10 samples
            (1 s), its context and an OTLP push every 100 (10 s), a scrape every 150 (15 s)."""
            per_tick = []
            c0 = time.process_time()
            for i in range(1, count + 1):
                t0 = time.thread_time_ns()
                tracker._tick()
                per_tick.append(time.thread_time_ns() - t0)
                if i % 10 == 0:
                    writer.flush(context=i % 100 == 0)
                if i % 100 == 0:
                    otlp_reader.collect()
                if i % 150 == 0:
                    _scrape(url)
            return per_tick, (time.process_time() - c0) / count * 1e6

        window(min(n, 200))  # warm-up: first collection, first file, first push
        runs = [window(n) for _ in range(windows)]
        medians = sorted(statistics.median(t) / 1e3 for t, _ in runs)
        process = sorted(p for _, p in runs)

        def step_and_mark() -> None:
            with tracker.step(), tracker.mark("nccl:all_reduce"):
                pass

        # At most 1,000 steps (2,000 spans) in one burst: the span queue holds 2,048.
        spans = _per_call_us(step_and_mark, min(n, 1000))
        tracker.stop_tracking()
        out, _ = receiver.communicate("", timeout=30)  # stdin closed: it prints its count
        pushed = int(out.split()[-1])
        assert pushed > 0, "the OTLP receiver got nothing"
        return {"sampling_thread_us_median": statistics.median(medians),
                "sampling_thread_us_windows": medians,
                "process_cpu_us_per_sample_median": statistics.median(process),
                "process_cpu_us_per_sample_windows": process,
                "step_mark_us": spans, "otlp_requests": pushed, "sampler": sampler,
                "load_average": os.getloadavg()[0]}
    finally:
        if receiver.poll() is None:
            receiver.kill()


def _scrape(url: str) -> None:
    """One scrape, by curl in its own process as Prometheus would be (in-process without it)."""
    import shutil
    import subprocess
    import urllib.request

    if shutil.which("curl"):
        subprocess.run(["curl", "-sf", "-o", "/dev/null", url], check=True)
    else:
        urllib.request.urlopen(url, timeout=5).read()


#: An OTLP/HTTP receiver on loopback (the tests' own): prints its URL, then, once stdin is
#: closed, how many metric requests it decoded.
_RECEIVER = """
import sys
from tests.tracker.otlp_util import HttpReceiver
rx = HttpReceiver()
print(rx.url, flush=True)
sys.stdin.read()
rx.close()
print(len(rx.got.metrics), flush=True)
"""


def _train(steps: int, tracker: MemoryTracker | None, width: int) -> tuple[float, float]:
    """(wall seconds per step, process CPU seconds per step — all threads, tracker's included)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.ReLU(),
                                torch.nn.Linear(2 * width, width))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, width)
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(steps):
        if tracker is None:
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        else:
            with tracker.step(i):
                loss = model(x).pow(2).mean()
                loss.backward()
                with tracker.mark("optimizer"):
                    opt.step()
                opt.zero_grad()
    return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps


DESTINATIONS: dict[str, dict[str, Any]] = {
    "archive (OTLP JSON line per sample)": {"archive_dir": "ovh", "archive_format": "lines"},
    "compact archive (batched, zstd)": {"archive_dir": "ovh", "archive_format": "compact"},
    "prometheus endpoint only": {"prometheus_port": 0, "prometheus_addr": "127.0.0.1"},
}


def training_overhead(steps: int, repeats: int, workdir: Path, width: int) -> dict[str, Any]:
    """Alternate untracked and tracked runs so machine noise hits all alike; report medians.

    Wall time on a shared machine is noisy; process CPU time (every thread, so the sampling and
    export threads are included) is the steadier measure of what the tracker costs.
    """
    import torch

    torch.set_num_threads(1)
    runs: dict[str, list[tuple[float, float]]] = {"untracked": []}
    for r in range(repeats):
        runs["untracked"].append(_train(steps, None, width))
        for i, (name, kwargs) in enumerate(DESTINATIONS.items()):
            kw = {k: workdir / v if k == "archive_dir" else v for k, v in kwargs.items()}
            tracker = MemoryTracker(sampler="simulated", sampling_interval=0.1, env={},
                                    identity=IdentityConfig(job_id=f"ovh{r}-{i}"),
                                    export=ExportConfig(**kw))
            with tracker:
                runs.setdefault(name, []).append(_train(steps, tracker, width))
    med = {name: (statistics.median(x[0] for x in rs), statistics.median(x[1] for x in rs))
           for name, rs in runs.items()}
    bw, bc = med["untracked"]
    out: dict[str, Any] = {"step_ms_untracked": bw * 1e3, "cpu_ms_per_step_untracked": bc * 1e3,
                           "steps": steps, "repeats": repeats, "width": width,
                           "load_average": os.getloadavg()[0], "tracked": {}}
    for name in DESTINATIONS:
        tw, tc = med[name]
        out["tracked"][name] = {"step_ms": tw * 1e3, "wall_overhead_percent": (tw - bw) / bw * 100,
                                "cpu_ms_per_step": tc * 1e3,
                                "cpu_overhead_us_per_step": (tc - bc) * 1e6,
                                "cpu_overhead_percent": (tc - bc) / bc * 100}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=2000)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--width", type=int, default=512,
                   help="MLP width: 512 gives a ~40 ms step on one CPU thread")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--archive-only", action="store_true",
                   help="only the archive CPU-per-sample rows (the issue's figure), no training")
    p.add_argument("--all-destinations", action="store_true",
                   help="only the every-destination-on rows (Prometheus + OTLP + archive)")
    p.add_argument("--sampler", default="simulated",
                   help="the sampler of the --all-destinations rows (cuda, nvml on a GPU)")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        if args.all_destinations:
            _print_all(all_destinations(args.samples, Path(tmp), sampler=args.sampler))
            return
        if args.archive_only:
            for fmt, row in archive_cpu_per_sample(args.samples, Path(tmp)).items():
                print(f"archive format {fmt:<18} CPU {row['cpu_us_per_sample']:8.1f} us/sample "
                      f"(windows {row['cpu_us_per_sample_min']:.1f}-"
                      f"{row['cpu_us_per_sample_max']:.1f}); load average {os.getloadavg()[0]:.1f}")
            return
        result = {"archive_cpu": archive_cpu_per_sample(args.samples, Path(tmp)),
                  "samplers": sampler_costs(args.samples),
                  "ticks": tick_costs(args.samples, Path(tmp)),
                  "all_destinations": all_destinations(args.samples, Path(tmp)),
                  "training": training_overhead(args.steps, args.repeats, Path(tmp),
                                                args.width),
                  "python": sys.version.split()[0], "cpus": os.cpu_count()}
    for group in ("samplers", "ticks"):
        for name, row in result[group].items():
            if "skipped" in row:
                print(f"{name:<50} skipped: {row['skipped']}")
            else:
                extra = (f"  {row['archive_bytes_per_line']} B/line"
                         if "archive_bytes_per_line" in row else "")
                print(f"{name:<50} median {row['median_us']:8.1f} us  p99 "
                      f"{row['p99_us']:8.1f} us{extra}")
    for fmt, row in result["archive_cpu"].items():
        print(f"archive format {fmt:<8} CPU {row['cpu_us_per_sample']:8.1f} us/sample (all "
              f"threads; windows {row['cpu_us_per_sample_min']:.1f}-"
              f"{row['cpu_us_per_sample_max']:.1f})  {row['bytes_per_sample']:7.0f} B/sample "
              "on disk "
              f"({row['raw_bytes_per_sample']:.0f} raw)  {row['mb_per_rank_hour_10hz']:.1f} MB "
              "per rank-hour at 10 Hz")
    tr = result["training"]
    print(f"training step (width {tr['width']}, 1 thread): untracked {tr['step_ms_untracked']:.2f}"
          f" ms wall, {tr['cpu_ms_per_step_untracked']:.2f} ms CPU; load average "
          f"{tr['load_average']:.1f}")
    for name, row in tr["tracked"].items():
        print(f"  tracked at 10 Hz, {name:<36} {row['step_ms']:.2f} ms wall "
              f"({row['wall_overhead_percent']:+.1f} %), CPU {row['cpu_ms_per_step']:.2f} ms "
              f"({row['cpu_overhead_us_per_step']:+.0f} us/step, "
              f"{row['cpu_overhead_percent']:+.1f} %)")
    _print_all(result["all_destinations"])
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


def _print_all(row: dict[str, Any]) -> None:
    threads = ", ".join(f"{w:.1f}" for w in row["sampling_thread_us_windows"])
    process = ", ".join(f"{w:.1f}" for w in row["process_cpu_us_per_sample_windows"])
    sm = row["step_mark_us"]
    print(f"all destinations (prometheus + otlp + compact archive), {row['sampler']} sampler: "
          f"sampling thread CPU "
          f"{row['sampling_thread_us_median']:.1f} us/sample median (windows {threads}); "
          f"process CPU {row['process_cpu_us_per_sample_median']:.1f} us/sample (windows "
          f"{process}); step()+mark() median {sm['median_us']:.1f} us, p99 {sm['p99_us']:.1f} us"
          f"; load average {row['load_average']:.1f}")


if __name__ == "__main__":
    main()
