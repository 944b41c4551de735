"""The MPI launchers' and Paddle's launcher's last words: which process of the world ended first.

Jobs started by ``mpirun`` (Horovod, DeepSpeed's MPI runner, Paddle, Megatron on clusters
without torchrun) end with the launcher's own report, not a worker's. The messages are Open
MPI's help texts — ``orte/tools/orterun/help-orterun.txt`` (1.x-4.x, ``[orterun:…]``) and
PRRTE's ``help-prun.txt`` / ``help-prterun.txt`` (Open MPI 5, ``prterun``), read at each
release; the tool name is a ``%s`` (``mpirun``, ``mpiexec``, ``orterun``, ``prterun``):

- ``proc-aborted(-strsignal)``: "%s noticed that process rank %lu with PID %lu on node %s
  exited on signal %d (%s)." — the **first** abnormal termination the launcher saw; it then
  kills the rest;
- ``non-zero-exit``: "%s detected that one or more processes exited with non-zero status, thus
  causing\\nthe job to be terminated. The first process to do so was:\\n\\n  Process name: %s\\n
  Exit code:    %d" — the name is ``[[family,job],vpid]`` (ORTE) or ``[nspace,vpid]`` (PRRTE);
  the vpid is the MPI rank;
- ``proc-exit-no-sync`` / ``proc-ordered-abort``: "%s has exited due to process rank %lu with
  PID %lu on\\nnode %s exiting improperly" / "… calling \\"abort\\"" (wrapped over two lines);
- PRRTE's ``proc-aborted(-strsignal)`` (``help-prun.txt``, 3.0.13 – 4.0.0, Open MPI 5) wraps
  the same sentence as "… on node %s exited on\\nsignal %d (%s)." — read joined with its next
  line, as the "has exited due to" pair is;
- ``[mpi-abort]`` (``ompi/mpi/help-mpi-api.txt``, printed by the *aborting process itself* in
  ``MPI_Abort``): "MPI_ABORT was invoked on rank %d in communicator %s\\nwith errorcode %d."
  (4.x) / "…\\n  Proc: %s\\n  Errorcode: %d" (5.x). The rank is the caller's rank *in that
  communicator*: a world rank only for ``MPI_COMM_WORLD`` or from 5.x's ``Proc`` name (its
  vpid) — another communicator's rank without a ``Proc`` line is not read;
- Paddle's ``launch_utils.watch_local_trainers``: "ABORT!!! Out of all {nranks} trainers, the
  trainer process with rank={error_rank} was aborted. Please check its log." — ``error_rank``
  lists every local trainer found with a non-zero return code at one poll (1 s apart), by its
  global rank; ``nranks`` is the world size.

What each proves. The MPI rank is the process's rank in the launcher's world: the job's global
rank when the launcher starts the workers (Horovod, DeepSpeed/Paddle MPI runners), but a
*node's* rank when it starts one launcher per node (``mpirun … torchrun``) — so when the same
output shows torchelastic's or DeepSpeed's per-node launcher, the rank is not read as a worker's.
A process that ended on its own death signal (SIGKILL, SIGSEGV, SIGBUS, SIGILL, SIGFPE) or
first with a non-zero exit code is a failure of its own, as torchelastic's root cause is; one
that ended on SIGABRT (how a ProcessGroupNCCL watchdog timeout ends a rank that was only
waiting), SIGTERM/SIGINT/SIGHUP (a stop from outside), exited without finalising or called
MPI_Abort (how a framework ends the rank that *noticed* a peer's failure) is a suspect, never a
culprit by itself — whether the launcher reports the abort or the rank prints it itself.
Several ranks at one Paddle poll are first only together: a tie names nobody. Each becomes a
``rank_error`` event with ``launcher_only`` (an exit status without the rank's own traceback),
so a rank's own error lines still decide first. An ``[mpi-abort]`` whose world rank cannot be
read (another communicator, no ``Proc`` line) still shows the job was aborted: a rankless
event (:mod:`.log_rankless`: undecided, what to collect).
"""

from __future__ import annotations

import contextlib
import re

from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_failures import (
    RANK_ERROR,
    VICTIM_SIGNALS,
    WORLD_HINT,
    Found,
    signal_name,
)
from stormotel.analyzers.stalls.log_rankless import KIND as RANKLESS

_ABORTED = re.compile(r"(?P<tool>[\w./-]{1,64}) noticed that process rank (?P<rank>\d{1,7}) with "
                      # the node name may print empty ("on node exited", horovod#926); PRRTE
                      # wraps "exited on\nsignal" (read joined with one space)
                      r"PID (?P<pid>\w{1,12}) on node (?:(?P<node>\S{1,200}) )?exited on"
                      r"[ \t]{1,4}signal "
                      r"(?P<sig>\d{1,3})(?: \((?P<name>[^)]{1,60})\))?")
_FIRST_HEAD = re.compile(r"exited with non-zero status, thus causing|The first process to do so "
                         r"was:")
#: ORTE ``[[29973,1],0]``; PRRTE ``[prterun-host-1234@1,7]``: the vpid is the last number
_PROC_NAME = re.compile(r"Process name:\s*\[(?:\[\d{1,10},\d{1,10}\]|[^\],\s]{1,200}),"
                        r"(?P<rank>\d{1,7})\]")
_EXIT_CODE = re.compile(r"Exit code:\s*(?P<code>-?\d{1,4})")
_EXITED_DUE = re.compile(r"(?P<tool>[\w./-]{1,64}) has exited due to process rank "
                         r"(?P<rank>\d{1,7}) with PID (?P<pid>\w{1,12}) on\s*node "
                         r"(?P<node>\S{1,200}) (?P<how>exiting improperly|calling \"?abort\"?)")
_PADDLE = re.compile(r"ABORT!!! Out of all (?P<n>\d{1,7}) trainers, the trainer process with "
                     r"rank=\[(?P<ranks>[\d,\s]{0,4000})\] was aborted")
#: a per-node launcher in the same output: then mpirun's ranks are nodes, not workers
_NODE_LAUNCHERS = ("torch.distributed.elastic", "torchrun", "torch.distributed.launch",
                   "elastic/multiprocessing", "deepspeed.launcher.launch", "[launch.py:")
_MPI_ABORT = gr.BY_ID["openmpi.mpi_abort"].regex
#: the proc-aborted head alone, its "on node … exited on signal" cut away
_CUT = gr.BY_ID["openmpi.proc_aborted_cut"].regex
#: 5.x's second line of [mpi-abort]: ``  Proc: [[29973,1],3]`` / ``  Proc: [prterun-h-12@1,3]``
_ABORT_PROC = re.compile(r"^\s*Proc:\s*\[(?:\[\d{1,10},\d{1,10}\]|[^\],\s]{1,200}),"
                         r"(?P<rank>\d{1,7})\]")
_WORLD_COMM = "MPI_COMM_WORLD"
_TRIGGERS = ("noticed that process rank", "non-zero status", "first process to do so",
             "process name:", "exit code:", "has exited due to process rank", "abort!!!")
#: lines an [mpi-abort] head may take to its ``Proc:`` line (5.x)
_ABORT_SPAN = 3
#: lines a non-zero-exit block may take from its head to its exit code
_BLOCK_SPAN = 8


class MpiLauncherScanner:
    """Stateful scan over one file's lines: :attr:`found` (``rank_error`` / ``world_hint``)."""

    def __init__(self) -> None:
        self.found: list[Found] = []
        self._node_launcher = False
        self._block: int | None = None  # line of an open non-zero-exit head
        self._block_rank: int | None = None
        #: the previous line: "has exited due to … on" wraps before "node", PRRTE's "noticed
        #: that process rank … exited on" before "signal"
        self._prev = ""
        self._prev_no = 0
        #: an [mpi-abort] head whose communicator is not the world: (line, its text)
        self._abort: tuple[int, str] | None = None

    def feed(self, no: int, seg: str, low: str) -> None:
        if not self._node_launcher and any(k in low for k in _NODE_LAUNCHERS):
            self._node_launcher = True
        prev, self._prev = self._prev, ""
        with contextlib.suppress(gr.NumberTooLong):
            if prev and self._joined(no, prev + " " + seg):
                return
            if prev:
                self._cut(self._prev_no, prev)
            if self._abort is not None and self._abort_proc(no, seg):
                return
            if "invoked on rank" in low and self._mpi_abort(no, seg):
                return
            if ("has exited due to" in low and not self._exited(no, seg)) or (
                    "noticed that process rank" in low and not _ABORTED.search(seg)):
                self._prev, self._prev_no = seg, no  # wrapped: read with the next line
                return
            if any(k in low for k in _TRIGGERS):
                self._read(no, seg)
            elif self._block is not None and no - self._block > _BLOCK_SPAN:
                self._block = None

    def _joined(self, no: int, text: str) -> bool:
        """A help text wrapped over two lines, read joined."""
        if self._exited(no, text):
            return True
        if _ABORTED.search(text):
            self._read(no, text)
            return True
        return False

    def _mpi_abort(self, no: int, seg: str) -> bool:
        """[mpi-abort]: a world rank now, or wait for 5.x's ``Proc:`` line (module docstring)."""
        m = _MPI_ABORT.search(seg)
        if m is None:
            return False
        comm = (m.group("comm") or "").split()
        if comm and comm[0] == _WORLD_COMM:
            self._abort_event(no, m.group("rank"), seg, _WORLD_COMM)
        else:
            self._abort = (no, seg)  # another communicator (or the name wrapped): its Proc line
        return True

    def _abort_proc(self, no: int, seg: str) -> bool:
        assert self._abort is not None
        head_no, head = self._abort
        if no - head_no > _ABORT_SPAN:
            self._abort_rankless()
            return False
        if seg.strip().startswith(_WORLD_COMM) and (m := _MPI_ABORT.search(head)):
            self._abort = None  # 1.x/4.x: "… in communicator\nMPI_COMM_WORLD with errorcode"
            self._abort_event(head_no, m.group("rank"), head + " " + seg.strip(), _WORLD_COMM)
            return True
        if m := _ABORT_PROC.search(seg):
            self._abort = None
            self._abort_event(head_no, m.group("rank"), head + " " + seg.strip(), "Proc name")
            return True
        return False

    def _abort_rankless(self) -> None:
        """An [mpi-abort] of another communicator with no ``Proc`` line: no world rank."""
        if self._abort is None:
            return
        no, head = self._abort
        self._abort = None
        m = _MPI_ABORT.search(head)
        self.found.append(Found(RANKLESS, no, None, None, head.strip()[:300], {
            "reporter": None, "abort_comm": (m.group("comm") or "?").strip()[:80] if m else "?"},
            "openmpi.mpi_abort"))

    def _abort_event(self, no: int, rank: str, text: str, source: str) -> None:
        self._add(no, rank, text, {
            "category": "exception", "ambiguous": True, "launcher": "MPI_Abort",
            "why": f"MPI rank {rank} called MPI_Abort itself (its world rank from {source}): a "
                   "program or framework aborts the process that noticed an error, its own or "
                   "a peer's — a suspect; its own lines before the abort tell which"},
            "openmpi.mpi_abort")

    def _exited(self, no: int, text: str) -> bool:
        m = _EXITED_DUE.search(text)
        if not m:
            return False
        how = "called MPI_Abort" if "abort" in m.group("how") else "exited without MPI_Finalize"
        self._add(no, m.group("rank"), text, {
            "category": "exception", "host": (m.group("node") or "")[:100],
            "launcher": m.group("tool")[:40], "ambiguous": True,
            "why": f"{m.group('tool')} saw MPI rank {m.group('rank')} end first: it {how} — how "
                   "a framework ends the rank that noticed a peer's failure as often as its "
                   "own"}, "openmpi.proc_exit")
        return True

    def _read(self, no: int, seg: str) -> None:
        if m := _ABORTED.search(seg):
            sig = int(m.group("sig"))
            detail: dict[str, object] = {
                "category": "signal", "exit_code": -sig, "signal": signal_name(-sig),
                "host": (m.group("node") or "")[:100], "launcher": m.group("tool")[:40],
                "ambiguous": sig in VICTIM_SIGNALS}
            if sig in VICTIM_SIGNALS:
                detail["why"] = (
                    f"{m.group('tool')} saw MPI rank {m.group('rank')} end first, on "
                    f"{signal_name(-sig) or f'signal {sig}'}: how a watchdog timeout (SIGABRT) "
                    "ends a rank that was only waiting, or a stop from outside (SIGTERM/SIGINT) "
                    "ends any — its own lines before the abort tell which (a CUDA error: its "
                    "own; a watchdog timeout: a victim)")
            self._add(no, m.group("rank"), seg, detail, "openmpi.proc_aborted")
            return
        if m := _PADDLE.search(seg):
            ranks = gr.parse_rank_list(m.group("ranks"))
            n = gr.parse_rank(m.group("n"))
            if n:
                self.found.append(Found(WORLD_HINT, no, None, None, seg.strip()[:300],
                                        {"world_size": n}, "paddle.launch_abort"))
            for r in ranks:
                self.found.append(Found(RANK_ERROR, no, r, None, seg.strip()[:300], {
                    "category": "exception", "launcher_only": True, "ambiguous": len(ranks) > 1,
                    "why": f"Paddle's launcher found trainers {ranks} ended non-zero at one poll: "
                           "first only together"}, "paddle.launch_abort"))
            return
        if _FIRST_HEAD.search(seg):
            self._block, self._block_rank = no, None
            return
        if self._block is None or no - self._block > _BLOCK_SPAN:
            self._block = None
            return
        if m := _PROC_NAME.search(seg):
            self._block_rank = gr.parse_rank(m.group("rank"))
        elif (m := _EXIT_CODE.search(seg)) and self._block_rank is not None:
            code = int(m.group("code"))
            exit_detail: dict[str, object] = {"exit_code": code, "launcher_only": True}
            if code > 128 and signal_name(-(code - 128)):  # a shell's 128+N for a signal
                exit_detail |= {"category": "signal", "signal": signal_name(-(code - 128)),
                                "ambiguous": code - 128 in VICTIM_SIGNALS}
            else:
                exit_detail["category"] = "exception"
            self._add(no, str(self._block_rank), f"MPI launcher: the first process to exit "
                      f"non-zero was rank {self._block_rank} (exit code {code})", exit_detail,
                      "openmpi.first_nonzero_exit")
            self._block = None

    def _add(self, no: int, rank_text: str, seg: str, detail: dict[str, object],
             pattern: str) -> None:
        rank = gr.parse_rank(rank_text)
        if rank is None:
            return
        detail.setdefault("launcher_only", True)
        detail["rank_from"] = "the MPI launcher's rank (its world's vpid)"
        self.found.append(Found(RANK_ERROR, no, rank, None, seg.strip()[:300], detail, pattern))

    def _cut(self, no: int, text: str) -> None:
        """A "noticed that process rank N with PID P" head that no next line completes: cut
        (an issue title, a paste ending there). Every help text that begins so ends "exited on
        signal %d" — the first process the launcher saw end on a signal — but which signal is
        cut away: a SIGABRT or SIGTERM would make it a victim, so the rank is named at low
        only (``weak_rank``)."""
        m = _CUT.search(text)
        if m is None:
            return
        self._add(no, m.group("rank"), text, {
            "category": "signal", "cut": True, "weak_rank": True,
            "launcher": m.group("tool")[:40],
            "why": f"{m.group('tool')} noticed MPI rank {m.group('rank')} end first, on a "
                   "signal the line's cut end does not show: its own death (SIGKILL, SIGSEGV) "
                   "makes it the culprit, a SIGABRT or SIGTERM a victim — its own last lines "
                   "tell which"}, "openmpi.proc_aborted_cut")

    def close(self) -> None:
        with contextlib.suppress(gr.NumberTooLong):
            if self._prev:
                self._cut(self._prev_no, self._prev)
        self._prev = ""
        self._abort_rankless()
        if not self._node_launcher:
            return
        for f in self.found:
            if f.pattern and f.pattern.startswith("openmpi."):
                f.detail["ambiguous"] = True
                f.detail["why"] = (
                    f"the MPI launcher names its process rank {f.rank}, but the same output "
                    "shows a per-node launcher (torchrun / DeepSpeed's): mpirun's ranks are "
                    "then nodes, not workers — collect that node's worker logs")
