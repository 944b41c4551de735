"""A large job's compact archive on disk, analysed end to end: wall, CPU and the tree's memory.

    .venv/bin/python benchmarks/bench_archive_scale.py --ranks 1024 --hours 1 --hz 10
    .venv/bin/python benchmarks/bench_archive_scale.py --ranks 64 --hours 0.1667   # quick check

**The archive** is written through the tracker's own code path: per rank, the tracker's
``Telemetry`` is built from a real ``MemoryTracker`` configuration (its resource, its identity,
its SDK reader for the context instruments) and creates the real
:class:`~stormotel.archive_writer.CompactArchiveWriter`; numpy-generated samples go through the
writer's ``put`` and one ``flush`` per second of data (one line per 10 samples at 10 Hz, the
context instruments every 10th line), exactly what its writer thread does at the tracker's tick,
with the columnar companion beside each file (a frame every 3,000 samples, as a tracker's).
Only the sampler and the sampling thread are left out (a rank-hour of real ticks is an hour).
Ranks differ: each starts within the first minute (staggered), has its own noise, its own step
rhythm; rank ``ranks * 3 // 8`` leaks memory outside the allocator from a quarter of the run on
(a gap that grows to 6 GiB), rank ``ranks * 5 // 8`` has a 3 s, 8 GiB gap spike at 70 % of the
run. Ranks are written by parallel worker processes and cached under ``benchmarks/out/`` keyed by
the parameters (``--rewrite`` forces a new one).

**The run** is ``stormotel analyze FOLDER --format json -o REPORT`` as a subprocess (the
installed console entry point of this checkout's virtual environment). While it runs the whole
process tree is sampled from /proc every 50 ms: the peak of the tree's summed RSS is reported,
with the tree's CPU (user + sys of the process and its reaped children, from ``wait4``) and the
wall time. The report is then checked: the leaking rank must have a ``persistent_drift`` gap
finding and the spiking rank a ``transient_spike``. The last line is one summary line.
``--json-only`` first runs the same analysis over links to the JSON files alone (the reader's
path for archives written before the companion) and ``--before REV`` with revision REV's code;
each report must equal this one's (the input folder's name and the run time aside).

Results and the command are in docs/benchmarks.md ("1,024 ranks x 1 h from the archive on
disk").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: Bumped when the generated data changes, so a cached archive of the old shape is not reused.
GEN_VERSION = 3  # 2: with the columnar companion; 3: its frames carry the digest (format 2)
JOB_ID = "scale-bench"
MIB = 2**20
GIB = 2**30
#: The job's last sample: a fixed instant (reproducible bytes), in the past.
END_NS = 1_790_000_000_000_000_000


def planted(ranks: int) -> tuple[int, int]:
    """(leaking rank, spiking rank)."""
    return ranks * 3 // 8, ranks * 5 // 8


def rank_samples(rank: int, ranks: int, hours: float, hz: float) -> dict[str, np.ndarray]:
    """One rank's samples as int64 columns: warm-up, a step sawtooth, noise, the planted faults."""
    rng = np.random.default_rng(1000 + rank)
    duration_s = hours * 3600.0
    start_s = float(rng.uniform(0.0, min(60.0, duration_s / 10)))  # staggered starts
    n = int((duration_s - start_s) * hz)
    interval_ns = int(1e9 / hz)
    i = np.arange(n, dtype=np.int64)
    begin = END_NS - int(duration_s * 1e9) + int(start_s * 1e9)
    t = begin + i * interval_ns + rng.integers(-2_000_000, 2_000_000, n)  # sampler jitter
    t_s = i / hz  # seconds since this rank started
    # Training is data parallel: the first step waits for the last rank to load (the first
    # collective), then every rank steps in lockstep with the others (a few ms apart).
    train_s = min(90.0, duration_s / 5) - start_s  # the job's first step, on this rank's clock
    step_s = 1.25
    warm = np.minimum(1.0, t_s / 3.0)  # weights and optimizer state load in a few seconds
    weights = 30 * GIB + rank % 7 * 256 * MIB
    since = t_s - train_s + rng.uniform(0, 0.005)
    phase = (since % step_s) / step_s
    activations = 8 * GIB * np.where(phase < 0.6, phase / 0.6, (1.0 - phase) / 0.4) * (since >= 0)
    allocated = (weights * warm + activations
                 + rng.normal(0, 16 * MIB, n)).astype(np.int64) // 512 * 512
    allocated = np.maximum(allocated, 512)
    block = 2 * MIB
    peak = np.maximum.accumulate(allocated)
    reserved = (peak + block - 1) // block * block + GIB
    active = allocated + rng.integers(0, 4 * MIB, n) // 512 * 512
    inactive_split = rng.integers(0, 64 * MIB, n) // 512 * 512
    gap = 1536 * MIB + rng.integers(0, 8 * MIB, n) // 4096 * 4096
    leak, spike = planted(ranks)
    if rank == leak:
        from_s = duration_s / 4 - start_s
        gap += (np.clip((t_s - from_s) / (duration_s - start_s - from_s), 0, 1)
                * 6 * GIB).astype(np.int64) // 4096 * 4096
    if rank == spike:
        at_s = duration_s * 0.7 - start_s
        gap += np.where((t_s >= at_s) & (t_s < at_s + 3.0), 8 * GIB, 0)
    total = np.full(n, 80 * GIB, np.int64)
    used = reserved + gap
    return {"t": t, "allocated": allocated, "reserved": reserved, "active": active,
            "inactive_split": inactive_split, "device_used": used, "device_total": total,
            "device_free": total - used, "process_used": used,
            "step": np.maximum(0, since // step_s).astype(np.int64)}


def write_rank(args: tuple[int, int, float, float, str]) -> tuple[int, int]:
    """Write one rank's archive through the tracker's Telemetry and writer; (samples, bytes)."""
    rank, ranks, hours, hz, folder = args
    from stormotel.archive_writer import ArchiveLimits
    from stormotel.config import ExportConfig, IdentityConfig, StallConfig
    from stormotel.samplers.base import Sample
    from stormotel.telemetry import Telemetry
    from stormotel.tracker import MemoryTracker

    tracker = MemoryTracker(
        sampler="simulated", sampling_interval=1 / hz, env={},
        identity=IdentityConfig(job_id=JOB_ID, rank=rank, world_size=ranks, local_rank=rank % 8,
                                host=f"node-{rank // 8:04d}"),
        export=ExportConfig(archive_dir=folder, archive_format="compact", archive_interval_s=1e9),
        stall=StallConfig(enabled=False))
    telemetry = Telemetry(tracker.resource(), tracker.attributes, tracker.state,
                          tracker.export_config, JOB_ID, rank, env={})
    writer = next(d.archive for d in telemetry.destinations if d.archive is not None)
    # The writer thread's own clock would cut batches at wall-clock seconds (its batch length
    # is 1e9 s above, so it never wakes); here every batch is one second of *data*, flushed
    # explicitly (the same lines a 10 Hz tracker writes), the context every 10 s of data.
    # Companion frames end every 3,000 samples (300 s at 10 Hz), as a tracker's do.
    writer.limits = ArchiveLimits(batch_s=1e9, context_s=1e9)
    cols = rank_samples(rank, ranks, hours, hz)
    per_batch = max(1, round(hz))
    lists = {k: v.tolist() for k, v in cols.items()}
    t, step = lists.pop("t"), lists.pop("step")
    names = list(lists)
    rows = zip(*(lists[k] for k in names), strict=True)
    for j, (ts, row) in enumerate(zip(t, rows, strict=True)):
        writer.put(Sample(ts, **dict(zip(names, row, strict=True))), step[j], 0.00021)
        if (j + 1) % per_batch == 0:
            writer.flush(context=(j + 1) % (per_batch * 10) == 0)
    writer.close()
    telemetry.tracer_provider.shutdown()
    return len(t), sum(p.stat().st_size for p in writer.files)


def archive(ranks: int, hours: float, hz: float, workers: int, rewrite: bool) -> Path:
    """The cached archive folder for these parameters, written first if needed."""
    key = f"archive-scale-v{GEN_VERSION}-r{ranks}-h{hours:g}-hz{hz:g}"
    folder = REPO / "benchmarks" / "out" / key
    done = folder / "DONE.json"
    if done.exists() and not rewrite:
        return folder
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    t0, c0 = time.perf_counter(), os.times()
    jobs = [(r, ranks, hours, hz, str(folder)) for r in range(ranks)]
    samples = size = 0
    with ProcessPoolExecutor(workers) as pool:
        for k, (n, b) in enumerate(pool.map(write_rank, jobs, chunksize=4), start=1):
            samples, size = samples + n, size + b
            if k % 64 == 0 or k == ranks:
                print(f"  wrote {k}/{ranks} ranks, {samples:,} samples, {size / 1e6:,.0f} MB "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
    c1 = os.times()
    done.write_text(json.dumps({
        "ranks": ranks, "hours": hours, "hz": hz, "samples": samples, "zstd_bytes": size,
        "write_wall_s": round(time.perf_counter() - t0, 1),
        "write_cpu_s": round(c1.children_user - c0.children_user
                             + c1.children_system - c0.children_system, 1)}))
    return folder


def archive_shape(folder: Path) -> dict[str, object]:
    shape = json.loads((folder / "DONE.json").read_text())
    files = [p for p in (folder / JOB_ID).iterdir() if p.is_file()]
    shape["files"] = len(files)
    shape["bytes_on_disk"] = sum(p.stat().st_size for p in files)
    shape["json_bytes"] = sum(p.stat().st_size for p in files if ".metrics.jsonl" in p.name)
    shape["companion_bytes"] = shape["bytes_on_disk"] - shape["json_bytes"]
    return shape


def json_only_folder(folder: Path) -> Path:
    """The archive's JSON files alone, as links in a folder of their own (the companions
    left out, so the reader takes the JSON path for every file)."""
    out = folder / "json-only" / JOB_ID
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for p in (folder / JOB_ID).glob("*.metrics.jsonl.zst"):
        (out / p.name).symlink_to(p)
    return out


def _tree(root: int) -> list[int]:
    """``root`` and every descendant, from /proc (children files where the kernel has them)."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
            except OSError:
                pass
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


class TreeSampler(threading.Thread):
    """The peak of the summed RSS of a process tree, sampled every ``every_s``."""

    def __init__(self, pid: int, every_s: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.pid, self.every_s = pid, every_s
        self.peak = self.peak_procs = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            pids = _tree(self.pid)
            total = sum(_rss(p) for p in pids)
            if total > self.peak:
                self.peak, self.peak_procs = total, len(pids)
            self.stop.wait(self.every_s)


def run_analyze(folder: Path, report: Path, extra: list[str],
                pythonpath: str | None = None) -> dict[str, float]:
    """``stormotel analyze`` as a subprocess (``python -m stormotel``, what the console script
    runs; ``pythonpath``: another revision's package tree): wall, tree CPU, tree peak RSS, rc."""
    cmd = [sys.executable, "-m", "stormotel", "analyze", str(folder), "--format", "json", "-o",
           str(report), *extra]
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    t0 = time.perf_counter()
    # cwd outside the checkout: with it first on sys.path, its own package would shadow the
    # other revision's tree on PYTHONPATH.
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            cwd=folder.parent)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    # wait4 gives the child's rusage including the children it reaped (the loader's workers).
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    sampler.stop.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in (0, 1, 2):  # findings exit non-zero by design; >2 is a failure
        sys.stderr.write(err[-4000:])
    return {"rc": proc.returncode, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_bytes": sampler.peak, "peak_procs": sampler.peak_procs,
            "maxrss_largest": usage.ru_maxrss * 1024}


def check_report(report: Path, ranks: int) -> dict[str, object]:
    """Whether the planted ranks are named, and by what."""
    rep = json.loads(report.read_text())
    leak, spike = planted(ranks)
    by_rank: dict[int, set[str]] = {}
    for f in rep.get("gap_findings", []):
        by_rank.setdefault(int(f["rank"]), set()).add(f["classification"])
    others = sorted(r for r in by_rank if r not in (leak, spike))
    suspects = [s["rank"] for s in rep.get("cross_rank", {}).get("first_cause_suspects", [])]
    return {"leak_found": "persistent_drift" in by_rank.get(leak, set()),
            "spike_found": "transient_spike" in by_rank.get(spike, set()),
            "participating": len(rep.get("participating_ranks", [])),
            "other_ranks_with_gap_findings": len(others), "first_cause_suspects": suspects[:5]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--hours", type=float, default=1.0)
    p.add_argument("--hz", type=float, default=10.0)
    p.add_argument("--write-workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--rewrite", action="store_true", help="write the archive again")
    p.add_argument("--write-only", action="store_true")
    p.add_argument("--before", metavar="REV", help="first run the same analysis with git "
                   "revision REV's code (a package tree laid out as installed), same archive")
    p.add_argument("--json-only", action="store_true", help="first run the same analysis on "
                   "the JSON files alone (a folder of links without the columnar companions: "
                   "what the reader does for an archive written before them)")
    p.add_argument("--report", type=Path, help="where the JSON report goes (default: beside "
                   "the archive)")
    p.add_argument("analyze_args", nargs="*", help="more `stormotel analyze` flags (after --)")
    a = p.parse_args()
    folder = archive(a.ranks, a.hours, a.hz, a.write_workers, a.rewrite)
    shape = archive_shape(folder)
    print(f"archive: {folder} — {shape['ranks']} ranks x {shape['hours']} h at {shape['hz']} Hz, "
          f"{shape['files']} files, {int(shape['bytes_on_disk']) / 1e9:.2f} GB on disk "
          f"(JSON {int(shape['json_bytes']) / 1e9:.2f} GB, companions "
          f"{int(shape['companion_bytes']) / 1e9:.2f} GB), "
          f"{int(shape['samples']):,} samples (written in {shape['write_wall_s']} s wall, "
          f"{shape['write_cpu_s']} s CPU)", flush=True)
    if a.write_only:
        return
    report = a.report or folder / "report.json"
    runs: dict[str, tuple[str | None, Path]] = {"now": (None, folder / JOB_ID)}
    tmp = None
    if a.before:
        import tempfile

        from bench_otlp_archive import installed_layout

        tmp = tempfile.TemporaryDirectory()
        runs = {f"before({a.before})": (installed_layout(a.before, Path(tmp.name)),
                                        folder / JOB_ID), **runs}
    if a.json_only:
        runs = {"json-only": (None, json_only_folder(folder)), **runs}
    ok = True
    reports: dict[str, bytes] = {}
    for label, (pythonpath, data) in runs.items():
        out = report if label == "now" else report.with_suffix(f".{label.split('(')[0]}.json")
        out.unlink(missing_ok=True)
        load = os.getloadavg()
        m = run_analyze(data, out, a.analyze_args, pythonpath)
        found = check_report(out, a.ranks) if out.exists() else {}
        # the report names its input files: one folder's name for both
        reports[label] = out.read_bytes().replace(str(data).encode(), str(folder / JOB_ID)
                                                  .encode()) if out.exists() else b""
        print(json.dumps({"label": label, "shape": shape, "run": m, "found": found,
                          "loadavg_before": load}))
        good = bool(m["rc"] in (0, 1, 2) and found.get("leak_found") and found.get("spike_found"))
        ok = ok and good
        print(f"SUMMARY {label} ranks={a.ranks} hours={a.hours:g} hz={a.hz:g} "
              f"samples={int(shape['samples']):,} disk={int(shape['bytes_on_disk']) / 1e9:.2f}GB "
              f"wall={m['wall_s']:.1f}s cpu={m['cpu_s']:.1f}s peak_tree_rss="
              f"{m['peak_bytes'] / 1e9:.2f}GB procs={m['peak_procs']} rc={m['rc']} "
              f"planted_found={'yes' if good else 'NO'} load1={load[0]:.1f}", flush=True)
    now = reports.pop("now")
    for label, other in reports.items():
        same = _same_report(other, now)
        print(f"reports {label}/now: {'identical' if same else 'DIFFERENT'} (ignoring run "
              "times and the input folder's name)")
        ok = ok and same
    if tmp is not None:
        tmp.cleanup()
    sys.exit(0 if ok else 1)


def _same_report(a: bytes, b: bytes) -> bool:
    """The two JSON reports say the same (the fields that name the run itself left out)."""
    def norm(raw: bytes) -> object:
        rep = json.loads(raw) if raw else {}
        rep.get("extra", {}).pop("analysis_seconds", None)
        return rep
    return norm(a) == norm(b)


if __name__ == "__main__":
    main()
