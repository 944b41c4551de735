"""Megatron-Core's rerun state machine: its own verdict on a rejected result, and whose it was.

Why: run with ``--rerun-mode validate_results``, Megatron-Core does not raise on a NaN / Inf or
a spiky loss (that is :mod:`.log_megatron_nan`'s RuntimeError, reruns disabled): it logs the
rejected result, reruns the step on the same GPU, possibly resumes from a checkpoint on another
GPU, and logs a verdict before it stops the job. Those lines read "no evidence" before.

The lines, read in ``megatron/core/rerun_state_machine.py`` of the megatron-core 0.10.0, 0.12.0
and 0.14.0 wheels (``pip download --no-deps``; grammar ``megatron.rerun.unexpected`` and
``megatron.rerun.verdict``)::

    Unexpected result nan at /…/pretrain_gpt.py line 180, invokation #1 at iteration #52
    (message='…')                                         (the initial run, 0.10 – 0.12: no rank)
    Unexpected result nan on rank 9 at iteration #52 invokation #1 (message='…')    (0.14)
    Rank R, node H, device D: Possible transient error!   (first rerun, same GPU: different)
    Rank R, node H, device D: Possible persistent error!  (second rerun, another GPU: different)
    Rank R, node H, device D: Correct result (but possible Application error) (…)!
                                                          (second rerun, another GPU: the same)

``R`` is ``_safe_get_rank()`` — the global rank (``$RANK`` before the process group); ``log_
failure`` runs on the rank whose result was rejected, where the failed validation call is.

What each proves — the machine's own conclusion, taken as it states it:

- transient: the same step on the same GPU gave another result — that rank's device (H, D)
  computed wrongly once (a silent data corruption); the job stops on it. One rank: that rank at
  ``low`` (category ``device``);
- persistent: a different GPU disagreed with the first run's result, which the first GPU had
  reproduced — the device rank R ran on BEFORE the resume is at fault (H and D in this line
  name the NEW placement, said in the reason). One rank: that rank at ``low``;
- correct result: another GPU reproduced it — NOT the device: the data, the model or the
  application, a cause every rank may share: ``undecided``, R a suspect;
- only the initial run's line: no verdict yet — 0.14's rank is a suspect, the older form names
  nobody; the verdict comes after the rerun (what to collect);
- several ranks with a device verdict: ``undecided``, suspects.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_failures import Found
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner, log_finding, of_kind

KIND = "megatron_rerun"
VERDICT = "megatron.rerun.verdict"
UNEXPECTED = "megatron.rerun.unexpected"
_DEVICE = {"Possible transient error": "transient", "Possible persistent error": "persistent"}


class Scanner(LineScanner):
    """One event per rerun-machine line: its verdict (or the initial run's rejection) and rank."""

    kind, patterns = KIND, (VERDICT, UNEXPECTED)

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        # the parser glues a long "Rank …" line to the next one (a wrapped NCCL record, to it):
        # every verdict of a segment is read, not only its first
        if not any(t in low for t in self.triggers):
            return
        for pid in self.patterns:
            for m in gr.BY_ID[pid].regex.finditer(seg):
                if (read := self.read(pid, m, rank)) is not None:
                    self.found.append(Found(self.kind, no, read[0], self.stamp(seg),
                                            m.group(0)[:300], read[1], pid))

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        if pid == UNEXPECTED:
            told = gr.parse_rank(m.group("rank"))
            return told, {"verdict": "unexpected", "told": told,
                          "result": m.group("result")[:60]}
        told = gr.parse_rank(m.group("rank"))
        if told is None:
            return None
        return told, {"verdict": _DEVICE.get(m.group("what"), "correct"), "told": told,
                      "node": m.group("node"), "device": m.group("dev")}


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """One finding for the rerun machine's lines of the logs (module docstring)."""
    mine = of_kind(events, KIND)
    if not mine:
        return []
    device = [e for e in mine if e.detail["verdict"] in ("transient", "persistent")]
    correct = [e for e in mine if e.detail["verdict"] == "correct"]
    lines = device or correct or mine
    ranks = sorted({int(e.detail["told"]) for e in lines if e.detail["told"] is not None})
    kind, category, pattern = "undecided", "device" if device else "exception", VERDICT
    if device and len(ranks) == 1:
        d = device[0].detail
        where = (f"node {d['node']}, device {d['device']}" if d["verdict"] == "transient"
                 else f"the device it ran on before the resume (node {d['node']}, device "
                      f"{d['device']} is the new placement)")
        kind = "rank_failure"
        reason = (f"Megatron's rerun state machine concluded 'Possible {d['verdict']} error' on "
                  f"rank {ranks[0]}: " + ("the same step on the same GPU gave another result"
                                          if d["verdict"] == "transient" else
                                          "another GPU did not reproduce the first run's result")
                  + f" — {where} computed wrongly; the machine stopped the job on it")
    elif device:
        reason = (f"Megatron's rerun state machine gave device verdicts on ranks {ranks[:16]}: "
                  "several devices at once is more likely a shared cause than as many faults")
    elif correct:
        reason = (f"Megatron's rerun state machine reproduced rank(s) {ranks[:16]}'s rejected "
                  "result on another GPU ('Correct result (but possible Application error)'): "
                  "NOT the device — the data, the model or the application, which every rank "
                  "may share")
    else:
        pattern = UNEXPECTED
        reason = (f"Megatron's rerun state machine rejected a result ({mine[0].detail['result']})"
                  + (f" on rank(s) {ranks[:16]}" if ranks else " (this version names no rank)")
                  + ": no verdict in the logs yet — the rerun on the same GPU and on another one "
                    "tells the device from the data")
    ev: dict[str, Any] = ({"node": device[0].detail["node"]} if kind == "rank_failure" else
                          {"suspects": ranks[:64], "collect_next": _NEXT if pattern == UNEXPECTED
                           else ranks[:16]})
    return [log_finding(kind, ranks if kind == "rank_failure" else [], category, "low", pattern,
                        reason, REMEDIATION, lines[:8],
                        rank_from="_safe_get_rank() in the message: the global rank", **ev)]


#: what to collect and where to look (read by findings)
REMEDIATION = [
    "A transient or persistent verdict points at a GPU: run the vendor's diagnostics on that "
    "node and device (for a persistent one, the placement of the run BEFORE the resume), and "
    "drain it before resuming.",
    "A correct-result verdict clears the device: look at the data and the model at that "
    "iteration (a bad sample, the learning rate, the loss scale) — every rank may share it.",
]
_NEXT = ("the rerun's verdict line ('Rank R, node H, device D: Possible transient|persistent "
         "error!' or 'Correct result …'), after the resume")
