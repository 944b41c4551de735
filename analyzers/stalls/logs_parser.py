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

from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import (
    log_elastic,
    log_frtrace,
    log_horovod,
    log_ncclwarn,
    log_ras,
    log_scanners,
    paste,
)
from stormotel.analyzers.stalls import log_failures as lf

from stormotel.errors import UsageError

# --- event kinds --------------------------------------------------------------------------
TIMEOUT = gr.K_TIMEOUT  #: the watchdog caught a collective timing out (WorkNCCL)
COUNTERS = gr.K_COUNTERS  #: last enqueued / completed work
FIRST_SIGNAL = gr.K_FIRST_SIGNAL  #: this rank's own watchdog fired first
OBSERVED_SIGNAL = gr.K_OBSERVED_SIGNAL  #: notified by another rank
HEARTBEAT = gr.K_HEARTBEAT  #: heartbeat monitor / watchdog stuck
TEARDOWN = gr.K_TEARDOWN  #: taking the process down, watchdog thread terminated
WITNESS = gr.K_WITNESS  #: one rank's line names other ranks as culprits
BARRIER_TIMEOUT = gr.K_BARRIER_TIMEOUT  #: rank 0 ran out of time in monitoredBarrier
GLOO_WAIT = gr.K_GLOO_WAIT  #: a gloo operation of this rank timed out / lost its peer
NCCL_COLL = gr.K_NCCL_COLL  #: an NCCL_DEBUG_SUBSYS=COLL line: a collective this rank launched
NCCL_INIT = gr.K_NCCL_INIT  #: an NCCL init line (comm pointer -> communicator rank)
ELASTIC_FAILED = gr.K_ELASTIC_FAILED  #: torchelastic saw a local worker fail
INIT_WAIT = "init_wait"  #: waited in rendezvous / communicator setup for peers that never came
NCCL_WARN = "nccl_warn"  #: an NCCL WARN line reporting a failure of its own process
DETAIL_TRACE = "detail_trace"  #: DETAIL's "Running collective: CollectiveFingerPrint(…)" (INFO)
WATCHDOG_BARE = "watchdog_bare"  #: a watchdog timeout whose WorkNCCL record is cut/paraphrased
RAS = log_ras.RAS_SPLIT  #: an NCCL RAS report's count split / missing ranks of one communicator
HOROVOD = log_horovod.HOROVOD  #: Horovod's stall inspector: ranks that did not submit tensors
FR_TRACE = log_frtrace.FR_TRACE  #: a block of torch's fr_trace report pasted in the logs
ELASTIC_CLOSING = log_elastic.ELASTIC_CLOSING  #: the agent stopped a worker still running
ELASTIC_LAYOUT = "elastic_layout"  #: the agent's node layout: local -> global ranks, node count
HOROVOD_SHUTDOWN = "horovod_shutdown"  #: Horovod shut down: another rank failed (a victim)
NCCL_CHANNEL = log_ncclwarn.CHANNEL  #: NCCL's intra-node channel line: rank -> device of a host
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
                            r"[^\]]{0,200}pid=|"
                            # OpenMPI --tag-output (mpirun, horovodrun): [jobid,rank]<stderr>:
                            # and horovodrun's gloo launcher: [rank]<stderr>:
                            r"^\s*\[(?:\d{1,7},)?(\d{1,7})\]<std(?:err|out)>:")
_GLOG = re.compile(r"\b[EWIF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?\b")
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?")
_TAG = re.compile(
    r"\[(?:PG ID (?P<id3>\d+) PG GUID (?P<guid>[^\s(\]]+)(?:\((?P<name>[^)]*)\))?"
    r"|PG (?P<id2>\d+)(?: \((?P<name2>[^)]*)\))?)? ?Rank (?P<grank>\d+)\]")
_RAN_FOR = re.compile(r"ran for (\d+) milliseconds")
_TIMEOUT_AT = re.compile(r"(?:Timeout at NCCL work|detected by watchdog at work"
                         r"(?: sequence id)?): (\d+)", re.I)
#: Hints about a rank's trouble (not stall evidence by themselves): category words only.
_HINTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (OOM, re.compile(r"CUDA out of memory|OutOfMemoryError", re.I)),
    (DATA_LOADING, re.compile(r"DataLoader worker|AISBatchLoaderError|Connection reset by peer"
                              r"|timed out waiting for (?:data|batch)|retrying \d+/\d+|"
                              r"StopIteration", re.I)),
    (EXCEPTION, re.compile(r"Traceback \(most recent call last\)")),
)
#: the event kinds read line by line through the catalogue (the others span lines and are read
#: by the stateful scanners of log_failures / log_ras)
_LINE_KINDS = frozenset({TIMEOUT, COUNTERS, FIRST_SIGNAL, OBSERVED_SIGNAL, HEARTBEAT, TEARDOWN,
                         FABRIC, WITNESS, BARRIER_TIMEOUT, GLOO_WAIT, NCCL_COLL, NCCL_INIT,
                         ELASTIC_FAILED, WATCHDOG_BARE, DETAIL_TRACE, NCCL_WARN, INIT_WAIT,
                         ELASTIC_CLOSING, HOROVOD_SHUTDOWN, NCCL_CHANNEL, ELASTIC_LAYOUT})
#: Cheap substring checks (on the lower-cased segment) decide whether a segment can hold any
#: event at all — most lines of a training log are not watchdog lines, and one big
#: case-insensitive regex alternation costs ~10x more per line than these ``in`` tests.
_TRIGGERS = tuple(sorted({t for p in gr.CATALOGUE if p.kind in (
    gr.K_TIMEOUT, gr.K_COUNTERS, gr.K_FIRST_SIGNAL, gr.K_OBSERVED_SIGNAL, gr.K_HEARTBEAT,
    gr.K_TEARDOWN, gr.K_WITNESS, gr.K_BARRIER_TIMEOUT, gr.K_GLOO_WAIT, gr.K_NCCL_COLL,
    gr.K_NCCL_INIT, gr.K_ELASTIC_FAILED, "fabric", "watchdog_bare", "detail_trace",
    "nccl_warn", "init_wait", "elastic_closing", "horovod_shutdown", "nccl_channel",
    "elastic_layout")
    for t in p.triggers} | {
    "out of memory", "outofmemory", "dataloader", "aisbatchloader", "connection reset",
    "timed out waiting", "retrying", "stopiteration", "nvlink", "traceback"}))
#: a trigger that contains another one is redundant (fewer ``in`` tests per line)
_TRIGGERS = tuple(t for t in _TRIGGERS if not any(o != t and o in t for o in _TRIGGERS))


def _nccl_record(seg: str) -> bool:
    """A segment from ProcessGroupNCCL (the only records whose hard wraps we glue back)."""
    return "NCCL" in seg or "Rank " in seg or "atchdog" in seg


def _triggered(seg: str) -> bool:
    low = seg.lower()
    return any(k in low for k in _TRIGGERS)


_RECORD_START = re.compile(r"^\s+(?:- |\[[\d, ]+\] |#\d+ )|"
                           # the line-per-rank reports: NCCL RAS ("  Rank 9 -- GPU …", "  30
                           # ranks have …", "  Missing communicator …") and Horovod ("3!: [")
                           r"^\s*(?:Rank \d+ (?:--|has)|\d+ ranks |Missing communicator|"
                           r"The missing rank|Communicator ranks|\d+!?: \[)|"
                           r"^\s*(?:\[rank\d+\]:|\[default\d+\]:|\(\w*Worker|\d{4}-\d{2}-\d{2}"
                           r"|\[[EWIF](?:\d{4} | )|[\w.-]+:\d+:\d+ \[\d+\] "
                           r"|[EWIF]\d{4} |\[\d+\]|\w[\w.-]* \[std(?:err|out)\]|Traceback|"
                           r"File \")")
_FILE_RANK = re.compile(r"rank[_\-.]?(\d{1,7})|(?:^|[_\-.])(\d{1,7})\.(?:log|err|out|txt)$", re.I)


class LogError(UsageError, ValueError):
    """A log path that cannot be read as text (message names the file and reason)."""


class NoReadableLog(LogError):
    """Every file found in the folders (or globs) given is empty or binary: the logs hold no
    evidence. Alone, that is bad input; beside an archive it is a note (a quiet rank's log from
    torchrun's ``--log-dir`` is empty), and the archive is judged."""


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
    #: the catalogue pattern (:mod:`.grammar`) the line was read through
    pattern: str | None = None


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
    #: how often each paste normalisation (:data:`.paste.KINDS`) applied, before any pattern
    normalised: Counter[str] = field(default_factory=Counter)
    #: the global ranks each file holds lines of (a file with several is one interleaved stream,
    #: where a rank's silence is evidence; per-rank files can simply be missing)
    ranks_by_file: dict[str, set[int]] = field(default_factory=dict)


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
    named = {Path(s) for s in specs}
    unreadable: list[str] = []
    for path in expand_paths(specs):
        try:
            _parse_file(path, result)
        except LogError as exc:
            if path in named:  # a file the user named: its error is the answer
                raise
            # Found in a folder (or by a glob): an empty or binary file (a rank that never
            # wrote, NUL blocks a crash left) is one counted skip, not every log refused.
            result.skipped["unreadable_log"] += 1
            result.notes.append(f"skipped {exc}")
            unreadable.append(str(exc))
    if not result.files:
        if unreadable:
            raise NoReadableLog(unreadable[0] + (
                f" (and {len(unreadable) - 1} other unreadable log(s))"
                if len(unreadable) > 1 else ""))
        raise LogError(f"{' '.join(specs)}: no log files")
    return result


def _read_text(path: Path) -> tuple[str, int]:
    """The file's text and how many NUL bytes were dropped from its end.

    A node that dies mid-write leaves the file's last blocks allocated but never written: a
    tail of NUL bytes after the last line the rank printed (ext4's delayed allocation, any
    filesystem whose size reached disk before the data). A short log with such a tail held a
    NUL in its first 8 KiB, so the dying rank's own log was refused as binary and its last
    words lost (found by tests/fuzz/test_log_scanners.py: a handled failure line followed by
    3,000 NUL bytes read as no evidence, exit 3). The tail is dropped and counted; a NUL
    anywhere else still marks a binary file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LogError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    whole = len(data)
    data = data.rstrip(b"\x00")
    nul_tail = whole - len(data)
    if not data.strip():
        raise LogError(f"{path}: empty file")
    if b"\x1b" in data:
        data = _ANSI.sub(b"", data)
    sample = data[:8192]
    if b"\x00" in sample or sum(b < 9 or 13 < b < 32 for b in sample) > len(sample) // 20:
        raise LogError(f"{path}: binary file, not a text log")
    return data.decode("utf-8", errors="replace"), nul_tail


#: a record glued back from hard-wrapped continuations stops growing here: joining is one pass
#: and each piece is copied once, so a log of a million "continuations" stays linear
MAX_JOINED = MAX_LINE


def _pieces(part: str) -> list[str]:
    """One CR-separated part split at each embedded ``[rankN]:`` prefix."""
    n_tags = part.count("[rank")
    if n_tags == 0 or (n_tags == 1 and part.startswith("[rank")):
        return [part]  # the common case: no embedded rank prefix to split at
    starts = [m.start() for m in _SEG_START.finditer(part)]
    if not starts or starts[0] > 0:
        starts = [0, *starts]
    return [part[a:b] for a, b in zip(starts, [*starts[1:], len(part)], strict=True)]


class _Joiner:
    """The record being glued: its pieces are kept in a list and joined once (linear time)."""

    def __init__(self) -> None:
        self.out: list[tuple[int, str]] = []
        self.no = 0
        self.pieces: list[str] = []
        self.size = 0
        self.nccl = False
        self.joined = 0

    def accepts(self, piece: str, prev_long: bool) -> bool:
        return (prev_long and bool(self.pieces) and self.nccl
                and self.size + len(piece) <= MAX_JOINED
                and not self.pieces[-1].rstrip().endswith(".")
                and not _RECORD_START.match(piece))

    def add(self, no: int, piece: str, prev_long: bool) -> None:
        if self.accepts(piece, prev_long):
            # "NCCL" cut by the wrap itself still counts (the boundary is checked too)
            self.nccl = self.nccl or _nccl_record(self.pieces[-1][-8:] + piece)
            self.pieces.append(piece)
            self.size += len(piece)
            self.joined += 1
            return
        self.flush()
        self.no, self.pieces, self.size, self.nccl = no, [piece], len(piece), _nccl_record(piece)

    def flush(self) -> None:
        if self.pieces:
            self.out.append((self.no, "".join(self.pieces)))
            self.pieces = []


def _segments(text: str, skipped: Counter[str] | None = None,
              normalised: Counter[str] | None = None
              ) -> tuple[list[tuple[int, str]], int, int]:
    """(line number, segment) pairs: wrappers undone (:mod:`.paste`), CR-split, split at
    embedded ``[rankN]:``, wraps glued.

    One pass; physical lines longer than :data:`MAX_LINE` are cut first (counted in
    ``skipped``) and a glued record never grows past :data:`MAX_JOINED`.
    """
    joiner = _Joiner()
    fused = 0
    prev_long = False
    pasted = paste.Paste()
    for no, physical in pasted.lines(text):
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
            pieces = _pieces(part)
            fused += len(pieces) - 1
            for piece in pieces:
                joiner.add(no, piece, prev_long)
                prev_long = len(piece) >= 60
    joiner.flush()
    if normalised is not None:
        normalised.update(+pasted.counts)
    return joiner.out, fused, joiner.joined


def rank_from_filename(name: str) -> int | None:
    m = _FILE_RANK.search(name)
    if not m:
        return None
    return gr.parse_rank(m.group(1) or m.group(2))


def contradicted_file_rank(text: str, file_rank: int | None) -> bool:
    """Whether the file's own lines say its name's number is no rank: torch's exception hook
    prefixes each line with ``[rank{get_rank()}]:`` (the GLOBAL rank, distributed_c10d.py's
    ``_distributed_excepthook``), so a file holding such lines of another rank is not that
    rank's alone — ``srun -o node-%n.log`` (the node's index), torchrun's per-LOCAL-rank
    folders. Its unprefixed lines then have no rank (round five, ``node_prefix4``: node-1.log's
    traceback named rank 1 beside rank 3's own ``[rank3]:`` copy, medium)."""
    if file_rank is None or "[rank" not in text:
        return False
    return any(gr.parse_rank(m.group(1)) not in (None, file_rank)
               for m in _RANK_PREFIX.finditer(text))


def _parse_file(path: Path, result: ParsedLogs) -> None:
    text, nul_tail = _read_text(path)
    result.files.append(str(path))
    if nul_tail:
        result.skipped["log ending in NUL bytes (dropped)"] += 1
        result.notes.append(f"{path.name}: {nul_tail} NUL bytes after its last line dropped "
                            "(blocks a crash left unwritten); the lines before them are read")
    file_rank = rank_from_filename(path.name)
    if contradicted_file_rank(text, file_rank):
        result.notes.append(f"{path.name}: its lines carry other ranks' [rankN]: prefixes, so "
                            f"the {file_rank} in its name is not read as a rank")
        file_rank = None
    if file_rank is not None:
        result.ranks_seen.add(file_rank)
    year = _year_hint(text, path)
    segs, fused, joined = _segments(text, result.skipped, result.normalised)
    result.split_fused += fused
    result.joined_wrapped += joined
    result.lines += text.count("\n") + 1
    ctx = log_scanners.ScanContext(file_rank, lambda s: _timestamp(s, year, result.skipped))
    scanners = [kind.scanner(ctx) for kind in log_scanners.KINDS]
    in_file = result.ranks_by_file.setdefault(str(path), set())
    for no, seg in segs:
        m = _RANK_PREFIX.search(seg) if "[rank" in seg else None
        prefixed = gr.parse_rank(m.group(1)) if m else None
        if prefixed is not None:
            result.ranks_seen.add(prefixed)
        rank = prefixed if m else _global_rank(seg, file_rank)
        if rank is not None:
            in_file.add(rank)
        low = seg.lower()
        for sc in scanners:
            sc.feed(no, seg, low, rank)
        if not any(k in low for k in _TRIGGERS):
            continue
        if rank is not None:
            result.ranks_seen.add(rank)
        ts = _timestamp(seg, year, result.skipped)
        result.events.extend(_events(seg, str(path), no, rank, ts, result.skipped))
    for sc in scanners:  # the stateful kinds of stall log, in the table's order
        for f in sc.finish(text):
            result.events.append(LogEvent(f.kind, str(path), f.line, f.rank, ts_ns=f.ts_ns,
                                          text=f.text, detail=dict(f.detail),
                                          pattern=f.pattern))


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
        return gr.parse_rank(m.group(1))
    m = _LAUNCHER_RANK.search(seg)
    if m:
        return gr.parse_rank(next(g for g in m.groups() if g is not None))
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
    except gr.NumberTooLong:
        if skipped is not None:
            skipped["number longer than 18 digits (line skipped)"] += 1
        return []


def _events_unchecked(seg: str, file: str, line: int, rank: int | None, ts: int | None
                      ) -> list[LogEvent]:
    """The events of one line, each read through a catalogue pattern (:mod:`.grammar`)."""
    tag = _TAG.search(seg)
    group = group_rank = None
    if tag:
        group_rank = gr.parse_rank(tag.group("grank"))
        if tag.group("guid"):
            name = tag.group("name")  # the Flight Recorder's label: "<guid>:<desc>"
            group = f"{tag.group('guid')}:{name}" if name else tag.group("guid")
        elif tag.group("id2"):
            group = f"id:{tag.group('id2')}" + (f"({tag.group('name2')})"
                                                if tag.group("name2") else "")
    text = seg.strip()[:400]
    low = seg.lower()
    # What every event of this line shares; each kind below fills in its own fields.
    common = LogEvent("", file, line, rank, group=group, group_rank=group_rank, ts_ns=ts,
                      text=text)
    events: list[LogEvent] = []
    hits = {h.pattern.id: h for h in gr.scan(seg, low, _LINE_KINDS)}
    work = hits.get("torch.nccl.watchdog_timeout")
    ran = _RAN_FOR.search(seg) if work else None
    if work and ("timeout" in low or ran):
        w = work.match
        events.append(replace(
            common, kind=TIMEOUT, seq=_opt_int(w.group("seq")), op=w.group("op").upper(),
            numel_in=_numel(w.group("nin")), numel_out=_numel(w.group("nout")),
            timeout_ms=_opt_int(w.group("tmo")),
            ran_for_ms=_opt_int(ran.group(1) if ran else None), pattern=work.pattern.id))
    counters = hits.get("torch.nccl.timeout_counters") or hits.get("torch.nccl.pg_status")
    if counters:
        at = _TIMEOUT_AT.search(seg)
        events.append(replace(common, kind=COUNTERS, enqueued=_int(counters.match.group("enq")),
                              completed=_int(counters.match.group("done")),
                              seq=_int(at.group(1)) if at else None,
                              pattern=counters.pattern.id))
    for pid, hit in hits.items():
        event = _hit_event(pid, hit, hits, work is not None, rank, group_rank, seg, common)
        if event is not None:
            events.append(event)
    for kind, rx in _HINTS:
        if rx.search(seg):
            events.append(replace(common, kind=kind))
    return events


def _hit_event(pid: str, hit: gr.Hit, hits: dict[str, gr.Hit], has_timeout: bool,
               rank: int | None, group_rank: int | None, seg: str,
               common: LogEvent) -> LogEvent | None:
    """The event one catalogue hit stands for (None: another hit of the line says it)."""
    kind = hit.pattern.kind
    if kind in (TIMEOUT, COUNTERS) or (kind == WATCHDOG_BARE and has_timeout):
        return None
    detail: dict[str, Any] | None = None
    if pid == "torch.nccl.dump_signal_received":
        if hit.match.group("local"):
            kind = FIRST_SIGNAL
        else:
            detail = {"initiator": gr.parse_rank(hit.match.group("initiator"))}
    elif kind == WITNESS:
        if pid == "torch.gloo.monitored_barrier_rank" and \
                "torch.gloo.monitored_barrier_ranks" in hits:
            return None  # "Ranks 4, 5 failed…" also reads as "Rank 5 failed…"
        detail = {"culprits": gr.parse_rank_list(hit.match.group("ranks")),
                  "witness": rank if rank is not None else group_rank}
        if "ms" in hit.match.groupdict():
            detail["timeout_ms"] = _opt_int(hit.match.group("ms"))
    elif kind == BARRIER_TIMEOUT:
        groups = hit.match.groupdict()
        detail = {"witness": gr.parse_rank(groups.get("rank")),
                  "processed": gr.parse_rank_list(groups.get("done") or "")}
    elif kind == NCCL_COLL:
        m = hit.match
        detail = {"op": m.group("op"), "opcount": int(m.group("opcount"), 16),
                  "count": _int(m.group("count")), "dtype": _int(m.group("dtype")),
                  "redop": _int(m.group("redop")), "root": _int(m.group("root")),
                  "comm": m.group("comm"), "nranks": _int(m.group("nranks")),
                  "host_pid": NCCL_HOST_PID.search(seg).group(0)  # type: ignore[union-attr]
                  if NCCL_HOST_PID.search(seg) else None}
    elif kind == NCCL_INIT:
        m = hit.match
        detail = {"comm": m.group("comm"), "comm_rank": gr.parse_rank(m.group("rank")),
                  "nranks": _int(m.group("nranks")), "comm_id": m.group("commid")}
    elif kind == DETAIL_TRACE:
        m = hit.match
        if m.group("seq") is None:
            return None
        detail = {"of_rank": gr.parse_rank(m.group("rank")), "seq": _int(m.group("seq")),
                  "op": m.group("op"), "shape": m.group("shape"), "dtype": m.group("dtype")}
    elif kind == NCCL_CHANNEL:
        detail = log_ncclwarn.channel_detail(seg, hit.match)
        if detail is None:
            return None
    elif kind == ELASTIC_CLOSING:
        detail = {"pid": _int(hit.match.group("pid")), "signal": hit.match.group("sig")}
    elif kind == ELASTIC_FAILED:
        detail = {"exit_code": _int(hit.match.group("code")),
                  "local_rank": gr.parse_rank(hit.match.group("local")),
                  "pid": _int(hit.match.group("pid"))}
    elif kind == ELASTIC_LAYOUT:
        m = hit.match
        if m.group("which"):
            detail = {f"{m.group('which')}_ranks": gr.parse_rank_list(m.group("ranks"))}
        else:
            nodes = m.group("nodes") or m.group("maxn")
            detail = {"nodes": _int(nodes)} if nodes else {"nproc": _int(m.group("nproc"))}
    return replace(common, kind=kind, detail=detail, pattern=pid)


#: NCCL's own line prefix ``host:pid:tid [cudaDev]`` (src/debug.cc)
NCCL_HOST_PID = re.compile(r"(?<![\w.-])[\w.-]{1,255}:\d{1,10}:\d{1,10} \[\d{1,4}\] NCCL")


def _int(v: str) -> int:
    """A number from a log line; more than 18 digits is bad input, not a SeqNum."""
    return gr.parse_int(v)


def _opt_int(v: str | None) -> int | None:
    return _int(v) if v is not None else None


#: ``WorkNCCL``'s ``NumelIn``/``NumelOut`` of work that has no single size (coalesced ops,
#: torch 2.2+) is -1 printed as an unsigned 64-bit number: 18446744073709551615, 20 digits
UNSIGNED_64 = 1 << 64


def _numel(v: str | None) -> int | None:
    """A work's element count; the unsigned spelling of -1 (or any count past int64) is
    unknown, not bad input: the watchdog's line about it is still a timeout (pytorch#117682)."""
    if v is not None and len(v) == 20 and v.isdigit() and int(v) < UNSIGNED_64:
        return None
    return _opt_int(v)
