"""``stormotel track``: sample one GPU and export it, for a duration or until Ctrl-C.

Useful beside a training job that is not instrumented (nvml sees every process on the GPU), to
try destinations out, and — with ``--sampler simulated --fault ...`` — to produce incident
telemetry on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

from stormotel import environment, exitcodes, schema
from stormotel.argtypes import percent, port, positive_float, seconds
from stormotel.config import (
    DEFAULT_ARCHIVE_DIR,
    ExportConfig,
    IdentityConfig,
    SamplingConfig,
    ThresholdConfig,
)
from stormotel.errors import StormotelError
from stormotel.samplers import SAMPLERS
from stormotel.samplers.faults import PROCESS_FAULTS, Fault, parse_faults
from stormotel.samplers.simulated import SimulatedSampler
from stormotel.textsafe import one_line, redact
from stormotel.units import parse_bytes

if TYPE_CHECKING:  # imported where a tracker is built: --help and flag errors need neither
    # the OTel SDK nor numpy (0.4 -> 0.1 s of CPU for `stormotel track --help`)
    from stormotel.telemetry import Telemetry
    from stormotel.tracker import MemoryTracker

#: Smallest simulated device: the baseline (weights, activations, gap) needs ~5.5 GiB.
MIN_SIMULATED_BYTES = 8 * 2**30

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stormotel track",
        description="Sample one GPU's memory and export it as OpenTelemetry metrics and spans. "
                    "Runs for --duration seconds or until Ctrl-C, then flushes and exits 0.",
        epilog="With no destination flag (and no OTEL_EXPORTER_OTLP_*ENDPOINT set) the OTLP "
               f"JSON-lines archive is written to ./{DEFAULT_ARCHIVE_DIR}. Identity falls back "
               "to torchrun/SLURM/Open MPI variables. Example: stormotel track --sampler "
               "simulated --duration 10 --archive out --fault 'rank=0:leak@t=2s,rate=64MiB/s'. "
               f"Simulated ranks started as separate processes line their faults up when each "
               f"gets the same ${environment.SIM_EPOCH_NS} (the shared t=0, ns since the epoch, "
               "e.g. $(date +%s%N) a few seconds ahead), or the same "
               f"${environment.SIM_EPOCH_FILE}, a file that will hold it, written once every "
               "rank has started (no fault before; --duration counts from it); without either "
               "each rank's t=0 is its own start. `stormotel rehearse` does this for N ranks "
               "and a local Prometheus.")
    _add_sampling_args(p)
    _add_identity_args(p)
    _add_destination_args(p)
    _add_threshold_args(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return p


def _add_sampling_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what to sample")
    g.add_argument("--sampler", choices=SAMPLERS, default="cuda",
                   help="cuda: PyTorch allocator + cudaMemGetInfo (this process); nvml: the "
                        "driver's view of the whole GPU; simulated: a scriptable fake GPU for "
                        "machines without one (default: cuda)")
    g.add_argument("--device", default=None,
                   help="GPU index or 'cuda:N' (default: the current CUDA device, NVML index "
                        "0, or the local rank for simulated)")
    g.add_argument("--interval", type=positive_float, default=0.1, metavar="SECONDS",
                   help="sampling interval in seconds (default: 0.1, i.e. 10 Hz)")
    g.add_argument("--duration", type=positive_float, default=None, metavar="SECONDS",
                   help="stop after this many seconds (default: run until Ctrl-C/SIGTERM)")
    g.add_argument("--fault", action="append", default=[], metavar="SPEC",
                   help="simulated sampler only: plant a fault, e.g. "
                        "'rank=2:first_spike@t=3s,delta=512MiB,lead=500ms' or "
                        "'rank=0:leak@t=1s,rate=32MiB/s'; kinds: leak, spike, fragmentation, "
                        "first_spike, oom (exit=1.5s: the OOM ends the rank that long after "
                        "it, exit status 1), stall (steps stop, samples go on), crash (the "
                        "process dies of SIGKILL); repeatable (also "
                        f"${environment.SIM_FAULTS})")
    g.add_argument("--device-memory", default=None, metavar="SIZE",
                   help="simulated sampler only: the device's size, e.g. 80GiB (default: "
                        "16GiB; at least 8GiB)")
    g.add_argument("--gpu-uuid", default=None, metavar="UUID",
                   help="simulated sampler only: the GPU UUID the rank reports (gpu_uuid, "
                        "hw.id), e.g. one dcgm-exporter shows (default: GPU-simulated-<device>)")


def _add_identity_args(p: argparse.ArgumentParser) -> None:
    i = p.add_argument_group("identity (default: torchrun, SLURM or Open MPI variables)")
    i.add_argument("--job-id", default=None,
                   help="job identifier shared by all ranks (default, first found: "
                        f"${environment.JOB_ID}, TORCHELASTIC_RUN_ID unless 'none', "
                        "SLURM_JOB_ID[.SLURM_STEP_ID], Open MPI's PMIX_NAMESPACE / "
                        "OMPI_MCA_ess_base_jobid / OMPI_MCA_orte_hnp_uri, an id agreed through "
                        "the torch.distributed store, else local-<time>-<pid>)")
    i.add_argument("--rank", type=int, default=None, help="global rank (0 <= rank < world size)")
    i.add_argument("--local-rank", type=int, default=None, help="rank within this host")
    i.add_argument("--world-size", type=int, default=None, help="number of ranks in the job")


def _add_destination_args(p: argparse.ArgumentParser) -> None:
    d = p.add_argument_group("destinations (any combination)")
    d.add_argument("--archive", default=None, metavar="DIR",
                   help="write the OTLP JSON-lines archive to DIR/<job_id>/ (metrics per "
                        "--archive-format, spans in rank-<R>.traces.jsonl[.zst])")
    d.add_argument("--archive-interval", type=positive_float, default=None, metavar="SECONDS",
                   help="compact format (the default): the batch length, one OTLP line per "
                        "SECONDS with every sample in it (default: 1 s); lines format: one line "
                        "per SECONDS instead of one per sample, each with the latest values and "
                        "the peak since the previous line (default: every sample)")
    d.add_argument("--archive-format", choices=schema.ARCHIVE_FORMATS, default=None,
                   help="lines: one SDK request per sample, plain JSON lines; compact: every "
                        "sample, one request per batch (--archive-interval, default 1 s), zstd, "
                        "rotated: DIR/<job_id>/rank-<R>.NNNNN.metrics.jsonl.zst (default: "
                        f"${environment.ARCHIVE_FORMAT}, else {schema.ARCHIVE_FORMAT_DEFAULT})")
    d.add_argument("--otlp-endpoint", default=None, metavar="URL",
                   help="send OTLP to a collector, e.g. http://localhost:4318 (http; a base "
                        "URL, /v1/metrics and /v1/traces are appended) or http://localhost:4317 "
                        "(grpc); default: OTEL_EXPORTER_OTLP_ENDPOINT")
    d.add_argument("--otlp-protocol", choices=("grpc", "http", "http/protobuf"), default=None,
                   help="OTLP transport (default: OTEL_EXPORTER_OTLP_PROTOCOL, else "
                        "http/protobuf as the OTel specification says)")
    d.add_argument("--otlp-interval", type=positive_float, default=None, metavar="SECONDS",
                   help="OTLP metric export interval; each export carries the latest value and "
                        "the peak since the previous export (default: OTEL_METRIC_EXPORT_INTERVAL"
                        ", else 10 s)")
    d.add_argument("--prometheus-port", type=port, default=None, metavar="PORT",
                   help="serve a Prometheus /metrics endpoint on PORT (0 = any free port)")
    d.add_argument("--prometheus-addr", default="0.0.0.0", metavar="ADDR",
                   help="address the Prometheus endpoint binds to (default: 0.0.0.0)")
    d.add_argument("--linger-s", type=seconds, default=None, metavar="SECONDS",
                   help="after an OOM, SIGTERM or a failure, keep the Prometheus endpoint up "
                        "until one scrape has read the final state, at most SECONDS; 0 = "
                        f"never wait (default: ${environment.LINGER_S}, else "
                        f"{schema.LINGER_AFTER_EVENT_S_DEFAULT:g})")
    d.add_argument("--prometheus-linger", type=float, default=60.0, metavar="SECONDS",
                   help="after a clean stop, keep the endpoint up until Prometheus scraped it "
                        "once more (at most SECONDS; only if it was ever scraped), so alert "
                        "rules see the stop and do not take the rank for a crashed one "
                        "(default: %(default)s; 0 = stop at once)")


def _add_threshold_args(p: argparse.ArgumentParser) -> None:
    t = p.add_argument_group("thresholds and edges")
    t.add_argument("--warning-percent", type=percent,
                   default=schema.DEFAULT_THRESHOLDS[schema.THRESHOLD_WARNING],
                   help="device-memory percent that emits a 'warning' threshold event "
                        "(default: %(default)s)")
    t.add_argument("--critical-percent", type=percent,
                   default=schema.DEFAULT_THRESHOLDS[schema.THRESHOLD_CRITICAL],
                   help="device-memory percent that emits a 'critical' event (default: "
                        "%(default)s)")
    t.add_argument("--hysteresis", type=float, default=2.0, metavar="PERCENT",
                   help="a level re-arms only after usage falls this many points below it "
                        "(default: 2.0)")
    t.add_argument("--peak-window", type=positive_float, default=schema.PEAK_WINDOW_S,
                   metavar="SECONDS", help="the peak gauges hold the maximum over this window of "
                   "the tracker's own clock, never reset by a read (default: %(default)s, "
                   "covers a 30 s scrape)")
    t.add_argument("--estimate", default=None, metavar="SIZE|FILE",
                   help="predicted peak: a size (e.g. 40GiB) or a `stormotel estimate` JSON file "
                        "with peak_bytes; exported as stormotel.memory.estimate")


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    built = _tracker_from_args(args)
    if isinstance(built, int):
        return built
    tracker, faults = built
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    tracker.start_tracking()
    if not args.quiet:
        _print_start(tracker, args)
    run = _track(tracker, args, faults, stop)
    # The rank's outcome is decided: a SIGTERM from here on (the launcher stopping the rest of
    # the job as this rank leaves) must not turn its status into "killed by SIGTERM" (-15).
    # Python puts the default disposition back while it finalizes, so ignore it from exit on.
    atexit.register(_ignore_sigterm_while_leaving)
    stats = tracker.stats
    if not args.quiet:
        dropped = sum(stats["dropped"].values())
        failed = sum(stats["export_failures"].values())
        print(f"stormotel track: {'interrupted, ' if run.interrupted else ''}flushed "
              f"{stats['samples']} samples ({dropped} dropped, {failed} failed exports)",
              file=sys.stderr)
    if run.died:
        print("stormotel track: the simulated rank ran out of memory and ended (fault oom "
              "with exit=)", file=sys.stderr)
        return exitcodes.FINDINGS
    # Ctrl-C is "interrupted" (130, as documented); SIGTERM is the orderly stop a scheduler
    # asks for (a pod shutting down), so it exits OK once the samples are flushed.
    if signal.SIGINT in received:
        return exitcodes.INTERRUPTED
    return _no_export_succeeded(run.telemetry, stats, run.had_otlp) or exitcodes.OK


def _ignore_sigterm_while_leaving() -> None:
    """Run at exit, after the rank's last flush: an ignored SIGTERM stays ignored through the
    interpreter's finalization, so the exit status stays the one ``main`` returned."""
    with contextlib.suppress(ValueError, OSError):  # not the main thread / interpreter
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _usage(msg: str) -> int:
    print(f"stormotel track: error: {one_line(msg)}", file=sys.stderr)
    return exitcodes.USAGE


def _tracker_from_args(args: argparse.Namespace) -> tuple[MemoryTracker, tuple[Fault, ...]] | int:
    """The tracker the flags configure and the faults they plant, or the usage exit status
    (its message printed) for flags that do not fit together or do not parse."""
    for flag, value in (("--fault", args.fault), ("--device-memory", args.device_memory),
                        ("--gpu-uuid", args.gpu_uuid)):
        if value and args.sampler != "simulated":
            return _usage(f"{flag} needs --sampler simulated")
    if args.prometheus_linger < 0:
        return _usage(f"--prometheus-linger {args.prometheus_linger:g} must be >= 0")
    from stormotel.tracker import MemoryTracker

    try:
        faults = parse_faults(args.fault)
        estimate_flag: str | None = args.estimate
        estimate: int | str | None = estimate_flag
        if estimate_flag is not None:
            with contextlib.suppress(ValueError):  # a size (1234, 40GiB); else a JSON file
                estimate = parse_bytes(estimate_flag)
        tracker = MemoryTracker(
            device=args.device, sampler=args.sampler, sampling_interval=args.interval,
            identity=IdentityConfig(job_id=args.job_id, rank=args.rank,
                                    local_rank=args.local_rank, world_size=args.world_size),
            sampling=SamplingConfig(
                peak_window_s=args.peak_window, faults=args.fault or None,
                sampler_options=_simulated_options(args) if args.sampler == "simulated"
                else {}),
            export=ExportConfig(
                archive_dir=args.archive, archive_interval_s=args.archive_interval,
                archive_format=args.archive_format, otlp_endpoint=args.otlp_endpoint,
                otlp_protocol=args.otlp_protocol, otlp_interval_s=args.otlp_interval,
                prometheus_port=args.prometheus_port, prometheus_addr=args.prometheus_addr,
                prometheus_linger_s=args.prometheus_linger,
                linger_after_event_s=args.linger_s),
            thresholds=ThresholdConfig(
                levels={schema.THRESHOLD_WARNING: args.warning_percent,
                        schema.THRESHOLD_CRITICAL: args.critical_percent},
                hysteresis_percent=args.hysteresis, estimate_bytes=estimate))
    except (StormotelError, ValueError) as e:  # identity, fault spec, sampler, flag values
        return _usage(str(e))
    return tracker, faults


def _print_start(tracker: MemoryTracker, args: argparse.Namespace) -> None:
    """One line on stderr: who this rank is, what it samples, where it exports."""
    ident = tracker.identity
    where = []
    if tracker.archive_files:
        where.append(f"archive {tracker.archive_files[0].parent}")
    if tracker.prometheus_address:
        where.append("prometheus http://{}:{}/metrics".format(*tracker.prometheus_address))
    if schema.DEST_OTLP in tracker.destinations:
        where.append(f"otlp {redact(args.otlp_endpoint or '(OTEL_EXPORTER_OTLP_* env)')}")
    print(f"stormotel track: job {ident.job_id} rank {ident.rank}/{ident.world_size} "
          f"{tracker.sampler.name} device {ident.gpu} every {args.interval}s -> "
          f"{', '.join(where)}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class _Tracked:
    """How the tracking ended, and what the stop released (read before it)."""

    interrupted: bool
    died: bool
    had_otlp: bool
    telemetry: Telemetry | None


def _track(tracker: MemoryTracker, args: argparse.Namespace, faults: tuple[Fault, ...],
           stop: threading.Event) -> _Tracked:
    """Sample until ``--duration``, a signal, or a simulated OOM's exit; then stop the tracker
    (flushing every destination). A simulated clock whose t=0 comes from an epoch file counts
    ``--duration`` from that t=0 (the rank runs until t = duration; no deadline before it)."""
    simulated = tracker.sampler if isinstance(tracker.sampler, SimulatedSampler) else None
    pending = simulated is not None and simulated.epoch_pending
    deadline = _earliest(None if args.duration is None or pending
                         else time.monotonic() + args.duration, _oom_exit_deadline(tracker))
    interrupted = died = False
    try:
        while not stop.is_set():
            if pending and simulated is not None and simulated.epoch_known():
                pending = False
                deadline = _earliest(None if args.duration is None else
                                     time.monotonic() + args.duration - simulated.elapsed_s(),
                                     _oom_exit_deadline(tracker))
            remaining = 1.0 if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                break
            if simulated is None:
                stop.wait(min(1.0, remaining))
                continue
            _play_step(tracker, simulated, stop, min(simulated.step_period_s, remaining),
                       has_process_faults=any(f.kind in PROCESS_FAULTS for f in faults))
        interrupted = stop.is_set()
        oom_exit = _oom_exit_deadline(tracker)
        died = not interrupted and oom_exit is not None and time.monotonic() >= oom_exit
    finally:
        # the destinations are released by the stop: which ones ran is read before it
        had_otlp = schema.DEST_OTLP in tracker.destinations
        telemetry = tracker.telemetry
        # A rank that dies of its OOM ends badly: the tracker lingers as at an uncaught OOM.
        tracker.stop_tracking(linger=True if died else None)
    return _Tracked(interrupted, died, had_otlp, telemetry)


def _earliest(*times: float | None) -> float | None:
    """The earliest of the deadlines that are set (None: none is)."""
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _oom_exit_deadline(tracker: MemoryTracker) -> float | None:
    """Monotonic time at which a simulated ``oom`` fault with ``exit=`` ends this rank."""
    from stormotel.samplers.simulated import SimulatedSampler

    sampler = tracker.sampler
    if not isinstance(sampler, SimulatedSampler):
        return None
    at_s = sampler.exit_after_oom_s()
    if at_s is None:
        return None
    return time.monotonic() + max(0.0, at_s - sampler.elapsed_s())


def _no_export_succeeded(telemetry: Telemetry | None, stats: dict[str, Any],
                         had_otlp: bool) -> int:
    """SINK_FAILURE (4) when OTLP was asked for and no export to it ever succeeded (failed, or
    still retrying when the final flush gave up): a collector that received nothing is not a
    healthy run (a wrong port used to exit 0 behind one warning). The archive and the
    Prometheus endpoint are judged by their own errors."""
    if not had_otlp:
        return 0
    failures: dict[str, int] = stats.get("export_failures") or {}
    successes: dict[str, int] = stats.get("export_successes") or {}
    failed = sum(n for key, n in failures.items() if key.startswith(f"{schema.DEST_OTLP}/"))
    if successes.get(schema.DEST_OTLP, 0) > 0:
        return 0
    hint = telemetry.otlp_failure_hint() if telemetry is not None else ""
    what = f"{failed} failed" if failed else "none answered within the stop's bound"
    print(one_line(f"stormotel track: error: no OTLP export succeeded ({what})"
                   + (f"; {hint}" if hint else "; is the collector reachable at that "
                      "endpoint?")), file=sys.stderr)
    return exitcodes.SINK_FAILURE


def _simulated_options(args: argparse.Namespace) -> dict[str, object]:
    """The simulated device the flags ask for (size, UUID); ValueError on bad input."""
    options: dict[str, object] = {}
    if args.device_memory is not None:
        size = parse_bytes(args.device_memory)
        if size < MIN_SIMULATED_BYTES:
            raise ValueError(f"--device-memory {args.device_memory} must be at least 8GiB (the "
                             "simulated training baseline holds about 5.5 GiB)")
        options["total_bytes"] = size
    if args.gpu_uuid:
        options["gpu_uuid"] = args.gpu_uuid
    return options


def _play_step(tracker: MemoryTracker, sampler: SimulatedSampler, stop: threading.Event,
               seconds: float, *, has_process_faults: bool) -> None:
    """One simulated training step: the step span (unless the rank stalls), a planted crash as
    SIGKILL."""
    if has_process_faults and sampler.started("crash"):
        os.kill(os.getpid(), signal.SIGKILL)  # no atexit, no flush: what a killed rank leaves
    if has_process_faults and sampler.started("stall"):
        stop.wait(seconds)  # the tracker samples on; the step no longer advances
        return
    with tracker.step():
        stop.wait(seconds)
