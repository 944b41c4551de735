"""NCCL-shaped Flight Recorder dumps of a 16-rank MoE job, built from torch's dump format.

No GPU runs here, so the dumps are produced by a small simulation of what ProcessGroupNCCL's
recorder (format ``2.10``, ``FlightRecorderDetail.hpp``) would hold: every rank runs the same
training program (tensor-parallel all_reduces, expert-parallel all_to_alls whose token counts
are synchronised to the CPU, pipeline send/recv between two stages, data-parallel gradient
reduce_scatter / all_gather / grad-norm all_reduce, and a default-group loss all_reduce only
every ``DEFAULT_EVERY`` iterations), ops complete in stream order once every member enqueued
them, and a rank's CPU blocks only at synchronising ops. Ranks that hang stop enqueuing at a
chosen op; the others run on until they block on them. Each rank's dump is the last
``buffer`` entries of its ring (record ids keep counting, so a ring that wrapped starts above
0), so ranks hold different record-id and time ranges, as dumps taken on a real job do.

Layout (Megatron order): ``rank = pp * 8 + dp * 2 + tp`` with TP=2, DP=4, PP=2; expert
parallel groups are pairs of data-parallel replicas (EP=2) inside each (pp, tp) slice.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

WORLD = 16
TP, DP, PP = 2, 4, 2
LAYERS = 2
MICRO = 2
DEFAULT_EVERY = 10
LOSS_OPS = 6
VERSION = "2.10"
T0_NS = 1_764_000_000_000_000_000  # a wall-clock epoch in ns, like c10::getTime()
OP_NS = 40_000_000  # CPU time between two enqueues (40 ms of compute)


def rank_of(pp: int, dp: int, tp: int) -> int:
    return pp * 8 + dp * 2 + tp


def coords(rank: int) -> tuple[int, int, int]:
    return rank // 8, (rank % 8) // 2, rank % 2


@dataclass(frozen=True)
class Group:
    name: str  #: global name (the same on every member)
    desc: str
    ranks: tuple[int, ...]


def groups() -> list[Group]:
    """Every process group, in creation order (names are global, like NCCL's ``pg_name``)."""
    return list(_groups())


@cache
def _groups() -> tuple[Group, ...]:
    """The groups, built once: ``program`` asks for a rank's groups per op kind (364 programs
    in test_fr_ring, each rebuilding the 41 groups four times, was ~3 s of its CPU)."""
    out = [Group("0", "default_pg", tuple(range(WORLD)))]

    def add(desc: str, ranks: list[int]) -> None:
        out.append(Group(str(len(out)), desc, tuple(sorted(ranks))))

    for pp in range(PP):
        for dp in range(DP):
            add("tp", [rank_of(pp, dp, t) for t in range(TP)])
    for dp in range(DP):
        for tp in range(TP):
            add("pp", [rank_of(p, dp, tp) for p in range(PP)])
    for pp in range(PP):
        for tp in range(TP):
            add("dp", [rank_of(pp, d, tp) for d in range(DP)])
    for pp in range(PP):
        for tp in range(TP):
            for e in range(DP // 2):
                add("ep", [rank_of(pp, 2 * e + k, tp) for k in range(2)])
    return tuple(out)


def group_of(rank: int, desc: str) -> Group:
    return next(g for g in _groups() if g.desc == desc and rank in g.ranks)


@dataclass
class Op:
    group: Group
    op: str  #: all_reduce, all_to_all, send, recv, ...
    size: int
    sync: bool = False  #: the CPU waits for its result (``.item()``, ``.tolist()``)
    peer: int | None = None  #: global peer rank of a send/recv


def program(rank: int, iterations: int, skip: frozenset[str] = frozenset()) -> list[Op]:
    """The ops one rank enqueues, in order (``skip``: group descs this rank never calls)."""
    pp, _, _ = coords(rank)
    tp, pipe, dp, ep = (group_of(rank, d) for d in ("tp", "pp", "dp", "ep"))
    default = _groups()[0]
    other = next(r for r in pipe.ranks if r != rank)
    ops: list[Op] = [Op(default, "barrier", 1, sync=True),
                     Op(tp, "broadcast", 4096), Op(dp, "broadcast", 8192, sync=True)]

    def layer(backward: bool) -> list[Op]:
        moe = [Op(ep, "all_to_all", 256), Op(ep, "all_to_all", 256)]
        counts = [] if backward else [Op(ep, "all_to_all", 2, sync=True)]
        return [Op(tp, "all_reduce", 4096), *counts, *moe, Op(tp, "all_reduce", 4096)]

    for it in range(iterations):
        for _ in range(MICRO):
            if pp == 1:
                ops.append(Op(pipe, "recv", 4096, peer=other))
            for _ in range(LAYERS):
                ops.extend(layer(backward=False))
            if pp == 0:
                ops.append(Op(pipe, "send", 4096, peer=other))
            else:  # vocab-parallel cross entropy, z-loss and an MTP head on the last stage
                ops.extend(Op(tp, "all_reduce", 8) for _ in range(LOSS_OPS))
        for _ in range(MICRO):
            if pp == 0:
                ops.append(Op(pipe, "recv", 4096, peer=other))
            for _ in range(LAYERS):
                ops.extend(layer(backward=True))
            if pp == 1:
                ops.append(Op(pipe, "send", 4096, peer=other))
        ops += [Op(dp, "reduce_scatter", 65536), Op(dp, "all_gather", 16384),
                Op(dp, "all_reduce", 1, sync=True)]
        if it % DEFAULT_EVERY == 0:
            ops.append(Op(default, "all_reduce", 1, sync=True))
    return [o for o in ops if o.group.desc not in skip]


@dataclass
class Rec:
    """One recorded entry while the job runs."""

    record_id: int
    op: Op
    seq: int  #: collective_seq_id (the group's count so far)
    p2p_seq: int
    key: tuple[Any, ...]  #: what the same op is called on every member
    created: int
    completed: int | None = None


@dataclass
class Sim:
    hung: dict[int, int]  #: rank -> index of the first op it never enqueues
    iterations: int
    skip: dict[int, frozenset[str]] = field(default_factory=dict)
    #: rank -> index of its first op whose completion it never discovers (a CUDA error makes
    #: its events unqueryable: its peers complete the collective, it keeps it pending)
    broken: dict[int, int] = field(default_factory=dict)
    progs: dict[int, list[Op]] = field(default_factory=dict)
    recs: dict[int, list[Rec]] = field(default_factory=dict)
    #: (rank, buffer, form, only_active) -> that rank's dump, written once (:func:`write`)
    dumps: dict[tuple[int, int, str, bool], bytes] = field(default_factory=dict)

    def run(self) -> None:
        self.progs = {r: program(r, self.iterations, self.skip.get(r, frozenset()))
                      for r in range(WORLD)}
        self.recs = {r: [] for r in range(WORLD)}
        pc = dict.fromkeys(range(WORLD), 0)
        clock = {r: T0_NS + 3_000_000 * r for r in range(WORLD)}  # clocks a little apart
        blocked: dict[int, Rec | None] = dict.fromkeys(range(WORLD))
        seqs: dict[tuple[int, str], int] = {}
        p2p: dict[tuple[int, str], int] = {}
        pairs: dict[tuple[int, int, str], int] = {}
        pending: dict[tuple[Any, ...], dict[int, Rec]] = {}
        done_upto = dict.fromkeys(range(WORLD), 0)  # index of the first incomplete rec
        moved = True
        while moved:
            moved = False
            for r in range(WORLD):
                while blocked[r] is None and pc[r] < len(self.progs[r]) \
                        and pc[r] < self.hung.get(r, 1 << 30):
                    o = self.progs[r][pc[r]]
                    pc[r] += 1
                    moved = True
                    k = (r, o.group.name)
                    if o.op in ("send", "recv"):
                        p2p[k] = p2p.get(k, 0) + 1
                        src, dst = (r, o.peer) if o.op == "send" else (o.peer, r)
                        n = pairs.get((src, dst, o.op), 0) + 1  # type: ignore[arg-type]
                        pairs[(src, dst, o.op)] = n  # type: ignore[index]
                        key: tuple[Any, ...] = (o.group.name, "p2p", src, dst, n)
                    else:
                        seqs[k] = seqs.get(k, 0) + 1
                        key = (o.group.name, seqs[k])
                    rec = Rec(len(self.recs[r]), o, seqs.get(k, 0), p2p.get(k, 0), key,
                              clock[r])
                    clock[r] += OP_NS
                    self.recs[r].append(rec)
                    pending.setdefault(key, {})[r] = rec
                    if o.sync:
                        blocked[r] = rec
            # complete, in stream order, every op all of whose members enqueued it
            progress = True
            while progress:
                progress = False
                for r in range(WORLD):
                    lst = self.recs[r]
                    while done_upto[r] < len(lst):
                        rec = lst[done_upto[r]]
                        need = 2 if rec.key[1] == "p2p" else len(rec.op.group.ranks)
                        members = pending.get(rec.key, {})
                        if len(members) < need or any(
                                self.recs[m][done_upto[m]] is not members[m]
                                for m in members):
                            break
                        end = max(m.created for m in members.values()) + OP_NS // 4
                        for m, mrec in members.items():
                            if mrec.record_id < self.broken.get(m, 1 << 30):
                                mrec.completed = end
                            done_upto[m] += 1
                        pending.pop(rec.key)
                        progress = moved = True
            for r in range(WORLD):
                b = blocked[r]
                if b is not None and b.completed is not None:
                    clock[r] = max(clock[r], b.completed)
                    blocked[r] = None
                    moved = True

    def newest_times(self) -> dict[int, int]:
        return {r: lst[-1].created for r, lst in self.recs.items() if lst}


_RUNS: dict[tuple[Any, ...], Sim] = {}


def simulated(hung: dict[int, int], iterations: int,
              skip: dict[int, frozenset[str]] | None = None,
              broken: dict[int, int] | None = None) -> Sim:
    """``Sim(...)`` after its ``run()``, each distinct job simulated once per process.

    The simulation is deterministic and nothing reads a run's records but to write dumps, so
    the scenarios share one (test_fr_ring asks for the GIL hang eleven times; each run was
    ~0.5 s of CPU). Treat the result as read-only."""
    skip, broken = skip or {}, broken or {}
    key = (tuple(sorted(hung.items())), iterations, tuple(sorted(skip.items())),
           tuple(sorted(broken.items())))
    if key not in _RUNS:
        sim = Sim(hung=dict(hung), iterations=iterations, skip=dict(skip), broken=dict(broken))
        sim.run()
        _RUNS[key] = sim
    return _RUNS[key]


def entry(rank: int, rec: Rec) -> dict[str, Any]:
    """One entry as ``getCollectiveTrace`` writes it (pickle form: ints, None for unset)."""
    o = rec.op
    g = o.group
    if o.op in ("send", "recv"):
        me, peer = g.ranks.index(rank), g.ranks.index(o.peer)  # type: ignore[arg-type]
        name = f"nccl:{o.op} {me}->{peer}" if o.op == "send" else f"nccl:{o.op} {me}<-{peer}"
    else:
        name = f"nccl:{o.op}"
    n = len(g.ranks)
    ins, outs = [[o.size]], [[o.size]]
    if o.op == "all_gather":
        outs = [[o.size * n]]
    elif o.op == "reduce_scatter":
        outs = [[o.size // n]]
    elif o.op == "barrier":
        ins = outs = [[1]]
    done = rec.completed is not None
    return {"record_id": rec.record_id, "pg_id": PG_ID[g.desc], "process_group": [g.name, g.desc],
            "thread_name": "pt_main_thread", "thread_id": "140000000000000",
            "collective_seq_id": rec.seq, "p2p_seq_id": rec.p2p_seq,
            "op_id": rec.record_id + 1, "profiling_name": name,
            "time_created_ns": rec.created, "input_sizes": ins, "input_dtypes": ["BFloat16"],
            "output_sizes": outs, "output_dtypes": ["BFloat16"],
            "state": "completed" if done else "started",
            "time_discovered_started_ns": rec.created + 1000,
            "time_discovered_completed_ns": rec.completed if done else None,
            "retired": done, "timeout_ms": 600000, "is_p2p": o.op in ("send", "recv")}


#: process-local pg_id: each rank creates its groups in the same kind order
PG_ID = {"default_pg": 0, "tp": 1, "pp": 2, "dp": 3, "ep": 4}


def dump(rank: int, recs: list[Rec], buffer: int, form: str = "json",
         only_active: bool = False) -> bytes:
    """One rank's dump; ``only_active`` leaves out completed entries, as
    ``_dump_nccl_trace(onlyActive=True)`` does (NVIDIA's resiliency extension dumps so)."""
    kept = recs[-buffer:]
    if only_active:
        kept = [r for r in kept if r.completed is None]
    mine = [g for g in _groups() if rank in g.ranks]
    by_group: dict[str, list[Rec]] = {g.name: [] for g in mine}
    for r in recs:  # group names are unique, so this is the same split as comparing groups
        if r.op.op not in ("send", "recv"):
            by_group[r.op.group.name].append(r)
    status: dict[str, dict[str, int]] = {}
    for g in mine:
        coll = by_group[g.name]
        seqs = [r.seq for r in coll]
        done = [r.seq for r in coll if r.completed is not None]
        status[str(PG_ID[g.desc])] = {
            "last_enqueued_collective": max(seqs, default=-1),
            "last_started_collective": max(seqs, default=-1),
            "last_completed_collective": max(done, default=-1)}
    cfg = {g.name: {"name": g.name, "desc": g.desc, "ranks": json.dumps(list(g.ranks))}
           for g in mine}
    entries = [entry(rank, r) for r in kept]
    body: dict[str, Any] = {"version": VERSION, "comm_lib_version": "2.21.5", "pg_config": cfg,
                            "pg_status": status, "entries": entries}
    if form == "pickle":
        return pickle.dumps(body)
    # dump_json: stringified pg_status, 0 for unset times, no "entries" key when there are none
    for st in status.values():
        for k in st:
            st[k] = str(st[k])  # type: ignore[assignment]
    for e in entries:
        e["time_discovered_completed_ns"] = e["time_discovered_completed_ns"] or 0
    if not entries:
        body.pop("entries")
    return json.dumps(body).encode()


def write(folder: Path, sim: Sim, buffer: int, empty: set[int] = frozenset(),  # type: ignore[assignment]
          form: str = "json", only_active: bool = False) -> Path:
    """``folder/nccl_trace_rank_<r>`` per rank; ``empty`` ranks leave a zero-byte file."""
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(WORLD):
        key = (r, buffer, form, only_active)
        if r not in empty and key not in sim.dumps:
            sim.dumps[key] = dump(r, sim.recs[r], buffer, form, only_active)
        (folder / f"nccl_trace_rank_{r}").write_bytes(b"" if r in empty else sim.dumps[key])
    return folder


# -- the scenarios -------------------------------------------------------------------------

#: the two ranks that hang holding the GIL (both on the last pipeline stage)
GIL_HUNG = (9, 14)
ITERATIONS = 28


def _hang_index(rank: int, iteration: int, nth_ep_sync: int = 1) -> int:
    """Index of ``rank``'s nth token-count all_to_all in ``iteration`` (where it hangs)."""
    prog = program(rank, ITERATIONS)
    seen_it = -1
    n = 0
    for i, o in enumerate(prog):
        if o.group.desc == "dp" and o.op == "all_reduce":
            seen_it += 1
        if seen_it == iteration - 1 and o.group.desc == "ep" and o.sync:
            n += 1
            if n == nth_ep_sync:
                return i
    raise ValueError("no such op")


def gil_hang(iteration: int = ITERATIONS - 1) -> Sim:
    return simulated(hung={9: _hang_index(9, iteration, 2), 14: _hang_index(14, iteration, 3)},
                     iterations=ITERATIONS)


def ring_between(sim: Sim, keep: set[int], drop: set[int]) -> int:
    """A ring size at which every ``keep`` rank still holds its newest default-group entry and
    every ``drop`` rank has lost it (ValueError when no such size exists)."""

    def back(r: int) -> int:
        recs = sim.recs[r]
        last = max(i for i, x in enumerate(recs) if x.op.group.desc == "default_pg")
        return len(recs) - last  # entries from it to the newest

    need = max(back(r) for r in keep)
    limit = min(back(r) for r in drop)
    if need >= limit:
        raise ValueError(f"no ring size separates {sorted(keep)} from {sorted(drop)}")
    return need


def moe_gil_hang(folder: Path, form: str = "json") -> Path:
    """The issue's case: ranks 9 and 14 hang holding the GIL and leave empty dumps; six live
    last-stage ranks' rings no longer hold the last default-group all_reduce."""
    sim = gil_hang()
    live = set(range(WORLD)) - set(GIL_HUNG)
    stage1 = {r for r in live if r >= 8}
    buffer = ring_between(sim, live - stage1, stage1)
    return write(folder, sim, buffer, empty=set(GIL_HUNG), form=form)


def moe_gil_hang_partly_wrapped(folder: Path) -> Path:
    """The same hang with a ring large enough that only some ranks wrapped."""
    sim = gil_hang()
    sizes = sorted(len(sim.recs[r]) for r in range(WORLD) if r not in GIL_HUNG)
    return write(folder, sim, (sizes[0] + sizes[-1]) // 2, empty=set(GIL_HUNG))


def moe_idle(folder: Path) -> Path:
    """Rank 9 stops (stuck outside communication, nothing pending) early in the last
    iteration but its dump is written normally."""
    sim = simulated(hung={9: _hang_index(9, ITERATIONS - 1, 1) - 4}, iterations=ITERATIONS)
    return write(folder, sim, 400)


def moe_stale(folder: Path, stopped_s: int = 120) -> Path:
    """The idle rank 9 stopped ``stopped_s`` before its peers' last entries (a long CPU-side
    step while their work did not need it yet; the simulation's peers block within an
    iteration, so its entries are moved back in time): its newest entry is far older."""
    moe_idle(folder)
    f = folder / "nccl_trace_rank_9"
    body = json.loads(f.read_text())
    for e in body["entries"]:
        for k in ("time_created_ns", "time_discovered_started_ns",
                  "time_discovered_completed_ns"):
            if e[k]:
                e[k] -= stopped_s * 1_000_000_000
    f.write_text(json.dumps(body))
    return folder


def moe_short(folder: Path) -> Path:
    """Rank 9 hangs right after start-up: a dump of three entries where peers hold hundreds."""
    sim = simulated(hung={9: 3}, iterations=ITERATIONS)
    return write(folder, sim, 400)


def moe_not_joined(folder: Path, buffer: int = 100_000) -> Path:
    """Rank 6 never calls its expert-parallel group (a config bug); its partner 4 waits there.
    With the default (large) ring nothing wrapped: the windows prove rank 6 never entered."""
    sim = simulated(hung={}, iterations=3, skip={6: frozenset({"ep"})})
    return write(folder, sim, buffer)


def moe_gil_hang_only_active(folder: Path) -> Path:
    """The GIL hang dumped with only active entries: every entry held is pending, record ids
    skip, and the hung ranks' dumps hold pg_status but no entries (their own nothing pending)."""
    sim = gil_hang()
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(WORLD):
        recs = [] if r in GIL_HUNG else sim.recs[r]
        (folder / f"_dump_{r}").write_bytes(dump(r, recs, 2000, "pickle", only_active=True)
                                            if r not in GIL_HUNG else
                                            _no_entries(r, sim.recs[r]))
    return folder


def _no_entries(rank: int, recs: list[Rec]) -> bytes:
    body = pickle.loads(dump(rank, recs, 2000, "pickle"))
    body["entries"] = []
    return pickle.dumps(body)


GPU_ERROR = (12, 15)


def moe_gpu_error(folder: Path) -> Path:
    """Ranks 12 and 15 hit a CUDA error: their peers complete the collectives they share,
    while on 12 and 15 nothing is ever seen completing again; dumped with only active
    entries."""
    broken = {r: _hang_index(r, ITERATIONS - 1, 1) for r in GPU_ERROR}
    sim = simulated(hung={}, iterations=ITERATIONS, broken=broken)
    return write(folder, sim, 2000, form="pickle", only_active=True)


SCENARIOS = {"moe_gil_hang": moe_gil_hang,
             "moe_gil_hang_partly_wrapped": moe_gil_hang_partly_wrapped,
             "moe_idle": moe_idle, "moe_stale": moe_stale, "moe_short": moe_short,
             "moe_not_joined": moe_not_joined,
             "moe_gil_hang_only_active": moe_gil_hang_only_active,
             "moe_gpu_error": moe_gpu_error}


if __name__ == "__main__":  # write every scenario under OUT (for torch's fr_trace, by hand)
    import sys

    out = Path(sys.argv[1])
    for name, make in SCENARIOS.items():
        make(out / name)
        print(out / name)
