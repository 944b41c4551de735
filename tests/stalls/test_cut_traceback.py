"""An OOM on one rank beside another rank's traceback cut before its exception line: at the CLI
boundary, with logs written from CPython's traceback format (Lib/traceback.py,
``TracebackException.format``: the header, ``  File "…", line N, in f`` frames with their source
line and 3.11+ carets, then the exception line ``Type: message`` at the header's indentation)
behind torchrun's ``[rankN]: `` prefix — not copied from a case.

fresh8 measured two confident wrong answers of this shape (diffusion-pipe#153, torchtune#2071):
the OOM rank named at medium while the other rank raised something nobody can read. The rule
(analyzers/stalls/log_cut_traceback.py) caps such a finding at low with the other rank a
suspect; a traceback that reaches its exception line — a consequence or an own error — leaves
the answer as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.stalls.helpers import root_findings

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
       "total capacity of 79.10 GiB of which 1.02 GiB is free. Of the allocated memory 74.20 GiB "
       "is allocated by PyTorch, and 2.31 GiB is reserved by PyTorch but unallocated.")


def frames(rank: int) -> list[str]:
    """A traceback's header and frames as Python 3.11 prints them (source line, carets)."""
    p = f"[rank{rank}]: "
    return [p + "Traceback (most recent call last):",
            p + '  File "/work/train.py", line 88, in <module>',
            p + "    main()",
            p + '  File "/work/train.py", line 61, in main',
            p + "    loss = model(batch).sum()",
            p + "           ^^^^^^^^^^^^",
            p + '  File "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", '
                "line 1518, in _wrapped_call_impl",
            p + "    return self._call_impl(*args, **kwargs)",
            p + "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^"]


def job(rank1_ends_with: str | None, world: int = 2) -> str:
    """Rank 0's full traceback ending in its OOM, then rank 1's: cut after its frames (None) or
    finished by ``rank1_ends_with``; ranks 2.. print nothing."""
    lines = [*frames(0), "[rank0]: " + OOM, *frames(1)]
    if rank1_ends_with is not None:
        lines.append("[rank1]: " + rank1_ends_with)
    return "\n".join(lines) + "\n"


def the_root(tmp_path: Path, text: str, *args: str) -> dict[str, Any]:
    code, roots = root_findings(tmp_path, text, *args)
    assert code == 1, roots  # a failing job: findings, never "healthy"
    assert len(roots) >= 1
    return roots[0]


@pytest.mark.parametrize("world", [[], ["--world-size", "4"]], ids=["no-world", "world-4"])
def test_a_cut_traceback_on_another_rank_caps_the_oom_rank_at_low(
        tmp_path: Path, world: list[str]) -> None:
    """Rank 1 raised something unknown (its own OOM? an aborted communicator?): rank 0 is not
    established as the one culprit — low, rank 1 a suspect, and what to collect says so."""
    root = the_root(tmp_path, job(None), *world)
    assert root["kind"] == "rank_failure" and root["ranks"] == [0]
    assert root["confidence"] == "low"
    assert root["evidence"]["suspects"] == [1]
    assert "rank 1's traceback is cut before its exception" in root["evidence"]["reason"]
    assert root["evidence"]["unfinished_tracebacks"]["1"].endswith(":11")  # rank 1's header
    assert any("Collect rank 1's full log" in r for r in root["remediation"])


def test_a_cut_exception_group_member_counts_too(tmp_path: Path) -> None:
    """Python 3.11+ prints an exception group's sub-tracebacks behind a "| " margin, indented
    alike (traceback.py ``_ExceptionPrintContext.emit``): one cut there is cut the same way."""
    p = "[rank1]: "
    text = "\n".join([*frames(0), "[rank0]: " + OOM,
                                  p + "  + Exception Group Traceback (most recent call last):",
                                  p + '  |   File "/work/train.py", line 88, in <module>',
                                  p + "  |     main()",
                                  p + "  | ExceptionGroup: step failed (1 sub-exception)",
                                  p + "  +-+---------------- 1 ----------------",
                                  p + "    | Traceback (most recent call last):",
                                  p + '    |   File "/work/train.py", line 61, in main',
                                  p + "    |     loss = model(batch).sum()"]) + "\n"
    root = the_root(tmp_path, text)
    assert (root["ranks"], root["confidence"], root["evidence"]["suspects"]) == ([0], "low", [1])


@pytest.mark.parametrize("consequence", [
    "torch.distributed.DistBackendError: NCCL communicator was aborted on rank 1.",
    "RuntimeError: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600024 milliseconds "
    "before timing out.",
], ids=["comm-aborted", "watchdog-timeout"])
def test_a_traceback_finished_by_a_consequence_leaves_the_answer(
        tmp_path: Path, consequence: str) -> None:
    """Rank 1's exception line is read and reports a peer's trouble: rank 1 is a victim, rank 0
    stays the one culprit at the confidence its rule gives (medium: torch.cuda.oom's ceiling)."""
    root = the_root(tmp_path, job(consequence))
    assert root["kind"] == "rank_failure" and root["ranks"] == [0]
    assert root["confidence"] == "medium"
    assert "suspects" not in root["evidence"]
    assert "unfinished_tracebacks" not in root["evidence"]


def test_a_traceback_finished_by_its_own_exception_gives_two_failures(tmp_path: Path) -> None:
    """Rank 1's exception line is its own error: the existing answer — one rank_failure per
    category, the OOM and the exception, each naming its own rank, neither capped by this rule."""
    code, roots = root_findings(tmp_path, job("ValueError: expected a non-empty batch"))
    assert code == 1
    got = {(f["evidence"]["category"], tuple(f["ranks"])) for f in roots
           if f["kind"] == "rank_failure"}
    assert got == {("oom", (0,)), ("exception", (1,))}
    assert not [f for f in roots if "unfinished_tracebacks" in f["evidence"]]


def test_a_header_without_frames_or_without_a_rank_proves_nothing(tmp_path: Path) -> None:
    """A header alone (no frame after it) and a traceback with no rank (re-printed by a parent
    without a prefix) name nobody else who failed: the OOM answer stands."""
    text = "\n".join([*frames(0), "[rank0]: " + OOM,
                                  "[rank1]: Traceback (most recent call last):",
                                  "Traceback (most recent call last):",
                                  '  File "/work/train.py", line 88, in <module>',
                                  "    main()"]) + "\n"
    root = the_root(tmp_path, text)
    assert (root["ranks"], root["confidence"]) == ([0], "medium")
    assert "suspects" not in root["evidence"]


def test_a_rank_that_timed_out_first_does_not_contest_a_failure_timed_before(
        tmp_path: Path) -> None:
    """Rank 1 printed its own watchdog timeout, after rank 0's timed OOM, before its cut
    traceback: it was waiting in a collective, so what it raised came after — rank 0's finding
    keeps its confidence. The same lines untimed (order unknown) are capped."""
    timeout = ("[rank1]:[E1129 10:10:40.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog "
               "caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, "
               "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600024 milliseconds before "
               "timing out.")
    untimed = [*frames(0), "[rank0]: " + OOM, timeout, *frames(1)]
    step = "[rank0]:[E1129 10:00:40.000000000 train.py:61] step 7"  # times rank 0's OOM
    (tmp_path / "timed").mkdir()
    root = the_root(tmp_path / "timed", "\n".join([step, *untimed]) + "\n")
    assert root["ranks"] == [0] and root["evidence"]["order"].endswith(
        "s before the first watchdog timeout")
    assert root["confidence"] == "medium"
    assert "unfinished_tracebacks" not in root["evidence"]
    (tmp_path / "untimed").mkdir()
    root = the_root(tmp_path / "untimed", "\n".join(untimed) + "\n")
    assert root["ranks"] == [0] and root["evidence"]["order"].startswith("order unknown")
    assert (root["confidence"], root["evidence"]["suspects"]) == ("low", [1])
