"""The analyzer facade: a Timeline in, a versioned Report out.

Thin on purpose (like HolisticTraceAnalysis' ``trace_analysis.py``): select ranks, align clocks
as asked, run each algorithm module, assemble the :class:`~stormotel.analyzers.report.Report`.
Sources and sinks live elsewhere, so the same call serves files, Prometheus and tests.

The package's public face exports this facade as ``stormotel.analyzers.analyze``, which is also
this module's name: the import system binds that package attribute to the module whenever it is
imported, so the module itself is made callable (:class:`_Facade`). ``from stormotel.analyzers
import analyze; analyze(timeline)`` runs :func:`analyze`, and every spelling that reaches the
module (``import stormotel.analyzers.analyze as m``, ``from stormotel.analyzers.analyze import
analyze``) keeps working.
"""

from __future__ import annotations

import sys
import time
import types
from collections.abc import Iterable, Mapping
from typing import Any, cast

from stormotel.analyzers.algorithms import analyze_collectives, analyze_first_cause, estimate_ratio
from stormotel.analyzers.algorithms.dead_rank import dead_ranks
from stormotel.analyzers.algorithms.drift_lead import cap_drift_leads
from stormotel.analyzers.algorithms.gap import gap_analysis
from stormotel.analyzers.algorithms.oom_forensics import (
    mark_suspects_that_ran_out,
    oom_forensics,
)
from stormotel.analyzers.algorithms.plugin import AlgorithmInput, Estimates, SectionAlgorithm
from stormotel.analyzers.algorithms.rank_rows import prime_rank_facts
from stormotel.analyzers.algorithms.settings import Settings, settings_for
from stormotel.analyzers.algorithms.step_exceptions import step_exceptions
from stormotel.analyzers.align import align as align_timeline
from stormotel.analyzers.align import review_skew_hint
from stormotel.analyzers.attribution import attribute
from stormotel.analyzers.gcpause import gc_paused
from stormotel.analyzers.report import Report
from stormotel.analyzers.timeline import ALIGN_WALL, META_OOM_DUMPS, OomDump, Timeline

#: The algorithms that keep their findings in a typed section of the report
#: (:mod:`~stormotel.analyzers.algorithms.plugin`), in the order their sections appear: adding
#: one is its module and its line here.
SECTION_ALGORITHMS: tuple[SectionAlgorithm, ...] = (
    estimate_ratio.section,
)


def analyze(timeline: Timeline, *, sensitivity: str = "medium",
            ranks: Iterable[int] | None = None, align: str = ALIGN_WALL,
            overrides: Mapping[str, Any] | None = None,
            settings: Settings | None = None, estimates: Estimates = None) -> Report:
    """Run first cause, gap analysis and collective attribution over ``timeline``.

    ``ranks`` restricts the analysis (``None`` = all); ranks asked for but absent are reported
    as missing. ``align`` is ``wall`` | ``first-sample`` | ``markers`` and is recorded in the
    report. ``overrides`` replace single thresholds of the ``sensitivity`` preset.
    ``estimates`` (bytes for every rank, or rank → bytes) override the estimates the sources
    read into ``timeline.meta``; with either, the report gains its estimate section (in the
    JSON, ``extra["estimate_vs_actual"]``).
    """
    started = time.perf_counter()
    # The analysis allocates tens of thousands of small objects that all end in the report
    # (one rise, suspect and table row per rank): every generation-0 threshold crossing would
    # scan the Timeline's millions of marker dicts and find nothing to free.
    with gc_paused():
        report = _analyze(timeline, sensitivity, ranks, align, overrides, settings, estimates)
    report.extra["analysis_seconds"] = round(time.perf_counter() - started, 4)
    return report


def _analyze(timeline: Timeline, sensitivity: str, ranks: Iterable[int] | None, align: str,
             overrides: Mapping[str, Any] | None, settings: Settings | None,
             estimates: Estimates) -> Report:
    settings = settings or settings_for(sensitivity, **dict(overrides or {}))
    wanted = None if ranks is None else sorted(set(ranks))
    tl = timeline.select(wanted)
    prime_rank_facts(tl)  # every rank's interval and marker kinds, ranks of one length at once
    tl = align_timeline(tl, align)
    cross, table = analyze_first_cause(tl, settings)
    tl = review_skew_hint(tl, cross, lambda t: analyze_first_cause(t, settings)[0])
    gaps = gap_analysis(tl, settings)  # its spike episodes feed collective attribution
    cap_drift_leads(cross, gaps.findings)  # a leak crossing a threshold is not a confident lead
    collectives, coll_notes = analyze_collectives(tl, settings, gaps.episodes)
    expected = tl.expected_ranks() if wanted is None else wanted
    have = set(tl.ranks)
    starts = [int(s.t_ns[0]) for s in tl.ranks.values() if len(s)]
    ends = [int(s.t_ns[-1]) for s in tl.ranks.values() if len(s)]
    report = Report(
        job_id=tl.job_id, world_size=tl.world_size, participating_ranks=sorted(have),
        missing_ranks=[r for r in expected if r not in have], cross_rank=cross,
        gap_findings=gaps.findings, collective_attributions=collectives,
        notes=[*tl.notes, *gaps.notes, *coll_notes], skipped=dict(tl.skipped),
        sources=list(tl.sources), window_start_ns=min(starts) if starts else None,
        window_end_ns=max(ends) if ends else None,
        settings={**settings.to_dict(), "align": tl.alignment, "align_requested": align,
                  "ranks": "all" if wanted is None else wanted})
    report.extra["first_rise_by_rank"] = table.get("ranks", {})
    report.extra["first_cause_rounds"] = {k: v for k, v in table.items() if k != "ranks"}
    report.extra["offsets_ns"] = {r: o for r, o in tl.offsets_ns.items() if o}
    report.extra["samples"] = tl.total_samples()
    given = AlgorithmInput(tl, settings, estimates)
    report.sections.extend(s for run in SECTION_ALGORITHMS if (s := run(given)) is not None)
    # attach_oom_dumps stores the dumps it read as a list of OomDump
    forensics = oom_forensics(tl, cast("list[OomDump] | None", tl.meta.get(META_OOM_DUMPS)))
    if forensics is not None:
        report.oom_forensics = forensics
        mark_suspects_that_ran_out(cross.first_cause_suspects, forensics)
    # a rank silent while its peers go on (one that stopped cleanly: a note instead)
    report.stall_findings.extend(dead_ranks(tl, report.notes))
    # a rank whose last step ended in an exception (its peers' failures follow from it)
    report.stall_findings.extend(step_exceptions(tl, report.stall_findings, report.notes))
    attribute(report, tl)
    return report


class _Facade(types.ModuleType):
    """This module, callable as its :func:`analyze` (looked up when called, so a test that
    replaces ``analyze`` here replaces what the package's face runs too)."""

    def __call__(self, timeline: Timeline, **kwargs: Any) -> Report:
        return cast("Report", self.analyze(timeline, **kwargs))


sys.modules[__name__].__class__ = _Facade
