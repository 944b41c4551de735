"""Paddle's wait for its peers' endpoints: the trainers that never started listening.

Why: a multi-node Paddle 2.x job that hangs at start-up prints, every 3 s on the waiting
trainer, "server not ready, wait 3 sec to retry..." and "not ready endpoints:[…]" — all a user
sees; before this rule the log read "no evidence".

The lines, read in the paddlepaddle 2.6.2 and 3.0.0 wheels (``pip download --no-deps``; grammar
``paddle.wait_server_ready.not_ready`` and ``paddle.trainer_endpoints``):

- ``fleet/base/private_helper_function.py`` ``wait_server_ready(endpoints)`` (2.6.2; the same
  loop in the older fluid transpilers): it TCP-connects to every endpoint (``ip:port``, 2 s
  timeout) and, while any fails, writes ``"not ready endpoints:" + str(not_ready_endpoints)``
  to stderr and sleeps 3 s. 3.0.0's function returns at once (never printed); 2.6 skips it when
  ``FLAGS_dynamic_static_unified_comm`` is on.
- ``parallel.py`` ``init_parallel_env`` calls it on the trainer whose ``PADDLE_TRAINER_ID`` is 0
  over every other entry of ``PADDLE_TRAINER_ENDPOINTS``; ``fleet/meta_optimizers/common.py`` on
  ring rank 0 over the ring's endpoints; parameter-server modes over the pservers'.
- ``launch/controllers/collective.py`` builds ``PADDLE_TRAINER_ENDPOINTS`` = ``[f"{h}:{p +
  start_port}" for h in ips for p in range(replicas)]`` and gives container ``i`` of the node at
  ``ips.index(ip)`` the id ``i + ips.index(ip) × replicas`` — endpoint index = trainer id; the
  legacy ``fleet/launch_utils.py`` orders ``trainers_endpoints()`` by trainer rank the same way.
  The list is printed in ``Container.__str__``'s ``env {…}`` (2.6; 3.0 with
  ``FLAGS_print_launcher_env``), the legacy launcher's env table (a value of 45+ characters is
  cut to "... " + its tail: not read) and its ``endpoints.log`` ("PADDLE_TRAINER_ENDPOINTS:"
  then one endpoint a line).

What it proves. Nothing listened at a not-ready endpoint: the trainer meant to be there had not
reached its communicator's init (each non-zero trainer listens there for the NCCL id) — it did
not start, crashed or is slow before it, its node is down or unreachable, or its node computed
the endpoints from another ``--ips`` order. The LAST list printed is who had still not joined
when the log ends (the list shrinks as trainers come up; a short wait is normal start-up).

- with the endpoints list in the logs, every not-ready endpoint in it, and those trainers a
  minority of the others: ``not_joined`` at ``low``, their trainer ids (the global ranks) —
  when the last list was printed at least twice (one 3 s retry seen); once only:
  ``undecided``, the ids suspects;
- a majority of the others not ready (the waiter's own network, or every peer still starting),
  or an endpoint off the list (a pserver, another --ips order): ``undecided``, the mapped ids
  suspects;
- no list: ``undecided``, nobody named, the endpoints in the reason and what to collect.

A fallback kind: any rule that reads an error of the job decides instead (a wait that ended is
no stall).
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_failures as lf
from stormotel.analyzers.stalls.log_finding import log_finding, of_kind

#: the events: a wait's last not-ready list, and a printed endpoints list (a map, no evidence
#: alone: quiet for log_rankless)
KIND, MAP_KIND = "paddle_endpoints", "paddle_endpoints_map"
NOT_READY, MAP = "paddle.wait_server_ready.not_ready", "paddle.trainer_endpoints"
_MAX_EPS = 4096
#: an endpoint as str(list) quotes it; one alone on a line of endpoints.log, after its head
_EP = re.compile(r"'(?P<ep>[\w.-]{1,253}:\d{1,5})'")
_BARE, _LOG_HEAD = (re.compile(r"^\s{0,8}(?P<ep>[\w.-]{1,253}:\d{1,5})\s*$"),
                    re.compile(r"^\s{0,8}PADDLE_TRAINER_ENDPOINTS:\s*$"))


class Scanner:
    """The not-ready lists of one file in order, and the endpoints list it prints (if one)."""

    def __init__(self, ctx: Any) -> None:
        self.stamp = ctx.stamp
        self.waits: list[tuple[int, str, tuple[str, ...]]] = []
        self.maps: list[tuple[str, ...]] = []
        self._log: list[str] | None = None  #: an endpoints.log being read

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if self._log is not None:
            if (b := _BARE.match(seg)) is not None and len(self._log) < _MAX_EPS:
                self._log.append(b.group("ep"))
                return
            if self._log:
                self.maps.append(tuple(self._log))
            self._log = None
        if "not ready endpoints" in low:
            m = gr.BY_ID[NOT_READY].regex.search(seg)
            if m is not None:
                eps = tuple(e.group("ep") for e in _EP.finditer(m.group("eps")))
                self.waits.append((no, seg.strip()[:300], eps[:_MAX_EPS]))
        elif "paddle_trainer_endpoints" in low:
            if _LOG_HEAD.match(seg):
                self._log = []
            elif (m := gr.BY_ID[MAP].regex.search(seg)) is not None:
                self.maps.append(tuple(m.group("eps").split(","))[:_MAX_EPS])

    def finish(self, text: str) -> list[lf.Found]:
        if self._log:
            self.maps.append(tuple(self._log))
        maps = [lf.Found(MAP_KIND, 0, None, None, "PADDLE_TRAINER_ENDPOINTS", {"map": list(m)},
                         MAP) for m in dict.fromkeys(self.maps)]
        if not self.waits:
            return maps  # the list of another file's wait (alone: no evidence)
        no, line, last = self.waits[-1]
        repeats = 0
        for _, _, eps in reversed(self.waits):
            if eps != last:
                break
            repeats += 1
        detail: dict[str, object] = {"endpoints": list(last), "repeats": repeats,
                                     "waits": len(self.waits)}
        return [lf.Found(KIND, no, None, self.stamp(line), line, detail, NOT_READY), *maps]


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """One finding for the last not-ready list of the logs (module docstring)."""
    waits = of_kind(events, KIND)
    if not waits:
        return []
    e = waits[-1]
    d = e.detail
    eps: list[str] = list(d["endpoints"])
    if not eps:
        return []
    shown = ", ".join(eps[:8]) + (" …" if len(eps) > 8 else "")
    head = (f"Paddle's wait_server_ready could not connect to {len(eps)} endpoint(s) ({shown}) "
            f"— the last list of {d['waits']} printed: nothing listened there, so those "
            "trainers had not reached their communicator init (not started, crashed or slow "
            "before it, the node down, or another --ips order on that node)")
    maps = {tuple(m.detail["map"]) for m in of_kind(events, MAP_KIND)}
    if len(maps) != 1:
        why = ("; the logs carry no endpoints list, so which trainer ids they are is not said"
               if not maps else
               "; the logs carry different endpoints lists (several runs or --ips orders), so "
               "which trainer ids they are is not said")
        return [log_finding("undecided", [], "init_not_joined", "low", NOT_READY, head + why,
                            REMEDIATION, [e], suspects=[], collect_next=_COLLECT)]
    table = next(iter(maps))
    index = {ep: i for i, ep in enumerate(table)}
    ids = sorted({index[ep] for ep in eps if ep in index})
    off = [ep for ep in eps if ep not in index]
    others = len(table) - 1
    rank_from = "the endpoint's index in PADDLE_TRAINER_ENDPOINTS: the trainer id (global rank)"
    if not off and 2 * len(ids) < others and d["repeats"] >= 2:
        return [log_finding(
            "not_joined", ids[:64], "init_not_joined", "low", NOT_READY,
            head + f"; by the endpoints list they are trainer id(s) {ids[:32]} of {len(table)}, "
            f"still missing after {d['repeats']} retries — the others waited for them",
            REMEDIATION, [e], rank_from=rank_from)]
    why = (f"; {', '.join(off[:4])} not in the endpoints list (a parameter server, or another "
           "--ips order)" if off else
           f"; {len(ids)} of the {others} other trainers — not a minority: the waiter's own "
           "network, or every peer still starting" if 2 * len(ids) >= others else
           "; printed once only: a start-up still in progress may print it too")
    return [log_finding("undecided", [], "init_not_joined", "low", NOT_READY,
                        head + f"; by the endpoints list trainer id(s) {ids[:32]}" + why,
                        REMEDIATION, [e], suspects=ids[:64], collect_next=ids[:16],
                        rank_from=rank_from)]


#: what to collect and where to look (read by findings)
REMEDIATION = [
    "Look at the not-ready trainers' nodes: is the node up, did the launcher start the trainer "
    "there (its workerlog.N), did it crash or hang before init_parallel_env, is the port "
    "reachable from the waiting node (firewall, another network interface)?",
    "Check that every node was started with the same --ips list in the same order (the "
    "endpoints and trainer ids are computed from it on each node).",
]
_COLLECT = ("the endpoints list (PADDLE_TRAINER_ENDPOINTS: the launcher's env print, "
            "FLAGS_print_launcher_env=1 on 3.0, or log/endpoints.log) to map each endpoint to "
            "its trainer id")
