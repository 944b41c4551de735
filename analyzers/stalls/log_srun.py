"""Slurm ``srun``'s launch failures: the tasks its nodes could not start.

``srun`` starts a step's tasks through each node's ``slurmd``; when a node answers
``RESPONSE_LAUNCH_TASKS`` with an error, ``_launch_handler`` in ``src/api/step_launch.c``
(read at slurm-23-02-7-1, 24-05-4-1, 26-05-3-1) prints, once per task of that node::

    srun: error: task 3 launch failed: Slurmd could not execve program

What it proves: task ``r`` — its ``SLURM_PROCID``, the global rank of a one-task-per-rank step
(torchrun under srun has one task per NODE: then ``r`` is a node's index) — never ran, for a
reason of its node (the program missing there, a credential, a prolog). It is that task's own
failure, not a consequence of a peer's; but srun lists every task of the node, and the reason is
the node's: each is a **suspect** (a ``rank_error`` marked ``ambiguous``), read with the rest of
the evidence (:mod:`.log_verdicts`), never a culprit on this line alone.

The step's other failure at launch, "timeout waiting for task launch, started %d of %d tasks",
names no task and is read by :mod:`.log_rankless`.
"""

from __future__ import annotations

import re

from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_failures as lf
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner

PATTERN = "slurm.srun.launch_failed"


class Scanner(LineScanner):
    """One ``rank_error`` (ambiguous) per "task r launch failed" line."""

    kind = lf.RANK_ERROR
    patterns = (PATTERN,)

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        if (task := gr.parse_rank(m.group("rank"))) is None:
            return None
        why = m.group("why").strip()[:160]
        return task, {
            "category": "exception", "ambiguous": True, "launcher_only": True,
            "error": f"srun: task launch failed: {why}", "launcher": "srun",
            "rank_from": "srun's task id (SLURM_PROCID)",
            # one sentence for every task with the same reason (the finding lists the tasks)
            "why": f"srun could not start these tasks on their node ({why}): the node's "
                   "failure, shared by every task srun lists with it — suspects, not culprits; "
                   "check that node (the program's path there, slurmd's log) — the same reason "
                   "on every task of the step is the step's setup (--mpi, the interconnect)"}
