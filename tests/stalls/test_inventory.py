"""The rank-bearing message inventory: the table in docs/stalls.md is what the current parser
does with the checked-in messages, and no message once handled is lost.

The data (``docs/data/stall_inventory.json``) was read from the emitters' source by
``scripts/stall_inventory.py --extract``; these tests need no network. Regenerate the table
with ``.venv/bin/python scripts/stall_inventory.py --render`` when they fail on purpose.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from stormotel.analyzers.stalls import inventory as inv
from stormotel.analyzers.stalls import logs_parser as lp
from stormotel.analyzers.stalls.log_analysis import analyze_logs

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "data" / "stall_inventory.json"
DOC = REPO / "docs" / "stalls.md"


@pytest.fixture(scope="module")
def judged() -> tuple[list[dict[str, Any]], list[inv.Judgement]]:
    entries = json.loads(DATA.read_text())["entries"]
    return entries, inv.judge_all(entries)


def test_docs_table_is_regenerated_from_the_data_with_the_current_parser(
        judged: tuple[list[dict[str, Any]], list[inv.Judgement]]) -> None:
    entries, results = judged
    doc = DOC.read_text()
    assert inv.START in doc and inv.END in doc, "docs/stalls.md lost its inventory markers"
    want = inv.replace_block(doc, inv.render(entries, results))
    assert doc == want, ("docs/stalls.md's inventory is stale: run "
                         "`.venv/bin/python scripts/stall_inventory.py --render`")


def test_every_entry_expected_handled_is_still_handled(
        judged: tuple[list[dict[str, Any]], list[inv.Judgement]]) -> None:
    entries, results = judged
    expected = [(e, j) for e, j in zip(entries, results, strict=True)
                if e.get("expected") == "handled"]
    assert len(expected) >= 50, "the data file lost its expected-handled marks"
    lost = [f"{e['emitter']}: {j.line[:160]!r} ({j.reason})" for e, j in expected
            if not j.handled]
    assert not lost, "messages the parser handled before are no longer handled:\n" + \
        "\n".join(lost)


def test_every_entry_is_a_message_read_from_source_at_a_tag(
        judged: tuple[list[dict[str, Any]], list[inv.Judgement]]) -> None:
    entries, _ = judged
    assert len(entries) >= 300
    emitters = {e["emitter"] for e in entries}
    assert {"pytorch.c10d", "pytorch.c10d-cpp", "torchelastic", "nccl", "nccl-ras", "horovod",
            "openmpi", "prrte", "slurm-srun"} <= emitters
    for e in entries:
        assert e["tags"] and e["file"] and e["template"].strip(), e


def _c10d(template: str) -> dict[str, Any]:
    return {"emitter": "pytorch.c10d-cpp", "file": "libtorch_cpu.so", "call": "c10::str",
            "level": "error", "tags": ["v2.8.0"], "template": template}


def test_a_line_that_names_other_ranks_is_handled_only_when_those_ranks_are_named(
        tmp_path: Path) -> None:
    """The judge can fail: a ``names`` message is handled only when the analysis names the
    rank it names (5), never the reporter (3) — checked here against the analysis run
    directly on the same line."""
    listed = _c10d("[Rank {rank}]: Ranks {ranks} failed to pass monitoredBarrier in 30000 ms")
    peer = _c10d("Rank {rank} successfully reached monitoredBarrier, but received errors "
                 "while waiting for send/recv from rank {peer}. Please check rank {peer} logs "
                 "for faulty rank.")
    j_listed, j_peer = inv.judge_all([listed, peer])
    assert j_listed.family.role == j_peer.family.role == "names"
    assert "Ranks 5, 6 failed" in j_listed.line and j_listed.handled, j_listed
    assert "from rank 5" in j_peer.line and j_peer.line.startswith("[rank3]:")
    log = tmp_path / "one.log"
    log.write_text(j_peer.line + "\n")
    findings = analyze_logs(lp.parse_logs([str(log)])).findings
    culprits = {r for f in findings for r in f.ranks}
    suspects = {r for f in findings for r in f.evidence.get("suspects") or []}
    assert j_peer.handled == (5 in culprits | suspects and 3 not in culprits), j_peer


def test_a_watchdog_timeout_is_handled_and_an_info_line_is_not_counted() -> None:
    timeout = {"emitter": "pytorch.c10d-cpp", "file": "libtorch_cuda.so", "call": "c10::str",
               "level": "error", "tags": ["v2.4.0"],
               "template": "[Rank {rank_}] Watchdog caught collective operation timeout: "
                           "WorkNCCL(SeqNum=17, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, "
                           "Timeout(ms)=600000) ran for 600010 milliseconds before timing out."}
    info = {"emitter": "nccl", "file": "src/init.cc", "call": "INFO", "level": "info",
            "tags": ["v2.30.7-1"], "template": "comm %p rank %d nRanks %d nNodes %d localRanks "
                                               "%d localRank %d MNNVL %d"}
    j_timeout, j_info = inv.judge_all([timeout, info])
    assert j_timeout.handled and j_timeout.family.id == "c10d.watchdog_timeout"
    assert not j_info.handled and j_info.family.relevance == "info"
    shares = inv.shares([timeout, info], [j_timeout, j_info])
    assert shares["pytorch.c10d-cpp"]["handled"] == 1 and shares["nccl"]["stall"] == 0


def test_render_is_a_one_command_rerun_offline(tmp_path: Path) -> None:
    """``--render`` reads only the data file and rewrites the block: on a copy of the doc with
    the block emptied it writes back exactly the checked-in table."""
    doc = tmp_path / "stalls.md"
    text = DOC.read_text()
    head, rest = text.split(inv.START, 1)
    doc.write_text(head + inv.START + "\nstale\n" + inv.END + rest.split(inv.END, 1)[1])
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "stall_inventory.py"),
                           "--render", "--data", str(DATA), "--doc", str(doc)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "handled (stall-relevant): " in proc.stdout
    assert doc.read_text() == text
    usage = subprocess.run([sys.executable, str(REPO / "scripts" / "stall_inventory.py")],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert usage.returncode == 2 and "--render" in usage.stdout
