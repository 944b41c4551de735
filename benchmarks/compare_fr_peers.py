"""stormotel's Flight Recorder verdicts side by side with its peers', on the same dump sets.

    .venv/bin/python benchmarks/compare_fr_peers.py                       # every set, a table
    .venv/bin/python benchmarks/compare_fr_peers.py --only 'gloo/*' --json out/peers.json
    .venv/bin/python benchmarks/compare_fr_peers.py --peer-python /opt/peers/bin/python

Why this exists: "stormotel must be right wherever a peer is" can only be checked by running
the peers. The peers are torch's own analyzer (``python -m torch.distributed.flight_recorder.
fr_trace DIR``) and NVIDIA Resiliency Extension's attribution module (``CollectiveAnalyzer``,
``nvidia_resiliency_ext/attribution/trace_analyzer/fr_attribution.py``). They run in their own
interpreter (``--peer-python``, default ``/work/peers-venv/bin/python``; install steps in
docs/benchmarks.md) through ``fr_peer_drivers.py``; a missing interpreter or package skips that
peer with a message, so the script also runs where only stormotel is installed.

Dump sets, each with the culprit(s) it was made with:

- ``gloo/*``: REAL dumps of 4-rank gloo jobs (``tests/stalls/fr_jobs.py``, pickle form, plus
  the JSON form of the straggler job), and copies of the straggler job with one dump removed
  or emptied (as ``test_fr_real.py`` makes them);
- ``scale/*``: REAL dumps of ``tests/stalls/fr_scale_jobs.py`` (8-rank tp-inside-dp, a rank that
  dies with no dump / an empty dump, an out-of-memory rank);
- ``nccl/*``: the NCCL-shaped point-to-point sets of ``tests/stalls/test_fr_p2p.py``, written in
  the pickle form NCCL writes (fr_trace reads no other) with the ``pg_status`` NCCL writes
  filled in from the entries (the unit tests leave it empty: stormotel does not need it, NVRx
  does), plus the stuck pipeline with its pending ops ``scheduled`` (how NCCL records them when
  ``TORCH_NCCL_ENABLE_TIMING`` is off; NVRx reads only ``scheduled`` entries);
- ``moe/*``: the 16-rank MoE sets of ``tests/stalls/fr_moe.py`` when that module exists;
- ``corpus/*``: every labelled case (``tests/stalls/data/cases``, ``tests/stalls/data/real``)
  whose ``expect.json`` says ``"half": "dev"`` and has ``flight_recorder`` evidence (a
  ``heldout`` case is never opened past its ``half``).

Each peer runs on the folder as it is (``raw``), and, where it cannot read it, also on an
*adapted* copy so its verdict on the same collectives can be compared: the pickle form named
``nccl_trace_rank_<r>`` for JSON dumps (fr_trace unpickles every file; NVRx reads JSON only from
``*.json`` files and then compares stringified ``pg_status`` with ints), and for gloo dumps a
``pg_config`` rebuilt from the entries (members of a group = the ranks holding entries for it):
gloo keys ``pg_config`` by ``""`` with no rank lists, and both peers die on that (``KeyError``).
The table shows both (``raw`` / what was adapted). Every pickle is first decoded with
stormotel's restricted unpickler; a folder it refuses is not given to the peers (they use plain
``pickle.load``).

Scoring (as benchmarks/eval_stalls.py scores stormotel): stormotel's answer is its first root
stall finding (``consequence_of`` null), kind ``undecided`` = undecided, none = "healthy";
fr_trace's is the ranks of the first problem block it prints (missing ranks / culprit ranks),
none = healthy; NVRx's is its ``hanging ranks`` list, empty = healthy. ``right``: exactly the
true culprits (or healthy on a healthy set, or undecided where the set says no single side can
be named); ``wrong``: any other ranks, or a stall reported on a healthy set; ``missed``: healthy
on a stalled set; ``undecided``; ``error``: the tool crashed or refused the folder. Times are
wall seconds of one fresh process per tool and folder (interpreter start and imports included:
what a user waits for). Results are recorded in docs/benchmarks.md and docs/stalls.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

#: the checkout whose stormotel and generators run (``--repo`` points it at another one)
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
#: the interpreter that runs that checkout's stormotel and generators
PYTHON = sys.executable

DEFAULT_PEER_PYTHON = Path("/work/peers-venv/bin/python")
DRIVER = Path(__file__).with_name("fr_peer_drivers.py")
PEERS = ("fr_trace", "nvrx")
TOOLS = ("stormotel", *PEERS)
TIMEOUT_S = 300
#: culprits of the MoE scenarios of tests/stalls/fr_moe.py (its docstrings), used when the
#: module does not carry its own ``CULPRITS``
MOE_CULPRITS: dict[str, list[int]] = {"moe_gil_hang": [9, 14],
                                      "moe_gil_hang_partly_wrapped": [9, 14],
                                      "moe_gil_hang_only_active": [9, 14], "moe_idle": [9],
                                      "moe_stale": [9], "moe_short": [9], "moe_not_joined": [6],
                                      "moe_gpu_error": [12, 15]}


@dataclasses.dataclass(frozen=True)
class Truth:
    """What a dump set was made with: a stall or not, its culprits, whether no side can be named."""

    stall: bool
    ranks: tuple[int, ...] = ()
    undecided_ok: bool = False

    def label(self) -> str:
        if not self.stall:
            return "none (healthy)"
        named = f"[{', '.join(map(str, self.ranks))}]" if self.ranks else "no rank"
        return f"{named} or undecided" if self.undecided_ok else named


@dataclasses.dataclass
class DumpSet:
    name: str
    folder: Path
    truth: Truth
    origin: str
    world_size: int | None = None


@dataclasses.dataclass
class Answer:
    """One tool's answer on one folder, scored."""

    tool: str
    kind: str  #: ranks | healthy | undecided | error | skipped
    ranks: list[int]
    outcome: str  #: right | wrong | missed | undecided | error | skipped
    seconds: float
    detail: str
    raw: dict[str, Any] = dataclasses.field(default_factory=dict)

    def cell(self) -> str:
        if self.kind == "skipped":
            return f"skipped ({self.detail})"
        if self.kind == "error":
            what = self.detail
        elif self.kind == "ranks":
            what = f"[{', '.join(map(str, self.ranks))}]"
        else:
            what = self.kind
        extra = f" {self.raw['extra']}" if self.raw.get("extra") else ""
        return f"{what}{extra} **{self.outcome}**"


def score(truth: Truth, kind: str, ranks: list[int]) -> str:
    if kind in ("error", "skipped"):
        return kind
    if not truth.stall:
        return "right" if kind == "healthy" else "wrong"
    if kind == "healthy":
        return "missed"
    if kind == "undecided":
        return "right" if truth.undecided_ok else "undecided"
    return "right" if truth.ranks and sorted(ranks) == list(truth.ranks) else "wrong"


# -- dump sets -------------------------------------------------------------------------------

def _generate(module: str, out: Path) -> None:
    """Run one of the suite's real-job generators (imports torch once, forks the ranks)."""
    if (out / ".complete").exists():
        return
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    print(f"generating real gloo dumps: python -m {module} {out} ...", file=sys.stderr)
    started = time.monotonic()
    proc = subprocess.run([PYTHON, "-m", module, str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"{module} failed: {proc.stderr.strip()[-500:]}")
    (out / ".complete").write_text("")
    print(f"  done in {time.monotonic() - started:.0f} s", file=sys.stderr)


def _copy_without(src: Path, dst: Path, drop: str | None = None,
                  empty: str | None = None) -> Path:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    if drop:
        (dst / drop).unlink()
    if empty:
        (dst / empty).write_bytes(b"")
    return dst


#: a dump set's name and how to make it (called only for the sets chosen by ``--only``)
Maker = tuple[str, Callable[[], DumpSet]]
GLOO_ORIGIN = "real 4-rank gloo job, tests/stalls/fr_jobs.py"
SCALE_CULPRIT = {"tp_dp_stall": 5, "dies_no_dump": 1, "dies_empty_dump": 1, "oom": 2}


def _gloo_job(work: Path, name: str, scenario: str, truth: Truth, form: str = "pickle",
              drop: str | None = None, empty: str | None = None, how: str = "") -> DumpSet:
    _generate("tests.stalls.fr_jobs", work / "gloo")
    folder = work / "gloo" / scenario / form
    if drop or empty:
        folder = _copy_without(folder, work / "derived" / name, drop, empty)
    return DumpSet(f"gloo/{name}", folder, truth, GLOO_ORIGIN + how)


def _scale_job(work: Path, scenario: str) -> DumpSet:
    _generate("tests.stalls.fr_scale_jobs", work / "scale")
    return DumpSet(f"scale/{scenario}", work / "scale" / scenario / "dumps",
                   Truth(True, (SCALE_CULPRIT[scenario],)),
                   "real gloo job, tests/stalls/fr_scale_jobs.py")


def gloo_sets(work: Path) -> Iterator[Maker]:
    from tests.stalls import fr_jobs, fr_scale_jobs

    for scenario, bad in fr_jobs.SCENARIOS.items():
        truth = Truth(stall=bad is not None, ranks=() if bad is None else (bad,))
        yield f"gloo/{scenario}", partial(_gloo_job, work, scenario, scenario, truth)
    straggler = Truth(True, (2,))
    yield "gloo/straggler-json", partial(_gloo_job, work, "straggler-json", "straggler",
                                         straggler, "json", how=" (JSON form)")
    variants = {"straggler-no-dump-1": ("nccl_trace_rank_1", None, "rank 1's dump removed"),
                "straggler-no-dump-2": ("nccl_trace_rank_2", None, "the straggler's dump "
                                        "removed"),
                "straggler-empty-2": (None, "nccl_trace_rank_2", "the straggler's dump "
                                      "emptied (stuck holding the GIL)")}
    for name, (drop, empty, how) in variants.items():
        yield f"gloo/{name}", partial(_gloo_job, work, name, "straggler", straggler,
                                      drop=drop, empty=empty, how=f", straggler job, {how}")
    for scenario in fr_scale_jobs.SCENARIOS:
        yield f"scale/{scenario}", partial(_scale_job, work, scenario)


def _nccl_pickle(folder: Path, per_rank: dict[int, list[dict[str, Any]]],
                 pg_config: dict[str, Any] | None = None, untimed: bool = False) -> Path:
    """The unit tests' NCCL-shaped entries as NCCL writes them: pickle, ``_dump_<rank>``,
    ``pg_status`` per pg_id from the entries (collective seq ids; p2p ops are not counted)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for rank, entries in per_rank.items():
        entries = [dict(e, process_group=tuple(e["process_group"])) for e in entries]
        if untimed:  # TORCH_NCCL_ENABLE_TIMING off: a pending op stays "scheduled"
            for e in entries:
                if e["state"] == "started":
                    e["state"], e["time_discovered_started_ns"] = "scheduled", None
        status: dict[str, dict[str, int]] = {}
        for e in entries:
            st = status.setdefault(str(e["pg_id"]), {"last_enqueued_collective": -1,
                                                     "last_started_collective": -1,
                                                     "last_completed_collective": -1})
            if not e.get("is_p2p"):
                seq = int(e["collective_seq_id"])
                st["last_enqueued_collective"] = max(st["last_enqueued_collective"], seq)
                if e["state"] == "completed":
                    st["last_completed_collective"] = max(st["last_completed_collective"], seq)
        cfg = pg_config or {"0": {"name": "0", "desc": "default_pg",
                                  "ranks": json.dumps(sorted(per_rank))}}
        dump = {"version": "2.10", "pg_config": cfg, "pg_status": status, "entries": entries}
        (folder / f"_dump_{rank}").write_bytes(pickle.dumps(dump))
    return folder


def _nccl_set(work: Path, name: str, entries: Callable[[], dict[int, list[dict[str, Any]]]],
              truth: Truth, how: str, pg_config: dict[str, Any] | None = None,
              untimed: bool = False) -> DumpSet:
    folder = _nccl_pickle(work / "nccl" / name, entries(), pg_config, untimed)
    return DumpSet(f"nccl/{name}", folder, truth,
                   f"NCCL-shaped, tests/stalls/test_fr_p2p.py: {how}")


def nccl_sets(work: Path) -> Iterator[Maker]:
    from tests.stalls.test_fr_p2p import p2p, pipeline

    pp = ("7", "pp")
    cfg = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"},
           "7": {"name": "7", "desc": "pp", "ranks": "[1, 5]"}}
    done = {**p2p(0, "send", 0, 1, True, 0), "is_p2p": False, "collective_seq_id": 1,
            "profiling_name": "nccl:all_reduce"}
    sub: dict[int, list[dict[str, Any]]] = {r: [done] for r in range(8)}
    sub[1] = [done, p2p(1, "send", 0, 1, False, 0, pp)]
    stuck = Truth(True, (2,))
    yield "nccl/pipeline-stuck-2", partial(
        _nccl_set, work, "pipeline-stuck-2", partial(pipeline, stuck=2), stuck,
        "4 pipeline stages, stage 2 never posts its recv")
    yield "nccl/pipeline-stuck-2-ring3", partial(
        _nccl_set, work, "pipeline-stuck-2-ring3", partial(pipeline, stuck=2, micro=6, ring=3),
        stuck, "the same, ring buffers of 3 entries")
    yield "nccl/pipeline-stuck-2-untimed", partial(
        _nccl_set, work, "pipeline-stuck-2-untimed", partial(pipeline, stuck=2), stuck,
        "the same, pending ops 'scheduled' (timing off)", untimed=True)
    yield "nccl/pipeline-healthy", partial(
        _nccl_set, work, "pipeline-healthy", partial(pipeline, stuck=None), Truth(False),
        "4 pipeline stages, no hang")
    yield "nccl/send-send-deadlock", partial(
        _nccl_set, work, "send-send-deadlock",
        lambda: {0: [p2p(0, "send", 0, 1, False, 0)], 1: [p2p(0, "send", 1, 0, False, 0)]},
        Truth(True, (0, 1), undecided_ok=True), "ranks 0 and 1 both send first")
    yield "nccl/pp-subgroup-not-joined", partial(
        _nccl_set, work, "pp-subgroup-not-joined", lambda: sub, Truth(True, (5,)),
        "8 ranks; rank 5 never posts its recv in pp group [1, 5]", cfg)


def _moe_set(work: Path, name: str, make: Callable[[Path], Path], culprits: list[int]
             ) -> DumpSet:
    return DumpSet(f"moe/{name}", make(work / "moe" / name), Truth(True, tuple(sorted(culprits))),
                   "NCCL-shaped 16-rank MoE job, tests/stalls/fr_moe.py", world_size=16)


def moe_sets(work: Path) -> Iterator[Maker]:
    try:
        from tests.stalls import fr_moe  # type: ignore[attr-defined, unused-ignore]
    except ImportError:
        return
    culprits: dict[str, list[int]] = getattr(fr_moe, "CULPRITS", MOE_CULPRITS)
    for name, make in fr_moe.SCENARIOS.items():
        if name not in culprits:
            print(f"note: moe/{name}: culprits unknown to this script, skipped",
                  file=sys.stderr)
            continue
        yield f"moe/{name}", partial(_moe_set, work, name, make, culprits[name])


def nvrx_trace_sets(root: Path | None) -> Iterator[Maker]:
    """NVIDIA Resiliency Extension's own test traces (real 16-rank NCCL dumps of a Megatron MoE
    job with injected faults; ``tests/attribution/unit/fr_traces`` of its source, not in its
    wheel): each folder's ``fault_injection.log`` names the culprits ("Fault ranks: [12, 14]")."""
    if root is None:
        return
    for log in sorted(root.glob("*/fault_injection.log")):
        m = re.search(r"Fault ranks: \[([\d, ]*)\]", log.read_text(errors="replace"))
        if not m:
            continue
        ranks = tuple(sorted(int(x) for x in m.group(1).split(",") if x.strip()))
        name = f"nvrx/{log.parent.name}"
        yield name, partial(DumpSet, name, log.parent, Truth(True, ranks),
                            "real NCCL dumps with injected faults, NVIDIA resiliency-ext "
                            "tests/attribution/unit/fr_traces")


def corpus_sets(dirs: list[Path]) -> Iterator[Maker]:
    for root in dirs:
        for spec_path in sorted(root.glob("*/expect.json")):
            spec = json.loads(spec_path.read_text())
            if spec.get("half") != "dev":
                continue  # held-out cases are never opened past their half
            fr = (spec.get("evidence") or {}).get("flight_recorder")
            if not fr:
                continue
            exp = spec["expected"]
            ranks = exp.get("ranks")
            truth = Truth(True, tuple(sorted(int(r) for r in ranks or ())),
                          undecided_ok=ranks is None or not exp.get("evidence_names_them", True))
            ws = spec.get("world_size")
            yield f"corpus/{spec['id']}", partial(
                DumpSet, f"corpus/{spec['id']}", spec_path.parent / fr, truth,
                f"corpus case ({spec.get('source')})", int(ws) if ws else None)


# -- pg_config rebuilt for the peers, safety check --------------------------------------------

def _dumps(folder: Path) -> dict[Path, Any]:
    """Every non-empty dump decoded with stormotel's restricted unpickler (JSON as JSON);
    a pickle it refuses raises DumpError, and then no peer is given the folder."""
    from stormotel.analyzers.stalls.fr_loader import rank_from_name
    from stormotel.analyzers.stalls.safe_unpickle import loads_plain

    out: dict[Path, Any] = {}
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        if rank_from_name(path.name) is None:
            continue  # not a dump (a log beside them)
        data = path.read_bytes()
        if not data.strip():
            continue
        out[path] = loads_plain(data) if data[:1] == b"\x80" else json.loads(data)
    return out


def needs_rebuilt_pg_config(dumps: dict[Path, Any]) -> bool:
    """gloo's shape: a group named in the entries has no rank list in pg_config."""
    for d in dumps.values():
        if not isinstance(d, dict):
            return False
        cfg = d.get("pg_config") or {}
        for e in d.get("entries") or []:
            name = str(e["process_group"][0])
            if name not in cfg or cfg[name].get("ranks") in (None, "", "[]"):
                return True
    return False


def _as_pickled(d: dict[str, Any]) -> dict[str, Any]:
    """A dump read from the JSON form, as the pickle form holds it: ints in ``pg_status``,
    ``None`` for unset times (JSON writes 0), tuples for ``process_group``, ``entries`` present."""
    d = dict(d)
    d["pg_status"] = {k: {f: int(v) for f, v in st.items()}
                      for k, st in (d.get("pg_status") or {}).items()}
    d["entries"] = [dict(e, process_group=tuple(e["process_group"]), **{
        t: e.get(t) or None for t in ("time_discovered_started_ns",
                                      "time_discovered_completed_ns")})
        for e in d.get("entries") or []]
    return d


def adapt_for_peers(src: Path, dst: Path, dumps: dict[Path, Any], *, to_pickle: bool,
                    rebuild: bool) -> Path:
    """A copy the peers can read: the pickle form named ``nccl_trace_rank_<r>`` (fr_trace reads
    nothing else) and, for gloo, a pg_config naming every group with its members (the ranks
    holding entries for it; default_pg: every rank). Empty dumps stay empty."""
    from stormotel.analyzers.stalls.fr_loader import rank_from_name

    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    ranks = {p: r for p in src.iterdir()
             if p.is_file() and (r := rank_from_name(p.name)) is not None}
    world = max(ranks.values(), default=-1) + 1
    members: dict[tuple[str, str], set[int]] = {}
    for p, d in dumps.items():
        for e in d.get("entries") or []:
            members.setdefault((str(e["process_group"][0]), str(e["process_group"][1])),
                               set()).add(ranks[p])
    for p, rank in ranks.items():
        name = f"nccl_trace_rank_{rank}" if to_pickle else p.name
        if p not in dumps:
            shutil.copy(p, dst / name)
            continue
        d = dict(dumps[p])
        if to_pickle and p.read_bytes()[:1] != b"\x80":
            d = _as_pickled(d)
        if rebuild:
            d["pg_config"] = {gname: {"name": gname, "desc": desc, "ranks": json.dumps(
                sorted(range(world) if desc == "default_pg" else held))}
                for (gname, desc), held in members.items() if rank in held}
        (dst / name).write_bytes(pickle.dumps(d))
    return dst


# -- the tools -------------------------------------------------------------------------------

def run_stormotel(ds: DumpSet) -> Answer:
    argv = [PYTHON, "-m", "stormotel", "analyze", "--flight-recorder", str(ds.folder),
            "--format", "json", "--quiet"]
    if ds.world_size:
        argv += ["--world-size", str(ds.world_size)]
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    took = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1][:160]
        return Answer("stormotel", "error", [], "error", took, f"exit {proc.returncode}: {last}",
                      {"stderr": proc.stderr[-2000:]})
    report = json.loads(proc.stdout)
    findings = report.get("stall_findings") or []
    roots = [f for f in findings if f.get("consequence_of") is None]
    ranks: list[int] = []
    raw: dict[str, Any] = {"exit": proc.returncode, "findings": [
        {k: f.get(k) for k in ("kind", "ranks", "confidence", "process_group", "seq_id",
                               "consequence_of")} | {"category": (f.get("evidence") or {})
                                                     .get("category")}
        for f in findings]}
    if not roots:
        kind, ranks = "healthy", []
    elif roots[0]["kind"] == "undecided":
        kind, ranks = "undecided", []
        raw["extra"] = f"(suspects {roots[0].get('evidence', {}).get('suspects', [])})"
    else:
        kind, ranks = "ranks", sorted(roots[0]["ranks"])
        raw["extra"] = f"{roots[0]['kind']} {roots[0].get('confidence')}"
    return Answer("stormotel", kind, ranks, score(ds.truth, kind, ranks), took,
                  f"{kind} {ranks}", raw)


def run_peer(tool: str, folder: Path, truth: Truth, peer_python: Path) -> Answer:
    started = time.perf_counter()
    proc = subprocess.run([str(peer_python), str(DRIVER), tool, str(folder)], cwd=ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    took = time.perf_counter() - started
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:160]
        return Answer(tool, "error", [], "error", took, f"driver failed: {tail}")
    out = json.loads(lines[-1])
    if out["status"] == "unavailable":
        return Answer(tool, "skipped", [], "skipped", took, f"not installed: {out['error']}",
                      out)
    if out["status"] == "crash":
        return Answer(tool, "error", [], "error", took, f"crash: {out['error'][:80]}", out)
    kind = "ranks" if out["ranks"] else "healthy"
    if len(out["blocks"]) > 1:
        out["extra"] = f"(+{len(out['blocks']) - 1} more: " + "; ".join(
            f"{b['group']} {b['ranks']}" for b in out["blocks"][1:4]) + ")"
    if any("allow-incomplete" in n for n in out["notes"]):
        out["extra"] = (out.get("extra", "") + " (after refusing: missing dumps)").strip()
    return Answer(tool, kind, out["ranks"], score(truth, kind, out["ranks"]), took,
                  f"{kind} {out['ranks']}", out)


@dataclasses.dataclass
class Row:
    ds: DumpSet
    answers: dict[str, Answer]  #: stormotel, fr_trace, nvrx, fr_trace+adapted, nvrx+adapted
    notes: list[str]
    adapted: list[str] = dataclasses.field(default_factory=list)  #: what the peers' copy changed


def run_set(ds: DumpSet, peer_python: Path | None, work: Path) -> Row:
    answers = {"stormotel": run_stormotel(ds)}
    notes: list[str] = []
    if peer_python is None:
        return Row(ds, answers, notes)
    try:
        dumps = _dumps(ds.folder)
    except Exception as exc:  # a pickle the restricted unpickler refuses: not for the peers
        notes.append(f"peers not run: {type(exc).__name__}: {exc}")
        return Row(ds, answers, notes)
    for tool in PEERS:
        answers[tool] = run_peer(tool, ds.folder, ds.truth, peer_python)
    to_pickle = any(p.read_bytes()[:1] != b"\x80" for p in dumps)
    rebuild = needs_rebuilt_pg_config(dumps)
    adapted = [what for what, on in (("pickle form", to_pickle), ("pg_config rebuilt", rebuild))
               if on]
    if adapted:
        fixed = adapt_for_peers(ds.folder, work / "adapted" / ds.name, dumps,
                                to_pickle=to_pickle, rebuild=rebuild)
        for tool in PEERS:
            answers[f"{tool}+adapted"] = run_peer(tool, fixed, ds.truth, peer_python)
    return Row(ds, answers, notes, adapted)


# -- output ----------------------------------------------------------------------------------

def _peer_cell(row: Row, tool: str) -> tuple[str, str]:
    a = row.answers.get(tool)
    if a is None:
        return ("not run" if row.notes else "skipped (no peer interpreter)"), ""
    fixed = row.answers.get(f"{tool}+adapted")
    if fixed is None:
        return a.cell(), f"{a.seconds:.1f}"
    return (f"raw: {a.cell()}<br>{' + '.join(row.adapted)}: {fixed.cell()}",
            f"{a.seconds:.1f} / {fixed.seconds:.1f}")


def table(rows: list[Row]) -> str:
    out = ["| dump set | true culprit(s) | stormotel | s | fr_trace | s | NVRx | s |",
           "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        s = row.answers["stormotel"]
        fr, fr_s = _peer_cell(row, "fr_trace")
        nv, nv_s = _peer_cell(row, "nvrx")
        out.append(f"| {row.ds.name} | {row.ds.truth.label()} | {s.cell()} | "
                   f"{s.seconds:.1f} | {fr} | {fr_s} | {nv} | {nv_s} |")
    return "\n".join(out)


def tallies(rows: list[Row]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        for tool, a in row.answers.items():
            counts = out.setdefault(tool, {})
            counts[a.outcome] = counts.get(a.outcome, 0) + 1
    return out


def disagreements(rows: list[Row]) -> list[str]:
    """Every set where a peer's answer (raw or on rebuilt pg_config) differs from stormotel's,
    the ones where the peer is right and stormotel is not first."""
    lines: list[tuple[int, str]] = []
    for row in rows:
        s = row.answers["stormotel"]
        for tool, a in row.answers.items():
            if tool == "stormotel" or a.kind in ("error", "skipped"):
                continue
            if (a.kind, a.ranks) == (s.kind, s.ranks):
                continue
            worse = a.outcome == "right" and s.outcome != "right"
            lines.append((0 if worse else 1, f"{'PEER RIGHT, STORMOTEL NOT: ' if worse else ''}"
                          f"{row.ds.name}: {tool} {a.kind} {a.ranks} ({a.outcome}) vs "
                          f"stormotel {s.kind} {s.ranks} ({s.outcome})"))
    return [text for _, text in sorted(lines, key=lambda x: x[0])]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="run only the sets whose name matches (glob, e.g. 'gloo/*'; repeatable)")
    ap.add_argument("--json", type=Path, metavar="OUT", help="write every answer as JSON")
    ap.add_argument("--peer-python", type=Path, default=DEFAULT_PEER_PYTHON,
                    help=f"the peers' interpreter (default {DEFAULT_PEER_PYTHON})")
    ap.add_argument("--work", type=Path,
                    help="keep generated dumps here and reuse them (default: a temp folder)")
    ap.add_argument("--corpus", type=Path, action="append",
                    help="labelled case folders (default: tests/stalls/data/cases and real)")
    ap.add_argument("--nvrx-traces", type=Path, metavar="DIR",
                    help="NVIDIA resiliency-ext's tests/attribution/unit/fr_traces (real NCCL "
                         "dumps, culprits in each fault_injection.log)")
    ap.add_argument("--repo", type=Path, metavar="DIR",
                    help="run another stormotel checkout (its analyzer from its own .venv, its "
                         "generators and corpus), e.g. a branch before merging")
    ap.add_argument("--list", action="store_true", help="list the dump sets and exit")
    args = ap.parse_args(argv)
    if args.repo:
        global ROOT, PYTHON
        ROOT = args.repo.resolve()
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # read another checkout, never write to it
        sys.dont_write_bytecode = True
        venv = ROOT / ".venv" / "bin" / "python"
        PYTHON = str(venv) if venv.exists() else PYTHON
        # an editable install maps stormotel.analyzers to ITS checkout: make sure the analyzer
        # that runs is the one asked for (an export needs stormotel/analyzers -> ../analyzers)
        where = subprocess.run([PYTHON, "-c", "import stormotel.analyzers.stalls as m; "
                                "print(m.__file__)"], cwd=ROOT, capture_output=True, text=True)
        if not Path(where.stdout.strip() or "/").resolve().is_relative_to(ROOT):
            print(f"--repo {ROOT}: {PYTHON} imports the analyzer from "
                  f"{where.stdout.strip() or where.stderr.strip()[-200:]}, not from that "
                  "checkout (give it a .venv, or link stormotel/analyzers -> ../analyzers and "
                  "stormotel/dashboards -> ../dashboards in an export)", file=sys.stderr)
            return 2
        sys.path.insert(0, str(ROOT))

    peer_python: Path | None = args.peer_python
    if not args.peer_python.exists():
        print(f"peer interpreter {args.peer_python} not found: fr_trace and NVRx are skipped "
              "(install steps: docs/benchmarks.md, 'Flight Recorder analyzers side by side')",
              file=sys.stderr)
        peer_python = None
    with tempfile.TemporaryDirectory(prefix="fr_peers_") as tmp:
        work = (args.work or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        corpus = args.corpus or [ROOT / "tests/stalls/data/cases", ROOT / "tests/stalls/data/real"]
        makers = [*gloo_sets(work), *nccl_sets(work), *moe_sets(work),
                  *nvrx_trace_sets(args.nvrx_traces), *corpus_sets(corpus)]
        chosen = [(n, m) for n, m in makers
                  if not args.only or any(fnmatch.fnmatch(n, p) for p in args.only)]
        if args.list or not chosen:
            for name, _ in makers:
                print(name)
            return 0 if chosen or args.list else 2
        rows = []
        for name, make in chosen:
            print(f"{name} ...", file=sys.stderr, flush=True)
            rows.append(run_set(make(), peer_python, work))
        print(table(rows))
        print()
        for tool, counts in tallies(rows).items():
            print(f"{tool}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        diffs = disagreements(rows)
        if diffs:
            print("\nanswers that differ from stormotel's:")
            for line in diffs:
                print(f"- {line}")
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({
                "peer_python": str(peer_python) if peer_python else None,
                "sets": [{"name": r.ds.name, "origin": r.ds.origin,
                          "truth": dataclasses.asdict(r.ds.truth), "notes": r.notes,
                          "answers": {t: {k: v for k, v in dataclasses.asdict(a).items()}
                                      for t, a in r.answers.items()}} for r in rows],
                "tallies": tallies(rows), "disagreements": diffs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
