"""A dump is the tail of a bounded ring, taken at its own moment: 16-rank MoE NCCL-shaped dumps.

The dumps come from :mod:`tests.stalls.fr_moe` (a simulation of the job written in torch's
dump format, ``2.10``): TP=2 x PP=2 x DP=4 with expert-parallel pairs, send/recv between the
stages, a default-group all_reduce only every tenth iteration, rings of a few hundred entries.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import analyze_dumps, load_dump_dir
from stormotel.analyzers.stalls.fr_groups import rebuild_groups
from stormotel.analyzers.stalls.fr_window import build_windows

from tests.stalls import fr_moe
from tests.stalls.helpers import run_json


def roots(folder: Path) -> list[StallFinding]:
    return [f for f in analyze_dumps(load_dump_dir(folder)).findings
            if f.consequence_of is None]


def assert_only(folder: Path, culprits: list[int]) -> StallFinding:
    """The leading root names exactly ``culprits``; no other root names another rank at
    high or medium (the scoring's "confident wrong rank")."""
    rs = roots(folder)
    assert rs and rs[0].ranks == culprits, [(f.kind, f.ranks, f.confidence) for f in rs]
    wrong = [(f.kind, f.ranks, f.confidence) for f in rs
             if set(f.ranks) - set(culprits) and f.confidence in ("high", "medium")]
    assert wrong == []
    return rs[0]


@pytest.mark.parametrize("form", ["json", "pickle"])
def test_gil_hang_names_the_two_empty_dumps_not_ranks_whose_ring_dropped_the_group(
        tmp_path: Path, form: str) -> None:
    """Six live last-stage ranks no longer hold the default group's last all_reduce (their
    rings wrapped past it): that is no evidence they never joined it."""
    folder = fr_moe.moe_gil_hang(tmp_path / "d", form=form)
    ds = load_dump_dir(folder)
    assert ds.empty_ranks == [9, 14]
    default = [r for r, d in ds.dumps.items() if any(e.group[1] == "default_pg"
                                                     for e in d.entries)]
    assert sorted(default) == list(range(8))  # the six others dropped it
    root = assert_only(folder, [9, 14])
    assert (root.kind, root.confidence, root.process_group) == ("straggler", "medium", None)
    assert root.evidence["category"] == "empty_dump"
    assert root.evidence["pattern"] == "fr.ring.empty_dump"
    assert root.evidence["spoke"] == {"ranks": 14, "of": 16}
    assert set(root.evidence["waiting_ranks"]) == set(range(16)) - {9, 14}
    findings = analyze_dumps(ds).findings
    assert not [f for f in findings if f.kind == "not_joined"]


def test_windows_record_ids_times_and_the_inferred_ring_size(tmp_path: Path) -> None:
    ds = load_dump_dir(fr_moe.moe_gil_hang(tmp_path / "d"))
    groups, _ = rebuild_groups(ds)
    w = build_windows(ds, groups)
    sizes = {len(d.entries) for d in ds.dumps.values() if d.entries}
    assert sizes == {w.buffer_size}  # every live rank's ring is full
    first = {r: x.first_record_id for r, x in w.by_rank.items() if x.entries}
    assert len(set(first.values())) > 1 and min(first.values()) > 0  # each its own range
    assert all(x.dropped and x.oldest_ns and x.newest_ns and x.oldest_ns < x.newest_ns
               for x in w.by_rank.values() if x.entries)


def test_cli_exit_code_and_report(tmp_path: Path) -> None:
    code, report = run_json("--flight-recorder", str(fr_moe.moe_gil_hang(tmp_path / "d")))
    assert code == 1
    lead = report["stall_findings"][0]
    assert (lead["kind"], lead["ranks"], lead["consequence_of"]) == ("straggler", [9, 14], None)
    assert all(f["evidence"]["pattern"].startswith("fr.") for f in report["stall_findings"])


def test_ring_that_wrapped_on_some_ranks_only(tmp_path: Path) -> None:
    folder = fr_moe.moe_gil_hang_partly_wrapped(tmp_path / "d")
    ds = load_dump_dir(folder)
    starts = {r: d.entries[0].record_id for r, d in ds.dumps.items() if d.entries}
    assert 0 in starts.values() and any(starts.values())
    assert_only(folder, [9, 14])


def test_idle_rank_with_nothing_pending_is_the_answer(tmp_path: Path) -> None:
    """Rank 9 stopped with nothing pending; its peers wait for it (send/recv, tp, ep)."""
    assert_only(fr_moe.moe_idle(tmp_path / "d"), [9])


def test_stale_dump_newest_entry_far_older_than_its_peers(tmp_path: Path) -> None:
    root = assert_only(fr_moe.moe_stale(tmp_path / "d"), [9])
    assert (root.evidence["category"], root.confidence) == ("stale_dump", "medium")
    assert root.evidence["pattern"] == "fr.ring.stale_dump"
    assert "117" in root.evidence["reason"] or "118" in root.evidence["reason"]


def test_short_dump_is_the_rank_stuck_outside_communication(tmp_path: Path) -> None:
    """Rank 9 hung right after start-up: three entries where its peers hold dozens; its
    tensor-parallel partner also holds few, but waits inside a collective (a victim)."""
    root = assert_only(fr_moe.moe_short(tmp_path / "d"), [9])
    assert root.evidence["category"] == "short_dump"
    assert root.evidence["pattern"] == "fr.ring.short_dump"
    assert root.confidence == "medium"


def test_not_joined_that_the_windows_prove(tmp_path: Path) -> None:
    """Rank 6 never calls its expert-parallel group; nothing wrapped, so its window covers the
    moment its partner entered. The stages that wait behind it are consequences."""
    root = assert_only(fr_moe.moe_not_joined(tmp_path / "d"), [6])
    assert (root.kind, root.process_group) == ("not_joined", "22:ep")
    assert root.evidence["pattern"] == "fr.not_joined.window_covers"


def test_not_joined_is_not_claimed_when_the_ring_no_longer_reaches_back(tmp_path: Path) -> None:
    """The same job with a 12-entry ring: rank 6's window starts after its partner's entry,
    so absence proves nothing — undecided with what to collect, nobody named confidently."""
    folder = fr_moe.moe_not_joined(tmp_path / "d", buffer=12)
    findings = analyze_dumps(load_dump_dir(folder)).findings
    assert not [f for f in findings if f.kind == "not_joined"]
    assert not [f for f in findings if f.consequence_of is None and f.ranks
                and f.confidence in ("high", "medium")]
    assert findings[0].kind == "undecided"  # the answer: not a stage that only waits
    [ep] = [f for f in findings if f.process_group == "22:ep"]
    assert ep.kind == "undecided" and ep.evidence["suspects"] == [6]
    assert ep.evidence["pattern"] == "fr.not_joined.window_misses"
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" in " ".join(ep.remediation)


def test_json_dump_without_entries_key_is_an_empty_dump(tmp_path: Path) -> None:
    """``dump_json`` omits ``entries`` when nothing was recorded: that rank is silent."""
    folder = fr_moe.moe_gil_hang(tmp_path / "d")
    body = json.loads((folder / "nccl_trace_rank_0").read_text())
    body.pop("entries")
    (folder / "nccl_trace_rank_14").write_text(json.dumps(body))
    assert load_dump_dir(folder).empty_ranks == [9, 14]
    assert_only(folder, [9, 14])


def test_every_finding_names_its_pattern(tmp_path: Path) -> None:
    for name, make in fr_moe.SCENARIOS.items():
        for f in analyze_dumps(load_dump_dir(make(tmp_path / name))).findings:
            assert str(f.evidence.get("pattern", "")).startswith("fr."), (name, f.kind)


def test_only_active_dumps_of_the_gil_hang(tmp_path: Path) -> None:
    """Dumped with only active entries (as NVIDIA's resiliency extension does): every entry
    is pending, record ids skip; the hung ranks hold pg_status but no entries."""
    folder = fr_moe.moe_gil_hang_only_active(tmp_path / "d")
    ds = load_dump_dir(folder)
    groups, _ = rebuild_groups(ds)
    w = build_windows(ds, groups)
    assert all(x.only_active for r, x in w.by_rank.items() if x.entries)
    root = assert_only(folder, [9, 14])
    assert root.evidence["category"] == "empty_dump"
    assert "pg_status shows every collective it enqueued completed" in root.evidence["reason"]


def test_gpu_error_stream_stuck_in_a_collective_its_peers_completed(tmp_path: Path) -> None:
    """Ranks 12 and 15 hit a CUDA error: their partners completed the all_to_all both entered
    (pg_status), while 12 and 15 still hold it pending — their own stream stopped."""
    root = assert_only(fr_moe.moe_gpu_error(tmp_path / "d"), list(fr_moe.GPU_ERROR))
    assert root.evidence["category"] == "stream_stuck"
    assert root.evidence["pattern"] == "fr.stream.peers_completed"
