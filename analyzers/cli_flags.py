"""Flag declarations of ``stormotel analyze`` that need no heavy import.

``stormotel analyze --help`` and a run over files must not import numpy, httpx or the scheduled
job just to declare flags: the declarations and the "which mode did the flags pick" predicates
live here, and the modules that act on them are imported when a command needs them.
"""

from __future__ import annotations

import argparse
from pathlib import Path


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
    g.add_argument("--world-size", type=int, metavar="N",
                   help="the job's world size, when ranks with no dump/log must be counted as "
                        "unseen (default: highest rank seen + 1)")


def wants_stalls(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "flight_recorder", None) or getattr(args, "logs", None))
