"""The kernel's OOM killer joined with a launcher's pid → rank map.

Why: when the host (or a container's, a Slurm step's memory cgroup) runs out of memory, the
kernel SIGKILLs one process and says so by **pid**; the launchers around it end with an exit code
(-9, 137) that never says which rank was killed first — DeepSpeed's launcher does not even name
the process (``sigkill_handler`` lists every child and prints the LAST command it spawned). Some
launchers print, at start, which pid holds which rank; the join names the rank.

The kernel's lines (``mm/oom_kill.c``; grammar ``kernel.oom_kill.killed_process`` and
``kernel.oom_kill.summary``)::

    Out of memory: Killed process P (comm) total-vm:…kB, anon-rss:…kB, …          (4.19+)
    Memory cgroup out of memory: Killed process P (comm) total-vm:…                (a cgroup)
    Killed process P (comm) total-vm:…kB, …          (before 4.19, after "Kill process … score")
    oom-kill:constraint=CONSTRAINT_…,nodemask=…,…,task=comm,pid=P,uid=U            (4.19+)

The maps:

- DeepSpeed's launcher (``deepspeed/launcher/launch.py`` at v0.15.0 / v0.16.0; grammar
  ``deepspeed.launcher.process_spawned``, since #5004, first tagged v0.13.2 — v0.9.0 prints no
  pid): ``process P spawned with command: ['python', '-u', 'train.py', '--local_rank=N', …]``,
  one per local process in spawn order, after ``nnodes=A, num_local_procs=B, node_rank=C`` and
  ``global_rank_mapping=defaultdict(<class 'list'>, {'host': [0, 1, …], …})``. Local process
  ``i`` of node ``C`` is global rank ``global_rank_mapping[node C][i]``; with ``nnodes=1`` the
  ``--local_rank`` it passes is the global rank. A file whose spawned lines cannot be placed
  (several launchers, more lines than ``num_local_procs``, no mapping on a multi-node run) gives
  no map.
- Ray Train's worker list (``ray.train.worker_processes``, read by :mod:`.log_ray_pids`): ``(ip=…,
  pid=P) world_rank=N``.

What the join proves: the kernel killed the process of rank N for memory — its own failure (the
host's or the cgroup's memory, not the GPU's), a culprit at ``low``: the OOM killer picks the
LARGEST process by badness, not necessarily the one that grew, and a pid in the kernel's line is
in the host's pid namespace while a containerised launcher prints its own, so the join also
requires the killed comm to be the map's command (its executable's name, 15 characters),
PyTorch's main-thread name ``pt_main_thread`` or Ray's ``ray::`` title. Several mapped ranks
killed: suspects. A killed pid no map names (a DataLoader worker, another job's process, no map
in the logs): nobody — a rankless reading with the pid in the reason (:mod:`.log_rankless`).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_failures as lf
from stormotel.analyzers.stalls.log_finding import log_finding
from stormotel.analyzers.stalls.log_rankless import KIND as RANKLESS

KIND = "oom_killed"
#: grammar ids: the kernel's two lines, then the two pid -> rank maps
KILLED, SUMMARY = "kernel.oom_kill.killed_process", "kernel.oom_kill.summary"
DS_SPAWNED, RAY_MAP = "deepspeed.launcher.process_spawned", "ray.train.worker_processes"
_RX = {pid: gr.BY_ID[pid].regex for pid in (KILLED, SUMMARY, DS_SPAWNED, RAY_MAP)}
#: launch.py's layout lines (logged before the spawned lines, same module)
_LAUNCH = re.compile(r"nnodes=(?P<nnodes>\d{1,5}), num_local_procs=(?P<procs>\d{1,5}), "
                     r"node_rank=(?P<node>\d{1,5})|global_rank_mapping=defaultdict\("
                     r"<class 'list'>, (?P<d>\{[^\n]{0,20000}?\})\)")
#: the kernel's comm is TASK_COMM_LEN - 1 characters
_COMM_LEN = 15
#: the spawned command list: its executable, and the --local_rank it passes (if it does)
_CMD = re.compile(r"^\s{0,8}'(?P<exe>[^']{1,400})'(?:[^\n]{0,4000}?'--local_rank="
                  r"(?P<rank>\d{1,7})')?")
REMEDIATION = ("Read that rank's host memory (sacct MaxRSS, the container's memory limit, "
               "dmesg around the kill): lower host memory per rank (DataLoader workers, pinned "
               "buffers, CPU offload) or raise the node's / container's / step's memory limit.")


class Scanner:
    """The OOM killer's victims and the pid → rank maps of one file, joined at its end."""

    def __init__(self, ctx: Any) -> None:
        self.stamp = ctx.stamp
        self.kills: dict[int, tuple[int, str, str]] = {}  #: pid -> (line, comm, text)
        #: (line, pid, the --local_rank it passes, executable, text), in spawn order
        self.spawned: list[tuple[int, int, int | None, str, str]] = []
        self.layouts: set[tuple[int, int, int]] = set()  #: (nnodes, procs, node_rank)
        self.mapping: list[list[int]] | None = None
        self.ray: list[tuple[int, int, str]] = []  #: (pid, world rank, text)

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if "killed process" in low and (m := _RX[KILLED].search(seg)) is not None:
            pid, comm = m.group("pid") or m.group("pid2"), m.group("comm") or m.group("comm2")
            self.kills.setdefault(int(pid), (no, comm or "", seg.strip()[:300]))
        elif "oom-kill:constraint" in low and (m := _RX[SUMMARY].search(seg)) is not None:
            self.kills.setdefault(int(m.group("pid")), (no, m.group("comm"), seg.strip()[:300]))
        elif "spawned with command" in low and (m := _RX[DS_SPAWNED].search(seg)) is not None:
            cmd = _CMD.match(seg[m.end():])
            self.spawned.append((no, int(m.group("pid")),
                                 gr.parse_rank(cmd.group("rank")) if cmd else None,
                                 cmd.group("exe").rsplit("/", 1)[-1] if cmd else "",
                                 seg.strip()[:300]))
        elif ("num_local_procs=" in low or "global_rank_mapping=" in low) and \
                (m := _LAUNCH.search(seg)) is not None:
            if m.group("d") is not None:
                self.mapping = _parse_mapping(m.group("d"))
            else:
                self.layouts.add((int(m.group("nnodes")), int(m.group("procs")),
                                  int(m.group("node"))))
        elif "world_rank=" in low and (m := _RX[RAY_MAP].search(seg)) is not None and \
                (who := gr.parse_rank(m.group("rank"))) is not None:
            self.ray.append((int(m.group("pid")), who, seg.strip()[:300]))

    def _ds_map(self) -> dict[int, tuple[int, str, str]]:
        """pid -> (global rank, executable, line) from DeepSpeed's spawned lines, when placed."""
        if not self.spawned or len(self.layouts) != 1:
            return {}
        nnodes, procs, node = next(iter(self.layouts))
        if len(self.spawned) > procs:
            return {}  # two launchers' lines, or a restart: spawn order no longer places them
        out: dict[int, tuple[int, str, str]] = {}
        for i, (_, pid, local, exe, text) in enumerate(self.spawned):
            if nnodes == 1 and local is not None:
                out[pid] = (local, exe, text)
            elif self.mapping is not None and node < len(self.mapping) \
                    and i < len(self.mapping[node]):
                out[pid] = (self.mapping[node][i], exe, text)
        return out

    def finish(self, text: str) -> list[lf.Found]:
        ds = self._ds_map()
        ray: dict[int, set[int]] = {}
        for pid, who, _ in self.ray:
            ray.setdefault(pid, set()).add(who)
        out: list[lf.Found] = []
        for pid, (no, comm, line) in sorted(self.kills.items(), key=lambda kv: kv[1][0]):
            hit = ds.get(pid)
            if hit is not None and _same_program(comm, hit[1]):
                out.append(lf.Found(KIND, no, None, self.stamp(line), line, {
                    "rank": hit[0], "pid": pid, "comm": comm, "map_line": hit[2],
                    "map": DS_SPAWNED}, KILLED))
            elif len(ray.get(pid, ())) == 1 and comm.startswith("ray::"):
                map_line = next(t for (p, _, t) in self.ray if p == pid)
                out.append(lf.Found(KIND, no, None, self.stamp(line), line, {
                    "rank": next(iter(ray[pid])), "pid": pid, "comm": comm,
                    "map_line": map_line, "map": RAY_MAP}, KILLED))
            else:
                out.append(lf.Found(RANKLESS, no, None, self.stamp(line), line, {
                    "reporter": None, "process": f"pid {pid} ({comm})"}, KILLED))
        return out


def _parse_mapping(text: str) -> list[list[int]] | None:
    """``{'host': [0, 1], …}`` (a dict's repr, in node order) → the ranks of each node."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    nodes = [v for v in value.values() if isinstance(v, list)
             and all(isinstance(r, int) and 0 <= r <= gr.MAX_RANK for r in v)]
    return nodes if len(nodes) == len(value) else None


def _same_program(comm: str, exe: str) -> bool:
    """Whether the kernel's comm can be the map's process: its executable's name (cut to the
    kernel's 15 characters) or PyTorch's main-thread name (``pt_main_thread``)."""
    return comm == "pt_main_thread" or (bool(exe) and comm == exe[:_COMM_LEN])


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """The rank whose process the kernel's OOM killer killed, by a launcher's pid map (low)."""
    mine = [e for e in events if e.kind == KIND and e.detail]
    ranks = sorted({int(e.detail["rank"]) for e in mine})
    if not ranks:
        return []
    first = mine[0].detail
    if len(ranks) == 1:
        return [log_finding(
            "rank_failure", ranks, "oom", "low", KILLED,
            f"the kernel's OOM killer killed pid {first['pid']} ({first['comm']}) for host / "
            f"cgroup memory, and the launcher's own pid list gives that pid rank {ranks[0]} "
            f"({first['map']}) — its own failure ({len(mine)} such line(s)); the killer takes "
            "the largest process, not necessarily the one that grew",
            [REMEDIATION], mine, rank_from=f"the launcher's pid → rank list ({first['map']})",
            pid=first["pid"])]
    return [log_finding(
        "undecided", [], "oom", "low", KILLED,
        f"the kernel's OOM killer killed the processes of ranks {ranks[:16]} (joined with the "
        "launcher's pid → rank list): which one ran the host out of memory the lines do not say",
        [REMEDIATION], mine, suspects=ranks[:64], collect_next=ranks[:16])]
