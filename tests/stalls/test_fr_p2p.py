"""Point-to-point matching, coalesced ops and pg_config rank strings on NCCL-shaped dumps.

gloo's recorder (torch 2.13) writes no send/recv entries, so these dumps are written by hand in
the JSON form NCCL produces (``nccl:send 1->2`` / ``nccl:recv 2<-1`` with group-rank peers,
``pg_config`` rank lists as JSON strings).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stormotel.analyzers.stalls import analyze_dumps, load_dump_dir

DEFAULT = ("0", "default_pg")


def p2p(record: int, op: str, me: int, peer: int, done: bool, p2p_seq: int,
        group: tuple[str, str] = DEFAULT) -> dict[str, Any]:
    arrow = f"{me}->{peer}" if op == "send" else f"{me}<-{peer}"
    return {"record_id": record, "pg_id": 0, "process_group": list(group),
            "collective_seq_id": 0, "p2p_seq_id": p2p_seq, "op_id": record,
            "profiling_name": f"nccl:{op} {arrow}", "time_created_ns": 1000 + record,
            "input_sizes": [[1024]], "input_dtypes": ["Float"], "output_sizes": [[1024]],
            "output_dtypes": ["Float"], "state": "completed" if done else "started",
            "time_discovered_started_ns": 1500 + record,
            "time_discovered_completed_ns": 2000 + record if done else 0,
            "retired": done, "timeout_ms": 600000, "is_p2p": True}


def write(folder: Path, per_rank: dict[int, list[dict[str, Any]]],
          pg_config: dict[str, Any] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rank, entries in per_rank.items():
        cfg = pg_config or {"0": {"name": "0", "desc": "default_pg",
                                  "ranks": json.dumps(sorted(per_rank))}}
        dump = {"version": "2.10", "pg_config": cfg, "pg_status": {}, "entries": entries}
        (folder / f"_dump_{rank}").write_text(json.dumps(dump))
    return folder


def pipeline(stuck: int | None, micro: int = 3, stages: int = 4, ring: int | None = None
             ) -> dict[int, list[dict[str, Any]]]:
    """Forward sends stage k -> k+1; in the last micro-batch ``stuck`` posts nothing."""
    out: dict[int, list[dict[str, Any]]] = {r: [] for r in range(stages)}

    def add(k: int, op: str, peer: int, done: bool) -> None:
        out[k].append(p2p(len(out[k]), op, k, peer, done, len(out[k])))

    for mb in range(micro):
        hang = stuck is not None and mb == micro - 1
        for k in range(stages):
            if k > 0 and not (hang and k == stuck):
                add(k, "recv", k - 1, done=not (hang and k > stuck))  # type: ignore[operator]
            if k < stages - 1 and not (hang and k >= stuck):  # type: ignore[operator]
                add(k, "send", k + 1, done=not (hang and k == stuck - 1))  # type: ignore[operator]
    return {k: v[-ring:] if ring else v for k, v in out.items()}


def test_pipeline_stage_that_never_posts_its_recv(tmp_path: Path) -> None:
    folder = write(tmp_path, pipeline(stuck=2))
    [f] = analyze_dumps(load_dump_dir(folder)).findings
    assert (f.kind, f.ranks, f.evidence["category"]) == ("straggler", [2], "p2p_unposted")
    assert f.evidence["waiting_ranks"] == [1, 3] and f.confidence == "high"
    assert "rank 2 never posted its recv" in f.evidence["reason"]


def test_truncated_ring_buffers_do_not_change_the_match(tmp_path: Path) -> None:
    folder = write(tmp_path, pipeline(stuck=2, micro=6, ring=3))
    [f] = analyze_dumps(load_dump_dir(folder)).findings
    assert f.ranks == [2]


def test_healthy_pipeline_has_no_finding(tmp_path: Path) -> None:
    folder = write(tmp_path, pipeline(stuck=None))
    assert analyze_dumps(load_dump_dir(folder)).findings == []


def test_send_send_deadlock_is_undecided(tmp_path: Path) -> None:
    folder = write(tmp_path, {0: [p2p(0, "send", 0, 1, False, 0)],
                              1: [p2p(0, "send", 1, 0, False, 0)]})
    [f] = analyze_dumps(load_dump_dir(folder)).findings
    assert (f.kind, f.ranks, f.evidence["suspects"]) == ("undecided", [], [0, 1])


def test_sub_group_peers_are_mapped_through_pg_config_rank_strings(tmp_path: Path) -> None:
    pp = ("7", "pp")
    cfg = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"},
           "7": {"name": "7", "desc": "pp", "ranks": "[1, 5]"}}
    done = {**p2p(0, "send", 0, 1, True, 0), "is_p2p": False, "collective_seq_id": 1,
            "profiling_name": "nccl:all_reduce"}
    per_rank: dict[int, list[dict[str, Any]]] = {r: [done] for r in range(8)}
    per_rank[1] = [done, p2p(1, "send", 0, 1, False, 0, pp)]  # group rank 0 = global 1
    folder = write(tmp_path, per_rank, cfg)
    findings = analyze_dumps(load_dump_dir(folder)).findings
    [f] = [f for f in findings if f.consequence_of is None]
    assert (f.kind, f.ranks, f.process_group, f.op) == ("straggler", [5], "7:pp", "send/recv")
    assert f.ranks == [5] and f.evidence["pairs"][0] == {
        "src": 1, "dst": 5, "pending_sends": 1, "pending_recvs": 0,
        "never_posted": "recv on 5"}
