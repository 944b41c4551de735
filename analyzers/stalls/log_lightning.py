"""Lightning / Fabric's DDP launcher: the child process its observer found dead first.

Why: a ``Trainer(strategy="ddp")`` / ``Fabric`` job started without torchrun launches local ranks
1 … n-1 as subprocesses of local rank 0; when one of them dies, local rank 0's observer thread
prints one line and SIGKILLs everything — often the only line left. Before this rule such a log
read "no evidence".

The line, read in ``_ChildProcessObserver._run``
(``lightning/fabric/strategies/launchers/subprocess_script.py`` of the lightning 2.1.0 and 2.4.0
wheels, the same text; the prefix is ``lightning_utilities``' ``rank_prefixed_message``, read at
0.11.2; grammar ``lightning.child_terminated``)::

    [rank: {i + 1}] Child process with PID {pid} terminated with code {returncode}.
    Forcefully terminating all other processes to avoid zombies 🧟

What it proves. Every 5 s the observer polls the children in local order and reports the FIRST
with a non-zero return code (of those ended within one period, the lowest), then SIGKILLs every
child and its own process: the others' ends are its kills and are never reported. ``N`` is the
child's LOCAL rank (local rank 0 is the observer's own process and is never named by it). The
code is ``Popen.returncode``: ``-N`` a signal.

- its own death signal (-9 — usually the host's OOM killer —, -11, -7, -4, -8) → a culprit at
  ``low``, read as the global rank only when nothing in the logs shows a second node (the same
  presumption as spawn's index, :mod:`.log_mp_spawn`); otherwise ``undecided`` naming the local
  rank;
- -6 (SIGABRT, a watchdog's end), -15/-2/-1, or an exit code (the child raised — a victim of a
  peer's failure leaves so too) → a suspect;
- different local ranks in one paste (several nodes, several runs) → nobody.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_mp_spawn as spawn
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner, log_finding

KIND = "lightning"
PATTERN = "lightning.child_terminated"
_OWN = {-9: "SIGKILL", -11: "SIGSEGV", -7: "SIGBUS", -4: "SIGILL", -8: "SIGFPE"}
_SIGNALS = {-6: "SIGABRT", -15: "SIGTERM", -2: "SIGINT", -1: "SIGHUP"} | _OWN


class Scanner(LineScanner):
    """One event per observer line; a stated second node is kept on the first one."""

    kind, patterns = KIND, (PATTERN,)

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.nodes: str | None = None

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if self.nodes is None:
            self.nodes = spawn.stated_nodes(seg, low)
        super().feed(no, seg, low, rank)

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        local = gr.parse_rank(m.group("rank"))
        if local is None:
            return None
        code = int(m.group("code"))
        return None, {"local_rank": local, "pid": int(m.group("pid")), "exit_code": code,
                      "signal": _SIGNALS.get(code)}

    def finish(self, text: str) -> list[Any]:
        for f in self.found:
            f.detail["second_node"] = self.nodes
        return self.found


REMEDIATION = {
    "own": "Read that process's own end (dmesg on the host for -9: the OOM killer names the "
           "PID the line gives) — the observer SIGKILLed every other process after it, so "
           "their ends are its kills.",
    "suspect": "The child ended the way a waiting victim ends (an exception, SIGABRT): collect "
               "every rank's own output (Lightning prints '[rank: N]' prefixes; or run under "
               "torchrun --tee 3) and look for the earliest own error.",
}


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """One finding for the observer lines in the logs together (module docstring)."""
    mine = [e for e in events if e.kind == KIND and e.detail]
    if not mine:
        return []
    locals_ = sorted({int(e.detail["local_rank"]) for e in mine})
    lead = mine[0].detail
    where = (f"Lightning's process observer found local rank {lead['local_rank']} (pid "
             f"{lead['pid']}) ended with code {lead['exit_code']} first")
    if len(locals_) > 1:
        return [log_finding(
            "undecided", [], "unknown", "low", PATTERN,
            f"Lightning's observers named different local ranks {locals_[:16]} — several nodes "
            "or runs: nobody is named", [REMEDIATION["suspect"]], mine,
            suspects=[], local_ranks=locals_[:64])]
    local, code = locals_[0], int(lead["exit_code"])
    second = spawn.second_node(mine, events, known)
    if code in _OWN and second is None:
        return [log_finding(
            "rank_failure", [local], "signal", "low", PATTERN,
            f"{where}: {_OWN[code]}, its own death — read as rank {local} because nothing in "
            "the logs shows a second node", [REMEDIATION["own"]], mine,
            rank_from="Lightning's local rank, presumed the global rank on one node",
            signal=_OWN[code], exit_code=code)]
    why = (f"it died of {_OWN[code]}, but the rank is LOCAL and {second}" if code in _OWN else
           f"it ended with {lead.get('signal') or f'exit code {code}'}: how a waiting victim "
           "or a stopped process ends as well")
    return [log_finding(
        "undecided", [], "unknown", "low", PATTERN, f"{where} — {why}",
        [REMEDIATION["own" if code in _OWN else "suspect"]], mine,
        suspects=[] if second else [local], exit_code=code)]
