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
- a second node, or different indices (several launchers or runs) → nobody named;
- unless each failed container's line carries its environment (``Container.__str__`` appends
  " \\nenv {…}" in 2.6 always, in 3.0 with ``FLAGS_print_launcher_env``): its
  ``PADDLE_TRAINER_ID`` is the GLOBAL rank (``collective.py``: the local index plus the node's
  pod rank × containers per node), so those ids are the suspects on any number of nodes. The
  node itself prints no pod rank at INFO (``Run Pod: name, replicas R, status S``; the sync of
  peers is at DEBUG), so without the environment a local index stays local.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_lightning
from stormotel.analyzers.stalls import log_mp_spawn as spawn
from stormotel.analyzers.stalls.log_finding import LineRead, log_finding, of_kind

KIND = "paddle_container"
PATTERN = "paddle.launch.container_failed"
#: controllers/controller.py build_job: ``Job.__str__`` — replicas is the job's node count
_JOB = re.compile(r"Job: [^,\n]{0,128}, mode \w{1,16}, replicas (?P<n>\d{1,5})\[")
#: ``Container.__str__``'s " \nenv {…}" (2.6 always, 3.0 with FLAGS_print_launcher_env): the
#: container's own environment; its PADDLE_TRAINER_ID is the GLOBAL rank (collective.py:
#: ``i + rank_offset``, the node's pod rank × containers per node), PADDLE_NNODES the nodes
_ENV = re.compile(r"(?<![\w-])env \{[^\n]{0,20000}?'PADDLE_TRAINER_ID': '(?P<id>\d{1,7})'")
_NNODES = re.compile(r"'PADDLE_NNODES': '(?P<n>\d{1,5})'")


class Scanner(log_lightning.Scanner):
    """One event per failed-container line. Lightning's observer scanner (a launcher naming a
    LOCAL rank, a stated second node kept on its events) with Paddle's own line, and the
    launcher's "Job: …, replicas R[…]" (R nodes) as one more statement of a second node."""

    kind, patterns = KIND, (PATTERN,)

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._last = -1  #: the event the previous segment made (its env may be this one)

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if self._last == len(self.found) and self.found and "env {" in low:
            _environment(self.found[-1].detail, seg)
        if self.nodes is None and "job: " in low and (job := _JOB.search(seg)) and \
                int(job.group("n")) > 1:
            self.nodes = f"the launcher's job has {job.group('n')} nodes"
        before = len(self.found)
        super().feed(no, seg, low, rank)
        self._last = len(self.found) if len(self.found) > before else -1

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        detail: dict[str, object] = {"local_rank": int(m.group("rank")),
                                     "exit_code": int(m.group("code"))}
        _environment(detail, m.string[m.end():])  # the env line glued to it, if it was
        return None, detail


def _environment(detail: dict[str, object], text: str) -> None:
    """The container's GLOBAL trainer id (and the node count) from its printed environment."""
    if "trainer_id" in detail or (m := _ENV.search(text)) is None:
        return
    if (gid := gr.parse_rank(m.group("id"))) is not None:
        detail["trainer_id"] = gid
    if (n := _NNODES.search(text)) is not None:
        detail["nnodes"] = int(n.group("n"))


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
    if all("trainer_id" in e.detail for e in mine):
        return _global(mine)
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


def _global(mine: list[Any]) -> list[StallFinding]:
    """Every failed container printed its environment: their GLOBAL trainer ids, suspects."""
    ids = sorted({int(e.detail["trainer_id"]) for e in mine})
    nodes = max((int(e.detail.get("nnodes", 0)) for e in mine), default=0)
    code = int(mine[0].detail["exit_code"])
    how = f"signal {-code}" if code < 0 else f"exit code {code}"
    where = (f"Paddle's launcher found container {mine[0].detail['local_rank']} (local) failed "
             f"with {how}; its printed environment gives PADDLE_TRAINER_ID {ids[0]}, the "
             "GLOBAL trainer id" if len(ids) == 1 else
             f"Paddle's launchers found containers with trainer ids {ids[:16]} failed (each "
             "node's first found at its poll): which failed first the lines do not say")
    return [log_finding(
        "undecided", [], "unknown", "low", PATTERN,
        where + (f" ({nodes} nodes)" if nodes > 1 else "") + "; an exit-code report names the "
        "culprit too seldom to be one (a suspect)", REMEDIATION, mine, suspects=ids[:64],
        exit_code=code, rank_from="PADDLE_TRAINER_ID in the container's printed environment")]
