"""``stormotel analyze --flight-recorder DIR --logs PATH...``: the stuck-job evidence.

What one run (:func:`stormotel.analyzers.run.run_once`) uses, in its order:
:func:`read_stall_evidence` before (or instead of) reading telemetry; :func:`attach_markers` and
:meth:`StallResult.judged` to join a Timeline with it; :meth:`StallResult.apply` on the report.
Telemetry is optional: with only stall evidence (:class:`StallMarkerSource`)
:meth:`StallResult.empty_report` holds the stall findings and the exit code says whether there
were any. The live sources (``--nccl-ras``, ``--fr-pipe``, :func:`add_live_sources`) join the
same result; their clients load only when a live flag is given.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from stormotel.analyzers.options import StallOptions
from stormotel.analyzers.report import Report, StallFinding
from stormotel.analyzers.sources.protocol import Progress
from stormotel.analyzers.stalls.calibration import calibrate
from stormotel.analyzers.stalls.verdict import join_sources, with_telemetry
from stormotel.analyzers.timeline import (
    MAX_WORLD_SIZE,
    Markers,
    Timeline,
    TimelineBuilder,
    concat_markers,
)

from stormotel import schema
from stormotel.errors import UsageError

if TYPE_CHECKING:
    from stormotel.analyzers.http import Deadline
    from stormotel.analyzers.window import Window


class StallInputError(UsageError, ValueError):
    """Unreadable stall evidence (bad dump, binary log, ...): one line, exit USAGE."""


@dataclass
class StallResult:
    findings: list[StallFinding] = field(default_factory=list)
    markers_by_rank: dict[int, Markers] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    world_size: int | None = None
    seen_ranks: list[int] = field(default_factory=list)
    missing_ranks: list[int] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    #: counted skips of the evidence (merged into the report's ``skipped``)
    skipped: dict[str, int] = field(default_factory=dict)

    def apply(self, report: Report, findings: list[StallFinding] | None = None) -> Report:
        """Append the stall findings (``findings``, else this evidence's own; re-basing
        ``consequence_of``) and context to ``report``."""
        new = self.findings if findings is None else findings
        _drop_dead_ranks_explained(report, new)
        base = len(report.stall_findings)
        for f in new:
            report.stall_findings.append(dataclasses.replace(
                f, consequence_of=None if f.consequence_of is None else f.consequence_of + base))
        from stormotel.analyzers.stalls.per_rank import join_ranks

        report.stall_findings = named_roots_first(report.stall_findings, base)
        report.notes.extend(self.notes)
        report.sources.extend(s for s in self.sources if s not in report.sources)
        report.extra["stalls"] = {**self.extra, "per_rank": join_ranks(
            self.extra, report.stall_findings)}  # indices as the report numbers them
        for reason, n in self.skipped.items():
            report.skipped[reason] = report.skipped.get(reason, 0) + n
        return report

    def empty_report(self, job_id: str | None) -> Report:
        """A report for stall evidence alone (no memory telemetry given)."""
        report = Report(job_id=job_id, world_size=self.world_size,
                        participating_ranks=list(self.seen_ranks),
                        missing_ranks=list(self.missing_ranks))
        report.settings["telemetry"] = "none (stall evidence only)"
        report.extra["samples"] = 0
        return self.apply(report)

    def judged(self, timeline: Timeline) -> list[StallFinding]:
        """The stall findings judged again with what ``timeline`` shows, leaving this evidence
        as read: each window of a scheduled run is judged with its own telemetry."""
        from stormotel.analyzers.stalls.stacks import with_sample_gaps

        return calibrate(with_sample_gaps(timeline, with_telemetry(timeline, self.findings)))

    def marker_timeline(self, job_id: str | None = None) -> Timeline:
        """A Timeline holding only the collective markers (for trace sinks without telemetry)."""
        b = TimelineBuilder()
        for rank, m in self.markers_by_rank.items():
            b.add_markers(rank, m)
        return b.build(job_id=job_id, world_size=self.world_size)


@dataclass(frozen=True)
class StallMarkerSource:
    """Stall evidence alone as a run's source (no memory telemetry given): a Timeline of its
    collective markers, for the trace sinks; the report is the evidence's own."""

    stalls: StallResult
    job_id: str | None = None
    telemetry: ClassVar[bool] = False

    @property
    def outcome(self) -> None:
        return None

    def read(self, window: Window | None, deadline: Deadline | None,
             progress: Progress) -> Timeline:
        return self.stalls.marker_timeline(self.job_id)


def read_stall_evidence(options: StallOptions, progress: Progress | None = None,
                        beside_telemetry: bool = False) -> StallResult:
    """Read and analyse the dumps and logs ``options`` name (its world size already checked).
    ``beside_telemetry``: an archive is judged too, so logs that are all empty are a note, not
    bad input (round three: a healthy job's quiet ranks made ``--logs`` exit 2)."""
    from stormotel.analyzers.stalls.fr_loader import DumpError
    from stormotel.analyzers.stalls.logs_parser import LogError, NoReadableLog

    ws = options.world_size
    result = StallResult()
    progress = progress or Progress(quiet=True)
    try:
        if options.flight_recorder:
            add_flight_recorder(result, options.flight_recorder, ws, progress)
        if options.logs:
            try:
                _add_log_runs(result, list(options.logs), ws, progress, options.job_id)
            except NoReadableLog as exc:
                if not beside_telemetry:
                    raise
                result.notes.append(f"logs: no readable log ({exc}): the archive judged alone")
                result.skipped["unreadable_log"] = result.skipped.get("unreadable_log", 0) + 1
        if options.nccl_ras or options.fr_pipe:
            add_live_sources(result, options, progress)
    except (DumpError, LogError) as exc:
        raise StallInputError(str(exc)) from exc
    _add_stacks(result, options, ws, progress)
    result.findings = calibrate(join_sources(result.findings))
    return result


def add_flight_recorder(result: StallResult, path: Path, ws: int | None,
                         progress: Progress) -> None:
    from stormotel.analyzers.stalls.fr_analysis import analyze_dumps
    from stormotel.analyzers.stalls.fr_loader import load_dump_dir
    from stormotel.analyzers.stalls.fr_markers import markers_from_dumps

    ds = load_dump_dir(path, world_size=ws)
    progress.say(f"read {len(ds.dumps)} Flight Recorder dump(s) from {path} "
                 f"({sum(len(d.entries) for d in ds.dumps.values())} entries)")
    fr = analyze_dumps(ds)
    extend_findings(result, fr.findings)
    result.markers_by_rank = markers_from_dumps(ds)
    result.notes.extend(f"flight recorder: {n}" for n in fr.notes)
    result.sources.extend(d.path for d in ds.dumps.values())
    result.world_size = max(result.world_size or 0, ds.world_size)
    result.seen_ranks = sorted(set(result.seen_ranks) | set(ds.dumps))
    result.missing_ranks = list(ds.missing_ranks)
    result.extra["flight_recorder"] = {
        "dir": str(path), "world_size": ds.world_size, "seen_ranks": ds.ranks,
        "missing_ranks": ds.missing_ranks, "first_divergence": fr.first_divergence,
        "versions": sorted({d.version for d in ds.dumps.values()}),
        "forms": sorted({d.form for d in ds.dumps.values()}),
        "rank_states": {g: [s.as_dict() for s in st] for g, st in fr.states.items()}}


def _add_log_runs(result: StallResult, specs: list[str], ws: int | None, progress: Progress,
                  job_id: str | None) -> None:
    """The logs, one analysis per run id they state (analyzers/stalls/log_jobs.py): logs of
    different runs are different jobs and are never judged as one world or one causal chain."""
    from stormotel.analyzers.stalls.log_jobs import group_by_run
    from stormotel.analyzers.stalls.logs_parser import expand_paths

    groups = group_by_run(expand_paths(specs))
    filtered = len(groups) > 1 and job_id is not None and any(g.run_id == job_id
                                                              for g in groups)
    if filtered:
        others = [g for g in groups if g.run_id != job_id]
        n = sum(len(g.files) for g in others)
        result.skipped["other_job_log"] = result.skipped.get("other_job_log", 0) + n
        result.notes.append(f"logs: {n} file(s) of other runs than --job-id {job_id} ("
                            + ", ".join(str(g.run_id or "no run id") for g in others)
                            + ") skipped")
        groups = [g for g in groups if g.run_id == job_id]
    if len(groups) == 1:  # one job: read as given (the only job, or the one --job-id names)
        _add_logs(result, [str(p) for p in groups[0].files] if filtered else specs, ws,
                  progress)
        return
    result.notes.append(
        f"logs: {len(groups)} runs ({', '.join(str(g.run_id or 'no run id') for g in groups)}) "
        "among the files, judged as separate jobs (pass --job-id RUN_ID for one)")
    result.skipped["logs_of_another_run"] = result.skipped.get(
        "logs_of_another_run", 0) + sum(len(g.files) for g in groups[1:])
    for g in groups:
        _add_logs(result, [str(p) for p in g.files], ws, progress,
                  run=g.run_id or "no run id")


def _add_logs(result: StallResult, specs: list[str], ws: int | None,
              progress: Progress, run: str | None = None) -> None:
    from stormotel.analyzers.stalls.log_analysis import analyze_logs
    from stormotel.analyzers.stalls.log_busy import KIND as PROGRESS
    from stormotel.analyzers.stalls.log_cut_traceback import KIND as CUT_TRACEBACK
    from stormotel.analyzers.stalls.log_failures import NOT_EVIDENCE
    from stormotel.analyzers.stalls.log_pg_error import KIND as PG_ERROR
    from stormotel.analyzers.stalls.logs_parser import ELASTIC_LAYOUT, EXCEPTION, parse_logs

    # beside the world size and the job's own shutdown, a traceback no rule read (a crash of
    # something, cut before what it was: fresh3's ray-36317 read "healthy" on one), a progress
    # bar and torchelastic's node layout (its launch table: what was started, like the world
    # size — fresh8's kubeflow-trainer-1504 read "healthy" on one) say nothing about the
    # job's health: "no evidence", never "healthy"
    not_evidence = NOT_EVIDENCE | {EXCEPTION, PROGRESS, ELASTIC_LAYOUT}
    # a ProcessGroupNCCL ERROR line's prefix alone (log_pg_error) says only which LOG statement
    # printed it: the line's own message is the evidence, read by its own pattern
    not_evidence |= {PG_ERROR}
    # a traceback cut before its exception line: context for the rank-failure rule, like a bare
    # traceback it says nothing on its own
    not_evidence |= {CUT_TRACEBACK}

    parsed = _plausible_ranks(parse_logs(specs))
    progress.say(f"read {len(parsed.files)} log file(s), {parsed.lines} lines, "
                 f"{len(parsed.events)} watchdog events")
    la = analyze_logs(parsed, world_size=ws)
    label = "logs" if run is None else f"logs (run {run})"
    if parsed.skipped.get("rank_outside_world"):  # a finding about the input: counted
        result.skipped["rank_outside_world"] = result.skipped.get(
            "rank_outside_world", 0) + parsed.skipped["rank_outside_world"]
    if not parsed.events:
        result.notes.append(f"{label}: no ProcessGroupNCCL watchdog lines in "
                            f"{len(parsed.files)} file(s): they say nothing about stalls")
    if run is not None:
        for f in la.findings:
            f.evidence["run_id"] = run
    extend_findings(result, la.findings)
    result.notes.extend(f"{label}: {n}" for n in la.notes)
    result.sources.extend(parsed.files)
    result.world_size = max(result.world_size or 0, la.world_size) or None
    if not result.seen_ranks:
        result.seen_ranks = sorted(parsed.ranks_seen)
        world = min(la.world_size, MAX_WORLD_SIZE)
        result.missing_ranks = [r for r in range(world) if r not in parsed.ranks_seen]
    if run is not None:
        result.extra.setdefault("log_runs", []).append(
            {"run_id": run, "files": parsed.files, "world_size": la.world_size,
             "category": la.category})
        if "logs" in result.extra:
            return
    result.extra["logs"] = {
        "files": parsed.files, "events": len(parsed.events),
        # a line that only states the world size, or the job's own shutdown, says nothing
        # about the job's health (nor a bare traceback or progress bar: ``not_evidence``)
        "evidence_events": sum(1 for e in parsed.events if e.kind not in not_evidence),
        "category": la.category,
        "world_size": la.world_size,
        "state_tables": {g: [s.as_dict() for s in st] for g, st in la.states.items()},
        "timeline": la.timeline[:100]}


def _add_stacks(result: StallResult, options: StallOptions, ws: int | None,
                progress: Progress) -> None:
    """The tracker's stack snapshots (``--stacks``, and ``stacks/`` under telemetry PATHs)."""
    from stormotel.analyzers.stalls.stacks import analyze_stacks, find_snapshot_files

    files = find_snapshot_files([*options.stacks, *options.stacks_in])
    if options.stacks and not find_snapshot_files(options.stacks):
        raise StallInputError(f"--stacks {' '.join(options.stacks)}: no stack snapshot "
                              "(*.stack.txt, *.stack.pending) there")
    if not files:
        return
    sa = analyze_stacks(files, ws or result.world_size, options.job_id)
    progress.say(f"read {len(files)} stack snapshot(s) of {len(sa.snapshots)} rank(s)")
    result.findings = _insert_first_hand(result.findings, sa.findings)
    result.notes.extend(sa.notes)
    if sa.skipped:
        for reason, n in sa.skipped.items():  # counted like every other input's skips
            result.skipped[reason] = result.skipped.get(reason, 0) + n
    result.sources.extend(s.path for s in sa.snapshots.values())
    result.seen_ranks = sorted(set(result.seen_ranks) | set(sa.snapshots))
    result.extra["stacks"] = sa.extra()
    if options.flight_recorder is None:
        result.notes.extend(_dumps_beside(files))


def _dumps_beside(snapshots: list[Path]) -> list[str]:
    """A note per folder of Flight Recorder dumps the tracker wrote beside its snapshots and
    the run was not told to read. They are not read unasked: a dump is overwritten at each
    stall and carries no progress time, so one from a stall the job got over would accuse
    a rank of the hang it never had; the user knows which stall the run is about."""
    folders = sorted({p.parent.parent / schema.FR_DUMPS_DIR for p in snapshots})
    return [f"the tracker wrote Flight Recorder dumps at its snapshots in {d}: add "
            f"--flight-recorder {shlex.quote(str(d))} to read them" for d in folders
            if d.is_dir() and any(d.glob("nccl_trace_rank_*"))]


def named_roots_first(findings: list[StallFinding], base: int) -> list[StallFinding]:
    """The ``undecided`` roots among the first ``base`` findings (the telemetry's) after the
    later roots (the stall evidence's) when one of those names a rank; ``consequence_of``
    re-based. Why: the telemetry's findings come first in the list, and its "every rank failed
    inside a collective" (``exception_in_collective``, inferred from what the ranks saw, naming
    nobody) led the snapshots' and logs' findings that say which rank the others waited for
    (round three: ``monitored3``, ``data_raise3`` with logs) — the order the snapshots already
    get over inferred findings (:func:`_insert_first_hand`). Each source's own order stays."""
    roots = [i for i, f in enumerate(findings) if f.consequence_of is None]
    moved = [i for i in roots if i < base and findings[i].kind == "undecided"]
    if not moved or not any(findings[i].kind != "undecided" for i in roots if i >= base):
        return findings
    order = [*(i for i in roots if i not in moved), *moved,
             *(i for i in range(len(findings)) if i not in roots)]
    new_index = {old: new for new, old in enumerate(order)}
    out = []
    for old in order:
        parent = findings[old].consequence_of
        out.append(dataclasses.replace(
            findings[old], consequence_of=None if parent is None else new_index[parent]))
    return out


def _insert_first_hand(findings: list[StallFinding], first_hand: list[StallFinding]
                       ) -> list[StallFinding]:
    """Stack findings say where a rank *was*: they lead every finding inferred from what the
    others saw (waiting, missing, undecided), after a rank's own failure (an OOM, an
    exception: the rank is not hanging, it failed). ``consequence_of`` indices are re-based."""
    if not first_hand:
        return findings
    at = 0
    while at < len(findings) and findings[at].kind == "rank_failure" \
            and findings[at].consequence_of is None:
        at += 1
    n = len(first_hand)
    shifted = [f if f.consequence_of is None or f.consequence_of < at else
               dataclasses.replace(f, consequence_of=f.consequence_of + n) for f in findings]
    return [*shifted[:at], *first_hand, *shifted[at:]]


def plausible_rank(r: object) -> bool:
    """A rank some job can have: an int in ``[0, MAX_WORLD_SIZE)`` (the one bound for every rank
    parsed from text: prefixes, file names, desync reports, fingerprints, world hints)."""
    return type(r) is int and 0 <= r < MAX_WORLD_SIZE


def _is_rank_key(key: str) -> bool:
    return "rank" in key or key in ("culprits", "missing", "peers", "peer")


def _plausible_detail(detail: dict[str, Any] | None) -> tuple[dict[str, Any] | None, set[int]]:
    """``detail`` with every rank it names checked (values under rank-like keys): the ranks
    outside the bound, and None when the detail named only such ranks (it is no evidence)."""
    if not detail:
        return detail, set()
    absurd: set[int] = set()
    out = dict(detail)
    for key, value in detail.items():
        if key == "world_size":
            try:
                if not 0 < int(value) <= MAX_WORLD_SIZE:
                    return None, {MAX_WORLD_SIZE}
            except (TypeError, ValueError):
                return None, set()
            continue
        if not _is_rank_key(key):
            continue
        if isinstance(value, int) and not isinstance(value, bool) and not plausible_rank(value):
            absurd.add(value)
            return None, absurd
        if isinstance(value, list | tuple | set) and value and \
                all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            kept = [v for v in value if plausible_rank(v)]
            absurd.update(v for v in value if not plausible_rank(v))
            if not kept:
                return None, absurd
            out[key] = type(value)(kept) if not isinstance(value, list) else kept
    return out, absurd


def _plausible_ranks(parsed: Any) -> Any:
    """Drop log evidence of ranks no job can have (``[rank1000000000000]``, a desync report or
    a DETAIL fingerprint naming rank 9,999,999): the analysis builds per-rank sets of the
    world, and a 7-digit rank is no job's (docs/security.md: ranks below 1,000,000)."""
    absurd = {r for r in parsed.ranks_seen if not plausible_rank(r)}
    events = []
    for e in parsed.events:
        if e.rank is not None and not plausible_rank(e.rank):
            continue
        if e.group_rank is not None and not plausible_rank(e.group_rank):
            absurd.add(e.group_rank)
            continue
        detail, bad = _plausible_detail(e.detail)
        absurd |= bad
        if bad and detail is None:
            continue
        events.append(dataclasses.replace(e, detail=detail) if bad else e)
    if absurd:
        parsed.events = events
        parsed.ranks_seen = {r for r in parsed.ranks_seen if plausible_rank(r)}
        parsed.skipped["rank_outside_world"] += len(absurd)
        parsed.notes.append(f"ignored {len(absurd)} rank number(s) of {MAX_WORLD_SIZE} or more "
                            "(not a rank of any job)")
    return parsed


def extend_findings(result: StallResult, findings: list[StallFinding]) -> None:
    base = len(result.findings)
    for f in findings:
        if f.consequence_of is not None:
            f = dataclasses.replace(f, consequence_of=f.consequence_of + base)
        result.findings.append(f)


def attach_markers(timeline: Timeline, markers_by_rank: dict[int, Markers]) -> Timeline:
    """Add collective markers to the ranks the telemetry has (others are noted, not invented)."""
    ranks = dict(timeline.ranks)
    unmatched = sorted(set(markers_by_rank) - set(ranks))
    for rank, m in markers_by_rank.items():
        if rank not in ranks or not len(m):
            continue
        s = ranks[rank]
        merged = concat_markers([s.markers, m])
        ranks[rank] = dataclasses.replace(s, markers=merged)
    notes = list(timeline.notes)
    if unmatched:
        notes.append(f"collective markers of rank(s) {unmatched} have no telemetry to attach to")
    return dataclasses.replace(timeline, ranks=ranks, notes=notes)


def _drop_dead_ranks_explained(report: Report, findings: list[StallFinding]) -> None:
    """The memory findings' "rank N stopped reporting while its peers went on" says less than
    a rank_failure of the stall evidence for the same rank (an OOM, an error, memory at 99 %
    when it went silent): one rank, one failure in the report, the more specific one kept."""
    from stormotel.analyzers.algorithms.dead_rank import CATEGORY

    failing = {r for f in findings if f.kind == "rank_failure" for r in f.ranks}
    kept = report.stall_findings
    if not failing or any(f.consequence_of is not None for f in kept):
        return
    report.stall_findings = [f for f in kept if not (
        f.kind == "rank_failure" and f.evidence.get("category") == CATEGORY
        and set(f.ranks) <= failing)]


# --- live sources (--nccl-ras, --fr-pipe): a job that still runs is asked ----------------------
# Their clients (sockets, the dump pipes) are imported only when a live flag is given.
def add_live_sources(result: StallResult, options: StallOptions, progress: Progress) -> None:
    if options.nccl_ras:
        _add_nccl_ras(result, options, progress)
    if options.fr_pipe:
        _add_fr_pipe(result, options, progress)


def _add_nccl_ras(result: StallResult, options: StallOptions, progress: Progress) -> None:
    """Every endpoint must answer: a RAS port that does not is an input error (exit 2) — a
    silent endpoint proves nothing about the job's ranks, and a report without it would look
    like RAS saw nothing."""
    from stormotel.analyzers.stalls.nccl_ras import RasQueryError, evidence_from_answers, query

    answers = []
    for spec in options.nccl_ras:
        progress.say(f"asking NCCL RAS at {spec} for its status")
        try:
            answers.append(query(spec, timeout_s=options.live_timeout_s))
        except RasQueryError as exc:
            raise StallInputError(f"--nccl-ras: {exc}") from None
    ev = evidence_from_answers(answers, options.world_size or result.world_size)
    extend_findings(result, ev.findings)
    result.notes.extend(f"nccl ras: {n}" for n in ev.notes)
    result.sources.extend(f"ncclras://{a.endpoint}" for a in answers)
    result.extra["nccl_ras"] = {"answers": ev.answers, "communicators": ev.communicators,
                                "findings": len(ev.findings)}


def _add_fr_pipe(result: StallResult, options: StallOptions, progress: Progress) -> None:
    from stormotel.analyzers.stalls.fr_trigger import trigger

    assert options.fr_pipe is not None
    progress.say(f"asking every rank with a pipe at {options.fr_pipe}<rank>.pipe for a "
                 "Flight Recorder dump")
    tr = trigger(options.fr_pipe, env=os.environ, timeout_s=options.live_timeout_s)
    result.notes.extend(f"flight recorder pipe: {n}" for n in tr.notes)
    result.extra["fr_pipe"] = {"prefix": options.fr_pipe, "pipes": tr.pipes,
                               "dumped": tr.dumped, "not_listening": tr.not_listening,
                               "no_dump": tr.no_dump,
                               "folder": str(tr.folder) if tr.folder else None}
    if tr.folder is None:
        if not (options.flight_recorder or options.logs or options.stacks or options.nccl_ras):
            raise StallInputError(f"--fr-pipe {options.fr_pipe}: no Flight Recorder dump came "
                                  "back; " + "; ".join(tr.notes))
        return
    result.notes.append(f"flight recorder pipe: fresh dumps of rank(s) {tr.dumped} kept in "
                        f"{tr.folder} (the next poke overwrites the job's own copies)")
    if options.flight_recorder is None:
        add_flight_recorder(result, tr.folder, options.world_size, progress)
    else:
        result.notes.append(f"flight recorder pipe: --flight-recorder was given too, so the "
                            f"fresh dumps were not read; analyse {tr.folder} on its own")
