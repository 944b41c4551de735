"""How often the FIRST rank a launcher reports with an exit code is the labelled culprit.

    .venv/bin/python benchmarks/eval_exit_code_first.py [--per-case] [--json OUT] [--data DIR]

Why: the rules keep a rank that a launcher reports only with an exit code ("process 2
terminated with exit code 1", "Rank 1 crashed with exit code 1", "[rank: 3] Child process …
terminated with code 1", torchelastic's root cause "exitcode : 1", "task 3: Exited with exit
code 1", mpirun's "the first process to do so … Exit code: 1") a SUSPECT, never a culprit:
a victim — a rank whose collective failed because a peer left — exits with code 1 too. Four
held-out threads had the first such rank be the culprit; this counts it over every labelled
real case of every set except fresh10 (held out for the decision this measure informs), fresh11,
fresh12 and fresh13 (held out whole for the rules from source) and fresh14 (held out whole to
measure reach).

The reports are read by the analyzer's own scanners (:func:`.logs_parser.parse_logs`: the
grammar ids below), and the FIRST is taken by each emitter's semantics:

* ``torch.mp_spawn.process_exited`` — spawn's ``join`` raises once, for the first child it
  found dead (its index; the rules read it as the rank on one node);
* ``composer.launcher.rank_crashed`` — the launcher's poll stops at the first non-zero rank
  (its "Global rank … exited with code" blocks are in rank order and say nothing of first);
* ``lightning.child_terminated`` — the observer's first child found dead (a local rank);
* ``torchelastic.root_cause`` — "Root Cause (first observed failure)" of the failures table;
* ``torchelastic.worker_failed`` — the agent's "failed (exitcode: C) local_rank: N" line,
  printed for the node's first failure (a local rank);
* ``slurm.srun.task_exit`` — srun's first abnormal task line ("Exited with exit code C"); a
  line listing several tasks is a tie and names nobody;
* ``openmpi.first_nonzero_exit`` — mpirun's "the first process to do so … Exit code: C".

DeepSpeed's launcher is not an emitter here: its "[cmd] exits with return code = C" line prints
the command of the LAST process it spawned, not the failed one (deepspeed/launcher/launch.py
``sigkill_handler``; labelled so in anomalygpt#43 and visualglm-6b#38), so it names no rank.

Only an exit CODE counts (C > 0): a death signal (-9, SIGKILL; -6, SIGABRT …) is read by other
rules. A case whose emitter's first report is a signal is not an exit-code case for it.

Scoring is eval_stalls.py's: naming a rank is right when the label's ranks are exactly that
rank; a label with no ranks (undecided) makes any named rank wrong. Precision is right /
(cases), with a Wilson 95 % lower bound; per half (dev / held-out) as calibration.py reads it.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import logs_parser as lp

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests/stalls/data"
#: held out from this measure: the decision it informs is checked on fresh10, and fresh11 to
#: fresh13 are held out whole for the rules written from the emitters' source (rs11 to rs13),
#: and fresh14 is held out whole to measure reach
EXCLUDED = frozenset({"fresh10", "fresh11", "fresh12", "fresh13", "fresh14", "logs"})

#: emitter -> the grammar ids whose events carry its reports
EMITTERS: dict[str, tuple[str, ...]] = {
    "spawn": ("torch.mp_spawn.process_exited", "torch.mp_spawn.process_raised"),
    "composer": ("composer.launcher.rank_crashed",),
    "lightning": ("lightning.child_terminated",),
    "torchelastic root cause": ("torchelastic.root_cause",),
    "torchelastic worker_failed": ("torchelastic.worker_failed",
                                   "torchelastic.worker_failed_one_node"),
    "srun": ("slurm.srun.task_exit",),
    "mpirun": ("openmpi.first_nonzero_exit",),
}
Z95 = 1.96
ROOT_CAUSE = "torchelastic.root_cause"
_ROOT_HEAD = gr.BY_ID[ROOT_CAUSE].regex
#: the table's fields under its head (``ChildFailedError.format_msg``): "rank : N (local_rank:
#: …)", "exitcode : C (pid: …)"; a paste may drop the "[0]:" and "time" lines
_FIELD = re.compile(r"^\s*(?P<key>rank|exitcode)\s*:\s*(?P<v>-?\d{1,7})\b")
#: lines a root-cause entry spans under its head
_ROOT_SPAN = 8


@dataclass(frozen=True)
class _TableRead:
    """A root-cause entry the scanners left unread (a paste without its "[0]:" line), read
    here from the grammar's head and the table's field lines."""

    file: str
    line: int
    rank: int
    text: str
    detail: dict[str, Any]
    pattern: str = ROOT_CAUSE


@dataclass
class Row:
    """One case's first exit-code report of one emitter, and how it compares with the label."""

    set: str
    case: str
    half: str
    emitter: str
    rank: int | None  #: None: a tie (several ranks on the first line)
    exit_code: int
    label: list[int] | None
    outcome: str  #: culprit | other | undecided_label | tie
    line: str


def wilson_low(k: int, n: int, z: float = Z95) -> float | None:
    """The Wilson score interval's lower bound for k successes of n."""
    if n == 0:
        return None
    p = k / n
    den = 1 + z * z / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / den)


def _rank_and_code(emitter: str, ev: Any) -> tuple[int | None, int | None]:
    """The rank (or index / local rank) an event names and its exit code (None: a signal,
    or a spawn child that raised)."""
    d = ev.detail or {}
    if emitter == "spawn":
        return int(d["index"]), (int(d["exit_code"]) if d.get("how") == "exit_code" else None)
    if emitter == "composer":
        return int(d["global_rank"]), int(d["exit_code"])
    if emitter in ("lightning", "torchelastic worker_failed"):
        return int(d["local_rank"]), int(d["exit_code"])
    code = d.get("exit_code")
    return ev.rank, (None if code is None or d.get("signal") else int(code))


def unread_root_causes(files: list[str]) -> list[_TableRead]:
    """Root-cause entries in ``files`` read straight from the table (used only where the
    scanners produced no root-cause event)."""
    out: list[_TableRead] = []
    for f in files:
        lines = Path(f).read_text(errors="replace").splitlines()
        for i, head in enumerate(lines):
            if not _ROOT_HEAD.search(head):
                continue
            got: dict[str, int] = {}
            for body in lines[i + 1:i + 1 + _ROOT_SPAN]:
                if body.startswith("=") or body.strip().startswith("[1]"):
                    break
                if (m := _FIELD.match(body)) is not None:
                    got.setdefault(m.group("key"), int(m.group("v")))
            if "rank" in got and "exitcode" in got:
                code = got["exitcode"]
                out.append(_TableRead(f, i + 1, got["rank"], head.strip(), {
                    "exit_code": code, "signal": "signal" if code < 0 else None}))
    return out


def first_reports(events: list[Any], files: list[str]) -> dict[str, tuple[Any, list[int]]]:
    """Per emitter: its first report (in file, then line order) and every rank on that line."""
    order = {f: i for i, f in enumerate(files)}
    out: dict[str, tuple[Any, list[int]]] = {}
    for emitter, ids in EMITTERS.items():
        mine = sorted((e for e in events if e.pattern in ids and e.detail),
                      key=lambda e: (order.get(e.file, 0), e.line))
        if not mine:
            continue
        lead = mine[0]
        same = [e for e in mine if e.file == lead.file and e.line == lead.line]
        ranks = sorted({r for e in same if (r := _rank_and_code(emitter, e)[0]) is not None})
        out[emitter] = (lead, ranks)
    return out


def measure(data: Path = DATA) -> list[Row]:
    rows: list[Row] = []
    for d in sorted(p for p in data.iterdir() if p.is_dir() and p.name not in EXCLUDED):
        for c in sorted(p for p in d.iterdir() if (p / "expect.json").is_file()):
            spec = json.loads((c / "expect.json").read_text())
            logs = spec["evidence"].get("logs") or []
            if not spec.get("real") or not logs:
                continue
            parsed = lp.parse_logs([str(c / p) for p in logs])
            label = spec["expected"]["ranks"]
            label = None if label is None else sorted(int(r) for r in label)
            events: list[Any] = list(parsed.events)
            if not any(e.pattern == ROOT_CAUSE for e in events):
                events += unread_root_causes(parsed.files)
            for emitter, (ev, ranks) in first_reports(events, parsed.files).items():
                _, code = _rank_and_code(emitter, ev)
                if code is None or code <= 0:
                    continue  # a death signal: not an exit-code report
                rank = ranks[0] if len(ranks) == 1 else None
                outcome = ("tie" if rank is None else "undecided_label" if label is None
                           else "culprit" if label == [rank] else "other")
                rows.append(Row(d.name, str(spec["id"]), str(spec["half"]), emitter, rank,
                                code, label, outcome, ev.text.strip()[:160]))
    return rows


def summary(rows: list[Row]) -> dict[str, dict[str, Any]]:
    """Per emitter (and all): counts, precision of naming the first rank, its Wilson bound;
    the same over the held-out half alone."""
    groups: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        groups[r.emitter].append(r)
        groups["(all)"].append(r)
    out: dict[str, dict[str, Any]] = {}
    for name, rs in groups.items():
        s: dict[str, Any] = {"n": len(rs)}
        for o in ("culprit", "other", "undecided_label", "tie"):
            s[o] = sum(r.outcome == o for r in rs)
        for tag, sub in (("all", rs), ("heldout", [r for r in rs if r.half == "heldout"])):
            named = [r for r in sub if r.outcome != "tie"]
            k = sum(r.outcome == "culprit" for r in named)
            s[tag] = {"named": len(named), "right": k,
                      "precision": k / len(named) if named else None,
                      "wilson_low": wilson_low(k, len(named))}
        out[name] = s
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def render(rows: list[Row], per_case: bool) -> str:
    s = summary(rows)
    lines = ["| emitter | n | first = culprit | first = another rank | label undecided | tie "
             "| precision (Wilson 95 % low) | held-out: right/named, precision (Wilson low) |",
             "|---|---:|---:|---:|---:|---:|---|---|"]
    names = [n for n in EMITTERS if n in s] + ["(all)"]
    for n in names:
        if n not in s:
            continue
        g = s[n]
        a, h = g["all"], g["heldout"]
        lines.append(f"| {n} | {g['n']} | {g['culprit']} | {g['other']} | "
                     f"{g['undecided_label']} | {g['tie']} | {_pct(a['precision'])} "
                     f"({_pct(a['wilson_low'])}) | {h['right']}/{h['named']}, "
                     f"{_pct(h['precision'])} ({_pct(h['wilson_low'])}) |")
    if per_case:
        lines += ["", "| set | case | half | emitter | first rank | code | label | outcome |",
                  "|---|---|---|---|---:|---:|---|---|"]
        for r in sorted(rows, key=lambda r: (r.emitter, r.set, r.case)):
            lines.append(f"| {r.set} | {r.case} | {r.half} | {r.emitter} | "
                         f"{'tie' if r.rank is None else r.rank} | {r.exit_code} | "
                         f"{r.label} | {r.outcome} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-case", action="store_true", help="list every case too")
    ap.add_argument("--json", type=Path, help="write rows and summary as JSON")
    ap.add_argument("--data", type=Path, default=DATA,
                    help="folder of case sets (default: tests/stalls/data; fresh10, fresh11, "
                         "fresh12, fresh13 and fresh14 skipped)")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        print(f"{args.data}: no such folder", file=sys.stderr)
        return 2
    rows = measure(args.data)
    print(render(rows, args.per_case))
    if args.json:
        args.json.write_text(json.dumps({"rows": [asdict(r) for r in rows],
                                         "summary": summary(rows)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
