"""Hostile or broken worker logs: bounded work per line, counted skips, never a traceback."""

from __future__ import annotations

import time
from pathlib import Path

from stormotel.analyzers.stalls import logs_parser as lp
from stormotel.analyzers.stalls.log_analysis import analyze_logs

from tests.stalls.helpers import run_cli

WATCHDOG = ("[rank{r}]:[E1121 05:28:12.415871201 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID "
            "0(default_pg) Rank {r}] Watchdog caught collective operation timeout: WorkNCCL("
            "SeqNum={seq}, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran "
            "for 600010 milliseconds before timing out.")


def test_a_560_kb_watchdog_like_line_is_cut_not_backtracked(tmp_path: Path) -> None:
    # every pattern the parser knows, repeated without ever closing: the worst case for regexes
    body = ("[rank1]: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=8, [PG ID 0 PG GUID 0(x "
            "last_enqueued_collective 1 CollectiveFingerPrint(OpType=A Rank 3 is running "
            "collective: File \"x\", line 1, in Traceback CUDA error: Tried to allocate 1")
    line = (body * (560_000 // len(body) + 1))[:560_000]
    log = tmp_path / "rank1.log"
    log.write_text(WATCHDOG.format(r=0, seq=5) + "\n" + line + "\n")
    started = time.perf_counter()
    parsed = lp.parse_logs([str(log)])
    elapsed = time.perf_counter() - started
    assert elapsed < 10, f"{elapsed:.1f} s: super-linear work on one long line"
    assert parsed.skipped[f"line longer than {lp.MAX_LINE} characters (cut)"] == 1


def test_five_thousand_digit_seqnum_and_impossible_dates_are_counted_skips(
        tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("\n".join([
        WATCHDOG.format(r=0, seq="9" * 5000),
        "2026-13-45 25:61:61,000 " + WATCHDOG.format(r=1, seq=7).removeprefix("[rank1]:"),
        "[rank2]:[E0231 05:28:12.1 x.cpp:1] [PG ID 0 PG GUID 0(default_pg) Rank 2] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, "
        "NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600010 milliseconds",
    ]) + "\n")
    parsed = lp.parse_logs([str(log)])
    assert parsed.skipped["number longer than 18 digits (line skipped)"] == 1
    assert parsed.skipped["impossible timestamp (line kept, untimed)"] >= 2
    timeouts = sorted((e.group_rank, e.seq, e.ts_ns) for e in parsed.events
                      if e.kind == lp.TIMEOUT)
    assert timeouts == [(1, 7, None), (2, 7, None)]
    notes = analyze_logs(parsed).notes
    assert any("number longer than 18 digits" in n for n in notes)
    proc = run_cli("--logs", str(log), "--quiet")
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr


def test_ansi_coloured_logs_are_text(tmp_path: Path) -> None:
    log = tmp_path / "rank3.log"
    red, reset = "\x1b[31m", "\x1b[0m"
    lines = [f"{red}{WATCHDOG.format(r=r, seq=12)}{reset}" for r in (0, 1, 2)]
    lines.append("\x1b[1;33m[rank3]:\x1b[0m torch.OutOfMemoryError: CUDA out of memory. "
                 "Tried to allocate 2.00 GiB.")
    log.write_text("\n".join(lines * 20) + "\n")
    parsed = lp.parse_logs([str(log)])
    assert {e.rank for e in parsed.events if e.kind == lp.TIMEOUT} == {0, 1, 2}
    [root] = [f for f in analyze_logs(parsed).findings if f.consequence_of is None]
    assert (root.kind, root.ranks, root.evidence["requested_bytes"]) == (
        "rank_failure", [3], 2 * 2**30)


def test_wrapped_line_joining_is_bounded_on_a_progress_bar_log() -> None:
    # a watchdog record (no closing ".") followed by thousands of >= 60-character bar lines:
    # the joiner used to copy the growing record once per line (quadratic); now each glued
    # record stops at MAX_JOINED and the next bar line starts a new one
    bar = "Epoch 0:  45%|████▌     | 450/100000 [00:10<00:20, 45.00it/s, v_num=NCCL]"
    text = WATCHDOG.format(r=0, seq=5).rstrip(".") + "\n" + "\n".join([bar] * 20_000) + "\n"
    segs, _, joined = lp._segments(text)
    assert max(len(s) for _, s in segs) <= lp.MAX_JOINED
    assert len(segs) > 20_000 * len(bar) // lp.MAX_JOINED
    assert joined > 0 and segs[0][1].startswith("[rank0]:")
    timeouts = [e for e in lp._events(segs[0][1], "f", 1, 0) if e.kind == lp.TIMEOUT]
    assert [e.seq for e in timeouts] == [5]
