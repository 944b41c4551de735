"""The command line of ``stormotel analyze``, in one room: :mod:`.command` (parse, build the
options, run; the one place failures become exit codes), :mod:`.flags` (the parser, declared
without heavy imports), :mod:`.job_flags` (the TSDB job's flags: source, dcgm, window, sinks),
:mod:`.args` (the parsed namespace turned into typed options once, flags that need each other
checked). Nothing below the command line imports it."""

from stormotel.analyzers.cli.command import PROG, build_parser, main

__all__ = ["PROG", "build_parser", "main"]
