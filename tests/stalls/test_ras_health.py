"""NCCL RAS status splits and ERROR sections (log_ras_health), in reports laid out as
src/ras/client_support.cc (v2.24.3 – v2.30.7) prints them: the odd-status ranks and the ranks
with their own NCCL error are suspects; ranks reporting a remote error are witnesses; never
above low, never exit 0 or 3."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stormotel.analyzers.stalls import logs_parser as lp

from tests.stalls.helpers import root_findings

HEAD = "#0-0 (27a079b828ff1a75) {what}\n"


def gpu(r: int) -> str:
    return f"GPU {r} managed by process {4240 + r} on node 10.0.0.1"


def cli(tmp_path: Path, text: str) -> tuple[int, list[dict[str, Any]]]:
    return root_findings(tmp_path, text, name="ras.txt")


def test_a_status_split_names_the_odd_ranks_as_suspects(tmp_path: Path) -> None:
    text = (HEAD.format(what="MISMATCH") + "  Communicator ranks have different status\n"
            "  6 ranks have status RUNNING\n  2 ranks have status FINALIZE\n"
            f"  Rank 2 -- {gpu(2)}\n  Rank 7 -- {gpu(7)}\n\n")
    code, [f] = cli(tmp_path, text)
    assert code == 1 and (f["kind"], f["ranks"], f["confidence"]) == ("undecided", [], "low")
    assert f["evidence"]["suspects"] == [2, 7]


def test_the_2_24_unknown_ranks_list_is_read(tmp_path: Path) -> None:
    text = (HEAD.format(what="MISMATCH") + "  Communicator ranks have different status\n"
            "  7 ranks have status RUNNING\n  Rank 4 has status NOCOMM\n\n")
    code, [f] = cli(tmp_path, text)
    assert code == 1 and f["evidence"]["suspects"] == [4]


def test_own_errors_are_suspects_and_remote_errors_witnesses(tmp_path: Path) -> None:
    text = (HEAD.format(what="ERROR") + "  Asynchronous errors on 3 ranks\n"
            "  2 ranks reported remote process exited or there was a network error\n"
            f"  Rank 1 -- {gpu(1)}\n  Rank 6 -- {gpu(6)}\n"
            f"  Rank 3 reported unhandled cuda error -- {gpu(3)}\n\n")
    code, found = cli(tmp_path, text)
    assert code == 1 and all(f["kind"] == "undecided" for f in found)
    # "remote process exited" is also read as a fabric hint (nccl.warn.net's words)
    [f] = [f for f in found if f["evidence"]["pattern"].startswith("nccl.ras.")]
    assert f["evidence"]["suspects"] == [3] and f["evidence"]["witnesses"] == [1, 6]


def test_the_json_form_gives_the_same_reading(tmp_path: Path) -> None:
    """client_support.cc v2.28.7 jsonWriteRankData: per rank status {init_state, async_error,
    finalize_called, destroy_flag, abort_flag}; equal counts, nobody missing — only the status
    split and an own error tell the ranks apart (a remote error is a witness)."""
    import json

    def rank(r: int, **status: Any) -> dict[str, Any]:
        st = {"init_state": 0, "async_error": 0, "finalize_called": False,
              "destroy_flag": False, "abort_flag": False, **status}
        return {"rank": r, "host": "10.0.0.1", "pid": 4240 + r, "cuda_dev": r, "nvml_dev": r,
                "status": st, "collective_counts": {"AllReduce": 6650, "Broadcast": 0}}

    ranks = [rank(r) for r in range(8) if r not in (2, 4, 6)] + [
        rank(2, abort_flag=True), rank(4, async_error=1), rank(6, async_error=6)]
    doc = {"nccl_version": "2.28.7", "communicators_count": 1,
           "communicators": [{"hash": "0x27a079b828ff1a75", "size": 8, "ranks_count": 8,
                              "missing_ranks_count": 0, "ranks": ranks, "missing_ranks": []}]}
    code, found = cli(tmp_path, json.dumps(doc, indent=2) + "\n")
    assert code == 1
    [f] = [f for f in found if f["evidence"]["pattern"].startswith("nccl.ras.")]
    assert (f["kind"], f["confidence"]) == ("undecided", "low")
    assert f["evidence"]["suspects"] == [2, 4] and f["evidence"]["witnesses"] == [6]
    # a document with nothing odd gives nothing of this kind
    calm = dict(doc, communicators=[dict(doc["communicators"][0],
                                         ranks=[rank(r) for r in range(8)])])
    calm_log = tmp_path / "calm.json.txt"
    calm_log.write_text(json.dumps(calm, indent=2) + "\n")
    assert not [e for e in lp.parse_logs([str(calm_log)]).events if e.kind == "ras_health"]
