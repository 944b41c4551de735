"""Score stormotel's stuck-job verdicts on the labelled real-case corpus.

    .venv/bin/python benchmarks/eval_stalls.py                 # both halves, text tables
    .venv/bin/python benchmarks/eval_stalls.py --half heldout --json out/eval.json

Why this exists: rules written on a handful of cases look right on those cases and guess on
everything else, and a wrong rank at high confidence is the worst thing the tool can print. Each
case (``tests/stalls/data/cases/<id>/`` and the 14 older ``tests/stalls/data/real/<id>/``) holds
verbatim logs/dumps from a public thread and an ``expect.json`` saying which ranks the thread
established as the culprits (format: the corpus section of ``docs/stalls.md``). This script runs
``stormotel analyze --logs ... --flight-recorder ... [--world-size N] --format json`` on each case
the way a user would (the CLI's ``main`` in-process, exit code included; ``--subprocess`` runs the
installed entry point instead) and scores the answer:

- the *answer* is the first root stall finding (``consequence_of`` null) in report order; none,
  or kind ``undecided``, is "undecided";
- right: it names exactly ``expected.ranks``, or it is undecided and the evidence cannot name
  them (``evidence_names_them`` false, or no rank-level culprit: ``ranks`` null);
- undecided: undecided otherwise; wrong: it names any other set of ranks.

Also counted: every root finding at high/medium confidence naming a rank outside
``expected.ranks`` (a *confident wrong rank*), exit 0 on a case that shows a stall (*reported
healthy*) and exit 70 (*crashed*). Figures are per half (``dev``: the rules may be tuned on it;
``heldout``: never opened by rule writers) and real cases apart from constructed ones. The
per-pattern table (``evidence["pattern"]`` of the answer) is what the confidence ceilings come
from: ``--write-ceilings`` writes ``analyzers/stalls/ceilings.py`` (the patterns allowed to be
``high``: at least :data:`MIN_MEASURED` rank-naming answers on held-out real cases, precision at
least :data:`HIGH_PRECISION`), which ``analyzers/stalls/calibration.py`` applies.

Exit status: 0, or 1 when any case crashed the analyzer (exit 70), 2 on a malformed corpus.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

#: where the corpus lives: the labelled cases, then the 14 older cases the rules were tuned on.
DEFAULT_CASE_DIRS = (ROOT / "tests/stalls/data/cases", ROOT / "tests/stalls/data/real")
#: the fresh set (``"set": "fresh"`` in expect.json): real cases gathered by searches unlike the
#: corpus's, labelled before the tool ran, never tuned on and never measured for a ceiling;
#: read only with ``--reach`` (or ``--cases``) and always reported apart
FRESH_DIR = ROOT / "tests/stalls/data/fresh"
FRESH = "fresh"
#: a second fresh set (``"set": "fresh2"``), gathered later by other searches again (other message
#: families and projects), split into its own dev/held-out halves; read with ``--reach`` too
FRESH2_DIR = ROOT / "tests/stalls/data/fresh2"
#: a third fresh set (``"set": "fresh3"``): the store-based barrier, the TCPStore/ncclUniqueId
#: exchange and Gloo's own errors (issue 37), its own dev/held-out halves, Gloo held out whole
FRESH3_DIR = ROOT / "tests/stalls/data/fresh3"
#: a fourth fresh set (``"set": "fresh4"``, issue 37 round three): rank 0 busy while the rest
#: wait, Horovod through mpirun's stdio tags, lines pasted through launchers; own dev/held-out
#: halves (Horovod held out whole); read with ``--reach`` too
FRESH4_DIR = ROOT / "tests/stalls/data/fresh4"
#: a fifth fresh set (``"set": "fresh5"``): NCCL transport / proxy / network WARN lines, hangs at
#: checkpoint save and shutdown, inference / RL frameworks (held out whole); own dev/held-out
#: halves; read with ``--reach`` too
FRESH5_DIR = ROOT / "tests/stalls/data/fresh5"
#: a sixth fresh set (``"set": "fresh6"``): cases whose thread establishes WHICH rank was the
#: culprit (one rank's crash seen from the others, one rank stuck outside NCCL, code-path
#: divergence - held out whole); own dev/held-out halves; read with ``--reach`` too
FRESH6_DIR = ROOT / "tests/stalls/data/fresh6"
#: a seventh fresh set (``"set": "fresh7"``): culprit-bearing cases from emitters no earlier set
#: weighted (Slurm task lines, JAX / XLA multi-host, Paddle / Ascend / MindSpore launchers, FSDP
#: stacks; Kubernetes operators held out whole); own dev/held-out halves; read with ``--reach``
FRESH7_DIR = ROOT / "tests/stalls/data/fresh7"
#: an eighth fresh set (``"set": "fresh8"``): Slurm task lines, TPU / XLA heartbeat and
#: coordination messages, Kubernetes operators, device-naming OOMs - held out WHOLE (no dev half):
#: gathered before the rules written from those emitters' source, to measure them; read with
#: ``--reach``
FRESH8_DIR = ROOT / "tests/stalls/data/fresh8"
#: a ninth fresh set (``"set": "fresh9"``): torch.multiprocessing.spawn's parent reports, TensorFlow
#: TPU runtime messages, Ray actor deaths, MPI termination reports, Composer / fairseq / streaming -
#: held out WHOLE: gathered before the rules written from those emitters' source, to measure them
FRESH9_DIR = ROOT / "tests/stalls/data/fresh9"
#: a tenth fresh set (``"set": "fresh10"``): Composer's launcher, Ray deaths named by pid,
#: TensorFlow distributed tasks, Lightning / accelerate launchers, other frameworks - held out
#: WHOLE: gathered before the rules written from those emitters' source, to measure them
FRESH10_DIR = ROOT / "tests/stalls/data/fresh10"
#: an eleventh fresh set (``"set": "fresh11"``): the ``deepspeed`` launcher's own lines, ranks
#: killed by the host's OOM killer, TensorFlow tasks, Ray actors named by class / name, other
#: frameworks (PaddlePaddle's launch controller, Colossal-AI) - held out WHOLE: gathered before
#: the rules written from those emitters' source, to measure them
FRESH11_DIR = ROOT / "tests/stalls/data/fresh11"
#: a twelfth fresh set (``"set": "fresh12"``): Megatron's own NaN checks, Kubernetes pod and
#: operator status lines, PaddlePaddle jobs over several machines, JAX multi-host coordination,
#: other paths (Accelerate gathers, Lightning, fairseq) - held out WHOLE: gathered before the
#: rules written from those emitters' source, to measure them
FRESH12_DIR = ROOT / "tests/stalls/data/fresh12"
#: a thirteenth fresh set (``"set": "fresh13"``): PaddlePaddle launchers whose endpoints are not
#: ready or whose trainer aborts, Kubernetes events and operator lines, Megatron's rerun state
#: machine and NaN checks, Ray Train workers, other paths (PyTorch's MPI backend, torchtitan,
#: Determined) - held out WHOLE: gathered before the rules written from those emitters' source
FRESH13_DIR = ROOT / "tests/stalls/data/fresh13"
#: a fourteenth fresh set (``"set": "fresh14"``), culprit-labelled first: ranks whose own GPU
#: raised an uncorrectable ECC error or an illegal instruction, Horovod's rank-tagged output and
#: stall inspector, one rank that dies, reads slowly or enters a collective alone - held out
#: WHOLE: it measures how often the tool names the culprit on fresh threads
FRESH14_DIR = ROOT / "tests/stalls/data/fresh14"
FRESH_SETS = (FRESH, "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7", "fresh8",
              "fresh9", "fresh10", "fresh11", "fresh12", "fresh13", "fresh14")
#: exit code of an analyzer crash (docs/exit-codes.md).
EXIT_INTERNAL = 70
EXIT_HEALTHY = 0
CONFIDENT = ("high", "medium")
LEVELS = ("high", "medium", "low")
OUTCOMES = ("right", "wrong", "undecided")
NO_PATTERN = "(none)"


def half_of(case_id: str) -> str:
    """The fixed split: the case id's hash decides, before any rule is written."""
    return "dev" if int(hashlib.sha256(case_id.encode()).hexdigest()[:8], 16) % 2 == 0 \
        else "heldout"


@dataclasses.dataclass(frozen=True)
class Case:
    """One labelled case: its folder and its ``expect.json``."""

    path: Path
    spec: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.spec["id"])

    @property
    def half(self) -> str:
        return str(self.spec["half"])

    @property
    def real(self) -> bool:
        return bool(self.spec["real"])

    @property
    def fresh(self) -> bool:
        """A case of the fresh set (``"set": "fresh"``): gathered by other searches, never used
        to write a rule or to measure a ceiling, reported apart."""
        return self.spec.get("set") in FRESH_SETS

    @property
    def expected_ranks(self) -> list[int] | None:
        ranks = self.spec["expected"]["ranks"]
        return None if ranks is None else sorted(int(r) for r in ranks)

    @property
    def expected_kind(self) -> str:
        kinds = self.spec["expected"].get("kinds") or ["(none)"]
        return str(kinds[0])

    def argv(self) -> list[str]:
        """The command line a user would type for this case's evidence."""
        ev = self.spec["evidence"]
        argv = ["analyze", "--format", "json"]
        if ev.get("flight_recorder"):
            argv += ["--flight-recorder", str(self.path / ev["flight_recorder"])]
        if self.spec.get("world_size"):
            argv += ["--world-size", str(int(self.spec["world_size"]))]
        if ev.get("logs"):
            argv += ["--logs", *(str(self.path / p) for p in ev["logs"])]
        return argv


@dataclasses.dataclass
class Result:
    """What the analyzer said about one case and how it scores."""

    case: Case
    exit_code: int
    outcome: str  # right | wrong | undecided
    answer_kind: str | None
    answer_ranks: list[int]
    answer_confidence: str | None
    pattern: str
    confident_wrong: list[dict[str, Any]]
    stderr_tail: str
    #: every root finding: kind, ranks, confidence, the confidence its rule asked for (before
    #: the ceilings) and its pattern — what a different calibration would have said
    roots: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def fresh(self) -> bool:
        return self.case.fresh

    def as_json(self) -> dict[str, Any]:
        return {"id": self.case.id, "project": self.case.spec.get("project"),
                "half": self.case.half, "real": self.case.real,
                "tuned_on": bool(self.case.spec.get("tuned_on")),
                "expected_ranks": self.case.expected_ranks,
                "evidence_names_them": self.case.spec["expected"]["evidence_names_them"],
                "expected_kind": self.case.expected_kind, "exit_code": self.exit_code,
                "outcome": self.outcome, "answer_kind": self.answer_kind,
                "answer_ranks": self.answer_ranks, "answer_confidence": self.answer_confidence,
                "pattern": self.pattern, "confident_wrong": self.confident_wrong,
                "stderr_tail": self.stderr_tail}


def load_cases(dirs: list[Path]) -> list[Case]:
    """Every case folder (one holding ``expect.json``) under ``dirs``, sorted by id."""
    cases = []
    for d in dirs:
        if (d / "expect.json").is_file():
            folders = [d]
        elif d.is_dir():
            folders = sorted(p for p in d.iterdir() if (p / "expect.json").is_file())
        else:
            continue
        for folder in folders:
            cases.append(Case(folder, json.loads((folder / "expect.json").read_text())))
    return sorted(cases, key=lambda c: c.id)


def run_cli(argv: list[str], *, subprocess_mode: bool = False) -> tuple[int, str, str]:
    """``stormotel <argv>`` -> (exit code, stdout, stderr). In-process by default (one import
    for the whole corpus); an exception escaping ``main`` counts as the crash it would be."""
    if subprocess_mode:
        proc = subprocess.run([sys.executable, "-m", "stormotel.cli", *argv],
                              capture_output=True, text=True, timeout=300, check=False)
        return proc.returncode, proc.stdout, proc.stderr
    from stormotel.cli import main

    out, err = io.StringIO(), io.StringIO()
    try:
        code = main(argv, out=out, err=err)  # the run's own streams, no sys.std* swap
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 2
    except Exception as e:  # a crash is what we are counting
        print(f"uncaught {type(e).__name__}: {e}", file=err)
        code = EXIT_INTERNAL
    return int(code), out.getvalue(), err.getvalue()


def root_findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The stall findings that are not a consequence of another, in report order."""
    return [f for f in report.get("stall_findings") or [] if f.get("consequence_of") is None]


def score(case: Case, exit_code: int, stdout: str, stderr: str) -> Result:
    """Score one run by the corpus rule (module docstring)."""
    try:
        report = json.loads(stdout) if stdout.strip() else {}
    except json.JSONDecodeError:
        report = {}
    roots = root_findings(report) if isinstance(report, dict) else []
    answer = roots[0] if roots else None
    expected = case.expected_ranks
    names_them = bool(case.spec["expected"]["evidence_names_them"])
    kind = answer.get("kind") if answer else None
    ranks = sorted(int(r) for r in (answer.get("ranks") or [])) if answer else []
    if answer is None or kind == "undecided" or not ranks:
        outcome = "right" if (expected is None or not names_them) else "undecided"
    else:
        outcome = "right" if ranks == expected else "wrong"
    allowed = set(expected or [])
    confident_wrong = [
        {"kind": f.get("kind"), "confidence": f.get("confidence"),
         "ranks": sorted(set(f.get("ranks") or []) - allowed)}
        for f in roots
        if f.get("confidence") in CONFIDENT and set(f.get("ranks") or []) - allowed]
    pattern = (answer.get("evidence") or {}).get("pattern") if answer else None
    return Result(case, exit_code, outcome, kind, ranks,
                  answer.get("confidence") if answer else None,
                  str(pattern) if pattern else NO_PATTERN, confident_wrong,
                  "\n".join(stderr.strip().splitlines()[-3:]),
                  [_root(f) for f in roots])


def _root(f: dict[str, Any]) -> dict[str, Any]:
    evidence = f.get("evidence") or {}
    capped = evidence.get("confidence_capped") or {}
    return {"kind": f.get("kind"), "ranks": sorted(f.get("ranks") or []),
            "confidence": f.get("confidence"),
            "asked": capped.get("asked") or f.get("confidence"),
            "pattern": evidence.get("pattern") or NO_PATTERN}


def evaluate(cases: list[Case], *, subprocess_mode: bool = False) -> list[Result]:
    """Run and score every case."""
    results = []
    for case in cases:
        code, out, err = run_cli(case.argv(), subprocess_mode=subprocess_mode)
        results.append(score(case, code, out, err))
    return results


def _precision(right: int, wrong: int) -> float | None:
    return None if right + wrong == 0 else right / (right + wrong)


def summarize(results: list[Result]) -> dict[str, Any]:
    """The figures of one group of results (one half, real or constructed)."""
    by_kind: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(OUTCOMES, 0))
    by_level: dict[str, dict[str, int]] = {lv: dict.fromkeys(OUTCOMES, 0) for lv in LEVELS}
    by_pattern: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(OUTCOMES, 0))
    for r in results:
        by_kind[r.case.expected_kind][r.outcome] += 1
        by_pattern[r.pattern][r.outcome] += 1
        if r.answer_ranks and r.answer_confidence in by_level:
            by_level[r.answer_confidence][r.outcome] += 1
    totals = dict.fromkeys(OUTCOMES, 0)
    for r in results:
        totals[r.outcome] += 1
    return {
        "cases": len(results),
        "projects": len({r.case.spec.get("project") for r in results}),
        "totals": totals,
        "by_expected_kind": {k: v for k, v in sorted(by_kind.items())},
        "answer_precision_by_confidence": {
            lv: {"n": v["right"] + v["wrong"], **v,
                 "precision": _precision(v["right"], v["wrong"])}
            for lv, v in by_level.items()},
        "by_pattern": {
            p: {"n": sum(v.values()), **v, "precision": _precision(v["right"], v["wrong"])}
            for p, v in sorted(by_pattern.items())},
        "confident_wrong_ranks": [
            {"id": r.case.id, **w} for r in results for w in r.confident_wrong],
        "reported_healthy": [r.case.id for r in results if r.exit_code == EXIT_HEALTHY],
        "crashed": [r.case.id for r in results if r.exit_code == EXIT_INTERNAL],
        "other_exit": {r.case.id: r.exit_code for r in results
                       if r.exit_code not in (0, 1, EXIT_INTERNAL)},
    }


def groups(results: list[Result], half: str) -> dict[str, dict[str, Any]]:
    """Summaries keyed ``real/dev``, ``real/heldout``, ``constructed/dev`` ... (non-empty only),
    plus ``real/dev (not tuned on)`` when a half holds cases the rules were written on."""
    out = {}
    for origin in ("real", "constructed"):
        for h in ("dev", "heldout"):
            if half not in ("all", h):
                continue
            sel = [r for r in results if r.case.real == (origin == "real") and r.case.half == h
                   and not r.case.fresh]
            if sel:
                out[f"{origin}/{h}"] = summarize(sel)
            # the dev half includes the cases the rules were written on; their figures say
            # little about new logs, so the rest of dev is also shown on its own
            untuned = [r for r in sel if not r.case.spec.get("tuned_on")]
            if untuned and len(untuned) < len(sel):
                out[f"{origin}/{h} (not tuned on)"] = summarize(untuned)
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def render(name: str, s: dict[str, Any]) -> str:
    """One group's figures as text tables."""
    t = s["totals"]
    lines = [f"== {name}: {s['cases']} cases from {s['projects']} projects: "
             f"{t['right']} right, {t['wrong']} wrong, {t['undecided']} undecided", "",
             f"  {'expected kind':<28}{'n':>4}{'right':>7}{'wrong':>7}{'undec':>7}"]
    for k, v in s["by_expected_kind"].items():
        lines.append(f"  {k:<28}{sum(v.values()):>4}{v['right']:>7}{v['wrong']:>7}"
                     f"{v['undecided']:>7}")
    lines += ["", f"  {'answer confidence':<28}{'n':>4}{'right':>7}{'wrong':>7}{'prec':>7}"]
    for lv, v in s["answer_precision_by_confidence"].items():
        lines.append(f"  {lv:<28}{v['n']:>4}{v['right']:>7}{v['wrong']:>7}"
                     f"{_pct(v['precision']):>7}")
    lines += ["", f"  {'answer pattern':<44}{'n':>4}{'right':>7}{'wrong':>7}{'prec':>7}"]
    for p, v in s["by_pattern"].items():
        lines.append(f"  {p:<44}{v['n']:>4}{v['right']:>7}{v['wrong']:>7}"
                     f"{_pct(v['precision']):>7}")
    lines.append("")
    cw = s["confident_wrong_ranks"]
    lines.append(f"  confident wrong ranks (high/medium): {len(cw)}")
    lines += [f"    {w['id']}: {w['kind']} at {w['confidence']} names {w['ranks']}" for w in cw]
    lines.append(f"  reported healthy (exit 0): {', '.join(s['reported_healthy']) or 'none'}")
    lines.append(f"  crashed (exit 70): {', '.join(s['crashed']) or 'none'}")
    if s["other_exit"]:
        lines.append("  other exit codes: " + ", ".join(
            f"{k}={v}" for k, v in s["other_exit"].items()))
    return "\n".join(lines)


def render_markdown(name: str, s: dict[str, Any]) -> str:
    """One group's figures as Markdown (for docs/benchmarks.md)."""
    t = s["totals"]
    out = [f"**{name}**: {s['cases']} cases from {s['projects']} projects — {t['right']} right, "
           f"{t['wrong']} wrong, {t['undecided']} undecided", "",
           "| expected kind | n | right | wrong | undecided |", "|---|---:|---:|---:|---:|"]
    out += [f"| {k} | {sum(v.values())} | {v['right']} | {v['wrong']} | {v['undecided']} |"
            for k, v in s["by_expected_kind"].items()]
    out += ["", "| answer confidence | n | right | wrong | precision |",
            "|---|---:|---:|---:|---:|"]
    out += [f"| {lv} | {v['n']} | {v['right']} | {v['wrong']} | {_pct(v['precision'])} |"
            for lv, v in s["answer_precision_by_confidence"].items()]
    out += ["", "| answer pattern | n | right | wrong | precision |",
            "|---|---:|---:|---:|---:|"]
    out += [f"| `{p}` | {v['n']} | {v['right']} | {v['wrong']} | {_pct(v['precision'])} |"
            for p, v in s["by_pattern"].items()]
    cw = s["confident_wrong_ranks"]
    out += ["", "Confident wrong ranks: " + (", ".join(
        f"`{w['id']}` ({w['kind']} at {w['confidence']} names {w['ranks']})" for w in cw)
        or "none") + ".",
        f"Reported healthy (exit 0): {len(s['reported_healthy'])}. "
        f"Crashed (exit 70): {len(s['crashed'])}."]
    return "\n".join(out)


def render_cases(results: list[Result]) -> str:
    """One line per case, for reading a single run."""
    lines = []
    for r in results:
        got = f"{r.answer_kind or '-'} {r.answer_ranks or ''} {r.answer_confidence or ''}".strip()
        lines.append(f"  {r.outcome:<9} {r.case.half:<7} {r.case.id:<52} "
                     f"expect {r.case.expected_ranks} got {got} (exit {r.exit_code})")
    return "\n".join(lines)


#: rank-naming answers a pattern needs on held-out real cases before it may be called `high`
MIN_MEASURED = 3
#: the precision it needs there
HIGH_PRECISION = 0.95
CEILINGS_MODULE = ROOT / "analyzers/stalls/ceilings.py"


def measured_patterns(results: list[Result]) -> dict[str, dict[str, int]]:
    """Per pattern, its rank-naming answers on the held-out real cases: how many, right, wrong.

    Only answers that name ranks count (an undecided answer is right or not by the corpus rule,
    but says nothing about how often the pattern names the right rank), and only cases the
    rules were not written on."""
    out: dict[str, dict[str, int]] = {}
    for r in results:
        if r.case.half != "heldout" or not r.case.real or r.case.spec.get("tuned_on") \
                or r.case.fresh or not r.answer_ranks:
            continue
        m = out.setdefault(r.pattern, {"n": 0, "right": 0, "wrong": 0})
        m["n"] += 1
        m[r.outcome if r.outcome in ("right", "wrong") else "wrong"] += 1
    return dict(sorted(out.items()))


def high_allowed(measured: dict[str, dict[str, int]]) -> list[str]:
    """Patterns whose held-out precision allows `high` (:data:`MIN_MEASURED`,
    :data:`HIGH_PRECISION`); a reading under a presumption never is (calibration.PRESUMED)."""
    from stormotel.analyzers.stalls.grammar import CATALOGUE, K_READING

    presumed = {p.id for p in CATALOGUE if p.kind == K_READING}
    return sorted(p for p, m in measured.items() if p != NO_PATTERN and p not in presumed
                  and m["n"] >= MIN_MEASURED and m["right"] / m["n"] >= HIGH_PRECISION)


def ceilings_source(results: list[Result]) -> str:
    """The text of ``analyzers/stalls/ceilings.py`` for these results."""
    measured = measured_patterns(results)
    rows = "".join(f"    {json.dumps(p)}: {json.dumps(m)},\n" for p, m in measured.items())
    allowed = "".join(f"    {json.dumps(p)},\n" for p in high_allowed(measured))
    return (
        '"""Measured precision of each evidence pattern on the held-out real cases.\n\n'
        "Generated by ``benchmarks/eval_stalls.py --write-ceilings``; do not edit by hand (the\n"
        "corpus test fails when this differs from what the evaluation measures). Counted: the\n"
        "answers that name ranks, on held-out real cases the rules were not written on. A pattern\n"
        f"may be called ``high`` with at least {MIN_MEASURED} such answers and a precision of at"
        f" least\n{HIGH_PRECISION:.0%} (:mod:`stormotel.analyzers.stalls.calibration`).\n"
        '"""\n\n'
        "MEASURED: dict[str, dict[str, int]] = {\n" + rows + "}\n\n"
        "HIGH_ALLOWED: frozenset[str] = frozenset({\n" + allowed + "})\n")


def reach_tables(results: list[Result]) -> dict[str, Any]:
    """Per family per set, and each family held out (:mod:`stall_reach`)."""
    import stall_reach  # benchmarks/ is on sys.path (top of this file)
    from stormotel.analyzers.stalls.calibration import PRESUMED

    per_set = stall_reach.per_family(results)  # type: ignore[arg-type]
    held = stall_reach.family_heldout(results, measured_patterns,  # type: ignore[arg-type]
                                      high_allowed, PRESUMED)
    return {"per_set": per_set, "family_heldout": held,
            "families": {r.case.id: stall_reach.family_of(r.case) for r in results},
            "markdown": stall_reach.render_markdown(per_set, held)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--half", choices=("dev", "heldout", "all"), default="all")
    p.add_argument("--cases", type=Path, action="append", metavar="DIR",
                   help="a corpus folder (of case folders) or one case folder; repeatable "
                        "(default: tests/stalls/data/cases and tests/stalls/data/real)")
    p.add_argument("--json", type=Path, metavar="OUT", help="write every figure and case here")
    p.add_argument("--subprocess", action="store_true",
                   help="run `python -m stormotel.cli` per case instead of in-process")
    p.add_argument("--per-case", action="store_true", help="also print one line per case")
    p.add_argument("--markdown", action="store_true",
                   help="print the figures as Markdown tables (docs/benchmarks.md)")
    p.add_argument("--reach", action="store_true",
                   help="also read the fresh sets (tests/stalls/data/fresh, fresh2, fresh3, "
                        "fresh4, fresh5, fresh6, fresh7, fresh8, fresh9, fresh10, fresh11, "
                        "fresh12, fresh13, fresh14) and "
                        "print the "
                        "reach "
                        "tables: "
                        "per emitter family per set (dev, heldout, fresh, fresh2/dev, "
                        "fresh2/heldout, fresh3/dev, fresh3/heldout, fresh4/dev, "
                        "fresh4/heldout, fresh5/dev, fresh5/heldout, fresh6/dev, "
                        "fresh6/heldout, fresh7/dev, fresh7/heldout, fresh8/heldout, "
                        "fresh9/heldout, fresh10/heldout, fresh11/heldout, fresh12/heldout, "
                        "fresh13/heldout, fresh14/heldout) "
                        "and with "
                        "each family's calibration held out (benchmarks/stall_reach.py)")
    p.add_argument("--write-ceilings", action="store_true",
                   help="write analyzers/stalls/ceilings.py (the patterns that may be called "
                        "high) from the held-out measurement; needs --half all or heldout")
    args = p.parse_args(argv)
    dirs = list(args.cases or DEFAULT_CASE_DIRS)
    if args.reach and not args.cases:
        dirs += [FRESH_DIR, FRESH2_DIR, FRESH3_DIR, FRESH4_DIR, FRESH5_DIR, FRESH6_DIR,
                 FRESH7_DIR, FRESH8_DIR, FRESH9_DIR, FRESH10_DIR, FRESH11_DIR, FRESH12_DIR,
                 FRESH13_DIR, FRESH14_DIR]
    try:
        cases = load_cases(dirs)
    except (OSError, ValueError, KeyError) as e:
        print(f"eval_stalls: error: malformed corpus: {e}", file=sys.stderr)
        return 2
    cases = [c for c in cases if args.half in ("all", c.half)]
    if not cases:
        print("eval_stalls: error: no case folders (expect.json) found", file=sys.stderr)
        return 2
    results = evaluate(cases, subprocess_mode=args.subprocess)
    summaries = groups(results, args.half)
    draw = render_markdown if args.markdown else render
    print("\n\n".join(draw(name, s) for name, s in summaries.items()))
    reach = reach_tables(results) if args.reach else None
    if reach is not None:
        print("\n== reach: per emitter family and set, and each family held out\n"
              + reach["markdown"])
    if args.per_case:
        print("\n== per case\n" + render_cases(results))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(
            {"schema": "stormotel.eval_stalls/v1", "half": args.half, "groups": summaries,
             **({"reach": {k: v for k, v in reach.items() if k != "markdown"}} if reach else {}),
             "cases": [r.as_json() for r in results]}, indent=2) + "\n")
    if args.write_ceilings:
        if args.half == "dev":
            print("eval_stalls: error: --write-ceilings measures the held-out half",
                  file=sys.stderr)
            return 2
        CEILINGS_MODULE.write_text(ceilings_source(results))
        print(f"wrote {CEILINGS_MODULE.relative_to(ROOT)}")
    return 1 if any(r.exit_code == EXIT_INTERNAL for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
