"""A rank's own errors and PyTorch's own conclusions, read from worker logs.

The watchdog lines say who *waited*; these say who *failed* or what PyTorch already worked out:

- **rank errors**: CUDA out of memory (with the bytes asked for), CUDA errors (illegal memory
  access, device-side assert, ECC), NCCL errors of the rank's own making, Python exceptions with
  the type and the innermost frame of their traceback, and signals / exit codes from torchrun's
  failure summary ("Root Cause (first observed failure)");
- **desync reports** (``TORCH_NCCL_DESYNC_DEBUG``): "the lagging/dead/mismatched ranks that
  caused the desync are: [7] finished collective #182, but didn't join collective #183";
- **DETAIL fingerprints** (``TORCH_DISTRIBUTED_DEBUG=DETAIL``): "Detected mismatch between
  collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint(...), but Rank 0 is
  running collective: CollectiveFingerPrint(...)".

Errors that are *consequences* of a peer's trouble (watchdog timeouts, aborted communicators,
store/socket timeouts, remote errors, launcher wrappers) are not a rank's own failure and are
left to the watchdog triage. Several of these shapes span lines (tracebacks, the torchrun
summary, the desync report), so this scanner walks a file's lines in order with a little state.
"""

from __future__ import annotations

import re
import signal
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from stormotel.analyzers.stalls import grammar as gr

RANK_ERROR = "rank_error"  #: a rank's own failure (category in ``detail``)
DESYNC_REPORT = "desync_report"  #: PyTorch named the lagging/dead/mismatched ranks
FINGERPRINT = "fingerprint"  #: DETAIL collective fingerprint of one rank
WORLD_HINT = "world_hint"  #: a launcher/ProcessGroup line that states the world size
#: the job's own shutdown (destroy_process_group aborting its communicators, the watchdog ending
#: normally): context for the rules that tell teardown noise from a failure, never evidence
NORMAL_SHUTDOWN = "normal_shutdown"
#: kinds of event that say nothing about the job's health on their own
NOT_EVIDENCE = frozenset({WORLD_HINT, NORMAL_SHUTDOWN})

#: how many lines back a traceback looks for the time of its rank's latest timestamped line
_RECENT = 64
#: the most digits a rank, SeqNum, byte count or size may have; longer numbers are bad input
MAX_DIGITS = gr.MAX_DIGITS

#: the prefixes before a line's message, as many as there are. Possessive (``++``): nothing
#: follows the loop, so the greedy match never backtracks into it and the result is the same,
#: but sre no longer keeps a backtracking entry per prefix — a 256 KiB line of ``|`` cost 112 ms
#: and grew 9.8x from 64 KiB (the entries leaving the cache), now 37 ms and 4.1x
_PREFIX = re.compile(r"^(?:\s*(?:\[\d{1,7}(?:,\d{1,7})?\]<std(?:err|out)>:|"
                     r"\[\d+\]|\[rank\d+\]:|\[default\d+\]:|\(\w*Worker\w*\s+pid=\d+\)|"
                     r"\d{4}-\d{2}-\d{2}[T ][\d:.,]+|[EWIF]\d{4} [\d:.]+ \d+ \S+\]|"
                     r"\[[EWIF]\S* [^\]]*\]|\x1b\[[0-9;]*m|\|)\s*)++")
_TAG_RANK = re.compile(r"\[(?:PG ID 0 PG GUID 0(?:\([^)]*\))?|PG 0(?: \([^)]*\))?)? ?"
                       r"Rank (\d{1,7})\]")
_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|can't allocate memory", re.I)
_OOM_BYTES = re.compile(r"[Tt]ried to allocate (\d{1,18}(?:\.\d{1,6})?) ?([KMGT]i?B|bytes)\b")
_CUDA_ERR = re.compile(r"CUDA error: ([^\n.]{1,160})|device-side assert triggered|"
                       r"uncorrectable ECC error", re.I)
_NCCL_ERR = re.compile(r"(ncclUnhandledCudaError|ncclInternalError|ncclInvalidUsage|"
                       r"ncclInvalidArgument)", re.I)
_FRAME = re.compile(r'File "([^"]{1,500})", line (\d{1,9}), in (\S{1,200})')
_EXC = re.compile(r"^((?:[A-Za-z_][\w]*\.){0,8}([A-Za-z_]\w*(?:Error|Exception|Interrupt)))"
                  r"(?::\s?(.{0,300}))?$")
#: exceptions that report a PEER's trouble (timeouts, aborts, store/socket errors), not this rank's
_CONSEQUENCE = re.compile(
    r"Watchdog caught|timed? ?out|Timeout|communicator was aborted|DistBackendError|"
    r"DistNetworkError|DistStoreError|ncclRemoteError|remote process exited|Connection (?:reset|"
    r"refused|closed)|Broken pipe|Detected mismatch between collectives|ChildFailedError|"
    r"SignalException|Socket|TCPStore|NCCL communicator|ProcessGroupNCCL|monitoredBarrier|"
    r"Connection closed by peer|pair closure|KeyboardInterrupt|SystemExit|"
    r"Horovod has been shut down|HorovodInternalError", re.I)
_STORAGE = re.compile(r"No space left|Disk quota|Input/output error|Stale file handle|"
                      r"Read-only file system", re.I)
_DATA = re.compile(r"DataLoader worker|StopIteration|AISBatchLoaderError|corrupt", re.I)
_DESYNC_HEAD = re.compile(r"lagging/dead/mismatched ranks that caused the desync are", re.I)
_DESYNC_RANKS = re.compile(r"^\s*\[([\d,\s]{1,4000})\]\s+(.{0,200})")
_FINGER = re.compile(r"Rank (\d{1,7}) is running (?:inconsistent )?collective:\s*"
                     r"CollectiveFingerPrint\(([^)]{0,2000}\)?)\)")
_FINGER_OTHER = re.compile(r"but Rank (\d{1,7}) is running collective:\s*"
                           r"(?:CollectiveFingerPrint\(([^)]{0,2000}\)?)\)|(\w+))")
_FP_FIELD = re.compile(r"(SequenceNumber|OpType|TensorShape|TensorDtypes)=(\[[^\]]{0,500}\]|"
                       r"[^,)\s]{1,100})")
#: the catalogue pattern of each category of a rank's own error
_ERROR_PATTERN = {"oom": "torch.cuda.oom", "cuda_error": "torch.cuda.error",
                  "nccl_error": "nccl.error", "exception": "python.exception",
                  "storage": "python.exception", "data": "python.exception"}
#: pdsh / srun --label prefixes in front of a launcher's multi-line summary ("node-3: ", "3: ")
_HOST_PREFIX = re.compile(r"^[\w.-]{1,64}: (?=\s*(?:\[\d+\]:|time|host|rank|exitcode|"
                          r"error_file|traceback|Root Cause|Failures|=|-|<NO_OTHER))")
_LAUNCH_PREFIX = re.compile(r"^(?:\[(?:rank|default)\d{1,7}\]:)")
_SUMMARY_HEAD = re.compile(r"Root Cause \(first observed failure\)|^\s*Failures:\s*$")
_SUMMARY_FIELD = re.compile(r"^\s*(time|host|rank|exitcode|traceback|error_file)\s*:\s*(.*)$")
_SUMMARY_ENTRY = re.compile(r"^\s*\[(\d{1,7})\]:\s*$")
_BYTES = {"B": 1, "BYTES": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


@dataclass
class Found:
    """One piece of evidence (converted to a LogEvent by the parser)."""

    kind: str
    line: int
    rank: int | None
    ts_ns: int | None
    text: str
    detail: dict[str, object] = field(default_factory=dict)
    #: the catalogue pattern (:mod:`.grammar`) this evidence was read through
    pattern: str | None = None


def strip_prefix(line: str) -> str:
    """The message without launcher/glog/rank prefixes (what a traceback line really says)."""
    return _PREFIX.sub("", line, count=1).strip()


#: signals a rank dies of when it is a victim: SIGHUP, SIGINT, SIGABRT (watchdog), SIGTERM
VICTIM_SIGNALS = frozenset({1, 2, 6, 15})


def signal_name(code: int) -> str | None:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return None


def _summary_ts(text: str) -> int | None:
    try:
        dt = datetime.strptime(text.strip(), "%Y-%m-%d_%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(dt.timestamp()) * 1_000_000_000


def _num(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() and len(text) <= MAX_DIGITS else None


class FailureScanner:
    """Stateful scan over one file's lines (in order): call :meth:`feed`, then :attr:`found`."""

    def __init__(self, file_rank: int | None, stamp: Callable[[str], int | None]) -> None:
        self.file_rank = file_rank
        self.stamp = stamp  #: a line's timestamp (ns) or None
        self.found: list[Found] = []
        self._frames: dict[int | None, str] = {}  #: innermost traceback frame per rank
        self._recent: dict[int | None, deque[str]] = {}
        self._desync: tuple[int, int | None, int | None] | None = None  #: (line, rank, ts)
        self._summary: dict[str, str] | None = None
        self._summary_root = False
        self._in_summary = False
        #: the table was entered at an entry, its section header cut off (a paste that starts
        #: inside it): which section the entry is in is decided by the line that closes it
        self._headerless = False
        self._table = 0  #: the line a launcher table starts at (its entries share it)

    def feed(self, no: int, line: str, low: str, rank: int | None) -> None:
        """One line (``low``: the same, lower-cased). Times are parsed only for what is kept."""
        recent = self._recent.setdefault(rank, deque(maxlen=_RECENT))
        recent.append(line)
        if (self._in_summary or "root cause" in low or "failures:" in low
                or "local_rank:" in low or "]:" in low[-3:]) and \
                self._summary_line(no, line):
            return
        if self._desync is not None:
            if self._desync_line(no, line):
                return
            self._desync = None
        if "lagging/dead/mismatched" in low and _DESYNC_HEAD.search(line):
            self._desync = (no, rank, self._when(rank))
            return
        if "collectivefingerprint" in low:
            self._fingerprints(no, line, rank, self._when(rank))
            return
        if "file \"" in low:
            m = _FRAME.search(line)
            if m:
                self._frames[rank] = f"{m.group(3)} ({m.group(1)}:{m.group(2)})"
                return
        if "size" in low or "member:" in low:
            for pid in ("torch.nccl.init_options", "launcher.world_size"):
                w = gr.BY_ID[pid].regex.search(line)
                if not w:
                    continue
                n = _num(next(g for g in w.groups() if g is not None))
                if n:
                    self.found.append(Found(WORLD_HINT, no, rank, self._when(rank),
                                            line.strip()[:200], {"world_size": n}, pid))
                break
        if any(k in low for k in ("error", "exception", "out of memory", "assert")):
            self._rank_error(no, line, rank, low)

    def _when(self, rank: int | None) -> int | None:
        """The time of this rank's latest timestamped line (tracebacks carry none)."""
        for line in reversed(self._recent.get(rank, ())):
            ts = self.stamp(line)
            if ts is not None:
                return ts
        return None

    # --- rank errors ---------------------------------------------------------------------
    def _rank_error(self, no: int, line: str, rank: int | None, low: str) -> None:
        detail: dict[str, object] = {}
        if rank is None:
            m = _TAG_RANK.search(line)
            rank = gr.parse_rank(m.group(1)) if m else None
            if m and "PG" not in m.group(0):
                # a bare "[Rank r]" (PyTorch <= 2.2) is the rank in SOME process group: the
                # global rank only if that group is the default one, which the line does not say
                detail["ambiguous"] = True
                detail["rank_from"] = "bare [Rank r] tag (group rank, group unknown)"
        msg = strip_prefix(line)
        oom = _OOM.search(line) if "memory" in low else None
        if oom:
            category = "oom"
            size = _OOM_BYTES.search(line)
            if size:
                unit = size.group(2).upper()
                detail["requested_bytes"] = int(float(size.group(1)) * _BYTES.get(unit, 1))
        elif (cuda := _CUDA_ERR.search(line)) and "watchdog caught" not in low:
            category = "cuda_error"
            error = cuda.group(1) or cuda.group(0)
            detail["error"] = re.split(r"CUDA kernel errors|--", error)[0].strip()
        elif (nccl := _NCCL_ERR.search(line)):
            category = "nccl_error"
            detail["error"] = nccl.group(1)
        else:
            exc = _EXC.match(msg)
            if not exc or _CONSEQUENCE.search(msg):
                return
            text = exc.group(3) or ""
            category = ("storage" if _STORAGE.search(msg) else
                        "data" if _DATA.search(msg) else "exception")
            detail["exception"] = exc.group(2)
            detail["message"] = text[:200]
        if rank is None:
            return
        detail["category"] = category
        if rank in self._frames:
            detail["frame"] = self._frames[rank]
        self.found.append(Found(RANK_ERROR, no, rank, self._when(rank), line.strip()[:300],
                                detail, _ERROR_PATTERN.get(category, "python.exception")))

    # --- PyTorch's desync report ------------------------------------------------------------
    def _desync_line(self, no: int, line: str) -> bool:
        """Rank lines after the report's head; False ends the report."""
        assert self._desync is not None
        head_no, rank, when = self._desync
        m = _DESYNC_RANKS.match(strip_prefix(line) if not line.startswith(" ") else line)
        if not m or no - head_no > 2 * 64:
            return False
        ranks = [int(r) for r in re.findall(r"\d{1,7}", m.group(1))]
        self.found.append(Found(DESYNC_REPORT, no, rank, when, line.strip()[:300],
                                {"culprits": ranks, "why": m.group(2).strip(),
                                 "head": head_no}, "torch.nccl.desync_report"))
        self._desync = (head_no, rank, when)
        return "finished" in m.group(2) or "didn't join" in m.group(2) or \
            "not join" in m.group(2)

    # --- DETAIL fingerprints -----------------------------------------------------------------
    def _fingerprints(self, no: int, line: str, rank: int | None, when: int | None) -> None:
        own = _FINGER.search(line)
        if not own:
            return
        pairs = [(int(own.group(1)), _fp(own.group(2)))]
        other = _FINGER_OTHER.search(line, own.end())
        if other:
            fp = _fp(other.group(2)) if other.group(2) is not None else {"OpType": other.group(3)}
            pairs.append((int(other.group(1)), fp))
        for r, fp in pairs:
            self.found.append(Found(FINGERPRINT, no, rank, when, line.strip()[:300],
                                    {"of_rank": r, "fingerprint": fp},
                                    "torch.detail.fingerprint_mismatch"))

    # --- torchrun's failure summary ------------------------------------------------------------
    def _summary_line(self, no: int, line: str) -> bool:
        line = _HOST_PREFIX.sub("", _LAUNCH_PREFIX.sub("", line))
        if _SUMMARY_HEAD.search(line):
            self._flush_summary(no)
            if not self._in_summary:
                self._table = no  # one launcher table: its Failures and its Root Cause
            self._in_summary = True
            self._summary_root = "Root Cause" in line
            self._headerless = False
            return True
        if not self._in_summary:
            # a paste that starts inside the table: "[2]:" or "  host : …" / "  rank : 1
            # (local_rank: 1)" with no header above
            field_m = _SUMMARY_FIELD.match(line)
            if not (_SUMMARY_ENTRY.match(line) or (field_m and "local_rank" in line)):
                return False
            self._in_summary, self._summary_root = True, False
            self._headerless = True
            self._table = no
            if field_m:
                self._summary = {field_m.group(1): field_m.group(2).strip()}
                return True
        if _SUMMARY_ENTRY.match(line):
            self._flush_summary(no)
            self._summary = {}
            return True
        m = _SUMMARY_FIELD.match(line)
        if m and self._summary is not None:
            self._summary[m.group(1)] = m.group(2).strip()
            return True
        if line.strip().startswith(("=", "-", "<NO_OTHER")) or not line.strip():
            if line.strip().startswith("=") and self._summary:
                # ChildFailedError.format_msg (torch/distributed/elastic/multiprocessing/errors/
                # __init__.py, _MSG_FORMAT_TEMPLATE; the "="/"-" layout of 1.10+): "Failures:"
                # entries are closed by the "-" section line, and the root failure is the table's
                # LAST entry, closed by the "=" border. An entry closed by "=" whose header was cut
                # off is therefore the root cause (megatron-lm#1880: rank 0's SIGSEGV)
                if self._headerless:
                    self._summary_root = True
                self._flush_summary(no)
                self._in_summary = False
            return True
        self._flush_summary(no)
        self._in_summary = False
        return False

    def _flush_summary(self, no: int) -> None:
        entry, self._summary = self._summary, None
        if not entry or "rank" not in entry or "exitcode" not in entry:
            return
        rank_m = re.match(r"(\d{1,7})", entry["rank"])
        code_m = re.match(r"(-?\d{1,4})", entry["exitcode"])
        if not rank_m or not code_m:
            return
        code = int(code_m.group(1))
        detail: dict[str, object] = {"exit_code": code, "launcher_root_cause": self._summary_root,
                                     "host": entry.get("host", "")[:100],
                                     "table": self._table, "time": entry.get("time", "")[:40]}
        local_m = re.search(r"local_rank:\s*(\d{1,7})", entry["rank"])
        pid_m = re.search(r"pid:\s*(\d{1,10})", entry["exitcode"])
        if local_m:
            detail["local_rank"] = int(local_m.group(1))
        if pid_m:
            detail["pid"] = int(pid_m.group(1))
        if code < 0:
            detail["category"] = "signal"
            detail["signal"] = signal_name(code)
            # SIGABRT is how a watchdog timeout ends a rank, SIGTERM/SIGINT/SIGHUP how the
            # launcher or scheduler stops the others: the first rank seen with one of these
            # may be a victim as well as a culprit
            detail["ambiguous"] = -code in VICTIM_SIGNALS
        else:
            detail["category"] = "exception"
            detail["message"] = entry.get("traceback", "")[:200]
            detail["launcher_only"] = True
        rank = gr.parse_rank(rank_m.group(1))
        if rank is None:
            return
        self.found.append(Found(RANK_ERROR, no, rank, _summary_ts(entry.get("time", "")),
                                f"torchrun: rank {rank} exitcode {code} "
                                f"{entry.get('traceback', '')}".strip()[:300], detail,
                                "torchelastic.root_cause" if self._summary_root
                                else "torchelastic.failures"))

    def close(self, no: int) -> None:
        self._flush_summary(no)
        # torchelastic's "first observed failure" among ranks that failed in the same second
        # is first only by the order it polled them: a tie names nobody
        summary = [f for f in self.found if f.pattern and f.pattern.startswith("torchelastic.")]
        for f in summary:
            if f.pattern == "torchelastic.failures":
                f.detail["ambiguous"] = True  # failed after the root cause: a consequence
                f.detail["tied_with"] = [f.rank]
        for f in summary:
            if f.pattern == "torchelastic.root_cause" and f.ts_ns is not None and any(
                    g is not f and g.ts_ns == f.ts_ns and g.rank != f.rank for g in summary):
                f.detail["ambiguous"] = True
                f.detail["tied_with"] = sorted({g.rank for g in summary if g.ts_ns == f.ts_ns
                                                and g.rank is not None})


def _fp(text: str) -> dict[str, str]:
    return {k: v for k, v in _FP_FIELD.findall(text)}
