"""Slurm ``srun``'s per-task exit lines: which task of a step ended first, and how.

Why: a job launched by ``srun`` (one task per rank, or one per node running torchrun) often
leaves only srun's own words — "srun: error: gpu7: task 3: Out Of Memory" — and before this
rule such a log read "no evidence".

The lines, read in ``_task_finish`` (``src/srun/launch.c`` at slurm-23-02-7-1, 24-05-4-1,
26-05-3-1; ``src/plugins/launch/slurm/launch_slurm.c`` at slurm-20-11-9-1, the same code;
grammar pattern ``slurm.srun.task_exit``)::

    srun: error: <hosts>: task|tasks <ids>: Out Of Memory
    srun: error: <hosts>: task|tasks <ids>: Exited with exit code <C>
    srun: error: <hosts>: task|tasks <ids>: <strsignal(sig)>[ (core dumped)]

One line per exit message srun receives, in the order received; ``<ids>`` are the message's
global task ids (``SLURM_PROCID``) as ``bit_fmt`` ranges ("0-3,5"). What each proves:

- **Out Of Memory** is printed once (``oom_printed``), for the first exit message whose status is
  ``SIG_OOM``; slurmstepd sets it on every exit message of a node after task/cgroup's OOM check —
  run at that node's FIRST task end (``task_p_post_term``: "Only run this on the first call") —
  found OOM kills in the step's memory cgroup (``mgr.c``, ``_send_exit_msg``). So: that host's
  step was OOM-killed, and the listed task is the first of its tasks to end after it. One task:
  a culprit at ``low`` (the OOM kill may have hit another task of the same node, or a child
  process); several on one line: suspects.
- **A signal of its own death** (Killed, Segmentation fault, Bus error, Illegal instruction,
  Floating point exception) on the FIRST abnormal line, before srun stopped the step: that task
  died first — a culprit at ``low`` (SIGKILL is also how srun ends a step after KillWait).
- **An exit code**, SIGABRT or SIGTERM/SIGINT/SIGHUP: how a victim ends too (a watchdog timeout
  raised in Python exits 1; a ProcessGroupNCCL abort is SIGABRT; srun's stop is SIGTERM) —
  suspects only.
- **Anything after** srun's "Terminating StepId=…" (``_step_signal``: ``--kill-on-bad-exit``
  after the first abnormal exit, or a cancel), slurmstepd's "*** STEP … CANCELLED AT … ***"
  (``src/slurmd/slurmstepd/req.c``), "Job step aborted" / "Force Terminated"
  (``src/api/step_launch.c``), or an earlier abnormal task line: those tasks were killed or
  timed out after another's failure — victims, suspects at most (an OOM line excepted: a cgroup
  OOM kill is no consequence of a peer's failure).

Task or node: under srun's default one task per rank the task id is the global rank; when each
task is a per-node launcher (torchrun, ``deepspeed.launcher.launch``, accelerate), it is the
NODE's index. When the same output shows such a launcher, no line is read as a rank: each
becomes a rankless event (:mod:`.log_rankless`: undecided, what to collect). When nothing shows
either, the id is read as the rank — the rank_from says so, and the confidence is ``low``.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_failures as lf
from stormotel.analyzers.stalls.log_rankless import KIND as RANKLESS

PATTERN = "slurm.srun.task_exit"
_LINE = gr.BY_ID[PATTERN].regex
#: srun / slurmstepd stopping the step: every task line after it is a victim's
_STOPPED = re.compile(r"Terminating (?:job step )?StepId=|\*\*\* (?:STEP|JOB) \S{1,60} ON "
                      r"\S{1,200} CANCELLED AT|Job step aborted|Force Terminated")
#: a per-node launcher in the same output: srun's tasks are then nodes, not ranks
_NODE_LAUNCHERS = ("torch.distributed.elastic", "torchrun", "torch.distributed.run",
                   "torch.distributed.launch", "deepspeed.launcher.launch", "[default0]:",
                   "accelerate.commands.launch")
#: strsignal() text -> signal number (glibc's strings)
_SIGNALS = {"Hangup": 1, "Interrupt": 2, "Quit": 3, "Illegal instruction": 4, "Aborted": 6,
            "Bus error": 7, "Floating point exception": 8, "Killed": 9,
            "Segmentation fault": 11, "Terminated": 15}
RANK_FROM = ("srun's task id (SLURM_PROCID): the global rank when srun starts one task per "
             "rank — a node's index if each task is a per-node launcher (torchrun)")


def node_launcher_in(low: str) -> bool:
    """Whether a (lower-cased) line is a per-node launcher's: then a task or pod is a node."""
    return any(k in low for k in _NODE_LAUNCHERS)


class Scanner:
    """srun's task-exit lines of one file, each judged by what came before it."""

    def __init__(self, ctx: Any) -> None:
        self.stamp = ctx.stamp
        self.found: list[lf.Found] = []
        self._stopped = False  #: srun / slurmstepd stopped the step
        self._failed = False  #: an abnormal task line was already read
        self._node_launcher = False

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if not self._node_launcher and node_launcher_in(low):
            self._node_launcher = True
        if ("terminat" in low or "cancelled at" in low or "step aborted" in low) and \
                _STOPPED.search(seg):
            self._stopped = True
        if not (": task " in low or ": tasks " in low):
            return
        m = _LINE.search(seg)
        if m is None:
            return
        tasks = gr.parse_rank_list(m.group("tasks").replace(",", ", "))
        if not tasks:
            return
        self._read(no, seg, m, tasks)
        self._failed = True

    def _read(self, no: int, seg: str, m: re.Match[str], tasks: list[int]) -> None:
        host = m.group("host")[:100]
        after = ("srun had already stopped the step" if self._stopped else
                 "another task had already ended abnormally" if self._failed else "")
        base: dict[str, object] = {"launcher": "srun", "launcher_only": True, "host": host,
                                   "rank_from": RANK_FROM, "weak_rank": True}
        what = m.group("what")
        if self._stopped and what != "Out Of Memory":
            return  # killed by srun's stop after another task's failure: a victim, not a suspect
        if what == "Out Of Memory":
            own = len(tasks) == 1
            base |= {"category": "oom", "error": f"srun: {host}: Out Of Memory"}
            why = ("srun lists several tasks of the node whose step cgroup was OOM-killed: the "
                   "node is certain, the task is not")
        elif m.group("code") is not None:
            own = False
            base |= {"category": "exception", "exit_code": int(m.group("code")),
                     "error": f"srun: {host}: exited with exit code {m.group('code')}"}
            why = ("srun saw the task exit with a non-zero code: the code a Python exception "
                   "ends with, the task's own or a victim's timeout alike")
        else:
            sig = _SIGNALS[m.group("sig")]
            own = sig not in lf.VICTIM_SIGNALS and len(tasks) == 1 and not after
            base |= {"category": "signal", "exit_code": -sig, "signal": lf.signal_name(-sig),
                     "error": f"srun: {host}: {m.group('sig')}"}
            why = ("srun saw the task end on " + (lf.signal_name(-sig) or m.group("sig"))
                   + (": how a watchdog timeout (SIGABRT) or a stop from outside (SIGTERM) ends "
                      "a task that was only waiting" if sig in lf.VICTIM_SIGNALS else
                      " with other tasks on the same line: first only together"))
        if after and what != "Out Of Memory":
            own = False
            why = (f"srun reported this after {after} (--kill-on-bad-exit, a cancel, or the "
                   "peers' timeouts): a victim as often as not")
        if not own:
            base |= {"ambiguous": True, "why": f"{why} — task(s) {tasks[:16]} on {host}"}
        for task in tasks[:64]:
            self.found.append(lf.Found(lf.RANK_ERROR, no, task, self.stamp(seg), seg.strip()[:300],
                                       dict(base), PATTERN))

    def finish(self, text: str) -> list[lf.Found]:
        if not self._node_launcher:
            return self.found
        # each task is a node's launcher: no rank is named — one rankless event per line
        out: dict[int, lf.Found] = {}
        for f in self.found:
            out.setdefault(f.line, lf.Found(RANKLESS, f.line, None, f.ts_ns, f.text, {
                "reporter": None, "host": f.detail.get("host"),
                "error": f.detail.get("error")}, PATTERN))
        return list(out.values())
