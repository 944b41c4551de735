"""The two rules written from fresh5's dev half (log_pg_error; nccl.ib.completion_error_text).

Each is checked at the boundary a user touches (``stormotel analyze --logs`` on a file), on the
message shapes the emitters' sources print, both ways: the line that must change the answer and
the neighbouring shape that must not.
"""

from __future__ import annotations

from pathlib import Path

from tests.stalls.helpers import analyze_log_text, run_json


def _roots(tmp_path: Path, text: str) -> tuple[int, list[dict]]:  # type: ignore[type-arg]
    log = tmp_path / "job.log"
    log.write_text(text)
    code, report = run_json("--logs", str(log))
    return code, [f for f in report["stall_findings"] if f["consequence_of"] is None]


def _timeout(rank: int, seq: int = 167) -> str:
    """ProcessGroupNCCL.cpp (2.2), WorkNCCL::checkTimeout through c10's LOG(ERROR) prefix."""
    return (f"[rank{rank}]:[E ProcessGroupNCCL.cpp:523] [Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600272 milliseconds before timing out.\n")


# --- a rank whose watchdog line the paste cut is not a silent straggler ----------------------
def test_a_cut_processgroupnccl_line_is_not_a_silent_rank(tmp_path: Path) -> None:
    """accelerate#2375's shape: five ranks time out at SeqNum 167 and the excerpt ends inside
    rank 3's own ProcessGroupNCCL ERROR line. Rank 3 was in NCCL (c10 logging's ``[E …
    ProcessGroupNCCL.cpp:N]`` prefix): never "logged other lines but no watchdog line"."""
    text = "".join(_timeout(r) for r in (5, 4, 1, 6, 7)) + \
        "[rank3]:[E ProcessGroupNCCL.cpp:523] [R\n"
    code, roots = _roots(tmp_path, text)
    assert code == 1 and len(roots) == 1
    root = roots[0]
    assert (root["kind"], root["ranks"], root["confidence"]) == ("undecided", [], "low")
    assert root["evidence"]["pg_error_without_watchdog_line"] == [3]
    assert root["evidence"]["absent_from_watchdog"] == []


def test_a_rank_silent_outside_nccl_is_still_named(tmp_path: Path) -> None:
    """The same job where rank 3 logged only a training line (no ProcessGroupNCCL error): the
    silent-rank rule still names it — the new rule removes only ranks that were in NCCL."""
    text = "".join(_timeout(r) for r in (5, 4, 1, 6, 7)) + \
        "[rank3]: epoch 2 step 4120 loss 1.93\n"
    code, roots = _roots(tmp_path, text)
    assert code == 1 and [(f["kind"], f["ranks"]) for f in roots] == [("straggler", [3])]


def test_a_timestamped_error_prefix_counts_too(tmp_path: Path) -> None:
    """2.4+'s prefix carries a glog stamp (``[E1122 06:40:00.504052851 ProcessGroupNCCL.cpp:616]``,
    the month not zero-padded: ``[F930 …]``); a WARNING line (``[W …]``) is not an error."""
    stamp = "[rank3]:[E1122 06:40:00.504052851 ProcessGroupNCCL.cpp:616] [PG ID 0 PG GUID 0(d"
    code, roots = _roots(tmp_path, "".join(_timeout(r) for r in (5, 4, 1, 6, 7)) + stamp + "\n")
    assert code == 1 and roots[0]["ranks"] == [] and roots[0]["confidence"] == "low"
    warn = "[rank3]:[W ProcessGroupNCCL.cpp:1856] Warning: unknown device for rank 3\n"
    code, roots = _roots(tmp_path, "".join(_timeout(r) for r in (5, 4, 1, 6, 7)) + warn)
    assert [(f["kind"], f["ranks"]) for f in roots] == [("straggler", [3])]


def test_a_lone_processgroupnccl_prefix_is_never_healthy(tmp_path: Path) -> None:
    """Only a cut ERROR prefix in the file: not evidence of health — "no evidence" (3), as
    before the rule, never "healthy" (0)."""
    code, report = analyze_log_text(tmp_path, "rank3.log", "[E ProcessGroupNCCL.cpp:523] [R\n")
    assert code == 3, report.get("stall_findings")


# --- the IB transport's completion error without its WARN header ------------------------------
def test_ib_completion_error_text_alone_is_a_finding_with_no_rank(tmp_path: Path) -> None:
    """nccl#1664's paste: net_ib.cc's WARN text in prose, without the "host:pid:tid [dev]
    file:line NCCL WARN" header (as ncclGetLastError returns it after torch's "Last error:").
    A fabric failure seen by the reporter: undecided, nobody named — not "no evidence"."""
    for text in (
            "encountered the errors mentioned above. NET/IBP:Got completion from peer "
            "7.6.13.83<36315> with status=12 opcode=32698 len=32696 vendor err 129 (Send)\n",
            "ncclRemoteError: A call failed possibly due to a network error or a remote process "
            "exiting prematurely.\nLast error:\nNET/IB : Got completion from peer "
            "11.214.147.122<39138> with error 12, opcode 0, len 0, vendor err 129\n",
            "Last error:\nNET/IB: Got completion from peer 10.0.0.2<4791> with "
            "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129 localGid\n"):
        code, roots = _roots(tmp_path, text)
        assert code == 1 and len(roots) == 1, text
        assert (roots[0]["kind"], roots[0]["ranks"]) == ("undecided", []), text
        assert roots[0]["confidence"] == "low"


def test_a_normal_completion_trace_line_is_not_evidence(tmp_path: Path) -> None:
    """NCCL_DEBUG=TRACE prints every completion ("Got completion from peer … wr_id=…", no vendor
    err): a healthy transport's chatter, never read as a failure."""
    text = ("node1:1:2 [0] NCCL TRACE Got completion from peer 10.0.0.2<4791> with status=0 "
            "opcode=0 len=65536 wr_id=1 r=0x7f00 type=1 events={1,0,0,0}, i=0\n")
    code, report = analyze_log_text(tmp_path, "node1.log", text)
    assert code in (0, 3) and report["stall_findings"] == []


def test_the_header_form_is_read_once(tmp_path: Path) -> None:
    """With the NCCL WARN header the line is nccl.warn.net's (read as before); the new pattern
    steps aside, so one line is one fabric event."""
    text = ("H100-2:19989:20082 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion "
            "from peer fe80::966d:ae03:8b:df78%ib0<53249> with error 4, opcode 32564, len 32564, "
            "vendor err 81 (Send)\n")
    code, roots = _roots(tmp_path, text)
    assert code == 1 and roots[0]["evidence"]["pattern"] == "nccl.warn.net"
    assert "1 × fabric" in roots[0]["evidence"]["reason"]
