"""Matching rules on small hand-written dumps in the JSON form (stringified values, 0 times).

Real dumps cover the common hangs (test_fr_real.py); these cover the rules gloo jobs cannot
produce cheaply: numel rules per collective, dtype mismatch, ties, count splits, ring-buffer
truncation, a member that never joined a group, file naming.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stormotel.analyzers.stalls import analyze_dumps, load_dump_dir
from stormotel.analyzers.stalls.fr_loader import rank_from_name


def entry(seq: int, op: str = "all_reduce", ins: Any = ((4,),), outs: Any = None,
          dtype: str = "Float", group: tuple[str, str] = ("0", "default_pg"),
          pg_id: int = 0, record: int | None = None) -> dict[str, Any]:
    outs = ins if outs is None else outs
    return {"record_id": record if record is not None else seq, "pg_id": pg_id,
            "process_group": list(group), "collective_seq_id": seq, "p2p_seq_id": 0,
            "op_id": seq, "profiling_name": f"nccl:{op}", "time_created_ns": 1000 + seq,
            "input_sizes": [list(s) for s in ins], "input_dtypes": [dtype] * len(ins),
            "output_sizes": [list(s) for s in outs], "output_dtypes": [dtype] * len(outs),
            "state": "completed", "time_discovered_started_ns": 0,
            "time_discovered_completed_ns": 2000 + seq, "retired": True,
            "timeout_ms": 600000, "is_p2p": False}


def write(folder: Path, per_rank: dict[int, list[dict[str, Any]]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rank, entries in per_rank.items():
        last = max((e.get("collective_seq_id", 0) for e in entries), default=0)
        dump = {"version": "2.10", "pg_config": {"": {"name": "", "desc": "", "ranks": "[]"}},
                "pg_status": {"0": {"last_enqueued_collective": str(last),
                                    "last_started_collective": "-1",
                                    "last_completed_collective": str(last)}},
                "entries": entries}
        (folder / f"trainer-host{rank // 2}_rank{rank}.json").write_text(json.dumps(dump))
    return folder


def findings(folder: Path) -> list[tuple[str, list[int], int | None]]:
    return [(f.kind, f.ranks, f.seq_id) for f in analyze_dumps(load_dump_dir(folder)).findings]


def test_all_gather_output_must_be_input_times_group_size(tmp_path: Path) -> None:
    good = [entry(1, "all_gather", ((4,),), ((16,),))]
    bad = [entry(1, "all_gather", ((4,),), ((12,),))]
    folder = write(tmp_path, {0: good, 1: good, 2: bad, 3: good})
    [f] = analyze_dumps(load_dump_dir(folder)).findings
    assert (f.kind, f.ranks) == ("size_mismatch", [2])


def test_reduce_scatter_sizes_and_api_aliases(tmp_path: Path) -> None:
    """reduce_scatter input = output x group size; its API aliases match each other."""
    ok = [entry(1, "reduce_scatter", ((8,),), ((2,),))]
    folder = write(tmp_path / "a", {r: ok for r in range(4)})
    assert findings(folder) == []
    alias = [entry(1, "_reduce_scatter_base", ((8,),), ((2,),))]
    folder = write(tmp_path / "b", {0: ok, 1: ok, 2: ok, 3: alias})
    assert findings(folder) == []  # another API name of the same collective
    three = [entry(1, "reduce_scatter", ((6,),), ((2,),))]
    folder = write(tmp_path / "c", {0: ok, 1: ok, 2: ok, 3: three})
    [f] = analyze_dumps(load_dump_dir(folder)).findings
    assert (f.kind, f.ranks) == ("size_mismatch", [3])


def test_dtype_mismatch(tmp_path: Path) -> None:
    folder = write(tmp_path, {r: [entry(1), entry(2, dtype="BFloat16" if r == 1 else "Float")]
                              for r in range(4)})
    assert findings(folder) == [("dtype_mismatch", [1], 2)]


def test_two_against_two_is_undecided(tmp_path: Path) -> None:
    folder = write(tmp_path, {r: [entry(1, ins=((4,),) if r < 2 else ((8,),))]
                              for r in range(4)})
    [f] = analyze_dumps(load_dump_dir(folder)).findings
    assert f.kind == "undecided" and f.ranks == [] and f.evidence["mismatch"] == "size_mismatch"


def test_rank_that_issued_more_collectives_is_a_count_split(tmp_path: Path) -> None:
    base = [entry(s) for s in range(1, 5)]
    folder = write(tmp_path, {0: base, 1: base, 2: base,
                              3: [*base, entry(5, "broadcast"), entry(6, "broadcast")]})
    [f] = analyze_dumps(load_dump_dir(folder)).findings
    assert (f.kind, f.ranks, f.seq_id) == ("count_split", [3], 5)


def test_ring_buffer_truncation_is_not_a_mismatch(tmp_path: Path) -> None:
    """Rank 0's buffer dropped seq 1-2; comparison starts where every rank still has entries."""
    full = [entry(s, ins=((s,),)) for s in range(1, 6)]
    folder = write(tmp_path, {0: full[2:], 1: full, 2: full, 3: full})
    assert findings(folder) == []


def test_member_without_entries_never_joined(tmp_path: Path) -> None:
    """Rank 3's ring dropped nothing (its record ids start at 0): absence proves it."""
    tp = ("1", "tp")
    folder = write(tmp_path, {0: [entry(1, record=0), entry(1, group=tp, pg_id=1, record=1)],
                              1: [entry(1, record=0), entry(1, group=tp, pg_id=1, record=1)],
                              2: [entry(1, record=0)],
                              3: [entry(1, group=tp, pg_id=1, record=0)]})
    [f] = [f for f in analyze_dumps(load_dump_dir(folder)).findings if f.kind == "not_joined"]
    assert (f.ranks, f.process_group) == ([3], "0:default_pg")
    assert f.evidence["pattern"] == "fr.not_joined.window_covers"


def test_absence_from_a_ring_that_dropped_the_moment_proves_nothing(tmp_path: Path) -> None:
    """Rank 3's ring starts (record id 40, created later) after the others' default-group
    entry: it may have issued that collective and dropped it. No rank is named."""
    tp = ("1", "tp")
    late = {**entry(2, group=tp, pg_id=1, record=40), "time_created_ns": 1000 + 60 * 10**9}
    folder = write(tmp_path, {0: [entry(1, record=0), entry(2, group=tp, pg_id=1, record=1)],
                              1: [entry(1, record=0), entry(2, group=tp, pg_id=1, record=1)],
                              2: [entry(1, record=0)],
                              3: [late]})
    assert [f for f in analyze_dumps(load_dump_dir(folder)).findings
            if f.kind == "not_joined" or 3 in f.ranks] == []


def test_first_divergence_is_the_earliest_primary_finding(tmp_path: Path) -> None:
    folder = write(tmp_path, {r: [entry(1), entry(2, "broadcast" if r == 2 else "all_reduce"),
                                  entry(3)] for r in range(4)})
    analysis = analyze_dumps(load_dump_dir(folder))
    assert analysis.first_divergence == {"process_group": "0:default_pg", "seq_id": 2,
                                         "kind": "op_type_mismatch", "ranks": [2]}


def test_a_recorder_reset_after_the_moment_proves_nothing(tmp_path: Path) -> None:
    """Rank 3's record ids start at 0, but its first entry came a minute after the others'
    default-group entry (its recorder was reset, torch >= 2.8): it may have joined before."""
    tp = ("1", "tp")
    late = {**entry(2, group=tp, pg_id=1, record=0), "time_created_ns": 1000 + 60 * 10**9}
    folder = write(tmp_path, {0: [entry(1, record=0), entry(2, group=tp, pg_id=1, record=1)],
                              1: [entry(1, record=0), entry(2, group=tp, pg_id=1, record=1)],
                              2: [entry(1, record=0)],
                              3: [late]})
    assert [f for f in analyze_dumps(load_dump_dir(folder)).findings
            if f.kind == "not_joined"] == []


def test_world_size_hint_names_unseen_ranks(tmp_path: Path) -> None:
    folder = write(tmp_path, {r: [entry(1)] for r in range(3)})
    ds = load_dump_dir(folder, world_size=6)
    assert ds.missing_ranks == [3, 4, 5]
    [f] = analyze_dumps(ds).findings
    assert f.kind == "undecided" and f.evidence["suspects"] == [3, 4, 5]


def test_malformed_entries_are_counted_not_fatal(tmp_path: Path) -> None:
    folder = write(tmp_path, {0: [entry(1), {"bogus": True}], 1: [entry(1)]})
    ds = load_dump_dir(folder)
    assert ds.dumps[0].skipped_entries == 1
    assert any("skipped 1 malformed entry" in n for n in ds.notes)


@pytest.mark.parametrize(("name", "rank"), [
    ("nccl_trace_rank_3", 3), ("nccl_trace_rank_12", 12), ("fr_node-7_rank3.json", 3),
    ("trainer-host1_rank15.json", 15), ("dump.rank-4.pkl", 4), ("trace7", 7), ("_dump_3", 3),
    ("README", None), ("notes.txt", None),
])
def test_rank_from_file_name(name: str, rank: int | None) -> None:
    assert rank_from_name(name) == rank
