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
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from stormotel.analyzers.report import Confidence, StallFinding
from stormotel.analyzers.timeline import MAX_WORLD_SIZE, Timeline

from stormotel import schema

PATTERN = "stormotel.stacks.odd_group"
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
    "broadcast_object_list"})


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


def _normalise(path: str) -> tuple[str, bool]:
    if m := _SITE.match(path):
        return path[m.end():], True
    if m := _STDLIB.match(path):
        return path[m.end():], True
    if "/stormotel/" in path:
        return "stormotel/" + path.rsplit("/stormotel/", 1)[1], True
    parts = path.rsplit("/", 2)
    return "/".join(parts[-2:]) if len(parts) > 2 else path, False


def find_snapshot_files(paths: Iterable[str | Path]) -> list[Path]:
    """Snapshot files named directly or found under folders (``stacks/`` of an archive)."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_file() and p.name.endswith((schema.STACK_SUFFIX, schema.STACK_PENDING_SUFFIX)):
            out.append(p)
        elif p.is_dir():
            for suffix in (schema.STACK_SUFFIX, schema.STACK_PENDING_SUFFIX):
                for q in p.rglob(f"*{suffix}"):
                    if q.is_file() and not q.is_symlink():
                        out.append(q)
                    if len(out) >= MAX_SNAPSHOT_FILES:
                        return sorted(set(out))
    return sorted(set(out))


def parse_snapshot(path: Path) -> Snapshot | None:
    """One snapshot file; None when it holds no traceback (armed, never fired) or no rank."""
    with open(path, "rb") as fh:
        raw = fh.read(MAX_SNAPSHOT_BYTES)
    text = raw.decode("utf-8", "replace")
    first, _, body = text.partition("\n")
    if not first.startswith(schema.STACK_HEADER_PREFIX):
        raise ValueError("not a stormotel stack snapshot (no header line)")
    try:
        header = json.loads(first[len(schema.STACK_HEADER_PREFIX):])
    except (json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"unreadable snapshot header ({e})") from None
    if not isinstance(header, dict):
        raise ValueError("snapshot header is not an object")
    rank = header.get("rank")
    if isinstance(rank, str) and rank.isdigit():
        rank = int(rank)
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < MAX_WORLD_SIZE:
        raise ValueError(f"snapshot header has no valid rank ({rank!r})")
    threads: dict[int, list[Frame]] = {}
    current: list[Frame] | None = None
    for line in body.splitlines():
        if m := _THREAD.match(line):
            current = threads.setdefault(int(m.group(1), 16), [])
        elif current is not None and (m := _FRAME.match(line)):
            file, library = _normalise(m.group(1))
            current.append(Frame(file, int(m.group(2)), m.group(3).strip(), library))
    if not threads:
        return None
    armed = header.get("armed_unix_ns")
    timeout = header.get("timeout_s")
    when = int(armed + float(timeout) * 1e9) if isinstance(armed, int) and \
        isinstance(timeout, int | float) else 0
    training = header.get("training_thread")
    return Snapshot(str(path), rank, when, threads,
                    training if isinstance(training, int) else None,
                    path.name.endswith(schema.STACK_PENDING_SUFFIX), header)


@dataclass
class StackGroup:
    ranks: list[int]
    where: str  # the user's frame, else the innermost one
    innermost: str
    collective: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"ranks": self.ranks, "where": self.where, "innermost": self.innermost,
                "collective": self.collective}

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
                "summary": "; ".join(g.describe() for g in self.groups)}


#: snapshots further than this from the others' moment describe another moment: not compared
SAME_MOMENT_S = 120.0


def read_snapshots(files: list[Path]) -> tuple[dict[int, Snapshot], list[str], Counter[str]]:
    """Per rank, the snapshot that describes the hang: the first one fired after the rank's last
    known progress (later ones may show it already tearing down after its peers failed), and
    only snapshots that hold the training thread. Ranks whose snapshot is far from the others'
    moment are left out with a note. Bad files: a counted skip with a note."""
    by_rank: dict[int, list[Snapshot]] = {}
    notes: list[str] = []
    skipped: Counter[str] = Counter()
    for path in files:
        try:
            snap = parse_snapshot(path)
        except (OSError, ValueError) as e:
            skipped["bad_stack_snapshot"] += 1
            notes.append(f"stack snapshot {path.name} skipped: {e}")
            continue
        if snap is None:
            skipped["unfired_stack_snapshot"] += 1
            continue
        by_rank.setdefault(snap.rank, []).append(snap)
    chosen: dict[int, Snapshot] = {}
    for rank, snaps in by_rank.items():
        usable = [s for s in snaps if s.main_frames]
        if len(usable) < len(snaps):
            skipped["snapshot_without_training_thread"] += len(snaps) - len(usable)
        if not usable:
            continue
        # A header's last progress is as of its arming: a snapshot fired before a progress
        # some later header records belongs to an earlier stall. Of the rest (fired after
        # the rank's last known progress: this hang), the first is nearest the hang's start.
        latest_progress = max(_last_progress(s) for s in snaps)
        current = [s for s in usable if s.time_ns >= latest_progress] or usable
        chosen[rank] = min(current, key=lambda s: s.time_ns)
    if len(chosen) > 2:
        moment = sorted(s.time_ns for s in chosen.values())[len(chosen) // 2]
        far = sorted(r for r, s in chosen.items() if abs(s.time_ns - moment) > SAME_MOMENT_S * 1e9)
        if far:
            notes.append(f"stack snapshots of rank(s) {far[:16]} are from another moment (more "
                         f"than {SAME_MOMENT_S:.0f} s from the others'): not compared")
            skipped["snapshot_other_moment"] += len(far)
            for r in far:
                del chosen[r]
    return chosen, notes, skipped


def _last_progress(s: Snapshot) -> int:
    value = s.header.get("last_progress_unix_ns")
    return value if isinstance(value, int) else 0


def _group(snaps: dict[int, Snapshot]) -> list[StackGroup]:
    by_sig: dict[tuple[tuple[str, int, str], ...], list[int]] = {}
    for rank in sorted(snaps):
        by_sig.setdefault(snaps[rank].signature(), []).append(rank)
    groups = []
    for ranks in by_sig.values():
        s = snaps[ranks[0]]
        frames = s.main_frames
        coll = s.in_collective()
        innermost = frames[0].where() if frames else "<no Python frame>"
        users = [f for f in frames if not f.library]
        if coll is not None:
            where = coll.function + (f" at {users[0].file}:{users[0].line}" if users else "")
        elif users:
            where = users[0].where() + "".join(f", called from {f.where()}" for f in users[1:2])
        else:
            where = innermost
        groups.append(StackGroup(ranks, where, innermost, coll.function if coll else None))
    return sorted(groups, key=lambda g: (-len(g.ranks), g.ranks[0]))


def _category(group: StackGroup, snap: Snapshot) -> str:
    files = " ".join(f.file for f in snap.main_frames)
    if "torch/utils/data" in files:
        return "data_loading"
    if "torch/serialization" in files or any(f.function in ("save", "write", "flush", "fsync")
                                             for f in snap.main_frames[:3]):
        return "storage"
    return "outside_communication"


def analyze_stacks(files: list[Path], world_size: int | None = None) -> StackAnalysis:
    """Group the ranks' latest snapshots; a lone group outside the collective every other
    snapshotted rank waits in becomes a ``straggler`` finding (source ``stacks``)."""
    snaps, notes, skipped = read_snapshots(files)
    groups = _group(snaps)
    findings: list[StallFinding] = []
    if len(groups) >= 2:
        findings = _odd_groups(groups, snaps, world_size, notes)
    elif groups:
        notes.append(f"stack snapshots: every snapshotted rank is at the same place "
                     f"({groups[0].describe()}): they name no odd rank")
    return StackAnalysis(snaps, groups, findings, notes, skipped)


def _odd_groups(groups: list[StackGroup], snaps: dict[int, Snapshot], world_size: int | None,
                notes: list[str]) -> list[StallFinding]:
    major = groups[0]
    waiting = [g for g in groups if g.collective]
    outside = [g for g in groups if not g.collective]
    if not waiting or not outside or len(major.ranks) < 2 or major.collective is None:
        notes.append("stack snapshots: the ranks are at different places but not as 'all wait "
                     "in a collective but a few': no odd rank named from stacks alone")
        return []
    culprits = sorted(r for g in outside for r in g.ranks)
    n_waiting = sum(len(g.ranks) for g in waiting)
    world = world_size or (max(snaps) + 1)
    unseen = [r for r in range(min(world, MAX_WORLD_SIZE)) if r not in snaps][:64]
    confidence: Confidence = "medium" if n_waiting >= 2 * len(culprits) and not unseen \
        else "low"
    reason = "; ".join(g.describe() for g in [*waiting, *outside])
    first = snaps[culprits[0]]
    ev: dict[str, Any] = {
        "pattern": PATTERN, "category": _category(outside[0], first), "reason": reason,
        "stack_groups": [g.as_dict() for g in groups],
        "frames": {str(r): [f.where() for f in snaps[r].main_frames[:12]] for r in culprits[:8]},
        "snapshot_ns": {str(r): snaps[r].time_ns for r in culprits[:8]},
        "spoke": {"ranks": len(snaps), "of": world}, "files": [snaps[r].path for r in culprits[:8]]}
    if unseen:
        ev["unseen_ranks"] = unseen
    return [StallFinding(
        kind="straggler", ranks=culprits, process_group=None, seq_id=None,
        op=major.collective, source="stacks", confidence=confidence, evidence=ev,
        remediation=[f"Look at {outside[0].where} on rank(s) {culprits[:8]}: the other ranks "
                     f"wait in {major.collective} for it ({_ADVICE[ev['category']]})."])]


_ADVICE = {
    "data_loading": "a data-loader worker that stopped delivering: its dataset, storage or "
                    "worker count",
    "storage": "a write that does not return: the checkpoint storage",
    "outside_communication": "code that never reached the collective: a wait, a loop, a "
                             "swallowed exception",
    "gil_held": "a Python thread holding the GIL: a regex, a C extension, a tight loop"}


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
            f.remediation = [f.remediation[0].rsplit(" (", 1)[0] + f" ({_ADVICE['gil_held']})."]
            f.evidence = {**f.evidence, "gil_held": held, "category": "gil_held",
                          "reason": f.evidence.get("reason", "") + "; rank(s) "
                          f"{[h['rank'] for h in held]} held the GIL: the tracker's own thread "
                          f"took no sample for {held[0]['no_samples_s']} s around the snapshot"}
        out.append(f)
    return out
