"""Process exit codes shared by every stormotel command, so cron jobs and CI can act on them.

Documented in docs/exit-codes.md; never reuse a number for another meaning.
"""

OK = 0  #: ran, nothing found (healthy)
FINDINGS = 1  #: ran, findings reported
USAGE = 2  #: bad arguments or bad input the user can fix (argparse uses 2 as well)
SOURCE_FAILURE = 3  #: no telemetry could be read (endpoint down, no files, nothing parseable)
SINK_FAILURE = 4  #: analysis done, but writing results (annotations, push, files) failed
INTERRUPTED = 130  #: Ctrl-C
INTERNAL = 70  #: a bug in stormotel (sysexits EX_SOFTWARE); never 1, so a crash is not "findings"
