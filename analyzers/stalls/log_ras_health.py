"""NCCL RAS status splits and ERROR sections: the ranks whose communicator is not like the rest.

Why: :mod:`.log_ras` reads a RAS report's operation counts and missing ranks; the same report
(``src/ras/client_support.cc``, v2.24.3 – v2.30.7) also prints, per communicator,

```
#0-0 (27a079b828ff1a75) MISMATCH
  Communicator ranks have different status
  7 ranks have status RUNNING
  Rank 5 has status ABORT -- GPU 5 managed by process 4245 on node 10.0.0.1
#0-0 (27a079b828ff1a75) ERROR
  Asynchronous error on 1 rank
  Rank 5 reported unhandled cuda error -- GPU 5 managed by process 4245 on node 10.0.0.1
```

(an outlier group of several ranks: "  2 ranks have status ABORT" / "  2 ranks reported …" then
one "  Rank r -- GPU …" per member). What it proves, per communicator:

- status (NOCOMM, INIT, RUNNING, FINALIZE, ABORT): a rank whose status differs from the most
  frequent one is still initialising, has finalised or aborted its communicator, or holds none —
  the others may be waiting on it, or it aborted after its own watchdog fired: a SUSPECT;
- errors: a rank whose communicator holds its own NCCL error (CUDA, system, internal, usage) is
  a SUSPECT; "remote process exited or there was a network error" (ncclRemoteError) says the
  error came from a peer: that rank is a WITNESS.

The JSON form (``ncclras -f json``, 2.28.7+) gives every rank's status flags and error codes;
:func:`json_blocks` derives the same split from them. One snapshot, ranks of the communicator
(not always global ranks): ``undecided`` at ``low``,
with the suspects and witnesses; a FALLBACK row of :data:`.log_scanners.KINDS` (the count and
missing-rank reading of :mod:`.log_ras_verdicts` decides when it answers).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_failures import Found, strip_prefix
from stormotel.analyzers.stalls.log_finding import log_finding
from stormotel.analyzers.stalls.log_ras import comm_of

KIND = "ras_health"
_REMOTE = "remote process exited"
_MEMBER = re.compile(r"^\s*Rank (?P<rank>\d{1,7}) -- (?:GPU|\[process)")
_STATUS = re.compile(r"^\s*(?:(?P<n>\d{1,7}) ranks have status (?P<status>[A-Z]{1,12})|Rank "
                     r"(?P<rank>\d{1,7}) has status (?P<rstatus>[A-Z]{1,12}))")

REMEDIATION = [
    "Read the logs of the ranks RAS lists (their own NCCL error, an early exit that finalised "
    "the communicator, a watchdog abort) and run `ncclras` again: a second report shows whether "
    "the split persists."]


@dataclass
class _Block:
    line: int
    comm: str
    text: str
    status: dict[int, str] = field(default_factory=dict)
    status_n: dict[str, int] = field(default_factory=dict)  #: status -> ranks (printed counts)
    errors: dict[int, str] = field(default_factory=dict)
    section: str = ""  #: "status" | "error" | "" (lines of other sections)
    group: str | None = None  #: the status or error whose members follow


def _member(b: _Block, line: str, into: dict[int, str]) -> bool:
    """A ``Rank N -- GPU …`` member line under the current group heading (a status or an
    error): the rank gets the group's text in ``into``. Whether the line was one."""
    mem = _MEMBER.match(line)
    if mem and b.group is not None and (r := gr.parse_rank(mem.group("rank"))) is not None:
        into[r] = b.group
        return True
    return False


class Scanner:
    """Stateful over a file's lines: one event per communicator section with a split."""

    def __init__(self, ctx: Any) -> None:
        self.found: list[Found] = []
        self._block: _Block | None = None

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if self._block is None and not ("mismatch" in low or "error" in low):
            return
        line = strip_prefix(seg)
        head = gr.BY_ID["nccl.ras.mismatch_head"].regex.search(line)
        if head and head.group("group") is not None:
            self._close()
            self._block = _Block(no, comm_of(head), line[:300])
            return
        b = self._block
        if b is None:
            return
        if not line.strip():
            return
        if "different status" in line:
            b.section, b.group = "status", None
            return
        if gr.BY_ID["nccl.ras.error_head"].regex.search(line):
            b.section, b.group = "error", None
            return
        if b.section == "status" and self._status(b, line):
            return
        if b.section == "error" and self._error(b, line):
            return
        if line.lstrip().startswith(("Rank ", "Communicator", "Missing", "The ")) or \
                re.match(r"\s*\d+ ranks? ", line):
            if b.section and not _MEMBER.match(line):
                b.section, b.group = "", None  # another section (counts) of the same block
            return
        self._close()

    def _status(self, b: _Block, line: str) -> bool:
        m = _STATUS.match(line)
        if m and m.group("n"):
            b.group = m.group("status")
            b.status_n[b.group] = int(m.group("n"))
            return True
        if m:
            r = gr.parse_rank(m.group("rank"))
            if r is not None:
                b.status[r] = m.group("rstatus")
                b.status_n[m.group("rstatus")] = b.status_n.get(m.group("rstatus"), 0) + 1
            return True
        lst = gr.BY_ID["nccl.ras.status_list"].regex.match(line)
        if lst:
            ranks = gr.parse_rank_list(lst.group("ranks"))
            b.status.update({r: lst.group("status") for r in ranks})
            b.status_n[lst.group("status")] = b.status_n.get(lst.group("status"), 0) + len(ranks)
            return True
        return _member(b, line, b.status)

    def _error(self, b: _Block, line: str) -> bool:
        m = gr.BY_ID["nccl.ras.error_rank"].regex.match(line)
        if m and m.group("n"):
            b.group = m.group("gerr").strip()
            return True
        if m:
            r = gr.parse_rank(m.group("rank"))
            if r is not None:
                b.errors[r] = m.group("err").strip()
            return True
        return _member(b, line, b.errors)

    def _close(self) -> None:
        b, self._block = self._block, None
        if b is None or not (b.status or b.errors):
            return
        common = max(b.status_n.items(), key=lambda kv: kv[1])[0] if b.status_n else None
        odd = {r: s for r, s in b.status.items() if s != common}
        detail: dict[str, object] = {
            "comm": b.comm, "status": {str(r): s for r, s in sorted(b.status.items())},
            "common_status": common, "odd_status": sorted(odd),
            "errors": {str(r): e for r, e in sorted(b.errors.items())}}
        pattern = "nccl.ras.error_rank" if b.errors else "nccl.ras.status_group"
        self.found.append(Found(KIND, b.line, None, None, b.text, detail, pattern))

    def finish(self, text: str) -> list[Found]:
        self._close()
        if '"communicators"' in text and '"status"' in text:  # ncclras -f json (2.28.7+)
            self.found.extend(json_blocks(text))
        return self.found


#: ncclResult_t (src/nccl.h.in), the numbers the JSON form prints for init_state / async_error
_NCCL_RESULT = {1: "unhandled cuda error", 2: "unhandled system error", 3: "internal error",
                4: "invalid argument", 5: "invalid usage",
                6: "remote process exited or there was a network error"}


def json_blocks(text: str) -> list[Found]:
    """The same split read from the JSON form (``jsonWriteRankData``, v2.28.7+: per rank
    ``status: {init_state, async_error, finalize_called, destroy_flag, abort_flag}``, the
    status derived as ``rasClientRunComms`` derives it for the text form: abort_flag → ABORT,
    finalize_called or destroy_flag → FINALIZE, init_state 0 → RUNNING, else INIT). Anything
    that does not parse as that shape gives nothing."""
    start, end = text.find("{"), text.rfind("}")
    try:
        doc = json.loads(text[start:end + 1]) if 0 <= start < end else None
    except (ValueError, RecursionError):
        return []
    comms = doc.get("communicators") if isinstance(doc, dict) else None
    out: list[Found] = []
    for i, c in enumerate(comms[:4096] if isinstance(comms, list) else []):
        if not isinstance(c, dict) or not isinstance(c.get("ranks"), list):
            continue
        status: dict[int, str] = {}
        errors: dict[int, str] = {}
        for r in c["ranks"][:1 << 16]:
            st = r.get("status") if isinstance(r, dict) else None
            rank = gr.parse_rank(str(r.get("rank"))) if isinstance(st, dict) else None
            if rank is None or not isinstance(st, dict):
                continue
            init, err = st.get("init_state"), st.get("async_error")
            status[rank] = ("ABORT" if st.get("abort_flag") is True else "FINALIZE"
                            if st.get("finalize_called") is True or st.get("destroy_flag") is True
                            else "RUNNING" if init == 0 else "INIT")
            for code in (init, err):
                if isinstance(code, int) and code in _NCCL_RESULT:
                    errors[rank] = _NCCL_RESULT[code]
        counts: dict[str, int] = {}
        for v in status.values():
            counts[v] = counts.get(v, 0) + 1
        common = max(counts.items(), key=lambda kv: kv[1])[0] if counts else None
        odd = sorted(r for r, v in status.items() if v != common)
        if not odd and not errors:
            continue
        name = f"#json-{i} ({str(c.get('hash', '?'))[:20]})"
        detail: dict[str, object] = {
            "comm": name, "status": {str(r): status[r] for r in odd},
            "common_status": common, "odd_status": odd,
            "errors": {str(r): e for r, e in sorted(errors.items())}}
        out.append(Found(KIND, 1, None, None, name, detail,
                         "nccl.ras.error_rank" if errors else "nccl.ras.status_group"))
    return out


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    evs = [e for e in events if e.kind == KIND and e.detail]
    if not evs:
        return []
    suspects: set[int] = set()
    witnesses: set[int] = set()
    parts = []
    for e in evs:
        d = e.detail
        odd = [int(r) for r in d["odd_status"]]
        suspects.update(odd)
        if odd:
            parts.append(f"{d['comm']}: rank(s) {odd[:16]} "
                         f"{sorted({d['status'][str(r)] for r in odd})} while the most are "
                         f"{d['common_status']}")
        own = sorted(int(r) for r, err in d["errors"].items() if _REMOTE not in err)
        seen = sorted(int(r) for r, err in d["errors"].items() if _REMOTE in err)
        suspects.update(own)
        witnesses.update(seen)
        if own:
            parts.append(f"{d['comm']}: rank(s) {own[:16]} hold an NCCL error of their own")
        if seen:
            parts.append(f"{d['comm']}: rank(s) {seen[:16]} report a remote process exited or "
                         "a network error (a peer's failure: witnesses)")
    witnesses -= suspects
    return [log_finding(
        "undecided", [], "nccl_error", "low", evs[0].pattern or "nccl.ras.status_group",
        "NCCL RAS: " + "; ".join(parts[:8]) + " — communicator ranks from one snapshot: "
        "suspects, not proven", REMEDIATION, evs, suspects=sorted(suspects)[:64],
        witnesses=sorted(witnesses)[:64], collect_next=sorted(suspects)[:16])]
