"""Score the stuck-job verdict on real gloo jobs newcomers write (helper uh, round two of
"hangs as users make them"): ``tests/stalls/newcomer_hang_jobs.py``, labelled before any ran.

    nice -n 19 .venv/bin/python benchmarks/eval_newcomer_hangs.py            # run, analyze
    nice -n 19 .venv/bin/python benchmarks/eval_newcomer_hangs.py --set three  # round three
    nice -n 19 .venv/bin/python benchmarks/eval_newcomer_hangs.py --set four   # round four
    nice -n 19 .venv/bin/python benchmarks/eval_newcomer_hangs.py --set five   # round five
    .venv/bin/python benchmarks/eval_newcomer_hangs.py --reuse DIR            # analyze only
    .venv/bin/python benchmarks/eval_newcomer_hangs.py --jobs busy2 raise3 --json out.json

Runs every job at once (``python -m tests.stalls.newcomer_hang_jobs DIR``; ``--set three``:
round three's held-out jobs, ``tests/stalls/newcomer_hang_jobs3.py``, helper nh; ``--set four``:
round four's, every hang rule held out, each rank a process of its own under torchrun,
``torch.multiprocessing.spawn``, ``python`` per rank or srun, helper nh4; ``--set five``:
round five's, a second held-out set of new shapes (async works, object collectives, group
order, swallowed exceptions, node-local log prefixes), helper nh5; ``--reuse``
reads a folder an earlier run left), then analyzes each job's archive through the installed CLI the
way a user would (``stormotel analyze ARCHIVE --format json``), and again with the ranks' logs
(``--logs DIR/<job>/logs``: their stdout/stderr, torchrun's ``--log-dir``). The answer is the
first root stall finding (``consequence_of`` null); none, or kind ``undecided``, is undecided.

Scored against the job's label (:data:`~tests.stalls.newcomer_hang_jobs.JOBS`):

- right: it names exactly the labelled culprit; on a healthy job, exit 0 and no stall finding;
  on a job with no single culprit, undecided;
- undecided: no rank named (``undecided_ok`` or not — it is never the worst answer);
- wrong: it names another rank set; *confident wrong* when that answer is ``medium``/``high``;
- exit-0: exit 0 on a hung or failing job (reported healthy), the worst; on a healthy job, any
  exit but 0 is wrong;
- label-wrong: the job labelled hung/failing really ended well (every rank exit 0 by itself,
  ``exits.json``), or its round's ``ERRATA`` says what it did instead (a label the first
  analysis showed wrong, kept as committed): the label was wrong, not the verdict; shown,
  never scored either way.

Exit status: 0; 1 when any hung/failing job exits 0 or any answer is confidently wrong.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.stalls import (  # noqa: E402
    newcomer_hang_jobs3,
    newcomer_hang_jobs4,
    newcomer_hang_jobs5,
)
from tests.stalls.helpers import run_job_group  # noqa: E402
from tests.stalls.newcomer_hang_jobs import JOBS, Job  # noqa: E402

CONFIDENT = ("medium", "high")
#: each round's jobs: the generator module and its labels
SETS: dict[str, tuple[str, dict[str, Job]]] = {
    "two": ("tests.stalls.newcomer_hang_jobs", JOBS),
    "three": ("tests.stalls.newcomer_hang_jobs3", newcomer_hang_jobs3.JOBS),
    "four": ("tests.stalls.newcomer_hang_jobs4", newcomer_hang_jobs4.JOBS),
    "five": ("tests.stalls.newcomer_hang_jobs5", newcomer_hang_jobs5.JOBS)}


def run_jobs(out: Path, names: list[str], timeout_s: float = 900,
             module: str = SETS["two"][0]) -> float:
    """The jobs, all at once, in one child interpreter (its ranks forked from one torch
    import); their wall time. Also the test suite's fixture (tests/stalls/test_newcomer_hangs.py
    loads this script), so both run the jobs the same way. RuntimeError when they fail. In a
    session of their own: past the timeout every rank goes with the runner."""
    started = time.monotonic()
    proc = run_job_group(module, out, timeout_s, *names)
    if proc.returncode != 0:
        raise RuntimeError(f"the jobs failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.monotonic() - started


def analyze(root: Path, name: str, with_logs: bool) -> tuple[int, dict[str, Any]]:
    """``stormotel analyze`` on the job's archive (and its logs): exit code and JSON report."""
    out = root / f"{name}{'-logs' if with_logs else ''}.json"
    cmd = [sys.executable, "-m", "stormotel", "analyze", str(root / name / "archive"),
           "--format", "json", "-o", str(out), "-q"]
    logs = root / name / "logs"
    if with_logs:
        cmd += ["--logs", str(logs)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    try:
        report = json.loads(out.read_text())
    except (OSError, ValueError):
        report = {"error": proc.stderr[-500:]}
    return proc.returncode, report


def answer(report: dict[str, Any]) -> dict[str, Any] | None:
    roots = [f for f in report.get("stall_findings") or [] if f.get("consequence_of") is None]
    return roots[0] if roots else None


def score(job: Job, code: int, report: dict[str, Any], ended_well: bool,
          erratum: str | None = None) -> dict[str, Any]:
    """One row: the verdict, the named ranks, the confidence and the score (module docstring)."""
    lead = answer(report)
    named = sorted(lead["ranks"]) if lead and lead.get("kind") != "undecided" else []
    conf = lead.get("confidence") if lead else None
    kind = lead.get("kind") if lead else None
    if job.label == "healthy":
        result = "right" if code == 0 and lead is None else "wrong"
    elif ended_well or erratum:
        result = "label-wrong"
    elif code == 0:
        result = "exit-0"
    elif not named:
        result = "right" if job.culprit is None else "undecided"
    elif job.culprit is not None and named == sorted(job.culprit):
        result = "right"
    else:
        result = "confident-wrong" if conf in CONFIDENT else "wrong"
    return {"exit": code, "kind": kind, "ranks": named, "confidence": conf,
            "pattern": (lead or {}).get("evidence", {}).get("pattern"), "result": result}


def observed(root: Path, name: str) -> tuple[str, bool]:
    """What the job really did: each rank's exit code as the launcher saw it, and whether every
    rank ended well by itself (exit 0, no SIGTERM from the launcher)."""
    try:
        exits = json.loads((root / name / "exits.json").read_text())
    except (OSError, ValueError):
        return "?", False
    ended_well = bool(exits) and all(c == 0 for c in exits.values()) and \
        not (root / name / "sigterm_ns").exists()
    return ",".join(f"{r}:{c}" for r, c in sorted(exits.items())), ended_well


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=sorted(SETS), default="two",
                    help="which round's jobs (default: two)")
    ap.add_argument("--jobs", nargs="+", help="some of the set's jobs (default: all)")
    ap.add_argument("--reuse", type=Path, help="analyze the jobs an earlier run left here")
    ap.add_argument("--json", type=Path, help="write the rows here")
    args = ap.parse_args(argv)
    module, jobs = SETS[args.set]
    errata: dict[str, str] = getattr(importlib.import_module(module), "ERRATA", {})
    unknown = sorted(set(args.jobs or ()) - set(jobs))
    if unknown:
        ap.error(f"not jobs of set {args.set}: {', '.join(unknown)}")
    args.jobs = args.jobs or list(jobs)
    if args.reuse:
        root, ran_s = args.reuse, None
    else:
        root = Path(tempfile.mkdtemp(prefix="newcomer-hangs-"))
        try:
            ran_s = run_jobs(root, args.jobs, module=module)
        except RuntimeError as e:
            sys.exit(str(e))
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    for name in args.jobs:
        job = jobs[name]
        exits, ended_well = observed(root, name)
        row: dict[str, Any] = {"job": name, "label": job.label,
                               "culprit": "-" if job.label == "healthy" else
                               "none" if job.culprit is None else
                               ",".join(map(str, job.culprit)),
                               "exits": exits}
        for with_logs in (False, True):
            code, report = analyze(root, name, with_logs)
            row["logs" if with_logs else "archive"] = score(job, code, report, ended_well,
                                                            errata.get(name))
        rows.append(row)
    analyze_s = time.monotonic() - started
    print(f"{'job':16} {'label':13} {'culprit':7} {'rank exits':18} | archive alone"
          f"{'':34} | archive + logs")
    for row in rows:
        cols = [f"{row['job']:16} {row['label']:13} {row['culprit']:7} {row['exits']:18}"]
        for src in ("archive", "logs"):
            a = row[src]
            cols.append(f"{a['result']:15} exit {a['exit']} {a['kind'] or '-':16} "
                        f"{','.join(map(str, a['ranks'])) or '-':5} {a['confidence'] or '-':6}")
        print(" | ".join(cols))
    bad = 0
    for src in ("archive", "logs"):
        counts: dict[str, int] = {}
        for row in rows:
            counts[row[src]["result"]] = counts.get(row[src]["result"], 0) + 1
        bad += counts.get("exit-0", 0) + counts.get("confident-wrong", 0)
        print(f"{src}: " + ", ".join(f"{k} {counts.get(k, 0)}" for k in
                                     ("right", "undecided", "wrong", "confident-wrong",
                                      "exit-0", "label-wrong")) + f" of {len(rows)}")
    for src in ("archive", "logs"):  # each rule that answered first, and how it scored
        by_rule: dict[str, dict[str, int]] = {}
        for row in rows:
            rule = by_rule.setdefault(row[src]["pattern"] or "(none)", {})
            rule[row[src]["result"]] = rule.get(row[src]["result"], 0) + 1
        print(f"{src} by rule: " + "; ".join(
            f"{p} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
            for p, c in sorted(by_rule.items())))
    print(f"jobs ran in {ran_s:.1f} s; analyzed in {analyze_s:.1f} s ({root})"
          if ran_s is not None else f"analyzed in {analyze_s:.1f} s ({root})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
