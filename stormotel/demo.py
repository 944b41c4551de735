"""``stormotel demo`` (``make demo``): a real 4-rank torch job on CPU with a planted memory fault.

Each rank (gloo, ``torch.multiprocessing`` forkserver) trains a small model with real all-reduce of
its gradients, tracked by a ``MemoryTracker`` on the simulated device; rank 2 is given a fault —
it rises first (``first_spike``, the others follow half a second later) and leaks outside the
allocator (``leak``). All ranks write the (compact, zstd) OTLP JSON-lines archive into one folder.

:func:`run_job` runs the job and returns the archive folder; :func:`main` calls it and prints
where the files are. The analysis step is added after ``run_job`` in ``main``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

from stormotel import exitcodes, schema
from stormotel.errors import exit_code_of
from stormotel.samplers.faults import FaultSpecError, parse_faults

__all__ = ["DEFAULT_FAULTS", "DEFAULT_JOB_ID", "build_parser", "main", "run_job"]

DEFAULT_JOB_ID = "demo"
#: rank 2 rises first by 500 ms (the others follow: the cross-rank incident) and leaks 24 MiB/s
#: outside the allocator from t=2s (persistent gap drift).
DEFAULT_FAULTS = "rank=2:first_spike@t=4s,delta=1GiB,lead=500ms;rank=2:leak@t=2s,rate=24MiB/s"


#: Imported once by the fork server the ranks are forked from ("forkserver": a fresh, single-
#: threaded process, so forking is safe even when the caller runs threads), instead of by every
#: rank's own fresh interpreter ("spawn", before): torch is ~2.5 s of CPU per import, and
#: ``stormotel demo`` went from 26.8 s to 17 s of CPU in all (docs/benchmarks.md). The server
#: is stopped when the job ends (:func:`_stop_fork_server`). ``torch._dynamo``: the rank's
#: ``torch.optim.SGD(...)`` imports it on first use (the optimizer's ``__init__`` is wrapped by
#: ``torch._disable_dynamo``, torch 2.x), ~2.5 s of CPU in every rank; imported once here
#: instead (a 4-rank job 16.4 -> 9.4 s of its processes' CPU, docs/benchmarks.md). The
#: fork server skips a preload module that fails to import (a torch without it).
RANK_PRELOAD = ("torch", "torch.distributed", "torch._dynamo", "stormotel.demo_worker")


def _fork_server() -> object:
    from multiprocessing import forkserver

    return getattr(forkserver, "_forkserver", None)


def _stop_fork_server() -> None:
    """Stop the fork server :func:`run_job` started and wait for it, so no process outlives the
    job, the ranks' CPU time is accounted to the caller (the server reaps them; the caller
    reaps the server), and a later job forks from a server with the caller's environment as it
    is then. ``_stop`` is the standard library's own (its tests call it); without it the server
    would end with the caller, as before."""
    stop = getattr(_fork_server(), "_stop", None)
    if callable(stop):
        stop()


def _clear_previous(job_dir: Path) -> None:
    """The file exporter appends; a re-run starts the job's archive afresh (our files only)."""
    if not job_dir.is_dir():
        return
    for pattern in (f"{schema.ARCHIVE_RANK_PREFIX}*{schema.ARCHIVE_METRICS_SUFFIX}",
                    f"{schema.ARCHIVE_RANK_PREFIX}*{schema.ARCHIVE_METRICS_SUFFIX}.zst",
                    f"{schema.ARCHIVE_RANK_PREFIX}*{schema.ARCHIVE_TRACES_SUFFIX}",
                    f"{schema.ARCHIVE_RANK_PREFIX}*{schema.ARCHIVE_COMPACT_TRACES_SUFFIX}"):
        for path in job_dir.glob(pattern):
            path.unlink()
    shutil.rmtree(job_dir / "oom", ignore_errors=True)


def run_job(out: str | Path, *, world_size: int = 4, duration_s: float = 8.0,
            step_period_s: float = 0.25, faults: str = DEFAULT_FAULTS,
            job_id: str = DEFAULT_JOB_ID, sampling_interval: float = 0.1,
            prometheus_ports: list[int] | None = None, estimate_bytes: int | None = None,
            quiet: bool = False) -> Path:
    """Run the tracked multi-process job; return ``<out>/<job_id>`` (the archive folder).

    Raises ``RuntimeError`` when a rank fails (its error is in the message).
    """
    parse_faults(faults)  # fail before importing torch or spawning anything
    import torch.multiprocessing as mp

    from stormotel.demo_worker import WorkerConfig, worker

    out = Path(out)
    job_dir = out / job_id
    _clear_previous(job_dir)
    out.mkdir(parents=True, exist_ok=True)
    # File rendezvous: no TCP port to pick and lose to another process between pick and bind.
    rendezvous_dir = Path(tempfile.mkdtemp(prefix="stormotel-demo-"))
    cfg = WorkerConfig(world_size=world_size, init_method=f"file://{rendezvous_dir / 'store'}",
                       archive_dir=str(out), job_id=job_id, faults=faults,
                       steps=max(1, int(duration_s / step_period_s)),
                       step_period_s=step_period_s, sampling_interval=sampling_interval,
                       prometheus_ports=tuple(prometheus_ports) if prometheus_ports else None,
                       estimate_bytes=estimate_bytes)
    if not quiet:
        print(f"stormotel demo: starting {world_size} ranks (gloo, CPU), {cfg.steps} steps of "
              f"{step_period_s}s, sampling every {sampling_interval}s; faults: {faults}",
              file=sys.stderr, flush=True)
    started = time.monotonic()
    ours = getattr(_fork_server(), "_forkserver_pid", None) is None  # not the caller's own
    try:
        mp.set_forkserver_preload(list(RANK_PRELOAD))
        mp.start_processes(worker, args=(cfg,), nprocs=world_size, join=True,
                           start_method="forkserver")
    except mp.ProcessRaisedException as e:
        raise RuntimeError(f"a rank failed: {str(e).strip().splitlines()[-1]}") from None
    except mp.ProcessExitedException as e:
        raise RuntimeError(f"a rank exited abnormally: {e}") from None
    finally:
        shutil.rmtree(rendezvous_dir, ignore_errors=True)
        if ours:
            _stop_fork_server()
    if not quiet:
        print(f"stormotel demo: job finished in {time.monotonic() - started:.1f}s",
              file=sys.stderr, flush=True)
    return job_dir


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stormotel demo",
        description="Run a real 4-rank torch job on CPU (gloo) with a planted memory fault on "
                    "rank 2, tracked by stormotel on the simulated device, writing the OTLP "
                    "JSON-lines archive.")
    p.add_argument("--out", default="demo-out", metavar="DIR",
                   help="output folder; the archive goes to DIR/<job-id>/ (default: demo-out)")
    p.add_argument("--job-id", default=DEFAULT_JOB_ID, help="job id (default: %(default)s)")
    p.add_argument("--world-size", type=int, default=4, help="number of ranks (default: 4)")
    p.add_argument("--duration", type=float, default=8.0, metavar="SECONDS",
                   help="training time (default: 8)")
    p.add_argument("--interval", type=float, default=0.1, metavar="SECONDS",
                   help="tracker sampling interval (default: 0.1)")
    p.add_argument("--fault", default=DEFAULT_FAULTS, metavar="SPEC",
                   help="fault spec for the simulated device (default: %(default)s)")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if not 2 <= args.world_size <= 16:
        print("stormotel demo: error: --world-size must be between 2 and 16", file=sys.stderr)
        return exitcodes.USAGE
    if not (args.duration > 0 and args.interval > 0):
        print("stormotel demo: error: --duration and --interval must be > 0", file=sys.stderr)
        return exitcodes.USAGE
    try:
        job_dir = run_job(args.out, world_size=args.world_size, duration_s=args.duration,
                          faults=args.fault, job_id=args.job_id,
                          sampling_interval=args.interval)
    except FaultSpecError as e:
        print(f"stormotel demo: error: {e}", file=sys.stderr)
        return exit_code_of(e)
    except RuntimeError as e:
        print(f"stormotel demo: error: {e}", file=sys.stderr)
        return exitcodes.SOURCE_FAILURE
    # Every file the job left (metrics, their columnar companions, traces, stacks, dumps):
    # listing only the metrics lines once showed 8 of 12 files.
    files = sorted(p for p in job_dir.rglob("*") if p.is_file())
    print(f"Archive written to {job_dir}/ ({len(files)} files):")
    for path in files:
        print(f"  {path}  ({path.stat().st_size / 1024:.0f} KiB)")
    # The analysis step: the same command a user runs on the archive (imported only here, so
    # the tracker half never loads the analyzer). Findings are the expected outcome of the demo.
    from stormotel.analyzers.cli import main as analyze_main

    cli = cli_command()
    print(f"\n$ {cli} analyze {shlex.quote(str(job_dir))}", flush=True)
    code = analyze_main([str(job_dir)])
    print(next_steps(cli, job_dir), flush=True)
    return exitcodes.OK if code in (exitcodes.OK, exitcodes.FINDINGS) else code


def cli_command(environ: dict[str, str] | None = None) -> str:
    """How the user can run the ``stormotel`` command from their shell right now: ``stormotel``
    when it is on their PATH (an activated venv, ``pip install``), else the script beside this
    interpreter (``.venv/bin/stormotel`` after ``make demo``), relative when it is below the
    working directory. The demo used to print a bare ``stormotel`` that was not on PATH."""
    env = os.environ if environ is None else environ
    script = Path(sys.executable).parent / "stormotel"
    on_path = shutil.which("stormotel", path=env.get("PATH"))
    if on_path and Path(on_path).resolve() == script.resolve():
        return "stormotel"
    try:
        rel = script.absolute().relative_to(Path.cwd())
        return shlex.quote(str(rel))
    except ValueError:
        return shlex.quote(str(script))


def next_steps(cli: str, job_dir: Path) -> str:
    """The lines printed after the analysis: the exact commands to run next."""
    folder = shlex.quote(str(job_dir))
    lines = ["", "Next steps (copy and paste):",
             f"  {cli} analyze {folder}                 # the analysis above, again",
             f"  {cli} analyze {folder} --html demo-report.html   # charts in a browser"]
    if cli != "stormotel":
        activate = Path(cli).parent / "activate"
        lines += [f"  source {activate}   # then plain `stormotel ...` works in this shell",
                  "  (or install it for your user: `pipx install .` / `pip install .` from the"
                  " checkout)"]
    return "\n".join(lines)
