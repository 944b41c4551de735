"""Worker-log triage on fixtures covering the watchdog formats and quirks of several versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stormotel.analyzers.stalls import logs_parser as lp
from stormotel.analyzers.stalls.log_analysis import analyze_logs

from tests.stalls.helpers import run_cli, run_json

DATA = Path(__file__).parent / "data" / "logs"


def triage(*specs: Path | str):  # type: ignore[no-untyped-def]
    return analyze_logs(lp.parse_logs([str(s) for s in specs]))


@pytest.mark.parametrize(("fixture", "kind", "ranks", "category", "group", "seq"), [
    # 2.5+ tags, one file per rank, four launcher prefixes; rank 2 observed and was idle
    ("straggler_v25", "straggler", [2], "data_loading", "0:default_pg", 8),
    # 2.2: no timestamps, plain [Rank r] tags, four ranks interleaved in one file
    ("interleaved_v22.log", "size_mismatch", [3], "mismatched_collective", "0:default_pg", 5),
    # 2.3: [PG id Rank r] tags, a file without [rankN]: prefixes, heartbeat monitor
    ("op_mismatch_v23", "op_type_mismatch", [1], "mismatched_collective", "0:default_pg", 42),
    # a sub-group: the tag carries the GROUP rank (1) of global rank 3; PG ids differ per rank
    ("subgroup.log", "straggler", [3], "straggler_outside_nccl", "5:tp", 17),
    # rank 3 is AHEAD (completed SeqNum 11, waits in 12): the others' wait at 11 is not
    # explained by it — the watchdog's SeqNum is each rank's oldest work not completed
    ("count_split.log", "undecided", [], "collective_count_split", "0:default_pg", 11),
    # everybody waiting in the same collective, but the logs do not prove the world is 4
    ("fabric.log", "undecided", [], "unknown", "0:default_pg", 100),
    # hard-wrapped lines, progress bars fused with log lines; rank 3 died of an OOM: the root
    ("wrapped_progress", "rank_failure", [3], "oom", None, None),
])
def test_fixture_verdicts(fixture: str, kind: str, ranks: list[int], category: str,
                          group: str, seq: int) -> None:
    result = triage(DATA / fixture)
    [f] = [f for f in result.findings if f.consequence_of is None]
    assert (f.kind, f.ranks, f.evidence["category"]) == (kind, ranks, category)
    assert (f.process_group, f.seq_id, f.source) == (group, seq, "logs")
    assert f.remediation


def test_oom_rank_is_the_root_and_its_silence_a_consequence() -> None:
    result = triage(DATA / "wrapped_progress")
    root, straggler = result.findings
    assert (root.kind, root.ranks, root.evidence["requested_bytes"]) == (
        "rank_failure", [3], 2 * 2**30)
    assert "train.py:212" in root.evidence["frame"]
    assert (straggler.kind, straggler.ranks, straggler.consequence_of) == ("straggler", [3], 0)


def test_fabric_only_when_the_whole_world_is_in_the_collective() -> None:
    parsed = lp.parse_logs([str(DATA / "fabric.log")])
    [f] = analyze_logs(parsed, world_size=4).findings
    assert (f.kind, f.evidence["category"], f.evidence["world_size_source"]) == (
        "undecided", "fabric", "--world-size")
    [f] = analyze_logs(parsed, world_size=5).findings  # no line at all from rank 4
    assert (f.kind, f.evidence["category"], f.evidence["unseen_ranks"]) == (
        "undecided", "unknown", [4])
    assert "collect every rank's log" in f.evidence["reason"]


def test_straggler_state_table_and_roles() -> None:
    result = triage(DATA / "straggler_v25")
    [f] = result.findings
    assert f.evidence["initiators"] == [0, 1, 3] and f.evidence["observers"] == [2]
    table = {s["rank"]: s for s in f.evidence["state_table"]}
    assert (table[2]["enqueued"], table[2]["completed"]) == (7, 7)
    assert (table[0]["enqueued"], table[0]["completed"]) == (8, 7)
    assert table[0]["op"] == "ALLREDUCE" and table[0]["numel_in"] == 25557032
    assert table[2]["hints"]["data_loading"] == 2
    assert f.op == "all_reduce" and f.confidence == "high"
    # the timeline is time-ordered and starts with the data-loading trouble on rank 2
    stamps = [r["ts_ns"] for r in f.evidence["timeline"] if r["ts_ns"] is not None]
    assert stamps == sorted(stamps)
    assert f.evidence["timeline"][0]["event"] == "data_loading"


def test_wrapped_and_fused_lines_are_reassembled() -> None:
    parsed = lp.parse_logs([str(DATA / "wrapped_progress")])
    timeouts = [e for e in parsed.events if e.kind == lp.TIMEOUT]
    assert sorted(e.rank for e in timeouts) == [0, 1, 2]
    assert {(e.seq, e.op, e.numel_in, e.numel_out, e.timeout_ms) for e in timeouts} == {
        (31, "ALLREDUCE", 2097152, 2097152, 900000)}
    counters = [e for e in parsed.events if e.kind == lp.COUNTERS]
    assert {(e.rank, e.enqueued, e.completed) for e in counters} == {
        (0, 31, 30), (1, 31, 30), (2, 31, 30)}
    assert parsed.joined_wrapped > 0 and parsed.split_fused > 0


def test_three_counter_wordings() -> None:
    lines = [
        "[rank0]:[E ProcessGroupNCCL.cpp:1537] [Rank 0] Timeout at NCCL work: 5, last enqueued "
        "NCCL work: 5, last completed NCCL work: 4.",
        "[rank1]:[E1121 05:28:12.416250018 ProcessGroupNCCL.cpp:2268] [PG ID 0 PG GUID "
        "0(default_pg) Rank 1]  failure detected by watchdog at work sequence id: 6 PG status: "
        "last enqueued work: 6, last completed work: 5",
        '{"pg_status": {"last_enqueued_collective": 7, "last_started_collective": 7, '
        '"last_completed_collective": 6}} [rank2]:[E1121 05:28:12.1 x.cpp:1] [Rank 2] status',
    ]
    events = [e for i, line in enumerate(lines)
              for e in lp._events(line, "f", i, i) if e.kind == lp.COUNTERS]
    assert [(e.enqueued, e.completed) for e in events] == [(5, 4), (6, 5), (7, 6)]
    assert [e.seq for e in events][:2] == [5, 6]


def test_tags_and_prefixes() -> None:
    ev = lp._events("(Worker[rank=5] pid=77) [PG ID 3 PG GUID 9(dp_replicate) Rank 1] First PG "
                    "on this rank to signal dumping.", "f", 1, 5)
    assert (ev[0].kind, ev[0].group, ev[0].group_rank) == (lp.FIRST_SIGNAL, "9:dp_replicate", 1)
    assert lp._global_rank("(Worker[rank=5] pid=77) hello", None) == 5
    assert lp._global_rank("[default3]:[rank3]:[E ProcessGroupNCCL.cpp:1] x", None) == 3
    assert lp._global_rank("[default6]: plain line", None) == 6
    assert lp._global_rank("node-b [stderr]: nothing", 4) == 4
    ts = lp._timestamp("[rank0]:[E1121 05:28:12.415871201 ProcessGroupNCCL.cpp:632]", 2026)
    assert ts is not None and ts % 1_000_000_000 == 415871201


def test_logs_cli_with_glob_and_text_summary() -> None:
    code, report = run_json("--logs", str(DATA / "straggler_v25" / "rank*.log"))
    assert code == 1
    [f] = report["stall_findings"]
    assert (f["kind"], f["ranks"], f["source"]) == ("straggler", [2], "logs")
    assert report["extra"]["stalls"]["logs"]["category"] == "data_loading"
    assert report["participating_ranks"] == [0, 1, 2, 3]
    text = run_cli("--logs", str(DATA / "fabric.log"), "--quiet", "--world-size", "4").stdout
    assert "undecided: no single rank" in text and "category: fabric" in text
    text = run_cli("--logs", str(DATA / "straggler_v25"), "--quiet").stdout
    table = text[text.index("rank  role"):].splitlines()
    assert table[1].split() == ["2", "observer", "-", "-", "7", "7"]  # the outlier first
    assert table[2].split() == ["0", "initiator", "8", "ALLREDUCE", "8", "7"]


def test_quiet_logs_are_healthy(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    log.write_text("2026-11-21 04:58:10,001 INFO train.py:88 step 1200 loss 2.31\n")
    proc = run_cli("--logs", str(log), "--format", "json", "--quiet")
    # No watchdog line: nothing about stalls to judge by, so "no evidence" (exit 3), not healthy.
    assert proc.returncode == 3 and json.loads(proc.stdout)["stall_findings"] == []


def test_logs_without_watchdog_lines_say_no_evidence_not_healthy(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    log.write_text("epoch 1 loss 0.52\nepoch 2 loss 0.41\n")
    proc = run_cli("--logs", str(log))
    assert proc.returncode == 3, proc.stderr  # docs/exit-codes.md: no evidence is not healthy
    assert "no evidence" in proc.stderr.splitlines()[-1]
    assert "Verdict: no evidence" in proc.stdout and "Verdict: healthy" not in proc.stdout
    assert "no ProcessGroupNCCL watchdog lines in 1 file(s)" in proc.stdout
