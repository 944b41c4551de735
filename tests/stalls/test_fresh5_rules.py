"""The two rules written from fresh5's dev half (log_pg_error; nccl.ib.completion_error_text).

Each is checked at the boundary a user touches (``stormotel analyze --logs`` on a file), on the
message shapes the emitters' sources print, both ways: the line that must change the answer and
the neighbouring shape that must not.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.stalls.helpers import analyze_log_text, run_json

DATA = Path(__file__).resolve().parent / "data"


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
    rank 3's line ``[E ProcessGroupNCCL.cpp:523] [R`` — the call site (c10 logging's
    ``file:line``) of the five read "Watchdog caught collective operation timeout" lines: the
    same LOG statement, so rank 3 printed the watchdog timeout too; never "logged other lines
    but no watchdog line". Still not named: its SeqNum and op were cut."""
    text = "".join(_timeout(r) for r in (5, 4, 1, 6, 7)) + \
        "[rank3]:[E ProcessGroupNCCL.cpp:523] [R\n"
    code, roots = _roots(tmp_path, text)
    assert code == 1 and len(roots) == 1
    root = roots[0]
    assert (root["kind"], root["ranks"], root["confidence"]) == ("undecided", [], "low")
    assert root["evidence"]["watchdog_timeout_line_unread"] == [3]
    assert root["evidence"]["absent_from_watchdog"] == []


def test_a_rank_silent_outside_nccl_is_still_named(tmp_path: Path) -> None:
    """The same job where rank 3 logged only a training line (no ProcessGroupNCCL error): the
    silent-rank rule still names it — the new rule removes only ranks that were in NCCL."""
    text = "".join(_timeout(r) for r in (5, 4, 1, 6, 7)) + \
        "[rank3]: epoch 2 step 4120 loss 1.93\n"
    code, roots = _roots(tmp_path, text)
    assert code == 1 and [(f["kind"], f["ranks"]) for f in roots] == [("straggler", [3])]


def test_a_timestamped_error_prefix_counts_too(tmp_path: Path) -> None:
    """2.4+'s prefix carries a glog stamp (``[E930 05:06:30.929096625 ProcessGroupNCCL.cpp:632]``,
    the month not zero-padded); the cut line counts when its call site is the read timeout
    lines' (632 here, as in arctictraining#219's 2.5-era log). A WARNING line (``[W …]``) at the
    same call site is not the ERROR statement: rank 3 stays silent."""
    stamp = "[rank3]:[E930 05:06:31.104052851 ProcessGroupNCCL.cpp:632] [R"
    code, roots = _roots(tmp_path, _v25_timeouts() + stamp + "\n")
    assert code == 1 and roots[0]["ranks"] == [] and roots[0]["confidence"] == "low"
    assert roots[0]["evidence"]["watchdog_timeout_line_unread"] == [3]
    warn = "[rank3]:[W930 05:06:31.104052851 ProcessGroupNCCL.cpp:632] [R\n"
    code, roots = _roots(tmp_path, _v25_timeouts() + warn)
    assert [(f["kind"], f["ranks"]) for f in roots] == [("straggler", [3])]


# --- torch >= 2.3: the heartbeat monitor of EVERY rank logs ERROR / FATAL lines -------------
# Line texts: ProcessGroupNCCL.cpp's getNCCLWatchdogTimeoutErrorMsg / heartbeatMonitor (the
# 2.4+ message; c10::str(" rank ", timeOutRank) gives the double space) and WorkNCCL's timeout;
# call sites 632 (timeout) and 1743 (the monitor's one LOG(ERROR) << errorMsg, which prints
# "… from this local rank", "… from  rank N" and the watchdog-hang message alike) from one
# 2.5-era build (arctictraining#219's and llamafactory#8261's logs in tests/stalls/data/cases).
_V25 = "[rank{r}]:[E930 05:{m:02d}:30.929096625 ProcessGroupNCCL.cpp:{n}] "


def _v25_timeouts(ranks: tuple[int, ...] = (0, 1, 2), seq: int = 167) -> str:
    return "".join(
        _V25.format(r=r, m=6, n=632) + f"[Rank {r}] Watchdog caught collective operation "
        f"timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600065 milliseconds before timing out.\n" for r in ranks)


_DUMP_SIGNAL = (
    _V25.format(r=3, m=14, n=1743) + "[PG ID 0 PG GUID 0(default_pg) Rank 3] Received a dump "
    "signal due to a collective timeout from  rank 0 and we will try our best to dump the debug "
    "info. Last enqueued NCCL work: 166, last completed NCCL work: 166.This is most likely "
    "caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order "
    "of collectives is not same for all ranks or the scheduled collective, for some reason, "
    "didn't run. Additionally, this can be caused by GIL deadlock or other reasons such as "
    "network errors or bugs in the communications library (e.g. NCCL), etc. \n")


def test_a_straggler_outside_nccl_with_a_dump_signal_line_is_named_as_before(
        tmp_path: Path) -> None:
    """Ranks 0-2 time out in SeqNum 167; rank 3, stuck in Python outside NCCL, logs only its
    heartbeat monitor's dump-signal ERROR line (enqueued == completed == 166: it never entered
    167). Read whole by its own pattern: rank 3 never entered the collective — the straggler,
    as main answers (medium)."""
    code, roots = _roots(tmp_path, _v25_timeouts() + _DUMP_SIGNAL)
    assert code == 1 and [(f["kind"], f["ranks"], f["confidence"]) for f in roots] == \
        [("straggler", [3], "medium")]
    assert roots[0]["evidence"]["never_entered"] == [3]


def test_a_cut_line_at_another_call_site_proves_nothing(tmp_path: Path) -> None:
    """The same straggler's dump-signal line cut after its prefix (site 1743), or the
    monitor's FATAL kill cut likewise: not the timeout's call site (632), so nothing is
    proved about rank 3 — it stays silent outside NCCL and is named, as main answers. (The
    ERROR prefix alone once cleared it: a straggler's own monitor lines hid it.)"""
    for cut in (_V25.format(r=3, m=14, n=1743) + "[PG ID 0 PG GUID 0(defa\n",
                "[rank3]:[F930 05:24:36.393067540 ProcessGroupNCCL.cpp:1309] [PG ID 0 PG\n"):
        code, roots = _roots(tmp_path, _v25_timeouts() + cut)
        assert code == 1 and [(f["kind"], f["ranks"], f["confidence"]) for f in roots] == \
            [("straggler", [3], "medium")], cut
        assert roots[0]["evidence"]["absent_from_watchdog"] == [3], cut
        assert "watchdog_timeout_line_unread" not in roots[0]["evidence"], cut


def test_a_cut_line_at_the_timeout_call_site_is_not_silent(tmp_path: Path) -> None:
    """The same job, rank 3's line cut after the prefix at the timeout's own call site (632):
    it printed the watchdog timeout too — a waiter, not the straggler; nobody named."""
    code, roots = _roots(tmp_path, _v25_timeouts() + _V25.format(r=3, m=6, n=632) + "[Ra\n")
    assert code == 1 and len(roots) == 1
    assert (roots[0]["kind"], roots[0]["ranks"], roots[0]["confidence"]) == \
        ("undecided", [], "low")
    assert roots[0]["evidence"]["watchdog_timeout_line_unread"] == [3]


def test_the_call_site_must_be_another_ranks_read_timeout_line(tmp_path: Path) -> None:
    """A site quoted only by the watchdog's catch ("Process group watchdog thread terminated
    with exception: [Rank r] Watchdog caught …", another statement) is not the timeout's: a
    cut line there leaves rank 3 silent, as main has it."""
    term = "".join(
        _V25.format(r=r, m=6, n=1899) + f"[PG ID 0 PG GUID 0(default_pg) Rank {r}] Process group "
        f"watchdog thread terminated with exception: [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=167, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600065 milliseconds before timing out.\n" for r in (0, 1, 2))
    code, roots = _roots(tmp_path, term + _V25.format(r=3, m=6, n=1899) + "[PG ID 0 PG\n")
    assert code == 1 and [(f["kind"], f["ranks"]) for f in roots] == [("straggler", [3])]


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


def _cut_pg_lines(src: Path, dst: Path, rank_file: str) -> None:
    """A copy of a log directory with every ProcessGroupNCCL line of one file cut after its
    c10 prefix, as a paste cuts a line (the rest of the file and the other files whole)."""
    dst.mkdir()
    for f in src.iterdir():
        text = f.read_text()
        if f.name == rank_file:
            text = "".join(
                line[:m.end()] + "[PG ID 0 PG\n"
                if (m := re.search(r"ProcessGroupNCCL\.cpp:\d+\] ", line)) else line
                for line in text.splitlines(keepends=True))
        (dst / f.name).write_text(text)


def test_the_straggler_fixtures_cut_monitor_lines_leave_it_named(tmp_path: Path) -> None:
    """straggler_v25 (the corpus's 2.5-shaped straggler: rank 2 stuck in data loading logs only
    its heartbeat monitor's lines — observed signal 1687, dump signal 1743, dump 1533, FATAL
    1557). With all four cut after the prefix, none is at the timeout's call site (632): rank 2
    stays silent and is named, as main names it; f5's first rule answered undecided here."""
    logs = tmp_path / "logs"
    _cut_pg_lines(DATA / "logs" / "straggler_v25", logs, "rank2.log")
    code, report = run_json("--logs", str(logs))
    roots = [f for f in report["stall_findings"] if f["consequence_of"] is None]
    assert code == 1 and [(f["kind"], f["ranks"], f["confidence"]) for f in roots] == \
        [("straggler", [2], "medium")]
    assert roots[0]["evidence"]["absent_from_watchdog"] == [2]


def test_a_waiters_cut_lines_in_the_straggler_fixture(tmp_path: Path) -> None:
    """The other way: rank 3's lines cut (its timeout at 632 among them, the site of ranks 0
    and 1's read timeout lines): rank 3 printed the timeout too — not silent; rank 2 is still
    the straggler that never entered."""
    logs = tmp_path / "logs"
    _cut_pg_lines(DATA / "logs" / "straggler_v25", logs, "rank3.log")
    code, report = run_json("--logs", str(logs))
    roots = [f for f in report["stall_findings"] if f["consequence_of"] is None]
    assert code == 1 and [(f["kind"], f["ranks"]) for f in roots] == [("straggler", [2])]
    ev = roots[0]["evidence"]
    assert ev["watchdog_timeout_line_unread"] == [3] and ev["absent_from_watchdog"] == []
