"""Ray Train's driver naming a training worker whose actor died: "Worker N has failed."

Why: a Ray Train job (``TorchTrainer``) whose worker process is killed (an OOM kill, Ray's
memory monitor, a segfault, a lost node) ends in the driver with a ``RayActorError`` that names
an actor id and a pid, never a rank; the one line that does is Ray Train's own, printed just
before it restarts or fails the run. Before this rule such a log named nobody.

The line, read in ``check_for_failure`` (``ray/train/_internal/utils.py`` at ray-2.9.0 and
ray-2.40.0, the same text; grammar ``ray.train.worker_failed``)::

    logger.info(f"Worker {failed_actor_rank} has failed.")

``failed_actor_rank`` is the position of the object ref in the list the BackendExecutor ran on
the worker group, and the executor gives worker ``i`` ``world_rank=i``
(``backend_executor.py``, "Started distributed worker processes: … world_rank=i, local_rank=…,
node_rank=…"): a WORLD rank. It is printed only for a ref that raised ``RayActorError`` — the
actor's process died or became unreachable; a worker whose training function raised is
re-raised another way (``StartTraceback``), so this line never names a rank for a Python error.
What it proves: that rank's process died, and it was the first dead actor ``ray.wait`` handed
back — workers lost at the same moment (one node) are first only together. So: one rank named
(by every such line) — a ``rank_failure`` at ``low``; several different ranks (the executor
restarts the group up to ``max_failures`` times, and each attempt may lose another worker) —
``undecided``, the ranks as suspects.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner, log_finding

KIND = "ray_train_failed"
PATTERN = "ray.train.worker_failed"


class Scanner(LineScanner):
    """One event per "Worker N has failed." line."""

    kind, patterns = KIND, (PATTERN,)

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        worker = gr.parse_rank(m.group("rank"))
        return None if worker is None else (None, {"world_rank": worker})


REMEDIATION = [
    "That worker's process died (RayActorError): read its own log (Ray's worker log "
    "/tmp/ray/session_latest/logs/worker-*.err on its node, or the driver's "
    "'(RayTrainWorker pid=…)' lines — the 'Started distributed worker processes' list maps "
    "pid to world_rank) and the node's dmesg / `ray memory` for an OOM kill.",
    "If Ray's memory monitor killed it ('Task was killed due to the node running low on "
    "memory'), lower the per-worker memory or raise RAY_memory_usage_threshold; a lost node "
    "shows in `ray status` / the GCS log.",
]


def dead_ranks(mine: list[Any], pattern: str, one: str, many: str,
               rank_from: str, **ev: Any) -> list[StallFinding]:
    """The world rank(s) Ray lost, at ``low``: one rank a ``rank_failure``; several, suspects
    (``one`` / ``many``: the reason, formatted with ``ranks``). Shared with :mod:`.log_ray_pids`."""
    ranks = sorted({int(e.detail["world_rank"]) for e in mine})
    if len(ranks) == 1:
        return [log_finding("rank_failure", ranks, "actor_died", "low", pattern,
                            one.format(ranks=ranks[0], n=len(mine)), REMEDIATION, mine,
                            rank_from=rank_from, **ev)]
    return [log_finding("undecided", [], "actor_died", "low", pattern,
                        many.format(ranks=ranks[:16], n=len(mine)), REMEDIATION, mine,
                        suspects=ranks[:64], collect_next=ranks[:16])]


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """The rank Ray Train lost, at ``low``; several different ranks: suspects."""
    mine = [e for e in events if e.kind == KIND and e.detail]
    if not mine:
        return []
    return dead_ranks(
        mine, PATTERN,
        "Ray Train's driver found the actor of world rank {ranks} dead (RayActorError: its "
        "process crashed, was killed, or its node was lost) — the first dead worker it was "
        "handed ({n} such line(s))",
        "Ray Train's driver found the actors of world ranks {ranks} dead, one per failure it "
        "handled (the group is restarted after each): which one started the job's trouble the "
        "lines do not say",
        "Ray Train's worker index (world_rank = its place in the worker group)")
