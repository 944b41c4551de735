"""Open MPI's own crash report of one process: the process that printed it died of that signal.

Open MPI installs a signal handler in every process it starts (``opal/util/stacktrace.c``,
``show_stackframe``, 1.x-5.x): on SIGSEGV/SIGBUS/SIGILL/SIGFPE/SIGABRT it prints, prefixed with
``[host:pid]`` (the pid zero-padded ``%05d``)::

    [host:pid] *** Process received signal ***
    [host:pid] Signal: Segmentation fault (11)
    [host:pid] Signal code: Address not mapped (1)
    [host:pid] Failing at address: 0x47
    [host:pid] [ 0] …backtrace…
    [host:pid] *** End of error message ***

What a ``Signal: <name> (<n>)`` line proves: the process ``host:pid`` itself received that
signal — its own fault, not a peer's — for every signal but SIGABRT (6), which is also how a
process that only waited ends (PyTorch's watchdog and NCCL abort with it). The line carries a
pid, not a rank: a rank is known only when ``mpirun --tag-output`` put ``[job,rank]<stream>:``
in front of it (read by the log parser), and then that rank's failure is reported like any
rank's own error (:mod:`.log_verdicts`). Without a tag — or with several crashed pids and no
tags — the report goes to the rankless rule (:mod:`.log_rankless`): a process died, which one
is not said.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.stalls import log_failures as lf
from stormotel.analyzers.stalls.log_rankless import KIND

PATTERN = "openmpi.signal_handler"
#: ``[host:pid] Signal: <strsignal> (<signo>)`` (opal/util/stacktrace.c)
SIGNAL_LINE = re.compile(r"\[(?P<host>[^\]\s:]{1,255}):(?P<pid>\d{1,10})\] Signal: "
                         r"(?P<name>[A-Za-z][A-Za-z /-]{1,40}) \((?P<num>\d{1,2})\)")
#: signals a process receives for its own fault; SIGABRT (6) is left out (a waiter ends so too)
OWN = {4: "SIGILL", 7: "SIGBUS", 8: "SIGFPE", 11: "SIGSEGV"}
NAMES = {**OWN, 6: "SIGABRT"}


class Scanner:
    """One event per ``Signal:`` line: a rank's own error when the line carries its MPI rank,
    else a rankless crash (read by :mod:`.log_rankless`)."""

    def __init__(self, ctx: Any) -> None:
        self.stamp = ctx.stamp
        self.found: list[lf.Found] = []

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if "signal: " not in low:
            return
        m = SIGNAL_LINE.search(seg)
        if m is None:
            return
        num = int(m.group("num"))
        detail: dict[str, object] = {"signal": NAMES.get(num, f"signal {num}"),
                                     "process": f"{m.group('host')}:{int(m.group('pid'))}"}
        if rank is not None and num in OWN:
            detail |= {"category": "signal", "exit_code": -num,
                       "rank_from": "mpirun --tag-output tag on Open MPI's signal report"}
            self.found.append(lf.Found(lf.RANK_ERROR, no, rank, self.stamp(seg),
                                       seg.strip()[:300], detail, PATTERN))
            return
        detail["reporter"] = rank
        self.found.append(lf.Found(KIND, no, None, self.stamp(seg), seg.strip()[:300],
                                   detail, PATTERN))

    def finish(self, text: str) -> list[lf.Found]:
        return self.found

