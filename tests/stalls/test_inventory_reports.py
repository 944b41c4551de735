"""Report fragments (NCCL RAS, Horovod's stall warning) are judged inside a report laid out as
their emitter prints it: handled only when the report is read right AND reads differently
without the fragment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stormotel.analyzers.stalls import inventory as inv
from stormotel.analyzers.stalls.inventory_reports import NAMED, report_for


def _ras(template: str) -> dict[str, Any]:
    return {"emitter": "nccl-ras", "file": "src/ras/client_support.cc", "call": "rasOutAppend",
            "level": "info", "tags": ["v2.28.7-1"], "template": template}


def test_a_ras_member_line_is_judged_inside_its_report(tmp_path: Path) -> None:
    e = _ras("  Rank %d has launched up to operation %ld -- GPU %s managed by process %d on "
             "node %s\n")
    rep = report_for(e)
    assert rep is not None and f"Rank {NAMED} has launched up to operation 6649" in rep.text
    assert "MISMATCH" in rep.text and f"Rank {NAMED} has" not in rep.without
    j = inv.judge(e, tmp_path)
    assert j.handled, j.reason


def test_a_fragment_the_reader_ignores_is_not_handled(tmp_path: Path) -> None:
    """ranks_count is a key of the JSON document the reader does not use: the report reads
    the same without it, so it is not counted handled even though the report names rank 5."""
    j = inv.judge(_ras('      "ranks_count": %d,\n'), tmp_path)
    assert not j.handled and "reads the same without it" in j.reason
    j2 = inv.judge(_ras('      "missing_ranks": [\n'), tmp_path)
    assert j2.handled, j2.reason


def test_horovod_head_is_judged_in_the_tagged_warning(tmp_path: Path) -> None:
    e = {"emitter": "horovod", "file": "horovod/common/stall_inspector.cc", "call": "message <<",
         "level": "error", "tags": ["v0.28.1"],
         "template": "One or more tensors were submitted to be reduced, gathered or broadcasted "
                     "by subset of ranks and are waiting for remainder of ranks for more than "
                     "{stall_warning_time.count} seconds. This may indicate "}
    rep = report_for(e)
    assert rep is not None and rep.text.count("[1,0]<stderr>:") == 3
    assert "Missing ranks:" in rep.text
    j = inv.judge(e, tmp_path)
    assert j.handled, j.reason
    old = dict(e, tags=["v0.16.4"])
    rep_old = report_for(old)
    assert rep_old is not None and "Stalled ranks:" in rep_old.text


def test_normal_path_lines_are_info_by_a_written_criterion() -> None:
    """LOG(INFO)/VLOG lines of the normal path (ProcessGroupNCCL's watchdog ending normally,
    the CUDA driver shutting down at exit, a completed store barrier) are not counted against
    the share — and an error of the same family still is."""
    from stormotel.analyzers.stalls.inventory_families import family_of
    for text in ("[Rank {}] NCCL watchdog thread terminated normally",
                 "main process destroyed cuda before watchdog loop exited, terminating watchdog.",
                 "Rank {rank}: Completed store-based barrier for key:{store_key} with "
                 "{world_size} nodes."):
        fam = family_of("pytorch.c10d-cpp", "error", text)
        assert (fam.id, fam.relevance) == ("c10d.normal_path", "info"), text
    fam = family_of("pytorch.c10d-cpp", "error", "] NCCL watchdog thread terminated with "
                    "unknown exception")
    assert fam.relevance == "stall"
