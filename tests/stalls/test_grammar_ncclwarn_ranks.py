"""NCCL WARNs that name ranks without a failure word (log_ncclwarn_ranks), on lines printed as
src/debug.cc prints a WARN ("%s:%d:%d [%d] %s:%d NCCL WARN " fmt) with the format strings of
src/bootstrap.cc, init.cc, misc/socket.cc, transport.cc (v2.18.3 – v2.30.7). The named ranks
are suspects of an ``undecided`` (never more), the reporter a witness; never exit 0 or 3."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.stalls.helpers import root_findings as cli


def warn(rank: int, text: str) -> str:
    return f"[rank{rank}]:node-1:4242:4301 [{rank}] bootstrap.cc:1 NCCL WARN {text}\n"


@pytest.mark.parametrize(("text", "category", "suspects"), [
    ("Bootstrap Root : rank 5 of 8 ranks has already checked in", "duplicate_launch", [5]),
    ("Duplicate GPU detected : rank 5 and rank 6 both on CUDA device 1c000", "configuration",
     [5, 6]),
    ("Mismatched NCCL version detected : rank 5 version 22805 rank 6 version 22703",
     "configuration", [5, 6]),
    ("No transport found for rank 5[1c000] -> rank 6[1d000]", "configuration", [5, 6]),
    ("socketProgress: Connection closed by remote peer node-2<45123>", "fabric", []),
    ("peer 9 is not within valid range of ranks 8.", "nccl_error", [0]),
])
def test_a_rank_naming_warn_is_a_stall_with_its_suspects(
        tmp_path: Path, text: str, category: str, suspects: list[int]) -> None:
    code, found = cli(tmp_path, warn(0, text))
    assert code == 1
    [f] = [f for f in found if f["evidence"]["category"] == category]
    assert (f["kind"], f["ranks"], f["confidence"]) == ("undecided", [], "low")
    assert f["evidence"]["suspects"] == suspects
    assert f["evidence"]["pattern"].startswith("nccl.warn.")
