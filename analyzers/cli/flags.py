"""Flag declarations of ``stormotel analyze`` that need no heavy import.

``stormotel analyze --help`` and a run over files must not import numpy, httpx or the scheduled
job just to declare flags: the parser is built here; :mod:`stormotel.analyzers.cli.args` turns
what it parsed into typed options, and the modules that act on them are imported when a command
needs them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from stormotel.analyzers.algorithms.settings import SENSITIVITIES
from stormotel.analyzers.alignments import ALIGN_WALL, ALIGNMENTS
from stormotel.analyzers.cli import job_flags as job_options
from stormotel.analyzers.messages import PROG

from stormotel.streams import StreamParser

EPILOG = """\
exit codes: 0 healthy (no findings), 1 findings reported, 2 usage or input error,
3 no telemetry could be read, 4 writing an output failed, 70 internal error (a bug;
'stormotel --debug analyze ...' prints the traceback), 130 interrupted.

examples:
  stormotel analyze archive/run-7/                      # every rank's OTLP files
  stormotel analyze 'exports/events_rank*.json' --format json --output report.json
  stormotel analyze archive/ --ranks 0,4-7 --align markers --sensitivity high
  stormotel analyze archive/run-7/ --html report.html   # charts, opens offline
  stormotel analyze --prometheus http://prometheus:9090 --job-id run-7 --since 1h
  stormotel analyze --prometheus http://prometheus:9090 --dcgm --job-id run-7 --since 1h
  stormotel analyze --flight-recorder /shared/fr-dumps/ # a hung job's per-rank dumps
  stormotel analyze --logs 'slurm-1234-*.out'           # a hung job's worker logs
"""


# --- arguments ---------------------------------------------------------------------------------
def _add_source_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("telemetry sources")
    g.add_argument("paths", nargs="*", metavar="PATH",
                   help="files, folders (walked recursively) or quoted globs: OTLP JSON-lines "
                        "archives (.jsonl, also .gz/.zst), length-prefixed OTLP protobuf (.pb), "
                        "Stormlog telemetry exports (JSON, JSON lines, CSV). Merged and "
                        "de-duplicated across files.")
    g.add_argument("--job-id", metavar="ID",
                   help="analyse only this job's data when the files hold several jobs, and label "
                        "the report with it (default: the job id found in the data)")


def _add_analysis_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("analysis")
    g.add_argument("--ranks", metavar="SPEC", default="all",
                   help="ranks to analyse: 'all' (default), '0,2', '0,4-7'; requested ranks "
                        "with no data are reported missing")
    g.add_argument("--align", choices=ALIGNMENTS, default=ALIGN_WALL,
                   help="clock alignment across ranks: 'wall' trusts timestamps (NTP-synced "
                        "clusters; default), 'first-sample' lines up each rank's first sample, "
                        "'markers' lines up step/collective markers shared by all ranks. The "
                        "choice is stated in the output.")
    add_threshold_arguments(g)


def add_threshold_arguments(g: argparse._ArgumentGroup) -> None:
    """The threshold preset and its overrides, as every command that analyses takes them
    (``analyze``; ``serve`` for the runs its alerts start)."""
    g.add_argument("--sensitivity", choices=SENSITIVITIES, default="medium",
                   help="threshold preset: 'low' is strict (fewer, surer findings), 'high' is "
                        "broad; default medium")
    g.add_argument("--set", dest="overrides", action="append", metavar="NAME=VALUE",
                   help="override one threshold of the preset, e.g. --set spike_z=5 --set "
                        "rise_floor_bytes=134217728 (repeatable; names in docs/analyzer.md)")


def _add_output_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: human summary (default); json: the versioned report "
                        "(stormotel.report/v1)")
    g.add_argument("--output", "-o", metavar="FILE",
                   help="write the report to FILE instead of stdout ('-' = stdout)")
    g.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")
    g.add_argument("--oom-dumps", action="append", metavar="PATH",
                   help="OOM ring dumps (*.ring.jsonl files or folders) for the OOM forensics; "
                        "dumps the telemetry's OOM events point at are read automatically")
    g.add_argument("--html", type=Path, metavar="FILE",
                   help="also write a self-contained HTML report (charts of every rank's "
                        "memory with the findings; opens offline in any browser)")


def build_parser() -> StreamParser:
    p = StreamParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="Find the rank whose memory went wrong first, per-rank gap problems "
                    "(drift, spikes, fragmentation) and collective-synchronised spikes in "
                    "multi-rank GPU memory telemetry.")
    _add_source_arguments(p)
    _add_analysis_arguments(p)
    add_stall_arguments(p)  # stuck jobs: Flight Recorder dumps, worker logs
    _add_output_arguments(p)
    job_options.add_job_arguments(p, include_job_id=False)  # TSDB source, sinks, cron safety
    return p


def add_stall_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "stuck jobs", "Flight Recorder dumps and worker logs; usable with or without telemetry")
    g.add_argument("--flight-recorder", type=Path, metavar="DIR",
                   help="folder of per-rank Flight Recorder dumps (pickle from _dump_fr_trace "
                        "or JSON from _dump_fr_trace_json, format 2.x), named with the rank "
                        "(nccl_trace_rank_3, <host>_rank3.json); a single dump file also works. "
                        "Read with a restricted unpickler: nothing in a dump is executed.")
    g.add_argument("--logs", nargs="+", action="extend", metavar="PATH",
                   help="worker logs (files, folders, quoted globs; one file per rank or "
                        "interleaved) with ProcessGroupNCCL watchdog lines of any PyTorch "
                        "version; launcher prefixes, wrapped and progress-bar lines tolerated. "
                        "Put telemetry PATHs before --logs (it takes every path after it).")
    g.add_argument("--stacks", nargs="+", action="extend", metavar="PATH",
                   help="stack snapshots the tracker took when a rank stopped making progress "
                        "(rank-R-PID-N.stack.txt / .stack.pending, or folders holding them); "
                        "those under telemetry PATHs (<archive>/<job>/stacks/) are read anyway")
    g.add_argument("--world-size", type=int, metavar="N",
                   help="the job's world size, when ranks with no dump/log must be counted as "
                        "unseen (default: highest rank seen + 1)")
    add_live_stall_arguments(p)


def add_live_stall_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "live stuck jobs", "ask a job that still runs (see docs/stalls.md, 'Live sources')")
    g.add_argument("--nccl-ras", action="append", metavar="HOST[:PORT]",
                   help="query the NCCL RAS thread (NCCL 2.24+; JSON from 2.28.7) of a running "
                        "job at HOST:PORT (default port 28028) for missing ranks and "
                        "mismatched collective counts per communicator; repeatable. Example: "
                        "--nccl-ras 127.0.0.1 --nccl-ras node7:28028. An endpoint that does "
                        "not answer is an input error (exit 2).")
    g.add_argument("--fr-pipe", metavar="PREFIX",
                   help="make every rank on this host dump its Flight Recorder now, by writing "
                        "to the pipes PREFIX<rank>.pipe (the job's "
                        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE), then read the dumps from the job's "
                        "TORCH_FR_DUMP_TEMP_FILE / TORCH_NCCL_DEBUG_INFO_TEMP_FILE prefix (read "
                        "from this shell's environment, default /tmp/nccl_trace_rank_). "
                        "Example: --fr-pipe /tmp/fr_pipe_")
    g.add_argument("--live-timeout", type=float, metavar="SECONDS",
                   help="how long to wait for each live source (default: 15 s per RAS "
                        "endpoint, 30 s for the Flight Recorder dumps)")
