"""Ray Train's pid → world rank map, joined with a death that names a pid.

Why: when a Ray Train worker's process dies, the driver's error names the dead actor by class,
actor id, **pid** and IP ("The actor died unexpectedly before finishing this task." + "pid: P"),
and the raylet by "Worker PID: P" — never by rank, so :mod:`.log_serving` can only say that
somebody died. The same driver printed, when it started the worker group, which process holds
which world rank; the join names the rank.

The map, read in ``BackendExecutor._create_rank_world_size_mappings``
(``ray/train/_internal/backend_executor.py`` in the ray-2.9.0 and ray-2.40.0 wheels; grammar
``ray.train.worker_processes``)::

    logger.info(f"Started distributed worker processes: \\n{workers_info}")
    - (ip={ip}, pid={pid}) world_rank={i}, local_rank={l}, node_rank={n}            (2.9)
    - (node_id={id}, ip={ip}, pid={pid}) world_rank={i}, local_rank={l}, node_rank={n}  (2.40)

Worker ``i`` of the group is world rank ``i``. A restart builds a new group (new pids): every map
line is kept, a pid that two lines give different ranks (two hosts, pid reuse) is not joined
unless the death's IP tells them apart.

The deaths, read in ``ActorDiedError.__init__`` (``ray/exceptions.py`` at the same two versions:
"The actor died unexpectedly before finishing this task." then tab-indented ``class_name:``,
``actor_id:``, ``pid:``, ``name:``, ``namespace:``, ``ip:`` lines, then the GCS's cause) — only
when the cause is a failing exit type (grammar ``ray.actor.worker_died``: SYSTEM_ERROR,
USER_ERROR, NODE_OUT_OF_MEMORY; an INTENDED exit — ``ray.kill``, the executor's own shutdown of
the survivors — is not a death) — and the raylet's "A worker died or was killed while executing a
task by an unexpected system error … Worker IP address: A … Worker PID: P" (grammar
``ray.raylet.worker_died``, SYSTEM_ERROR only).

What the join proves: the process of world rank N died (crashed, killed — an OOM kill, Ray's
memory monitor — or lost with its node). One rank: a ``rank_failure`` at ``low`` (the first the
driver heard of; workers lost together are first only together). Several ranks: suspects. A
dead pid no map line names: nothing here (log_serving's rankless reading stands).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_failures as lf
from stormotel.analyzers.stalls import log_ray_train
from stormotel.analyzers.stalls.log_finding import log_finding

KIND = "ray_pids"
MAP = "ray.train.worker_processes"
ACTOR_DIED = "ray.actor_died_error"
WORKER_DIED = "ray.actor.worker_died"
RAYLET_DIED = "ray.raylet.worker_died"
_MAP = gr.BY_ID[MAP].regex
_BASE = "the actor died unexpectedly before finishing this task"
_FIELD = re.compile(r"^\s{0,8}(?:\\t)?\s{0,8}(?P<key>class_name|actor_id|pid|name|namespace|ip): "
                    r"(?P<value>\S{1,128})\s*$")
#: verl's name for a worker actor (grammar ``verl.worker_group.actor_name``)
VERL_NAME = "verl.worker_group.actor_name"
_VERL = gr.BY_ID[VERL_NAME].regex
_RAYLET_PID = re.compile(r"Worker PID: (?P<pid>\d{1,10})")
_RAYLET_IP = re.compile(r"Worker IP address: (?P<ip>[\w.:-]{1,64})")
#: lines an ActorDiedError's fields and cause may span after its first line
_SPAN = 12


@dataclass
class _Death:
    line: int
    text: str
    pid: int
    ip: str | None
    pattern: str
    failing: bool  #: the cause is a failing exit type (not an intended exit)
    name: str = ""  #: the actor's name field (verl names it by placement group and local rank)


class Scanner:
    """The map lines and the pid-naming deaths of one file."""

    def __init__(self, ctx: Any) -> None:
        self.stamp = ctx.stamp
        self.map: list[tuple[int, str, int, int, str]] = []  #: (line, ip, pid, rank, text)
        self.deaths: list[_Death] = []
        self._open: _Death | None = None
        self._open_at = 0

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if "world_rank=" in low and (m := _MAP.search(seg)) is not None:
            who = gr.parse_rank(m.group("rank"))
            if who is not None:
                self.map.append((no, m.group("ip"), int(m.group("pid")), who, seg.strip()[:300]))
            return
        if _BASE in low:
            self._close()
            self._open, self._open_at = _Death(no, seg.strip()[:300], 0, None, ACTOR_DIED,
                                               False), no
            return
        if "worker pid:" in low and gr.BY_ID[RAYLET_DIED].regex.search(seg) and \
                (p := _RAYLET_PID.search(seg)) is not None:
            ip = _RAYLET_IP.search(seg)
            self.deaths.append(_Death(no, seg.strip()[:300], int(p.group("pid")),
                                      ip.group("ip") if ip else None, RAYLET_DIED, True))
            return
        cur = self._open
        if cur is None:
            return
        if no - self._open_at > _SPAN:
            self._close()
            return
        if (f := _FIELD.match(seg)) is not None:
            value = f.group("value")
            if f.group("key") == "pid" and value.isascii() and value.isdigit():
                cur.pid = int(value)
            elif f.group("key") == "ip":
                cur.ip = f.group("value")
            elif f.group("key") == "name":
                cur.name = seg
        elif gr.BY_ID[WORKER_DIED].regex.search(seg):
            cur.failing = True
            self._close()

    def _close(self) -> None:
        cur, self._open = self._open, None
        if cur is not None and cur.pid and cur.failing:
            self.deaths.append(cur)

    def finish(self, text: str) -> list[lf.Found]:
        self._close()
        out: list[lf.Found] = []
        for d in self.deaths:
            ranks = {r for (_, ip, pid, r, _) in self.map
                     if pid == d.pid and (d.ip is None or ip == d.ip)}
            if len(ranks) == 1:
                line = next(t for (_, ip, pid, r, t) in self.map if pid == d.pid and r in ranks)
                out.append(lf.Found(KIND, d.line, None, self.stamp(d.text), d.text, {
                    "world_rank": ranks.pop(), "pid": d.pid, "ip": d.ip, "death": d.pattern,
                    "map_line": line}, MAP))
            elif not ranks and (v := _VERL.search(d.name)) is not None and v.group("pg") == "0":
                # verl's worker name: placement group 0's local rank is the group's RANK
                out.append(lf.Found(KIND, d.line, None, self.stamp(d.text), d.text, {
                    "world_rank": int(v.group("rank")), "pid": d.pid, "ip": d.ip,
                    "death": d.pattern, "map_line": d.name.strip()[:300]}, VERL_NAME))
        return out


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """The world rank(s) whose process died, by the driver's own pid → rank map (low)."""
    mine = [e for e in events if e.kind == KIND and e.detail]
    if not mine:
        return []
    pids = sorted({int(e.detail["pid"]) for e in mine})
    if mine[0].pattern == VERL_NAME:
        # ray.get over the group's calls (rank order) raises the FIRST error in list order once
        # every call is back: the LOWEST rank whose call failed, not the first to fail
        ranks = sorted({int(e.detail["world_rank"]) for e in mine})
        return [log_finding(
            "undecided", [], "actor_died", "low", VERL_NAME,
            f"the worker actor(s) of rank(s) {ranks[:16]} died (pid {pids[0]}; verl names its "
            "workers '…_<placement group>:<local rank>', and local rank N of placement group 0 "
            "is the worker group's RANK N) — but the driver's ray.get over the group's calls "
            "raises the lowest-rank failure, not the first: a suspect",
            log_ray_train.REMEDIATION, mine, suspects=ranks[:64], collect_next=ranks[:16])]
    return log_ray_train.dead_ranks(
        mine, MAP,
        f"the process of world rank {{ranks}} (pid {pids[0]}) died — Ray reported the dead "
        "worker by pid, and Ray Train's 'Started distributed worker processes' list gives that "
        "pid world_rank={ranks}",
        f"the processes of world ranks {{ranks}} died (pids {pids[:16]}, joined with Ray "
        "Train's pid → world_rank list): which one started the trouble the lines do not say",
        "Ray Train's pid → world_rank list joined with the dead worker's pid", pid=pids[0])
