"""Reach of the stuck-job verdicts: per emitter family, per set, and with whole families held out.

Used by ``benchmarks/eval_stalls.py --reach``. The corpus's held-out half is held out by case,
but its cases were found by the same searches as its dev half, so it measures the families the
rules already know. Two more measures say how far the verdicts reach:

- **per family and per set** — every case gets an *emitter family* from its kept evidence (the
  first of :data:`FAMILIES` whose words the logs hold; a Flight Recorder dump is its own family),
  read off the labelled evidence, never off the tool's answer. Each set — ``dev`` and
  ``heldout`` (the corpus), ``fresh`` (``tests/stalls/data/fresh``: other searches, labelled
  before the tool ran, never tuned on) — is counted per family: right / wrong / undecided,
  *confident wrong* (a root finding at high/medium naming a rank the source did not establish),
  exit 0 (reported healthy) and exit 3 (no evidence) on a case that shows a stall.
- **family held out** — for each family F, the confidence ceilings are measured again on the
  held-out real cases of every *other* family (the calibration's rule: at least
  ``MIN_MEASURED`` rank-naming answers, precision at least ``HIGH_PRECISION``), and F's cases
  are re-scored with those ceilings: each root finding keeps the confidence its rule asked for,
  capped at what its pattern earned without F. A family whose `high` rests only on its own
  cases loses it here; a confident wrong rank that appears is one the calibration could not
  have prevented on a family it had never seen. (The rules themselves cannot be retrained per
  family; what is held out is the measurement that decides confidence.)
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Protocol

#: (family, words): the first family whose words occur in a case's logs (lower-cased) is its
#: family. Ordered from the most specific evidence to the most general, so a case is filed under
#: the message that distinguishes it (a Horovod report beats the Python traceback around it).
FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("torch.store_barrier", ("store based barrier",)),
    ("torch.tcpstore_uniqueid", ("nccluniqueid", "tcpstore.cpp", "waitforinput",
                                 "socket timeout")),
    ("gloo.monitored_barrier", ("monitoredbarrier", "monitored_barrier")),
    ("horovod.stall", ("stall_inspector", "missing ranks", "stalled ops", "ready ranks",
                       "horovod has been shut down")),
    ("nccl.ras", ("ncclras", "missing communicator", "communicator ranks")),
    ("torch.desync_detail", ("collectivefingerprint", "desync")),
    ("launcher.mpi", ("mpirun noticed", "prterun noticed", "primary job", "mpirun detected")),
    ("torchelastic", ("childfailederror", "torch.distributed.elastic", "root cause (first")),
    ("torch.nccl_watchdog", ("watchdog caught collective", "processgroupnccl",
                             "heartbeat monitor", "watchdog thread")),
    ("nccl.warn", ("nccl warn",)),
    # fresh2's message families (issue 37, helper 37f): appended after the older ones so the
    # corpus's cases keep the family they had
    ("torch.nccl_teardown", ("some nccl operations", "communicator was aborted")),
    ("torchelastic.agent_signal", ("death signal",)),
    ("torchelastic.rendezvous", ("rendezvoustimeouterror", "rendezvousconnectionerror",
                                 "rendezvousclosederror")),
    ("gloo.peer_closed", ("connection closed by peer",)),
    ("nccl.error", ("ncclinternalerror", "nccl error in:", "remote process exited",
                    "ncclremoteerror", "unhandled cuda error", "ncclsystemerror")),
    ("launcher.mpi_peer", ("mpi communication peer", "exited on signal", "mpirun failed")),
    ("rank_error", ("out of memory", "traceback", "error")),
)
FLIGHT_RECORDER = "torch.flight_recorder"
OTHER = "other"
SETS = ("dev", "heldout", "fresh", "fresh2/dev", "fresh2/heldout", "fresh3/dev", "fresh3/heldout",
        "fresh4/dev", "fresh4/heldout", "fresh5/dev", "fresh5/heldout",
        "fresh5/heldout (tuned on)", "fresh6/dev", "fresh6/heldout", "fresh7/dev",
        "fresh7/heldout", "fresh8/dev", "fresh8/heldout", "fresh8/heldout (tuned on)",
        "fresh9/dev", "fresh9/heldout", "fresh9/heldout (tuned on)", "fresh10/dev",
        "fresh10/heldout", "fresh10/heldout (tuned on)", "fresh11/dev", "fresh11/heldout",
        "fresh11/heldout (tuned on)", "fresh12/dev", "fresh12/heldout",
        "fresh12/heldout (tuned on)", "fresh13/dev", "fresh13/heldout",
        "fresh13/heldout (tuned on)", "fresh14/dev", "fresh14/heldout",
        "fresh14/heldout (tuned on)")
#: the row of a fresh set's held-out cases that a later helper read while writing rules
#: (``"tuned_on": true`` with ``"tuned_by"``): their half and label stay, but they no longer
#: measure reach, so they are counted apart from the untouched held-out cases
TUNED_SUFFIX = " (tuned on)"
COLUMNS = ("n", "right", "wrong", "undecided", "confident_wrong", "exit0", "exit3")
CONFIDENT = ("high", "medium")
_ORDER = {"low": 0, "medium": 1, "high": 2}
EXIT_HEALTHY = 0
EXIT_NO_EVIDENCE = 3


class CaseLike(Protocol):
    path: Path
    spec: dict[str, Any]

    @property
    def half(self) -> str: ...
    @property
    def real(self) -> bool: ...
    @property
    def fresh(self) -> bool: ...
    @property
    def expected_ranks(self) -> list[int] | None: ...


class ResultLike(Protocol):
    case: Any
    exit_code: int
    outcome: str
    confident_wrong: list[dict[str, Any]]
    roots: list[dict[str, Any]]
    answer_ranks: list[int]
    pattern: str


def family_of(case: CaseLike, limit: int = 2_000_000) -> str:
    """The emitter family of a case, from its kept evidence (see :data:`FAMILIES`)."""
    evidence = case.spec["evidence"]
    text = ""
    for rel in evidence.get("logs") or []:
        try:
            text += (case.path / rel).read_text(errors="replace")[:limit].lower() + "\n"
        except OSError:
            continue
    for family, words in FAMILIES:
        if any(w in text for w in words):
            return family
    if evidence.get("flight_recorder"):
        return FLIGHT_RECORDER
    return OTHER


def set_of(case: CaseLike) -> str:
    """dev / heldout (the corpus), fresh, or fresh2/<half>, fresh3/<half> (the later fresh sets
    keep their own halves: their rules were written on their dev half only)."""
    name = case.spec.get("set")
    if name in ("fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7", "fresh8", "fresh9",
                "fresh10", "fresh11", "fresh12", "fresh13", "fresh14"):
        tuned = TUNED_SUFFIX if case.spec.get("tuned_on") else ""
        return f"{name}/{case.half}{tuned}"
    return "fresh" if case.fresh else case.half


def _blank() -> dict[str, int]:
    return dict.fromkeys(COLUMNS, 0)


def _count(row: dict[str, int], r: ResultLike, confident_wrong: int) -> None:
    row["n"] += 1
    row[r.outcome] += 1
    row["confident_wrong"] += confident_wrong
    row["exit0"] += r.exit_code == EXIT_HEALTHY
    row["exit3"] += r.exit_code == EXIT_NO_EVIDENCE


def per_family(results: list[ResultLike]) -> dict[str, dict[str, dict[str, int]]]:
    """{set: {family: counts}} with a ``(all)`` row per set; real cases only."""
    out: dict[str, dict[str, dict[str, int]]] = {s: defaultdict(_blank) for s in SETS}
    for r in results:
        if not r.case.real:
            continue
        s = set_of(r.case)
        fam = family_of(r.case)
        for key in (fam, "(all)"):
            _count(out[s][key], r, len(r.confident_wrong))
    return {s: dict(sorted(rows.items())) for s, rows in out.items() if rows}


def _ceiling(pattern: str, allowed: set[str], presumed: frozenset[str]) -> str:
    if pattern in presumed:
        return "low"
    return "high" if pattern in allowed else "medium"


def rescored_confident_wrong(r: ResultLike, allowed: set[str],
                             presumed: frozenset[str]) -> tuple[int, int]:
    """(confident wrong root findings, root findings at high) of ``r`` under ceilings that
    allow `high` only for ``allowed``."""
    expected = set(r.case.expected_ranks or [])
    wrong = high = 0
    for root in r.roots:
        asked = root.get("asked") or root.get("confidence") or "low"
        cap = _ceiling(str(root.get("pattern")), allowed, presumed)
        level = asked if _ORDER.get(asked, 0) <= _ORDER[cap] else cap
        high += level == "high"
        if level in CONFIDENT and set(root.get("ranks") or []) - expected:
            wrong += 1
    return wrong, high


def family_heldout(results: list[ResultLike], measured_patterns: Any, high_allowed: Any,
                   presumed: frozenset[str]) -> dict[str, dict[str, Any]]:
    """For each family F of the corpus (fresh set excluded): the ceilings measured without F,
    and F's real cases re-scored with them."""
    corpus = [r for r in results if r.case.real and not r.case.fresh]
    fam = {id(r): family_of(r.case) for r in corpus}
    out: dict[str, dict[str, Any]] = {}
    for family in sorted(set(fam.values())):
        others = [r for r in corpus if fam[id(r)] != family]
        allowed = set(high_allowed(measured_patterns(others)))
        own = set(high_allowed(measured_patterns(corpus)))
        row: dict[str, Any] = {**_blank(), "high_answers": 0,
                               "high_patterns_without": sorted(allowed),
                               "high_patterns_lost": sorted(own - allowed)}
        for r in corpus:
            if fam[id(r)] != family:
                continue
            wrong, high = rescored_confident_wrong(r, allowed, presumed)
            _count(row, r, wrong)
            row["high_answers"] += high
        out[family] = row
    return out


def render_markdown(per_set: dict[str, dict[str, dict[str, int]]],
                    held: dict[str, dict[str, Any]]) -> str:
    """The reach tables (docs/stalls.md, docs/benchmarks.md)."""
    lines: list[str] = []
    head = ("| family | n | right | wrong | undecided | confident wrong | exit 0 | exit 3 |",
            "|---|---:|---:|---:|---:|---:|---:|---:|")
    for s, rows in per_set.items():
        lines += ["", f"**{s}**", "", *head]
        for family, c in rows.items():
            name = f"**{family}**" if family == "(all)" else f"`{family}`"
            lines.append(f"| {name} | {c['n']} | {c['right']} | {c['wrong']} | "
                         f"{c['undecided']} | {c['confident_wrong']} | {c['exit0']} | "
                         f"{c['exit3']} |")
    lines += ["", "**family held out** (ceilings measured on the other families' held-out "
              "cases; the family's dev and held-out cases re-scored with them)", "",
              "| family | n | right | wrong | undecided | confident wrong | at high | "
              "`high` lost without it |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for family, c in held.items():
        lost = ", ".join(f"`{p}`" for p in c["high_patterns_lost"]) or "—"
        lines.append(f"| `{family}` | {c['n']} | {c['right']} | {c['wrong']} | "
                     f"{c['undecided']} | {c['confident_wrong']} | {c['high_answers']} | "
                     f"{lost} |")
    return "\n".join(lines).lstrip("\n")
