"""``stormotel`` command line: a thin dispatcher to per-command modules.

This is the one module that knows both halves of the project (tracker and analyzer). Each
subcommand lives in its own module exposing ``main(argv: list[str]) -> int`` with its own
argparse parser (``prog="stormotel <cmd>"``); they are imported only when run, so a training
process that only tracks never imports the analyzer, and ``stormotel --help`` stays instant.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TextIO

from stormotel import exitcodes
from stormotel.environment import DEBUG as ENV_DEBUG
from stormotel.errors import MissingExtraError, StormotelError, exit_code_of
from stormotel.streams import resolve
from stormotel.textsafe import one_line

#: Global flag (anywhere before ``--``) or environment variable that prints tracebacks.
DEBUG_FLAG = "--debug"

#: command → (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "track": ("stormotel.track_cli",
              "sample one GPU (cuda | nvml | simulated) and export OTel metrics and spans"),
    "analyze": ("stormotel.analyzers.cli",
                "find the first-cause rank, gap problems, collective spikes and stalls"),
    "estimate": ("stormotel.estimate.cli",
                 "predict a job's peak memory before it runs (fake tensors)"),
    "serve": ("stormotel.analyzers.serve.cli",
              "receive Alertmanager's webhook, analyse the alerting job, serve its report"),
    "dashboards": ("stormotel.dashboards.build",
                   "write the Grafana dashboards and Prometheus rules as files"),
    "demo": ("stormotel.demo",
             "run a 4-rank CPU training job with a planted fault, then analyze it"),
    "rehearse": ("stormotel.rehearse",
                 "set-up 2 on one machine: simulated ranks, their /metrics, a scrape config, a "
                 "local Prometheus, then the analysis"),
}

#: Optional dependencies a command may import → the extra that installs them. A tracker-only
#: install (``pip install stormotel``) has none of the analyzer's or the dashboards' libraries.
COMMAND_EXTRAS: dict[str, str] = {"analyze": "analyzer", "serve": "analyzer",
                                   "dashboards": "dashboards"}
EXTRA_MODULES: frozenset[str] = frozenset({"httpx", "orjson", "cramjam", "grafanalib", "yaml"})
MODULE_EXTRAS: dict[str, str] = {"torch": "torch", "pynvml": "nvml"}
#: Commands whose ``main(argv, out=, err=)`` prints only to the streams it is handed
#: (:mod:`stormotel.streams`): the ones run in-process, by ``serve``'s workers and the tests.
#: The others print to the process's streams and are run only as processes.
STREAMED: frozenset[str] = frozenset({"analyze", "dashboards"})


def missing_extra(command: str, exc: ModuleNotFoundError) -> MissingExtraError | None:
    """The one-line error for a missing optional dependency, or None when ``exc`` is about a
    module no extra provides (then it is a bug, reported as such)."""
    module = (exc.name or "").partition(".")[0]
    extra = MODULE_EXTRAS.get(module)
    if extra is None and module in EXTRA_MODULES:
        extra = COMMAND_EXTRAS.get(command, "all")
    if extra is None:
        return None
    return MissingExtraError(f"needs the optional dependency {module!r}, which this install"
                             f" lacks: pip install 'stormotel[{extra}]'")


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: stormotel <command> [options]", "",
             "GPU memory observability for distributed training.", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "Run 'stormotel <command> --help' for a command's options.",
              "Exit codes: 0 healthy, 1 findings, 2 usage/input error, 3 source failure, "
              "4 sink failure, 70 internal error, 130 interrupted.",
              f"{DEBUG_FLAG} (or {ENV_DEBUG}=1): print the traceback of an error."]
    return "\n".join(lines)


def _pop_debug(args: list[str]) -> tuple[list[str], bool]:
    """Remove ``--debug`` (before any ``--``) from the arguments; True when it was there."""
    end = args.index("--") if "--" in args else len(args)
    debug = DEBUG_FLAG in args[:end]
    rest = [a for a in args[:end] if a != DEBUG_FLAG] + args[end:]
    return rest, debug or os.environ.get(ENV_DEBUG, "") not in ("", "0")


def run_command(command: str, rest: list[str], *, debug: bool = False,
                out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The one exception boundary of every command: a known error is one line and its class's
    exit code; anything else is a bug, reported in one line with exit INTERNAL (the traceback
    only with ``--debug``), never a traceback that cron would read as FINDINGS. Its lines go
    to ``err`` (the process's stderr when None); a :data:`STREAMED` command gets ``out`` and
    ``err`` as its own."""
    prog = f"stormotel {command}"
    if command not in STREAMED and (out is not None or err is not None):
        raise ValueError(f"{prog} prints to the process's streams: run it as a process")
    out, err = resolve(out, err)
    try:
        module = importlib.import_module(COMMANDS[command][0])
        if command in STREAMED:
            return int(module.main(rest, out=out, err=err) or 0)
        return int(module.main(rest) or 0)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=err)
        return exitcodes.INTERRUPTED
    except StormotelError as exc:
        if debug:
            _print_traceback(err)
        print(f"{prog}: error: {one_line(exc)}", file=err)
        return exit_code_of(exc)
    except ModuleNotFoundError as exc:
        missing = missing_extra(command, exc)
        if missing is None:
            return _internal_error(prog, exc, debug, err)
        if debug:
            _print_traceback(err)
        print(f"{prog}: error: {missing}", file=err)
        return exit_code_of(missing)
    except RecursionError:
        if debug:
            _print_traceback(err)
        print(f"{prog}: internal error: input nested too deeply (RecursionError)"
              f"{'' if debug else f'; rerun with {DEBUG_FLAG} for the traceback'}",
              file=err)
        return exitcodes.INTERNAL
    except MemoryError:
        if debug:
            _print_traceback(err)
        print(f"{prog}: internal error: out of memory", file=err)
        return exitcodes.INTERNAL
    except Exception as exc:
        return _internal_error(prog, exc, debug, err)


def _print_traceback(err: TextIO) -> None:
    import traceback  # only with --debug: kept out of every command's start-up

    traceback.print_exc(file=err)


def _internal_error(prog: str, exc: Exception, debug: bool, err: TextIO) -> int:
    """A bug: one line with exit INTERNAL; the traceback only with ``--debug``."""
    if debug:
        _print_traceback(err)
    hint = "" if debug else f" (a bug; rerun with {DEBUG_FLAG} for the traceback)"
    print(f"{prog}: internal error: {type(exc).__name__}: {one_line(exc, 300)}{hint}",
          file=err)
    return exitcodes.INTERNAL


def main(argv: list[str] | None = None, *, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    """``stormotel ARGV``; ``out``/``err`` (the process's streams when None) receive every line
    — give them to run a :data:`STREAMED` command in-process without swapping ``sys``'s."""
    args, debug = _pop_debug(list(sys.argv[1:] if argv is None else argv))
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage(), file=out or sys.stdout)
        return exitcodes.OK
    if args[0] == "--version":
        from importlib.metadata import version

        print(f"stormotel {version('stormotel')}", file=out or sys.stdout)
        return exitcodes.OK
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"stormotel: unknown command {command!r}\n\n{_usage()}", file=err or sys.stderr)
        return exitcodes.USAGE
    return run_command(command, rest, debug=debug, out=out, err=err)


if __name__ == "__main__":
    sys.exit(main())
