"""MosaicML Composer's launcher (the ``composer`` CLI): the rank it found crashed, and how.

Why: a job started with ``composer -n 8 train.py`` ends, on each node, in the launcher's own
lines — "Rank 3 crashed with exit code 1." and one "Global rank N (PID P) exited with code C"
block per failed process — and the ranks' lines carry no prefix; before this rule such a log
named nobody.

The messages, read in ``composer/cli/launcher.py`` of the mosaicml 0.12.0, 0.17.0 and 0.25.0
wheels (the same loop and words; 0.25 labels a STDOUT block "logs" when stderr is not captured;
grammar ``composer.launcher.rank_crashed`` / ``composer.launcher.exit_status``)::

    _monitor_processes:  log.error(f'Rank {global_rank} crashed with exit code {rc}.')
    _print_process_exit_status:  Global rank {global_rank} (PID {pid}) exited with code {rc}
                                 ----------Begin global rank {global_rank} STDERR----------
                                 <that process's whole stderr file>
                                 ----------End global rank {global_rank} STDERR----------
    _aggregate_process_returncode:  log.error('Global rank %s (PID %s) exited with code %s')

What they prove. The launcher of ONE node starts its processes as global ranks ``base_rank +
local_rank`` (the ``RANK`` it sets: a global rank, not a local index). Every 0.1 s it polls them
in that order and stops at the FIRST with a non-zero return code — "crashed": of processes ended
within one tick the LOWEST rank, so first only together. Then it SIGTERMs the rest (SIGKILL
after a grace), and prints a block for every process that ended non-zero except those ended by
SIGTERM/SIGKILL (taken for its own kills — an OOM-killed rank, -9, therefore gets no block), in
rank order: the blocks say who failed, not who was first; the logged exit status names the
lowest rank with a non-zero code, a stopped victim included. Local rank 0's output is not
captured (it goes to the console), so it never has a block. The code is ``Popen.returncode``:
``-N`` is signal N.

- the crashed rank's own death signal (-9 — usually the host's OOM killer —, -11, -7, -4, -8),
  or its block's last exception line an own error (an OOM, a CUDA error, a bug — read by
  :mod:`.log_failures`' classifier fed the block as that rank's lines) → a culprit at ``low``;
- -6 (SIGABRT: how a watchdog timeout ends a process), -15/-2/-1 (a stop from outside), a code
  with no block, a block ending in a consequence (a timeout, a closed connection) → a suspect;
- different ranks "crashed" (one launcher per node, or several runs) → suspects, nobody named:
  a node's first failure may be the victim of another node's;
- blocks with no "crashed" line → suspects (they never say who was first).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_failures as lf
from stormotel.analyzers.stalls import log_mp_spawn as spawn
from stormotel.analyzers.stalls.log_finding import log_finding

KIND = "composer"
CRASHED = "composer.launcher.rank_crashed"
EXIT = "composer.launcher.exit_status"
_CRASHED = gr.BY_ID[CRASHED].regex
_EXIT = gr.BY_ID[EXIT].regex
#: the lines framing one process's captured output in ``_print_process_exit_status``
_BLOCK = re.compile(r"^-{10}(?P<end>Begin|End) global rank (?P<rank>\d{1,7}) "
                    r"(?:STDOUT|STDERR|logs)-{10}\s*$")
#: Popen return codes of a process's own death signal (SIGKILL, SIGSEGV, SIGBUS, SIGILL, SIGFPE)
_OWN_CODES = {-9: "SIGKILL", -11: "SIGSEGV", -7: "SIGBUS", -4: "SIGILL", -8: "SIGFPE"}
_SIGNALS = {-6: "SIGABRT", -15: "SIGTERM", -2: "SIGINT", -1: "SIGHUP"} | _OWN_CODES
#: lines one block may span before it is taken as cut (the whole stderr file is printed)
_SPAN = 20000

REMEDIATION = {
    "own": "Read that rank's own error (its STDERR block above; for -9 the host's dmesg: the "
           "OOM killer names the pid the launcher printed) — the launcher stopped the other "
           "processes of its node after it, so their ends are consequences.",
    "suspect": "The rank the launcher found first ended the way a waiting victim or a stopped "
               "process ends: collect every node's launcher output (one launcher per node: each "
               "names its own node's first failure) and each rank's stderr (composer "
               "--stderr 'rank{rank}.err', which also captures local rank 0's), and look for "
               "the earliest own error.",
}


@dataclass
class _Block:
    rank: int
    line: int
    reader: lf.FailureScanner
    exc_line: int | None = None
    exc_text: str = ""


@dataclass
class _Verdict:
    """What one rank's block showed: its last exception line, and whether it is an own error."""

    own: bool
    detail: dict[str, object] = field(default_factory=dict)


class Scanner:
    """The launcher's lines of one file; each block is read as its rank's own lines by a private
    :class:`.log_failures.FailureScanner`, whose reading of the block's last exception line
    decides whether that rank failed of its own."""

    def __init__(self, ctx: Any) -> None:
        self.stamp = ctx.stamp
        self.found: list[lf.Found] = []
        self.blocks: dict[int, _Verdict] = {}
        self._open: _Block | None = None

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if "global rank" in low and (b := _BLOCK.match(seg.strip())) is not None:
            self._block(no, b)
            return
        cur = self._open
        if cur is not None:
            if no - cur.line > _SPAN:
                self._close()
            else:
                body = seg.rstrip()
                if body and not body[0].isspace() and spawn.EXC_LINE.match(body):
                    cur.exc_line, cur.exc_text = no, body[:300]
                cur.reader.feed(no, seg, low, cur.rank)
                return
        if "with exit code" in low and (m := _CRASHED.search(seg)) is not None:
            self._line(no, seg, m, CRASHED)
        elif "exited with code" in low and (m := _EXIT.search(seg)) is not None:
            self._line(no, seg, m, EXIT)

    def _line(self, no: int, seg: str, m: re.Match[str], pid: str) -> None:
        who = gr.parse_rank(m.group("rank"))
        if who is None:
            return
        code = int(m.group("code"))
        self.found.append(lf.Found(KIND, no, None, self.stamp(seg), seg.strip()[:300], {
            "global_rank": who, "exit_code": code, "signal": _SIGNALS.get(code)}, pid))

    def _block(self, no: int, b: re.Match[str]) -> None:
        who = gr.parse_rank(b.group("rank"))
        if b.group("end") == "End":
            self._close()
        elif who is not None:
            self._close()
            self._open = _Block(who, no, lf.FailureScanner(None, self.stamp))

    def _close(self) -> None:
        cur, self._open = self._open, None
        if cur is None:
            return
        cur.reader.close(0)
        own = [f for f in cur.reader.found if f.kind == lf.RANK_ERROR and f.line == cur.exc_line]
        d = own[0].detail if own else {}
        verdict = _Verdict(bool(own), {"error": cur.exc_text or None} | {
            k: d[k] for k in ("category", "exception", "frame") if k in d})
        if cur.rank not in self.blocks or verdict.own:
            self.blocks[cur.rank] = verdict

    def finish(self, text: str) -> list[lf.Found]:
        self._close()
        for f in self.found:
            v = self.blocks.get(int(f.detail["global_rank"]))  # type: ignore[call-overload]
            if v is not None:
                f.detail.update({"block_own_error": v.own, **v.detail})
        return self.found


def _own(d: dict[str, Any]) -> bool:
    """A process's own failure: its own death signal, or an own error ending its block."""
    return int(d["exit_code"]) in _OWN_CODES or bool(d.get("block_own_error"))


def _why_not(d: dict[str, Any]) -> str:
    """Why the crashed rank is a suspect, not a culprit."""
    code = int(d["exit_code"])
    if d.get("signal"):
        return (f"it died of {d['signal']} (code {code}): how a watchdog timeout (SIGABRT) or a "
                "stop from outside ends a process that was only waiting")
    if "block_own_error" not in d:
        return (f"it exited with code {code} and no block of its output is in these logs "
                "(local rank 0's is never captured): what it raised is unknown")
    return (f"its output ends in {str(d.get('error') or 'no exception line')[:160]!r} — not an "
            "own error (a timeout, a closed connection, an aborted communicator: a peer's "
            "trouble reaches a victim so)")


def _nobody(pattern: str, reason: str, mine: list[Any], ranks: list[int]) -> StallFinding:
    """Undecided at low, these ranks the suspects: the lines do not say which was first."""
    return log_finding("undecided", [], "unknown", "low", pattern, reason,
                       [REMEDIATION["suspect"], REMEDIATION["own"]], mine,
                       suspects=ranks[:64], collect_next=ranks[:16])


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """One finding for the launcher lines in the logs together (module docstring)."""
    mine = [e for e in events if e.kind == KIND and e.detail]
    crashed = [e for e in mine if e.pattern == CRASHED]
    ranks = sorted({int(e.detail["global_rank"]) for e in crashed or mine})
    if not crashed:
        return [_nobody(EXIT, (
            f"Composer's launcher printed the exit of global ranks {ranks[:16]} — every process "
            "of its node that ended non-zero (not its own SIGTERM/SIGKILL), in rank order: "
            "which failed first the lines do not say (its 'Rank N crashed' line would)"),
            mine, ranks)] if mine else []
    if len(ranks) > 1:
        return [_nobody(CRASHED, (
            f"Composer's launchers found different ranks {ranks[:16]} crashed first — one "
            "launcher per node (each names its own node's first failure, which may be another "
            "node's victim) or several runs: nobody is named"), mine, ranks)]
    who, lead = ranks[0], crashed[0].detail
    where = (f"Composer's launcher found global rank {who} the first of its node's processes "
             f"ended non-zero (exit code {lead['exit_code']})")
    extra = {k: lead[k] for k in ("exit_code", "signal", "exception", "frame")
             if lead.get(k) is not None}
    if _own(lead):
        what = lead.get("signal") or str(lead.get("error") or "")[:200]
        return [log_finding(
            "rank_failure", [who], str(lead.get("category") or "signal"), "low", CRASHED,
            f"{where}: {what} — its own failure, before the launcher stopped the others",
            [REMEDIATION["own"]], mine,
            rank_from="the launcher's global rank (base_rank + local_rank, its RANK)", **extra)]
    return [log_finding(
        "undecided", [], str(lead.get("category") or "unknown"), "low", CRASHED,
        f"{where} — {_why_not(lead)}", [REMEDIATION["suspect"], REMEDIATION["own"]], mine,
        suspects=[who], **extra)]
