"""The report page: static tables (readable with scripts off) around the inlined charts.

Everything the page needs is inside the one file — uPlot's minified JS and CSS, the chart
script, the data — and a Content-Security-Policy forbids every network fetch, so the file opens
the same on a laptop on a plane as on a cluster's login node.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from importlib import resources

from stormotel.analyzers.headline import headline
from stormotel.analyzers.locations import location_text
from stormotel.analyzers.report import OomRank, Report
from stormotel.analyzers.sinks.html import lead_strip
from stormotel.analyzers.sinks.html.chart_data import ChartData, confidence_words, severity_words
from stormotel.analyzers.stalls.per_rank import place_text
from stormotel.analyzers.summary import fmt_bytes, fmt_duration, fmt_time
from stormotel.analyzers.timeline import RankIdentity, Timeline

# Every string on the page comes from input (job ids, sources, notes, file names): one escape
# for all of them that also redacts credentials and shows control/bidi characters escaped.
from stormotel.textsafe import html_text as escape
from stormotel.textsafe import script_json

#: No fetch of any kind: scripts and styles are inline, images only data: URLs.
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data:")
IDENTITY_COLUMNS = ("host", "gpu", "gpu_uuid", "pod", "namespace", "node", "slurm_job_id")
MAX_ROWS = 200


def asset(name: str) -> str:
    return resources.files(__name__.rpartition(".")[0]).joinpath("assets", name).read_text("utf-8")


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    rows = list(rows)
    if not rows:
        return '<p class="muted">none</p>'
    more = ""
    if len(rows) > MAX_ROWS:
        more = f'<p class="muted">… and {len(rows) - MAX_ROWS} more (see the JSON report)</p>'
        rows = rows[:MAX_ROWS]
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>{more}"


def identity_text(ident: RankIdentity | None) -> str:
    """``host=… gpu=… pod=…`` for the columns a rank's identity has."""
    if ident is None:
        return ""
    return " ".join(f"{k}={v}" for k in IDENTITY_COLUMNS
                    if (v := getattr(ident, k, None)) not in (None, ""))


def _ident(timeline: Timeline, rank: int) -> str:
    s = timeline.ranks.get(rank)
    return identity_text(s.identity if s else None)


def _located(report: Report, timeline: Timeline, rank: int) -> str:
    """Where the rank ran: the report's attribution, else the timeline's identity."""
    return location_text(report, rank) or _ident(timeline, rank)


def stall_headline(report: Report) -> str:
    """The stall part of the headline: the root finding's ranks, else the undecided places."""
    from stormotel.analyzers.families import stall_verdict

    return stall_verdict(report.stall_findings)


def _verdict(report: Report) -> str:
    """The page's first line. With findings it leads with the text summary's ``Lead:`` (an
    OOM, a dead rank, a leak, a stall: the page's question answered first), then the
    first-cause sentence: on an OOM or a one-rank leak the first-cause sentence alone read
    "First cause undecided", the opposite of what the report found."""
    first = _first_cause(report)
    if not report.has_findings():
        return escape(first)
    lead = headline(report)
    if lead.kind == "first_cause":  # the same answer: say it once
        return escape(first)
    return escape(f"{lead.text[:1].upper()}{lead.text[1:]}. {first}")


def _first_cause(report: Report) -> str:
    sus = report.cross_rank.first_cause_suspects
    if sus:
        lead = sus[0]
        text = (f"Rank {lead.rank} went first ({lead.confidence} confidence), "
                f"{fmt_duration(lead.lead_ns / 1e9)} before the others")
    elif report.cross_rank.notes:
        text = "First cause undecided: " + report.cross_rank.notes[0]
    else:
        text = "No first-cause suspect."
    roots = [f for f in report.stall_findings if f.consequence_of is None]
    if roots:
        # the same words as the text summary's verdict: the named ranks, or where each is
        text += "; " + stall_headline(report)
    return text


def _sections(timeline: Timeline, report: Report) -> str:
    origin = report.window_start_ns
    parts = [lead_strip.section(report, lambda rank: _located(report, timeline, rank))]
    if report.cross_rank.notes:
        parts.append("<ul>" + "".join(f"<li>{escape(n)}</li>" for n in report.cross_rank.notes)
                     + "</ul>")
    forensics = report.oom_forensics
    if forensics is not None:
        ooms = [f.record for f in report.findings() if isinstance(f.record, OomRank)]
        parts.append("<h2>Out-of-memory forensics</h2>")
        parts.append(f'<p class="verdict">{escape(str(forensics.summary))}</p>')
        parts.append(_table(
            ("order", "rank", "OOM at", "cause", "allocated", "reserved", "device used",
             "gap", "dump", "identity"),
            ((i + 1, o.rank, fmt_time(o.oom_ns, origin), o.cause, fmt_bytes(o.allocated_bytes),
              fmt_bytes(o.reserved_bytes), fmt_bytes(o.device_used_bytes),
              fmt_bytes(o.gap_bytes), o.dump_path, _located(report, timeline, o.rank))
             for i, o in enumerate(ooms))))
    parts.append("<h2>Gap findings</h2>")
    parts.append(_table(
        ("rank", "classification", "severity and confidence", "from", "to", "remedy",
         "identity"),
        ((f.rank, f.classification, severity_words(f.severity, f.confidence),
          fmt_time(f.start_ns, origin), fmt_time(f.end_ns, origin),
          f.remediation[0] if f.remediation else "", _located(report, timeline, f.rank))
         for f in report.gap_findings)))
    parts.append("<h2>Stall findings</h2>")
    parts.append(_table(
        ("#", "kind", "ranks", "op", "category", "source", "confidence", "consequence of",
         "reason", "fix"),
        ((i, f.kind, ",".join(map(str, f.ranks)) or "—", f.op or "",
          f.evidence.get("category", getattr(f, "category", "")) or "", f.source, f.confidence,
          "" if f.consequence_of is None else f.consequence_of,
          str(f.evidence.get("reason") or "")[:2000],
          f.remediation[0][:2000] if f.remediation else "")
         for i, f in enumerate(report.stall_findings))))
    places = (report.extra.get("stalls") or {}).get("per_rank") or {}
    if places and report.stall_findings:
        parts.append("<h2>Where each rank is</h2>")
        parts.append(_table(("rank", "main thread (stack snapshot)", "named by"), (
            (r, place_text(v["sources"]["stacks"]) if "stacks" in v.get("sources", {}) else "—",
             "; ".join(f"[{f['index']}] {f['kind']} {f['role']} ({f['confidence']})"
                       for f in v.get("findings") or []))
            for r, v in list(places.items())[:64])))
    stacks = (report.extra.get("stalls") or {}).get("stacks")
    if stacks:
        parts.append("<h2>What each rank was doing (stack snapshots)</h2>")
        parts.append(_table(
            ("ranks", "where", "innermost frame", "in collective"),
            ((",".join(map(str, g["ranks"])), g["where"], g["innermost"],
              g["collective"] or "no") for g in stacks.get("groups", []))))
    parts.append("<h2>Collective-synchronised gap spikes</h2>")
    parts.append(_table(
        ("rank", "classification", "confidence", "from", "to", "reasons"),
        ((c.rank, c.classification,
          f"{confidence_words(c.confidence)} ({c.confidence:.2f})",
          fmt_time(c.interval_start_ns, origin),
          fmt_time(c.interval_end_ns, origin), ", ".join(c.reason_codes))
         for c in report.collective_attributions)))
    return "\n".join(parts)


def _legend() -> str:
    items = [("rgba(70,130,180,0.35)", "envelope: min–max of all ranks (per pixel, spikes kept)"),
             ("#1f4e79", "median of all ranks"), ("#d62728", "leader (solid line)"),
             ("#ff7f0e", "follower"), ("#7b0000", "OOM"), ("#b8860b", "threshold crossing"),
             ("#1f77b4", "first rise (dashed)"),
             ("rgba(214,39,40,0.3)", "gap finding (shaded; long ones as a strip along the top)"),
             ("rgba(128,128,128,0.35)", "no data: no sample for longer than 3 sampling "
              "intervals (tracker stopped, scrape failed, rank restarted); lines are not drawn "
              "across it"),
             ("rgba(120,120,120,0.6)", "steps (bottom lane)"),
             ("rgba(148,103,189,0.8)", "collectives (lane above steps)")]
    return '<p class="legend">' + "".join(
        f'<span><i class="sw" style="background:{c}"></i>{escape(t)}</span>' for c, t in items
    ) + "</p>"


def _resolution_note(charts: ChartData) -> str:
    """What the lines mean, in words: step lines at the data's own resolution."""
    res = charts.get("resolution_seconds")
    if not res:
        return ""
    return ('<p class="muted">Lines are steps: each sample holds its value until the next '
            f"one. The data's resolution is {escape(fmt_duration(res))} (its sampling or "
            "scrape interval): an event is placed to within that, and no lead shorter than it "
            "is claimed. Each chart reduces time to at most 1,200 columns, keeping every "
            "column's minimum and maximum, so a one-sample spike stays visible.</p>")


def render_page(timeline: Timeline, report: Report, charts: ChartData) -> str:
    named = charts["named_ranks"]
    rank_rows = ((r, len(timeline.ranks[r]), _ident(timeline, r)) for r in named
                 if r in timeline.ranks)
    header = (f"job {report.job_id or '?'} · world size {report.world_size or '?'} · "
              f"{len(report.participating_ranks)} rank(s) with data"
              + (f" · missing {len(report.missing_ranks)}" if report.missing_ranks else "")
              + f" · window {fmt_time(report.window_start_ns, None)} → "
              + f"{fmt_time(report.window_end_ns, report.window_start_ns)}"
              + f" · clocks aligned by {report.settings.get('align', 'wall')}")
    notes = "".join(f"<li>{escape(n)}</li>" for n in report.notes[:30])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>stormotel report — {escape(str(report.job_id or "job"))}</title>
<style>{asset("uPlot.min.css")}</style>
<style>{asset("report.css")}</style>
</head><body>
<h1>stormotel memory report — {escape(str(report.job_id or "job"))}</h1>
<p class="muted">{escape(header)}</p>
<p class="verdict">{_verdict(report)}</p>
<h2>Memory per rank</h2>
{_legend()}
{_resolution_note(charts)}
<div id="charts"></div>
<p class="muted" id="render-time"></p>
{_sections(timeline, report)}
<h2>Ranks drawn as lines</h2>
{_table(("rank", "samples", "identity"), rank_rows)}
<h2>Notes</h2>
<ul>{notes}</ul>
<p class="muted">Sources: {escape(", ".join(report.sources[:20]))}. Charts: uPlot (MIT),
inlined.</p>
<script type="application/json" id="stormotel-data">{script_json(charts)}</script>
<script>{asset("uPlot.iife.min.js")}</script>
<script>{asset("report.js")}</script>
</body></html>
"""
