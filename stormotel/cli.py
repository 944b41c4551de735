"""``stormotel`` command line: a thin dispatcher to per-command modules.

This is the one module that knows both halves of the project (tracker and analyzer). Each
subcommand lives in its own module exposing ``main(argv: list[str]) -> int`` with its own
argparse parser (``prog="stormotel <cmd>"``); they are imported only when run, so a training
process that only tracks never imports the analyzer, and ``stormotel --help`` stays instant.
"""

from __future__ import annotations

import importlib
import sys

from stormotel import exitcodes

#: command → (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "track": ("stormotel.track_cli",
              "sample one GPU (cuda | nvml | simulated) and export OTel metrics and spans"),
    "analyze": ("analyzers.cli",
                "find the first-cause rank, gap problems, collective spikes and stalls"),
    "estimate": ("stormotel.estimate.cli",
                 "predict a job's peak memory before it runs (fake tensors)"),
    "dashboards": ("dashboards.build",
                   "write the Grafana dashboards and Prometheus rules as files"),
    "demo": ("stormotel.demo",
             "run a 4-rank CPU training job with a planted fault, then analyze it"),
}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: stormotel <command> [options]", "",
             "GPU memory observability for distributed training.", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "Run 'stormotel <command> --help' for a command's options.",
              "Exit codes: 0 healthy, 1 findings, 2 usage/input error, 3 source failure, "
              "4 sink failure."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return exitcodes.OK
    if args[0] == "--version":
        from importlib.metadata import version

        print(f"stormotel {version('stormotel')}")
        return exitcodes.OK
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"stormotel: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return exitcodes.USAGE
    module = importlib.import_module(COMMANDS[command][0])
    try:
        return int(module.main(rest) or 0)
    except KeyboardInterrupt:
        print("stormotel: interrupted", file=sys.stderr)
        return exitcodes.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
