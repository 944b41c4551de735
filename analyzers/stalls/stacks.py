"""Where every rank was at a hang: the tracker's stack snapshots, grouped across ranks.

Logs and Flight Recorder dumps say which collective the ranks wait in; they rarely say why the
odd rank is not there. The tracker (``stormotel/stall_watch.py``) leaves a faulthandler
traceback of every thread when a rank stops making progress; here ranks are grouped by the
signature of their training thread's stack (file, function and line of every frame; addresses,
object ids and install prefixes dropped), and the odd group joins the stuck-job verdict as
first-hand evidence: "3 ranks in all_reduce at train.py:212; rank 2 in match at
data/filter.py:88".

What a snapshot proves: where that rank's training thread was at that moment, no more. A rank
alone outside a collective while every other snapshotted rank waits inside the same one is the
one the others wait for — `medium` at most (a rank with no snapshot may be elsewhere too, and
the pattern has no measured precision on real cases yet). A rank whose tracker took no sample
around its snapshot could not run any Python thread: it held the GIL (said when telemetry is
given).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls.stack_rules import ADVICE, BACKWARD, BACKWARD_NOTE, PATTERN_OUTSIDE
from stormotel.analyzers.timeline import MAX_WORLD_SIZE, Timeline

from stormotel import schema

PATTERN = PATTERN_OUTSIDE
#: bytes read from one snapshot (faulthandler writes at most 100 threads x 100 frames)
MAX_SNAPSHOT_BYTES = 4 * 2**20
#: snapshots read at most (a few per rank and stall)
MAX_SNAPSHOT_FILES = 100_000

_THREAD = re.compile(r"^(?:Current thread|Thread) 0x([0-9a-fA-F]{1,16})")
_FRAME = re.compile(r'^  File "(.{1,4096})", line (\d{1,9}) in (.{1,512})$')
_SITE = re.compile(r"^.*/(?:site|dist)-packages/")
_STDLIB = re.compile(r"^.*/lib/python3\.\d+/")
#: functions of torch.distributed / NCCL / gloo wrappers a waiting rank sits in
_COLLECTIVES = frozenset({
    "all_reduce", "allreduce", "broadcast", "barrier", "monitored_barrier", "all_gather",
    "all_gather_into_tensor", "_all_gather_base", "reduce_scatter", "reduce_scatter_tensor",
    "_reduce_scatter_base", "all_to_all", "all_to_all_single", "reduce", "gather", "scatter",
    "send", "recv", "isend", "irecv", "batch_isend_irecv", "wait", "all_gather_object",
    "broadcast_object_list",
    # group creation is a rendezvous of every member (its store keys): a rank waiting in it
    # waits for its peers, it is not "in its own code" (round three's new_group4)
    "new_group", "new_subgroups", "new_subgroups_by_enumeration", "split_group",
    "init_process_group", "_store_based_barrier", "init_device_mesh"})
#: autograd's entry into its C++ engine: a training thread blocked here past its deadline is in
#: backward(), where DDP's and FSDP's gradient all_reduce / reduce_scatter run and wait (hooks
#: in C++, no Python frame says so) — or in a slow backward kernel: an inferred wait
_BACKWARD = frozenset({"_engine_run_backward", "run_backward", "backward", "grad"})


@dataclass(frozen=True)
class Frame:
    file: str  # normalised: install prefixes dropped
    line: int
    function: str
    library: bool  # stdlib, site-packages or stormotel itself

    def where(self) -> str:
        return f"{self.function} at {self.file}:{self.line}"


@dataclass
class Snapshot:
    path: str
    rank: int
    time_ns: int
    threads: dict[int, list[Frame]]  # innermost first
    training_thread: int | None
    pending: bool  # never renamed: the rank never got the GIL back before it ended
    header: dict[str, Any] = field(default_factory=dict)
    #: the tracker's progress trailer: step, marks entered in it, the previous step's marks
    progress: dict[str, Any] = field(default_factory=dict)

    @property
    def job_id(self) -> str | None:
        v = self.header.get("job_id")
        return v if isinstance(v, str) else None

    @property
    def restart(self) -> int:
        v = self.header.get("restart_count")
        return v if type(v) is int else 0

    @property
    def main_frames(self) -> list[Frame]:
        """The training thread's frames; [] when the snapshot does not hold it (never another
        thread's: a helper thread outside any collective would pass for the odd rank)."""
        if self.training_thread is not None:
            return self.threads.get(self.training_thread, [])
        return next(iter(self.threads.values()), []) if len(self.threads) == 1 else []

    def signature(self) -> tuple[tuple[str, int, str], ...]:
        return tuple((f.file, f.line, f.function) for f in self.main_frames)

    def user_frame(self) -> Frame | None:
        """The innermost frame of the user's own code (not stdlib, site-packages, stormotel)."""
        return next((f for f in self.main_frames if not f.library), None)

    def in_collective(self) -> Frame | None:
        return next((f for f in self.main_frames if f.function in _COLLECTIVES
                     and "distributed" in f.file), None)

    def in_backward(self) -> Frame | None:
        """The innermost frame when it is autograd's entry into its engine (:data:`_BACKWARD`):
        the thread runs C++ backward, where data-parallel wrappers wait for their gradients'
        collectives."""
        frames = self.main_frames
        if frames and frames[0].function in _BACKWARD and \
                "torch/autograd/" in frames[0].file.replace("\\", "/"):
            return frames[0]
        return None


def _normalise(path: str) -> tuple[str, bool]:
    if m := _SITE.match(path):
        return path[m.end():], True
    if m := _STDLIB.match(path):
        return path[m.end():], True
    if "/stormotel/" in path:
        return "stormotel/" + path.rsplit("/stormotel/", 1)[1], True
    parts = path.rsplit("/", 2)
    return "/".join(parts[-2:]) if len(parts) > 2 else path, False


_SUFFIXES = (schema.STACK_SUFFIX, schema.STACK_PENDING_SUFFIX, schema.STACK_PROGRESS_SUFFIX)


def find_snapshot_files(paths: Iterable[str | Path]) -> list[Path]:
    """Snapshot files named directly or found under folders (``stacks/`` of an archive)."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_file() and p.name.endswith(_SUFFIXES):
            out.append(p)
        elif p.is_dir():
            for suffix in _SUFFIXES:
                for q in p.rglob(f"*{suffix}"):
                    if q.is_file() and not q.is_symlink():
                        out.append(q)
                    if len(out) >= MAX_SNAPSHOT_FILES:
                        return sorted(set(out))
    return sorted(set(out))


#: plausible wall-clock times in a header (2000-01-01 .. 2200-01-01, ns): anything else is no
#: clock reading (1e30 would make a rank "hold the GIL for 1e21 s")
MIN_UNIX_NS = 946_684_800 * 10**9
MAX_UNIX_NS = 7_258_118_400 * 10**9
#: the longest timer the watch arms (its floor times 2 x 2**episodes, generously)
MAX_TIMEOUT_S = 30 * 86_400.0
MAX_STEP = 2**62


def _int_in(header: dict[str, Any], key: str, lo: int, hi: int, *, zero_ok: bool = False
            ) -> int | None:
    """``header[key]`` as an int within ``[lo, hi]``; None when absent; ValueError (a counted
    skip) when present but not such a number (a float, 1e308, 10**400, a string)."""
    v = header.get(key)
    if v is None or (zero_ok and v == 0 and type(v) is int):
        return None if v is None else 0
    if type(v) is not int or not lo <= v <= hi:
        raise ValueError(f"snapshot header field {key!r} out of range ({str(v)[:40]})")
    return v


def _timeout(header: dict[str, Any]) -> float | None:
    v = header.get("timeout_s")
    if v is None:
        return None
    if type(v) not in (int, float) or not math.isfinite(v) or not 0 < v <= MAX_TIMEOUT_S:
        raise ValueError(f"snapshot header field 'timeout_s' out of range ({str(v)[:40]})")
    return float(v)


def _trailer(text: str) -> dict[str, Any]:
    """The progress trailer the tracker's sampling thread appends (step, marks), checked:
    an unreadable or out-of-range trailer is dropped (the frames stand without it)."""
    at = text.rfind("\n" + schema.STACK_TRAILER_PREFIX)
    if at < 0:
        return {}
    line = text[at + 1 + len(schema.STACK_TRAILER_PREFIX):].partition("\n")[0]
    try:
        raw = json.loads(line)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(raw, dict):
        return {}
    out: dict[str, Any] = {}
    try:
        out["step"] = _int_in(raw, "step", -MAX_STEP, MAX_STEP)
        out["last_progress_unix_ns"] = _int_in(raw, "last_progress_unix_ns", MIN_UNIX_NS,
                                               MAX_UNIX_NS, zero_ok=True)
    except ValueError:
        return {}
    for key in ("marks", "previous_step_marks"):
        v = raw.get(key)
        if isinstance(v, list) and len(v) <= 64 and all(isinstance(m, str) for m in v):
            out[key] = [m[:128] for m in v]
    return out


def parse_snapshot(path: Path) -> Snapshot | None:
    """One snapshot file; None when it holds no traceback (armed, never fired) or no rank.
    Every number of the header is range-checked: out of range is a ValueError (a counted
    skip), never an exception further on."""
    snap = _parse(path)
    return snap if snap.threads else None


def _parse(path: Path) -> Snapshot:
    with open(path, "rb") as fh:
        raw = fh.read(MAX_SNAPSHOT_BYTES)
    text = raw.decode("utf-8", "replace")
    first, _, body = text.partition("\n")
    if not first.startswith(schema.STACK_HEADER_PREFIX):
        raise ValueError("not a stormotel stack snapshot (no header line)")
    try:
        header = json.loads(first[len(schema.STACK_HEADER_PREFIX):])
    except (ValueError, RecursionError) as e:
        raise ValueError(f"unreadable snapshot header ({str(e)[:120]})") from None
    if not isinstance(header, dict):
        raise ValueError("snapshot header is not an object")
    rank = header.get("rank")
    if isinstance(rank, str) and rank.isascii() and rank.isdigit() and len(rank) < 10:
        rank = int(rank)
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < MAX_WORLD_SIZE:
        raise ValueError(f"snapshot header has no valid rank ({str(rank)[:40]!r})")
    armed = _int_in(header, "armed_unix_ns", MIN_UNIX_NS, MAX_UNIX_NS)
    timeout = _timeout(header)
    _int_in(header, "last_progress_unix_ns", MIN_UNIX_NS, MAX_UNIX_NS, zero_ok=True)
    _int_in(header, "restart_count", 0, 10**6)
    training = _int_in(header, "training_thread", 0, 2**64)
    threads: dict[int, list[Frame]] = {}
    current: list[Frame] | None = None
    for line in body.splitlines():
        if m := _THREAD.match(line):
            current = threads.setdefault(int(m.group(1), 16), [])
        elif current is not None and (m := _FRAME.match(line)):
            file, library = _normalise(m.group(1))
            current.append(Frame(file, int(m.group(2)), m.group(3).strip(), library))
    when = armed + int(timeout * 1e9) if armed is not None and timeout is not None else 0
    return Snapshot(str(path), rank, when, threads, training,
                    path.name.endswith(schema.STACK_PENDING_SUFFIX), header, _trailer(body))


@dataclass
class StackGroup:
    ranks: list[int]
    where: str  # the user's frame, else the innermost one
    innermost: str
    collective: str | None
    #: the collective is inferred, not seen: the thread is in backward() (:data:`BACKWARD`)
    inferred: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"ranks": self.ranks, "where": self.where, "innermost": self.innermost,
                "collective": self.collective, "inferred": self.inferred}

    def describe(self) -> str:
        who = f"rank {self.ranks[0]}" if len(self.ranks) == 1 else f"{len(self.ranks)} ranks"
        inner = "" if self.where.startswith(self.innermost) else \
            f" (innermost: {self.innermost})"
        return f"{who} in {self.where}{inner}"


@dataclass
class StackAnalysis:
    snapshots: dict[int, Snapshot]
    groups: list[StackGroup]
    findings: list[StallFinding]
    notes: list[str]
    skipped: Counter[str]

    def extra(self) -> dict[str, Any]:
        return {"groups": [g.as_dict() for g in self.groups],
                "ranks": sorted(self.snapshots),
                "files": [s.path for s in self.snapshots.values()],
                "summary": "; ".join(g.describe() for g in self.groups),
                "places": {str(r): place_of(s) for r, s in sorted(self.snapshots.items())[:64]}}


#: snapshots further than this from the others' moment describe another moment: not compared
SAME_MOMENT_S = 120.0


def read_snapshots(files: list[Path], job_id: str | None = None, now_ns: int | None = None
                   ) -> tuple[dict[int, Snapshot], list[str], Counter[str], list[int]]:
    """Per rank, the snapshot that describes the hang: the first one fired after the rank's last
    known progress (later ones may show it already tearing down after its peers failed), and
    only snapshots that hold the training thread. Snapshots of another job (``job_id``, else
    the one job the snapshots name — several jobs without ``job_id`` are not compared) and of
    an earlier incarnation of the job (``restart_count``) are counted skips. A rank whose last
    snapshot precedes a later progress of its own got over that stall: not a hang. Ranks whose
    snapshot is far from the others' moment are left out with a note. Bad files: a counted
    skip with a note. Last, the ranks whose process ended without its tracker's stop
    (:func:`ended_unstopped`)."""
    notes: list[str] = []
    skipped: Counter[str] = Counter()
    parsed: list[Snapshot] = []
    for path in files:
        try:
            parsed.append(_parse(path))
        except (OSError, ValueError) as e:
            skipped["bad_stack_snapshot"] += 1
            if skipped["bad_stack_snapshot"] <= 10:
                notes.append(f"stack snapshot {path.name[:200]} skipped: {str(e)[:200]}")
    parsed = _this_job(parsed, job_id, notes, skipped)
    by_rank: dict[int, list[Snapshot]] = {}
    for snap in parsed:
        by_rank.setdefault(snap.rank, []).append(snap)
        if not snap.threads:
            skipped["unfired_stack_snapshot"] += 1
    if skipped["unfired_stack_snapshot"]:
        notes.append(f"{skipped['unfired_stack_snapshot']} stack snapshot(s) armed but never "
                     "fired (a header written ahead of a possible hang, no stacks: the rank "
                     "progressed, ended, or its snapshot was not yet due) — read for the "
                     "rank's last progress only")
    chosen: dict[int, Snapshot] = {}
    recovered: list[int] = []
    for rank, all_snaps in by_rank.items():
        snaps = [s for s in all_snaps if s.threads]
        usable = [s for s in snaps if s.main_frames]
        if len(usable) < len(snaps):
            skipped["snapshot_without_training_thread"] += len(snaps) - len(usable)
        if not usable:
            continue
        # A header's last progress is as of its arming: a snapshot fired before a progress
        # some later header (or trailer) records belongs to an earlier stall. Of the rest
        # (fired after the rank's last known progress: this hang), the first is nearest the
        # hang's start. None left: the rank made progress after its last snapshot.
        latest_progress = max(_last_progress(s) for s in all_snaps)
        current = [s for s in usable if s.time_ns >= latest_progress]
        if not current:
            recovered.append(rank)
            continue
        chosen[rank] = min(current, key=lambda s: s.time_ns)
    if recovered:
        skipped["snapshot_stall_got_over"] += len(recovered)
        notes.append(f"stack snapshots of rank(s) {sorted(recovered)[:16]} are of a stall the "
                     "rank got over (it made progress after them): not a hang")
    if len(chosen) > 2:
        moment = sorted(s.time_ns for s in chosen.values())[len(chosen) // 2]
        far = sorted(r for r, s in chosen.items() if abs(s.time_ns - moment) > SAME_MOMENT_S * 1e9)
        if far:
            notes.append(f"stack snapshots of rank(s) {far[:16]} are from another moment (more "
                         f"than {SAME_MOMENT_S:.0f} s from the others'): not compared")
            skipped["snapshot_other_moment"] += len(far)
            for r in far:
                del chosen[r]
    ended = ended_unstopped(by_rank, chosen, time.time_ns() if now_ns is None else now_ns)
    return chosen, notes, skipped, ended


#: slack past an armed timer's expiry before its silence says the process is gone
ENDED_SLACK_S = 5.0


def ended_unstopped(by_rank: dict[int, list[Snapshot]], chosen: dict[int, Snapshot],
                    now_ns: int) -> list[int]:
    """Ranks (without a snapshot of the hang) whose process ended without its tracker's stop.

    The tracker keeps one armed file per process: a header written at each arming, the C
    timer's dump appended when it fires. Every stop — ``stop_tracking()``, SIGTERM, the exit
    handler after an exception — removes that file or renames it ``.stack.progress``. So an
    unfired ``.stack.pending`` whose timer (armed at ``armed_unix_ns`` for ``timeout_s``) is
    long past is a process that neither fired it nor stopped: it was killed (SIGKILL, the
    OOM killer), aborted (a C++ ``terminate``) or left through ``os._exit`` (a forked worker
    after an uncaught exception: no exit handler runs). The file proves that much of the
    rank, not why, nor which rank went first."""
    out = []
    for rank, snaps in by_rank.items():
        if rank in chosen or not snaps:
            continue
        latest = max(snaps, key=lambda s: int(s.header.get("armed_unix_ns") or 0))
        armed, timeout = latest.header.get("armed_unix_ns"), latest.header.get("timeout_s")
        if latest.threads or not latest.pending or not isinstance(armed, int) or \
                not isinstance(timeout, (int, float)):
            continue
        if armed + (float(timeout) + ENDED_SLACK_S) * 1e9 < now_ns:
            out.append(rank)
    return sorted(out)


def _this_job(snaps: list[Snapshot], job_id: str | None, notes: list[str],
              skipped: Counter[str]) -> list[Snapshot]:
    """Only ``job_id``'s snapshots (else the one job they name), of its latest incarnation."""
    if job_id is not None:
        other = [s for s in snaps if s.job_id is not None and s.job_id != job_id]
        if other:
            skipped["other_job"] += len(other)
            notes.append(f"{len(other)} stack snapshot(s) of other jobs than {job_id[:80]!r} "
                         "left out")
        snaps = [s for s in snaps if s.job_id is None or s.job_id == job_id]
    else:
        jobs = sorted({s.job_id for s in snaps if s.job_id is not None})
        if len(jobs) > 1:
            skipped["other_job"] += len(snaps)
            names = ", ".join(j[:40] for j in jobs[:4]) + (", ..." if len(jobs) > 4 else "")
            notes.append(f"stack snapshots of {len(jobs)} jobs ({names}) in the input: none "
                         "compared; "
                         "pass --job-id to judge one")
            return []
    latest = max((s.restart for s in snaps), default=0)
    earlier = [s for s in snaps if s.restart < latest]
    if earlier:
        skipped["snapshot_earlier_run"] += len(earlier)
        notes.append(f"{len(earlier)} stack snapshot(s) of an earlier run of the job (restart "
                     f"count below {latest}) left out")
    return [s for s in snaps if s.restart == latest]


def _last_progress(s: Snapshot) -> int:
    """The rank's last progress this file knows: its header's (as of arming) or its trailer's
    (as of the dump being seen), whichever is later; both range-checked when read."""
    head = s.header.get("last_progress_unix_ns")
    tail = s.progress.get("last_progress_unix_ns")
    return max(head if type(head) is int else 0, tail if type(tail) is int else 0)


def _group(snaps: dict[int, Snapshot]) -> list[StackGroup]:
    by_sig: dict[tuple[tuple[str, int, str], ...], list[int]] = {}
    for rank in sorted(snaps):
        by_sig.setdefault(snaps[rank].signature(), []).append(rank)
    groups = []
    for ranks in by_sig.values():
        s = snaps[ranks[0]]
        frames = s.main_frames
        coll = s.in_collective()
        name = coll.function if coll else (BACKWARD if s.in_backward() else None)
        innermost = frames[0].where() if frames else "<no Python frame>"
        users = [f for f in frames if not f.library]
        if name is not None:
            where = name + (f" at {users[0].file}:{users[0].line}" if users else "")
        elif users:
            where = users[0].where() + "".join(f", called from {f.where()}" for f in users[1:2])
        else:
            where = innermost
        groups.append(StackGroup(ranks, where, innermost, name,
                                 inferred=coll is None and name is not None))
    return sorted(groups, key=lambda g: (-len(g.ranks), g.ranks[0]))


def analyze_stacks(files: list[Path], world_size: int | None = None,
                   job_id: str | None = None) -> StackAnalysis:
    """Group the ranks' latest snapshots (only ``job_id``'s when given) and judge them
    (:mod:`~stormotel.analyzers.stalls.stack_rules`): snapshots of one moment are a hang,
    never healthy."""
    from stormotel.analyzers.stalls.stack_rules import ended_finding, judge

    snaps, notes, skipped, ended = read_snapshots(files, job_id)
    groups = _group(snaps)
    findings = judge(groups, snaps, world_size, notes)
    if not findings and ended:
        findings = [ended_finding(ended, world_size, notes)]
    return StackAnalysis(snaps, groups, findings, notes, skipped)


def place_of(snap: Snapshot) -> dict[str, Any]:
    """Where the rank's training thread is: its own innermost frame (function, file:line), the
    collective it waits in, and the tracker's step and marks — the summary's per-rank line."""
    user = snap.user_frame()
    coll = snap.in_collective()
    frames = snap.main_frames
    backward = coll is None and snap.in_backward() is not None
    out: dict[str, Any] = {
        "function": user.function if user else (frames[0].function if frames else None),
        "file": user.file if user else (frames[0].file if frames else None),
        "line": user.line if user else (frames[0].line if frames else None),
        "collective": coll.function if coll else (BACKWARD if backward else None),
        "innermost": frames[0].where() if frames else None,
        "snapshot_ns": snap.time_ns, "pending": snap.pending}
    if backward:
        out["collective_inferred"] = BACKWARD_NOTE
    for key in ("step", "marks"):
        if snap.progress.get(key) is not None:
            out[key] = snap.progress[key]
    return out


def with_sample_gaps(timeline: Timeline, findings: list[StallFinding]) -> list[StallFinding]:
    """Say "held the GIL" for a stacks culprit whose tracker took no sample around its
    snapshot: the tracker's sampling thread is Python and could not run."""
    out = []
    for f in findings:
        if f.source != "stacks" or not f.ranks:
            out.append(f)
            continue
        held = []
        for rank in f.ranks:
            series = timeline.ranks.get(rank)
            when = int((f.evidence.get("snapshot_ns") or {}).get(str(rank), 0))
            if series is None or not len(series) or not when:
                continue
            t = series.t_ns
            before = t[t <= when]
            after = t[t > when]
            if not len(before):
                continue
            gap_from = int(before[-1])
            gap_to = int(after[0]) if len(after) else None
            interval = float(np.median(np.diff(t))) / 1e9 if len(t) > 2 else 0.1
            span_s = ((gap_to or when) - gap_from) / 1e9
            if span_s > max(5.0, 20 * interval):
                held.append({"rank": rank, "no_samples_s": round(span_s, 1),
                             "resumed": gap_to is not None})
        if held:
            f.remediation = [f.remediation[0].rsplit(" (", 1)[0] + f" ({ADVICE['gil_held']})."]
            f.evidence = {**f.evidence, "gil_held": held, "category": "gil_held",
                          "reason": f.evidence.get("reason", "") + "; rank(s) "
                          f"{[h['rank'] for h in held]} held the GIL: the tracker's own thread "
                          f"took no sample for {held[0]['no_samples_s']} s around the snapshot"}
        out.append(f)
    return out
