"""PaddlePaddle's launcher (``python -m paddle.distributed.launch``): the container it found failed.

Why: a Paddle job's launcher prints one block when a trainer process ends non-zero, and it is
often all a user pastes; before this rule the log read "no evidence" (the older
``launch_utils`` "ABORT!!!" line is read by :mod:`.log_mpirun`).

The lines, read in ``python/paddle/distributed/launch/`` of the paddlepaddle 2.6.2 and 3.0.0
wheels (``controllers/controller.py``'s older ``str.format`` form through the index; grammar
``paddle.launch.container_failed``)::

    LAUNCH INFO <time> Pod failed
    LAUNCH ERROR <time> Container failed !!!
    Container rank N status failed cmd ['python', '-u', 'train.py', …] code C log log/workerlog.N

What it proves. ``ControllerBase.watch`` calls ``Pod.watch``, which every 1 s walks the
containers in LOCAL order and returns at the first FAILED one; ``failed_container()[0]`` is then
the lowest-index container failed at that moment — of those ended within one poll, the lowest,
not the first. ``N`` is ``Container.rank``, set by ``Pod.add_container`` to the container's
index on its node (LOCAL; the global rank is ``PADDLE_TRAINER_ID`` = N + node index × containers
per node). ``C`` is ``Popen.poll()`` (-N a signal). The launcher then stops every other
container, whose ends are never printed.

An exit-code report's first rank was the culprit in only 65 % of the measured cases
(docs/stalls.md, "Exit-code reports"), so nothing here is a culprit:

- one local index, nothing showing a second node (the launcher's "Job: …, replicas R[…]" line
  with R > 1, or the shared node hints) → ``undecided`` at ``low``, that index a SUSPECT;
- a second node, or different indices (several launchers or runs) → nobody named.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import log_lightning
from stormotel.analyzers.stalls import log_mp_spawn as spawn
from stormotel.analyzers.stalls.log_finding import LineRead, log_finding, of_kind

KIND = "paddle_container"
PATTERN = "paddle.launch.container_failed"
#: controllers/controller.py build_job: ``Job.__str__`` — replicas is the job's node count
_JOB = re.compile(r"Job: [^,\n]{0,128}, mode \w{1,16}, replicas (?P<n>\d{1,5})\[")


class Scanner(log_lightning.Scanner):
    """One event per failed-container line. Lightning's observer scanner (a launcher naming a
    LOCAL rank, a stated second node kept on its events) with Paddle's own line, and the
    launcher's "Job: …, replicas R[…]" (R nodes) as one more statement of a second node."""

    kind, patterns = KIND, (PATTERN,)

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if self.nodes is None and "job: " in low and (job := _JOB.search(seg)) and \
                int(job.group("n")) > 1:
            self.nodes = f"the launcher's job has {job.group('n')} nodes"
        super().feed(no, seg, low, rank)

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        return None, {"local_rank": int(m.group("rank")), "exit_code": int(m.group("code"))}


REMEDIATION = [
    "Read that container's own log (the path after 'log', workerlog.N) for its own error; the "
    "launcher stopped every other container after it, so their ends are its kills.",
    "Collect every node's launcher output and workerlog.* files: the first rank to fail is the "
    "earliest own error among them, not the first one the launcher's poll found.",
]


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """One finding for the launcher's failed-container lines together (module docstring)."""
    mine = of_kind(events, KIND)
    by_local = {int(e.detail["local_rank"]): int(e.detail["exit_code"]) for e in reversed(mine)}
    if not by_local:
        return []
    locals_ = sorted(by_local)
    code = by_local[locals_[0]]
    how = f"signal {-code}" if code < 0 else f"exit code {code}"
    if len(locals_) > 1:
        return [log_finding(
            "undecided", [], "unknown", "low", PATTERN,
            f"Paddle's launcher named different failed containers {locals_[:16]} — several "
            "nodes or runs: nobody is named", REMEDIATION, mine, suspects=[],
            local_ranks=locals_[:64])]
    second = spawn.second_node(mine, events, known)
    where = (f"Paddle's launcher found container {locals_[0]} (a LOCAL index) failed with "
             f"{how} at its poll — the lowest index failed then, not necessarily the first")
    why = (f"; the index is local and {second}" if second else
           "; an exit-code report names the culprit too seldom to be one (a suspect, read as "
           "the global rank because nothing shows a second node)")
    return [log_finding(
        "undecided", [], "unknown", "low", PATTERN, where + why, REMEDIATION, mine,
        suspects=[] if second else locals_, exit_code=code)]
