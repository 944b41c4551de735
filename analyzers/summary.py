"""A concise human summary of a Report: who took part, who went first, what each rank shows.

What a person on call reads first; the JSON report has every number. Times are UTC with
milliseconds, and also seconds from the start of the analysed window so ranks compare at a glance.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

from stormotel.analyzers.findings import Finding, FindingFamily
from stormotel.analyzers.headline import headline
from stormotel.analyzers.locations import location_text
from stormotel.analyzers.rankspec import format_rank_list
from stormotel.analyzers.report import (
    EV_OOM_CAUSE,
    EV_OOM_NS,
    CollectiveAttribution,
    GapFinding,
    Report,
    Suspect,
)
from stormotel.analyzers.stalls.per_rank import render_places
from stormotel.analyzers.stalls.render import render_stalls
from stormotel.analyzers.textlines import capped

from stormotel.textsafe import printable, redact
from stormotel.units import format_bytes, format_duration

MAX_GAP_LINES = 20
MAX_COLLECTIVE_LINES = 10
#: Longest summary line (a note or a job id can be arbitrarily long input).
MAX_LINE_CHARS = 2000
MAX_NOTES = 10


def fmt_bytes(n: float | None) -> str:
    """A size as the summary prints it (one decimal, ``?`` when unknown)."""
    return format_bytes(n, digits=1, missing="?")


def fmt_duration(seconds: float | None) -> str:
    return format_duration(seconds, missing="?")


def fmt_time(ns: int | None, origin: int | None) -> str:
    if ns is None:
        return "?"
    wall = datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    rel = f" (+{(ns - origin) / 1e9:.3f} s)" if origin is not None else ""
    return f"{wall}Z{rel}"


def _gap_line(f: GapFinding) -> str:
    e = f.evidence
    if f.classification == "persistent_drift":
        detail = (f"gap grows {fmt_bytes(e.get('slope_bytes_per_s'))}/s (R² {e.get('r2', 0):.2f},"
                  f" +{fmt_bytes(e.get('growth_bytes'))} over {fmt_duration(e.get('duration_s'))})")
        if e.get("time_to_full_s") is not None:
            detail += f", device full in {fmt_duration(e['time_to_full_s'])} at this rate"
    elif f.classification == "transient_spike":
        detail = (f"{e.get('episodes')} spike episode(s), largest +"
                  f"{fmt_bytes(e.get('max_excess_bytes'))} (robust z {e.get('max_z', 0):.1f})")
    else:
        detail = (f"allocator holds {e.get('median_ratio', 0):.0%} idle "
                  f"({fmt_bytes(e.get('median_idle_bytes'))}) in "
                  f"{e.get('fragmented_share', 0):.0%} of samples")
    return f"  rank {f.rank:<4} {f.classification:<17} {f.severity:<8} {detail}"


def _collective_lines(items: list[CollectiveAttribution], origin: int | None) -> list[str]:
    groups: dict[int, list[CollectiveAttribution]] = defaultdict(list)
    for a in items:
        groups[int(a.evidence.get("group", -1))].append(a)
    ordered = sorted(groups.values(), key=lambda g: min(a.interval_start_ns for a in g))

    def line(g: list[CollectiveAttribution]) -> str:
        best = max(g, key=lambda a: a.confidence)
        start = min(a.interval_start_ns for a in g)
        end = max(a.interval_end_ns for a in g)
        return (f"  {fmt_time(start, origin)} .. +{(end - start) / 1e6:.0f} ms  ranks "
                f"{format_rank_list({a.rank for a in g})}  {best.classification} "
                f"({best.confidence:.2f}; {', '.join(best.reason_codes[1:])})")

    return capped(ordered, MAX_COLLECTIVE_LINES, line,
                  lambda n: f"  ... {n} more interval(s) in the JSON report")


def render_summary(report: Report) -> str:
    first = report.extra.get("first_sample_ns")
    origin = first if isinstance(first, int) else report.window_start_ns
    cr = report.cross_rank
    res = f"{cr.resolution_ns / 1e6:.1f} ms" if cr.resolution_ns else "unknown"
    head = f"stormotel analysis — job {report.job_id or '(unknown)'}"
    if report.world_size:
        head += f", world size {report.world_size}"
    lines = [head,
             f"Participating ranks: {format_rank_list(report.participating_ranks)}"
             f"  ({report.extra.get('samples', '?')} samples, clock alignment "
             f"{cr.alignment}, resolution {res})",
             f"Missing ranks: {format_rank_list(report.missing_ranks)}"]
    if isinstance(first, int) and report.window_start_ns is not None:
        wall = datetime.fromtimestamp(first / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        since = ("the job's first sample" if first - report.window_start_ns > 60 * 10**9
                 else "the first sample in the window (the job started earlier)")
        lines.append(f"Times: UTC; (+s) counts from {since}, {wall}")
    if report.has_findings():  # the page's question answered first (analyzers/headline.py)
        lines.append(f"Lead: {headline(report).text}")
    if cr.first_cause_suspects:
        top = cr.first_cause_suspects[0]
        onset = fmt_time(cr.cluster_onset_ns, origin) if cr.cluster_onset_ns is not None \
            else "none (no other rank rose)"
        before = "before the cluster onset" if cr.cluster_onset_ns is not None \
            else "before the other ranks' data ends"
        lines.append(f"Cluster onset: {onset}")
        lines.append(f"Top first-cause suspect: rank {top.rank} ({top.confidence}) — rose "
                     f"{fmt_bytes(top.delta_bytes)} at {fmt_time(top.first_spike_ns, origin)}, "
                     f"{fmt_duration(top.lead_ns / 1e9)} {before}" + _ran_out(top))
        if located := location_text(report, top.rank):
            lines.append(f"  where: {located}")
        for s in cr.first_cause_suspects[1:4]:
            lines.append(f"  also: rank {s.rank} ({s.confidence}), lead "
                         f"{fmt_duration(s.lead_ns / 1e9)}")
    else:
        lines.append("First cause: no rank led the others")
    lines.extend(f"  note: {n}" for n in cr.notes)
    forensics = report.oom_forensics
    if forensics is not None and forensics.summary:
        lines.append(f"Out of memory: {forensics.summary}")
    if report.gap_findings:
        order = {"critical": 0, "warning": 1, "info": 2}
        gf = sorted(report.gap_findings, key=lambda f: (order[f.severity], f.rank))
        lines.append(f"Gap findings ({len(gf)}, per rank):")
        lines.extend(capped(gf, MAX_GAP_LINES, _gap_line,
                            lambda n: f"  ... {n} more in the JSON report"))
    else:
        lines.append("Gap findings: none")
    if report.collective_attributions:
        lines.append("Collective intervals:")
        lines.extend(_collective_lines(report.collective_attributions, origin))
    else:
        lines.append("Collective intervals: none")
    for section in report.sections:  # each algorithm's own section (estimate vs actual, …)
        lines.extend(section.summary_lines(report))
    if report.stall_findings:
        lines.extend(render_stalls(report.stall_findings))
        lines.extend(render_places(report))
    if report.skipped:
        lines.append("Skipped input: " + ", ".join(f"{k}={v}" for k, v in
                                                     sorted(report.skipped.items())))
    if report.notes:
        lines.append("Notes:")
        lines.extend(capped(report.notes, MAX_NOTES, lambda n: f"  - {n}",
                            lambda n: f"  - ... {n} more in the JSON report"))
    lines.append(verdict(report))
    # Job ids, notes and stall details come from the input: one printed line per entry, with
    # escape sequences and newlines shown escaped, so no input can forge a "Verdict:" line.
    return "\n".join(printable(redact(line), MAX_LINE_CHARS) for line in lines)


def has_evidence(report: Report) -> bool:
    """Did the input hold anything to judge by? "Healthy" from nothing would be a false claim
    (the verdict says "no evidence" and ``stormotel analyze`` exits 3, docs/exit-codes.md).

    Log lines judge a rank only when they name one: lines that name none (an OOM message
    without a rank prefix, torchelastic's launch table) that no rule read as a finding leave
    every rank unjudged, and "healthy" on them claimed what nothing showed (fresh8: three
    failing jobs read "healthy", exit 0)."""
    if report.extra.get("samples", 1) or report.stall_findings:
        return True
    stalls = report.extra.get("stalls") or {}
    return "flight_recorder" in stalls or (rankless_log_evidence(report)
                                           and bool(report.participating_ranks))


def rankless_log_evidence(report: Report) -> bool:
    """Log lines held evidence events (beside the world size, the job's own shutdown, a bare
    traceback or a progress bar) — whether or not any of them named a rank."""
    logs = (report.extra.get("stalls") or {}).get("logs") or {}
    return bool(logs.get("evidence_events", logs.get("events")))


def _ran_out(suspect: Suspect) -> str:
    """``; then ran out of memory 3.4 s later (…)`` when the suspect's rise ended in an OOM."""
    oom_ns = suspect.evidence.get(EV_OOM_NS)
    if not isinstance(oom_ns, int):
        return ""
    cause = str(suspect.evidence.get(EV_OOM_CAUSE, "undecided")).replace("_", " ")
    return (f"; the rise ended in an OOM {fmt_duration((oom_ns - suspect.first_spike_ns) / 1e9)}"
            f" later ({cause})")


def verdict(report: Report) -> str:
    """One line naming each rank with findings and their kinds, most important first; then one
    phrase for each family said as a group (collective spikes, stalls). Every finding's family
    says how (:class:`~stormotel.analyzers.findings.FindingFamily`), so no family is left out."""
    if not report.has_findings():
        if not has_evidence(report):
            if rankless_log_evidence(report):
                return ("Verdict: no evidence about any rank — the input's log lines name no "
                        "rank and no rule read them as a finding: nothing was judged, this is "
                        "not a healthy verdict (see the notes)")
            return ("Verdict: no evidence — no memory samples, watchdog lines or Flight Recorder "
                    "entries in the input (see the notes)")
        if report.missing_ranks:  # a rank killed before its first export leaves no data
            return (f"Verdict: no findings in rank(s) "
                    f"{format_rank_list(report.participating_ranks)}; no data from rank(s) "
                    f"{format_rank_list(report.missing_ranks)} of the world (not collected, or "
                    "ended before their first export, as a rank killed at its start does): "
                    "not a verdict on those — collect their tracker's output or logs")
        return "Verdict: healthy"
    per_rank: dict[int, list[str]] = defaultdict(list)
    weight: dict[int, int] = defaultdict(lambda: 9)  # first cause, then critical, warning, info
    order: dict[int, int] = {}  # rank → its place in an ordered family (first OOM first)
    groups: dict[FindingFamily, list[Finding]] = {}
    for f in report.findings():
        if not f.of.verdict_per_rank or not f.ranks:
            groups.setdefault(f.of, []).append(f)
            continue
        rank = f.ranks[0]
        per_rank[rank].append(f.title)
        weight[rank] = min(weight[rank], f.of.verdict_weight(f))
        if f.of.verdict_ordered:
            order.setdefault(rank, f.index)
    parts = [f"rank {r}: {', '.join(kinds)}" for r, kinds in
             sorted(per_rank.items(), key=lambda kv: (weight[kv[0]],
                                                      order.get(kv[0], len(order)),
                                                      kv[0]))[:5]]
    if len(per_rank) > 5:
        parts.append(f"{len(per_rank) - 5} more rank(s)")
    parts.extend(family.verdict_group(found) for family, found in groups.items())
    return "Verdict: FINDINGS — " + "; ".join(parts)
