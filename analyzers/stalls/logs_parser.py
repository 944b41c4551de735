"""Parse worker logs for ProcessGroupNCCL watchdog evidence, across PyTorch versions.

Accepted line shapes (any launcher prefix in front, several ranks interleaved in one file):

- prefixes: ``[rank3]:[E1121 05:01:02.123456789 ProcessGroupNCCL.cpp:616]`` (2.3+),
  ``[rank3]:[E ProcessGroupNCCL.cpp:563]`` (2.2), plain glog ``E1121 05:01:02.123 ...``; launcher
  prefixes such as ISO/``YYYY-mm-dd HH:MM:SS,ms`` timestamps, ``[pid]``, ``(Worker[rank=3]
  pid=…)``, torchrun's ``[default3]:``, ``host [stderr]``;
- tags: ``[Rank 1]``, ``[PG 0 Rank 1]``, ``[PG ID 0 PG GUID 0(default_pg) Rank 1]`` — the rank
  in a tag is the *group* rank; groups are matched across ranks by GUID/name, never by the
  process-local id alone;
- ``WorkNCCL(SeqNum=…, OpType=…, NumelIn=…, NumelOut=…, Timeout(ms)=…)``;
- counters in three wordings: ``last enqueued NCCL work: N, last completed NCCL work: M``,
  ``last enqueued work: N, last completed work: M`` and ``last_enqueued_collective: N, …
  last_completed_collective: M`` (pg_status);
- "First PG on this rank to signal dumping" (initiator) vs "Observed flight recorder dump signal
  from another rank" (observer); heartbeat-monitor hangs; teardown lines;
- hints for the failure category: CUDA OOM, data-loading errors, fabric (NET/IB, remote
  errors).

Quirks tolerated: lines hard-wrapped mid-token (a continuation is glued back onto the NCCL
record it belongs to), progress-bar output fused with a log line (``\\r`` and embedded
``[rankN]:`` starts split the physical line), CRLF, undecodable bytes.
"""

from __future__ import annotations

import glob
import os
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stormotel.analyzers.stalls import log_failures as lf

from stormotel.errors import UsageError

# --- event kinds --------------------------------------------------------------------------
TIMEOUT = "watchdog_timeout"  #: the watchdog caught a collective timing out (WorkNCCL)
COUNTERS = "counters"  #: last enqueued / completed work
FIRST_SIGNAL = "first_signal"  #: this rank's own watchdog fired first
OBSERVED_SIGNAL = "observed_signal"  #: notified by another rank
HEARTBEAT = "heartbeat"  #: heartbeat monitor / watchdog stuck
TEARDOWN = "teardown"  #: taking the process down, watchdog thread terminated
OOM = "oom"
DATA_LOADING = "data_loading"
FABRIC = "fabric"
EXCEPTION = "exception"
RANK_ERROR = lf.RANK_ERROR  #: a rank's own error (OOM, CUDA/NCCL error, exception, signal)
DESYNC_REPORT = lf.DESYNC_REPORT  #: PyTorch's desync report named the culprits
FINGERPRINT = lf.FINGERPRINT  #: TORCH_DISTRIBUTED_DEBUG=DETAIL collective fingerprint
WORLD_HINT = lf.WORLD_HINT  #: a line stating the world size

#: Longer physical lines are cut here before any regex runs (a counted skip): every pattern is
#: then bounded by this length, whatever a hostile or broken log holds.
MAX_LINE = 16_384
#: terminal colour/cursor escape sequences (ANSI CSI and OSC), stripped before anything else
_ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]{0,512}(?:\x07|\x1b\\)"
                   rb"|\x1b[@-Z\\-_]")

_SEG_START = re.compile(r"\[rank\d+\]:")
_RANK_PREFIX = re.compile(r"\[rank(\d{1,7})\]:")
_LAUNCHER_RANK = re.compile(r"Worker\[rank=(\d{1,7})\]|\[default(\d{1,7})\]:|\brank[=\s](\d{1,7})\b"
                            r"[^\]]{0,200}pid=")
_GLOG = re.compile(r"\b[EWIF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?\b")
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?")
_TAG = re.compile(
    r"\[(?:PG ID (?P<id3>\d+) PG GUID (?P<guid>[^\s(\]]+)(?:\((?P<name>[^)]*)\))?"
    r"|PG (?P<id2>\d+)(?: \((?P<name2>[^)]*)\))?)? ?Rank (?P<grank>\d+)\]")
_WORK = re.compile(
    r"WorkNCCL\(\s*SeqNum=(?P<seq>\d+),\s*OpType=(?P<op>[A-Za-z_]+)"
    r"(?:,\s*NumelIn=(?P<nin>-?\d+),\s*NumelOut=(?P<nout>-?\d+))?"
    r"(?:,\s*Timeout\(ms\)=(?P<tmo>\d+))?")
_RAN_FOR = re.compile(r"ran for (\d+) milliseconds")
_COUNTERS = (
    re.compile(r"last enqueued NCCL work: (-?\d+), last completed NCCL work: (-?\d+)", re.I),
    re.compile(r"last enqueued work: (-?\d+), last completed work: (-?\d+)", re.I),
    re.compile(r"last_enqueued_collective\W+(-?\d+).*?last_completed_collective\W+(-?\d+)",
               re.I),
)
_TIMEOUT_AT = re.compile(r"(?:Timeout at NCCL work|detected by watchdog at work"
                         r"(?: sequence id)?): (\d+)", re.I)
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (FIRST_SIGNAL, re.compile(r"First PG on this rank to signal dumping", re.I)),
    (OBSERVED_SIGNAL, re.compile(r"Observed flight recorder dump signal from another rank",
                                 re.I)),
    (HEARTBEAT, re.compile(r"Heartbeat monitor timed out|no heartbeat|watchdog got stuck", re.I)),
    (TEARDOWN, re.compile(r"taking the entire process down|watchdog thread terminated with "
                          r"exception|terminate called after throwing", re.I)),
    (OOM, re.compile(r"CUDA out of memory|OutOfMemoryError", re.I)),
    (DATA_LOADING, re.compile(r"DataLoader worker|AISBatchLoaderError|Connection reset by peer"
                              r"|timed out waiting for (?:data|batch)|retrying \d+/\d+|"
                              r"StopIteration", re.I)),
    (FABRIC, re.compile(r"NCCL WARN NET/|ncclRemoteError|ncclSystemError|ibv_|"
                        r"remote process exited|NVLink|Xid \d+", re.I)),
    (EXCEPTION, re.compile(r"Traceback \(most recent call last\)")),
)
#: Cheap substring checks (on the lower-cased segment) decide whether a segment can hold any
#: event at all — most lines of a training log are not watchdog lines, and one big
#: case-insensitive regex alternation costs ~10x more per line than these ``in`` tests.
_TRIGGERS = ("worknccl", "last enqueued", "last_enqueued", "signal dumping", "dump signal",
             "heartbeat", "watchdog", "entire process", "terminate called", "out of memory",
             "outofmemory", "dataloader", "aisbatchloader", "connection reset",
             "timed out waiting", "retrying", "stopiteration", "nccl warn", "ncclremote",
             "ncclsystem", "ibv_", "remote process", "nvlink", "xid ", "traceback")


def _nccl_record(seg: str) -> bool:
    """A segment from ProcessGroupNCCL (the only records whose hard wraps we glue back)."""
    return "NCCL" in seg or "Rank " in seg or "atchdog" in seg


def _triggered(seg: str) -> bool:
    low = seg.lower()
    return any(k in low for k in _TRIGGERS)


_RECORD_START = re.compile(r"^\s+(?:- |\[[\d, ]+\] |#\d+ )|"
                           r"^\s*(?:\[rank\d+\]:|\[default\d+\]:|\(\w*Worker|\d{4}-\d{2}-\d{2}"
                           r"|[EWIF]\d{4} |\[\d+\]|\w[\w.-]* \[std(?:err|out)\]|Traceback|"
                           r"\s+File \")")
_FILE_RANK = re.compile(r"rank[_\-.]?(\d{1,7})|(?:^|[_\-.])(\d{1,7})\.(?:log|err|out|txt)$", re.I)


class LogError(UsageError, ValueError):
    """A log path that cannot be read as text (message names the file and reason)."""


@dataclass(frozen=True)
class LogEvent:
    kind: str
    file: str
    line: int
    rank: int | None  #: global rank (prefix, launcher or file name), None when unknown
    group: str | None = None  #: GUID(name) or name when known, else "id:<pg id>"
    group_rank: int | None = None
    seq: int | None = None
    op: str | None = None
    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None
    ran_for_ms: int | None = None
    enqueued: int | None = None
    completed: int | None = None
    ts_ns: int | None = None
    text: str = ""
    #: rank errors, desync reports, fingerprints and world hints carry their specifics here
    detail: dict[str, Any] | None = None


@dataclass
class ParsedLogs:
    events: list[LogEvent] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    #: every global rank any line or file name mentioned (the known world)
    ranks_seen: set[int] = field(default_factory=set)
    lines: int = 0
    joined_wrapped: int = 0
    split_fused: int = 0
    notes: list[str] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


def expand_paths(specs: list[str]) -> list[Path]:
    """Files, folders (recursively) and globs → a sorted, de-duplicated file list."""
    out: list[Path] = []
    for spec in specs:
        matches = sorted(glob.glob(spec, recursive=True)) if any(c in spec for c in "*?[") \
            else [spec]
        if not matches:
            raise LogError(f"{spec}: no file matches")
        for m in matches:
            p = Path(m)
            if p.is_dir():
                out.extend(sorted(Path(root) / f for root, _, names in os.walk(p)
                                  for f in names if not f.startswith(".")
                                  and (Path(root) / f).is_file()))  # no pipes or devices
            elif p.is_file():
                out.append(p)
            else:
                raise LogError(f"{m}: no such file or folder")
    seen: set[Path] = set()
    return [p for p in out if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]


def parse_logs(specs: list[str]) -> ParsedLogs:
    result = ParsedLogs()
    for path in expand_paths(specs):
        _parse_file(path, result)
    if not result.files:
        raise LogError(f"{' '.join(specs)}: no log files")
    return result


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LogError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if not data.strip():
        raise LogError(f"{path}: empty file")
    if b"\x1b" in data:
        data = _ANSI.sub(b"", data)
    sample = data[:8192]
    if b"\x00" in sample or sum(b < 9 or 13 < b < 32 for b in sample) > len(sample) // 20:
        raise LogError(f"{path}: binary file, not a text log")
    return data.decode("utf-8", errors="replace")


def _segments(text: str, skipped: Counter[str] | None = None
              ) -> tuple[list[tuple[int, str]], int, int]:
    """(line number, segment) pairs: CR-split, split at embedded ``[rankN]:``, wraps glued.

    Physical lines longer than :data:`MAX_LINE` are cut first (counted in ``skipped``).
    """
    out: list[tuple[int, str]] = []
    fused = joined = 0
    prev_long = False
    for no, physical in enumerate(text.split("\n"), 1):
        if len(physical) > MAX_LINE:
            physical = physical[:MAX_LINE]
            if skipped is not None:
                skipped[f"line longer than {MAX_LINE} characters (cut)"] += 1
        if "\r" in physical:
            parts = [p for p in physical.split("\r") if p.strip()]
            fused += max(0, len(parts) - 1)
        else:
            parts = [physical] if physical.strip() else []
        for part in parts:
            n_tags = part.count("[rank")
            if n_tags == 0 or (n_tags == 1 and part.startswith("[rank")):
                starts = [0]  # the common case: no embedded rank prefix to split at
            else:
                starts = [m.start() for m in _SEG_START.finditer(part)]
            if starts and starts[0] > 0:
                starts = [0, *starts]
            elif not starts:
                starts = [0]
            pieces = [part[a:b] for a, b in zip(starts, [*starts[1:], len(part)], strict=True)]
            fused += len(pieces) - 1
            for piece in pieces:
                if (prev_long and out and not out[-1][1].rstrip().endswith(".")
                        and _nccl_record(out[-1][1]) and not _RECORD_START.match(piece)):
                    out[-1] = (out[-1][0], out[-1][1] + piece)
                    joined += 1
                else:
                    out.append((no, piece))
                prev_long = len(piece) >= 60
    return out, fused, joined


def rank_from_filename(name: str) -> int | None:
    m = _FILE_RANK.search(name)
    if not m:
        return None
    return int(m.group(1) or m.group(2))


def _parse_file(path: Path, result: ParsedLogs) -> None:
    text = _read_text(path)
    result.files.append(str(path))
    file_rank = rank_from_filename(path.name)
    if file_rank is not None:
        result.ranks_seen.add(file_rank)
    year = _year_hint(text, path)
    segs, fused, joined = _segments(text, result.skipped)
    result.split_fused += fused
    result.joined_wrapped += joined
    result.lines += text.count("\n") + 1
    scanner = lf.FailureScanner(file_rank, lambda s: _timestamp(s, year, result.skipped))
    for no, seg in segs:
        m = _RANK_PREFIX.search(seg) if "[rank" in seg else None
        if m:
            result.ranks_seen.add(int(m.group(1)))
        rank = int(m.group(1)) if m else _global_rank(seg, file_rank)
        low = seg.lower()
        scanner.feed(no, seg, low, rank)
        if not any(k in low for k in _TRIGGERS):
            continue
        if rank is not None:
            result.ranks_seen.add(rank)
        ts = _timestamp(seg, year, result.skipped)
        result.events.extend(_events(seg, str(path), no, rank, ts, result.skipped))
    scanner.close(len(segs))
    for f in scanner.found:
        result.events.append(LogEvent(f.kind, str(path), f.line, f.rank, ts_ns=f.ts_ns,
                                      text=f.text, detail=dict(f.detail)))


def _year_hint(text: str, path: Path) -> int:
    m = _ISO.search(text)
    if m:
        return int(m.group(1))
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC).year
    except OSError:
        return datetime.now(UTC).year


def _global_rank(seg: str, file_rank: int | None) -> int | None:
    m = _RANK_PREFIX.search(seg)
    if m:
        return int(m.group(1))
    m = _LAUNCHER_RANK.search(seg)
    if m:
        return int(next(g for g in m.groups() if g is not None))
    return file_rank


def _timestamp(seg: str, year: int, skipped: Counter[str] | None = None) -> int | None:
    """The line's time (ISO or glog, searched in the first 120 characters only)."""
    head = seg[:120]
    if ":" not in head:
        return None
    m = _ISO.search(head)
    try:
        if m:
            y, mo, d, h, mi, s, frac = m.groups()
            base = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=UTC)
        else:
            m = _GLOG.search(head)
            if not m:
                return None
            mo, d, h, mi, s, frac = m.groups()
            base = datetime(year, int(mo), int(d), int(h), int(mi), int(s), tzinfo=UTC)
    except ValueError:
        if skipped is not None:
            skipped["impossible timestamp (line kept, untimed)"] += 1
        return None
    ns = int((frac or "0").ljust(9, "0")[:9])
    return int(base.timestamp()) * 1_000_000_000 + ns


def _events(seg: str, file: str, line: int, rank: int | None, ts: int | None = None,
            skipped: Counter[str] | None = None) -> list[LogEvent]:
    try:
        return _events_unchecked(seg, file, line, rank, ts)
    except _NumberTooLong:
        if skipped is not None:
            skipped["number longer than 18 digits (line skipped)"] += 1
        return []


class _NumberTooLong(ValueError):
    pass


def _events_unchecked(seg: str, file: str, line: int, rank: int | None, ts: int | None
                      ) -> list[LogEvent]:
    tag = _TAG.search(seg)
    group = group_rank = None
    if tag:
        group_rank = _int(tag.group("grank"))
        if tag.group("guid"):
            name = tag.group("name")  # the Flight Recorder's label: "<guid>:<desc>"
            group = f"{tag.group('guid')}:{name}" if name else tag.group("guid")
        elif tag.group("id2"):
            group = f"id:{tag.group('id2')}" + (f"({tag.group('name2')})"
                                                if tag.group("name2") else "")
    text = seg.strip()[:400]
    # What every event of this line shares; each kind below fills in its own fields.
    common = LogEvent("", file, line, rank, group=group, group_rank=group_rank, ts_ns=ts,
                      text=text)
    events: list[LogEvent] = []
    work = _WORK.search(seg)
    ran = _RAN_FOR.search(seg)
    if work and ("timeout" in seg.lower() or ran):
        events.append(replace(
            common, kind=TIMEOUT, seq=_int(work.group("seq")), op=work.group("op").upper(),
            numel_in=_opt_int(work.group("nin")), numel_out=_opt_int(work.group("nout")),
            timeout_ms=_opt_int(work.group("tmo")),
            ran_for_ms=_opt_int(ran.group(1) if ran else None)))
    for pattern in _COUNTERS:
        m = pattern.search(seg)
        if m:
            at = _TIMEOUT_AT.search(seg)
            events.append(replace(common, kind=COUNTERS, enqueued=_int(m.group(1)),
                                  completed=_int(m.group(2)),
                                  seq=_int(at.group(1)) if at else None))
            break
    for kind, pattern in _PATTERNS:
        if pattern.search(seg):
            events.append(replace(common, kind=kind))
    return events


def _int(v: str) -> int:
    """A number from a log line; more than 18 digits is bad input, not a SeqNum."""
    if len(v.lstrip("-")) > lf.MAX_DIGITS:
        raise _NumberTooLong(v[:20])
    return int(v)


def _opt_int(v: str | None) -> int | None:
    return _int(v) if v is not None else None
