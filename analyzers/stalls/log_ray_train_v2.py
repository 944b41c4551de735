"""Ray Train v2's controller: "Training failed due to worker errors" and the world ranks it lists.

Why: with Train v2 (``RAY_TRAIN_V2_ENABLED``, Ray 2.4x+) the driver no longer prints "Worker N
has failed." (:mod:`.log_ray_train`); ``trainer.fit()`` raises a ``WorkerGroupError`` whose text
lists, by world rank, the workers whose status carried an error. Before this rule that read
"no evidence" unless a rank prefix came with the error.

The lines, read in the ray-2.46.0 and ray-2.58.0 wheels (``ray/train/v2/api/exceptions.py`` and
``_internal/execution/worker_group/poll.py``; grammar ``ray.train.v2.worker_group_error``)::

    ray.train.WorkerGroupError: Training failed due to worker errors:
    [Rank 3]                                   (2.46: one block per errored rank)
    <that rank's error>
    [Rank 0,2 Error Snippet]:                  (2.58: ranks whose errors read alike, digits
    <the first such error, maybe cut>           ignored, grouped)

What it proves. ``WorkerGroupPollStatus.errors`` holds every worker (by WORLD rank) whose status
had an error at the controller's poll that ended the run: its training function raised, or its
actor failed the health check (its process died). Ranks without an error were still running.
So one rank listed is the only one failed by then — the first to fail, within one poll — but a
rank that waited on a hung peer fails too (a collective's timeout, a peer's broken connection),
while the hung peer keeps "running". Hence:

- one rank, its error no wait (no timeout / collective / peer words in any line of its
  block: the error is the worker's whole ``format_exc()``, "Traceback (most recent call
  last):" first): ``rank_failure`` at ``low``;
- one rank whose error is such a wait or is not in the logs (cut after its ``[Rank N]``), or
  several ranks: ``undecided``, the ranks suspects.

A fallback kind: a rule reading the errors themselves (a rank-prefixed traceback, the watchdog)
answers first.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_failures as lf
from stormotel.analyzers.stalls.log_finding import log_finding, of_kind

KIND = "ray_train_v2"
PATTERN = "ray.train.v2.worker_group_error"
_HEAD = "training failed due to worker errors"
#: an error a victim ends with too: a wait that timed out, a collective's or a peer's failure
_WAIT = re.compile(r"time(?:d)? ?out|timeout|watchdog|nccl|gloo|collective|connection (?:reset|"
                   r"closed|refused)|broken pipe|peer|rendezvous|barrier", re.I)
_BLOCKS = 1024
#: a block's error is the worker's ``traceback.format_exc()`` (UserExceptionWithTraceback's
#: str): "Traceback (most recent call last):", the frames, then the exception line — the wait
#: words are read in all of it (up to this many characters), the exception line is shown
_TEXT = 4000
_FRAME = re.compile(r"Traceback \(most recent call last\)|File \"|During handling of|"
                    r"The above exception")


class Scanner:
    """The rank blocks after each "Training failed due to worker errors:" of one file, with
    each block's text (the worker's whole traceback: its wait words may sit in any line) and
    its exception line (shown)."""

    def __init__(self, ctx: Any) -> None:
        self.stamp = ctx.stamp
        self.on = False
        self.blocks: list[dict[str, Any]] = []
        self.head: tuple[int, str] | None = None

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if _HEAD in low:
            self.on = True
            self.head = (no, seg.strip()[:300])
            return
        if not self.on:
            return
        if "[rank " in low and (m := gr.BY_ID[PATTERN].regex.match(seg)) is not None:
            if len(self.blocks) < _BLOCKS:
                ranks = [r for t in m.group("ranks").split(",")
                         if (r := gr.parse_rank(t)) is not None]
                self.blocks.append({"ranks": ranks, "no": no, "error": "", "text": ""})
            return
        if self.blocks and seg.strip() and len(self.blocks[-1]["text"]) < _TEXT:
            block = self.blocks[-1]
            block["text"] = (block["text"] + seg.strip()[:300] + "\n")[:_TEXT]
            if not block["error"] and not seg[:1].isspace() and not _FRAME.match(seg):
                block["error"] = seg.strip()[:200]

    def finish(self, text: str) -> list[lf.Found]:
        if self.head is None or not self.blocks:
            return []
        no, line = self.head
        return [lf.Found(KIND, no, None, self.stamp(line), line,
                         {"blocks": self.blocks[:_BLOCKS]}, PATTERN)]


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """One finding for the worker-group errors of the logs (module docstring)."""
    mine = of_kind(events, KIND)
    if not mine:
        return []
    errors: dict[int, str] = {}
    texts: dict[int, str] = {}
    for e in mine:
        for b in e.detail["blocks"]:
            for r in b["ranks"]:
                errors.setdefault(int(r), str(b["error"]))
                texts.setdefault(int(r), str(b["text"]))
    if not errors:
        return []
    ranks = sorted(errors)
    rank_from = "the world rank in Ray Train v2's '[Rank N]' block (WorkerGroupPollStatus)"
    if len(ranks) == 1 and texts[ranks[0]] and not _WAIT.search(texts[ranks[0]]):
        return [log_finding(
            "rank_failure", ranks, "exception", "low", PATTERN,
            f"Ray Train's controller lists only rank {ranks[0]} as failed when the run ended "
            f"({errors[ranks[0]][:120]!r}); the other workers were still running — its own "
            "error, the first within one poll", REMEDIATION, mine, rank_from=rank_from)]
    why = ((f"rank {ranks[0]}'s error ({errors[ranks[0]][:120]!r}) is how a rank that waited "
            "on a hung or dead peer ends too" if texts[ranks[0]] else
            f"rank {ranks[0]}'s error is not in the logs (cut after its '[Rank N]' line): "
            "whether it was its own or a wait on a peer is not said") if len(ranks) == 1 else
           f"ranks {ranks[:16]} had errors at the same poll: which failed first it does not say")
    return [log_finding("undecided", [], "exception", "low", PATTERN,
                        f"Ray Train's controller ended the run on worker errors; {why}",
                        REMEDIATION, mine, suspects=ranks[:64], collect_next=ranks[:16],
                        rank_from=rank_from)]


#: what to collect and where to look (read by findings)
REMEDIATION = [
    "Read the named worker's own log (Ray's worker-*.err on its node, or the driver's "
    "'(RayTrainWorker pid=…)' lines) for the error before the one Ray lists.",
    "If its error is a timeout or a peer's failure, the rank it waited on is the one to look "
    "at: collect every worker's log (or py-spy dumps of the workers still running).",
]
