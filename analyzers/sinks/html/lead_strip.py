"""The HTML report's "leader and followers" section: a table with every rank of the chosen
incident, and a lead-time strip drawn as inline SVG.

At scrape resolution (Prometheus every 15 s) every rank steps up at the same scrape, and the
memory chart draws the leader's line under another rank's: the picture hides what the analysis
found. The strip draws each rank of the incident on its own row at the time of its first rise
(the tracker's sample-exact edge time when it exported one) with the interval it may have risen
in (from the last sample still low to the rise), so a leader stands apart when its interval
ends before the others begin, and a tie looks like one: intervals that overlap. Followers are
listed too (the table once named the leader only). Pure server-side SVG: no script needed.
"""

from __future__ import annotations

from typing import Any

from stormotel.analyzers.report import Report
from stormotel.analyzers.summary import fmt_bytes, fmt_duration, fmt_time

from stormotel.textsafe import html_text as escape

#: Rows drawn; a 2048-rank incident lists the first ones by rise time and says how many more.
MAX_ROWS = 24
MAX_TABLE_ROWS = 64
ROW_H = 18
LABEL_W = 120
PLOT_W = 640
COLORS = {"leader": "#d62728", "tied": "#9467bd", "follower": "#ff7f0e"}


def incident_rows(report: Report) -> list[dict[str, Any]]:
    """Every rank of the chosen incident, by first rise: role, rise time, its interval, lag
    behind the leader, how it was timed."""
    rises = report.extra.get("first_rise_by_rank") or {}
    if not isinstance(rises, dict) or not rises:
        return []
    suspects = report.cross_rank.first_cause_suspects
    leader = suspects[0].rank if suspects else None
    tied = {s.rank for s in suspects} if len(suspects) > 1 and all(
        s.confidence == "low" for s in suspects) else set()
    rows = []
    for key, r in rises.items():
        try:
            rank, t_ns = int(key), int(r["first_spike_ns"])
        except (KeyError, TypeError, ValueError):
            continue
        earliest = r.get("earliest_ns")
        role = ("tied" if rank in tied else "leader" if rank == leader else "follower")
        rows.append({"rank": rank, "role": role, "t_ns": t_ns,
                     "earliest_ns": int(earliest) if isinstance(earliest, int | float) else t_ns,
                     "delta_bytes": r.get("delta_bytes"),
                     "edge": bool(r.get("timed_by_edge_event"))})
    rows.sort(key=lambda row: (row["role"] == "follower", row["t_ns"], row["rank"]))
    return rows


def section(report: Report, located: Any) -> str:
    """The section's HTML: the strip (when there is an incident) and the table."""
    rows = incident_rows(report)
    suspects = report.cross_rank.first_cause_suspects
    parts = ["<h2>First cause: leader and followers</h2>"]
    if not rows:
        if suspects:  # a source without the per-rank table: the suspects alone
            rows = [{"rank": s.rank, "role": "leader" if i == 0 else "tied",
                     "t_ns": s.first_spike_ns, "earliest_ns": s.first_spike_ns,
                     "delta_bytes": s.delta_bytes, "edge": False}
                    for i, s in enumerate(suspects) if s.first_spike_ns is not None]
        if not rows:
            return parts[0] + '<p class="muted">No cross-rank incident.</p>'
    parts.append(_strip(rows))
    first = min(r["t_ns"] for r in rows if r["role"] != "follower") if any(
        r["role"] != "follower" for r in rows) else rows[0]["t_ns"]
    confidence = {s.rank: s.confidence for s in suspects}
    origin = report.extra.get("first_sample_ns", report.window_start_ns)
    head = ("role", "rank", "confidence", "first rise", "after the leader", "may have risen from",
            "rise", "timed by", "identity")
    body = []
    for r in rows[:MAX_TABLE_ROWS]:
        lag = r["t_ns"] - first
        body.append(
            f'<tr class="{r["role"]}"><td>{escape(r["role"])}</td><td>{r["rank"]}</td>'
            f'<td>{escape(confidence.get(r["rank"], "—"))}</td>'
            f'<td>{escape(fmt_time(r["t_ns"], origin))}</td>'
            f'<td>{"—" if r["role"] != "follower" else escape("+" + fmt_duration(lag / 1e9))}'
            f'</td><td>{escape(fmt_time(r["earliest_ns"], origin))}</td>'
            f'<td>{escape(fmt_bytes(r["delta_bytes"]))}</td>'
            f'<td>{"edge event (sample-exact)" if r["edge"] else "series samples"}</td>'
            f'<td>{escape(str(located(r["rank"])))}</td></tr>')
    parts.append('<table class="leaders"><thead><tr>'
                 + "".join(f"<th>{escape(h)}</th>" for h in head)
                 + "</tr></thead><tbody>" + "".join(body) + "</tbody></table>")
    if len(rows) > MAX_TABLE_ROWS:
        parts.append(f'<p class="muted">{len(rows) - MAX_TABLE_ROWS} more follower(s) in the '
                     "JSON report (extra.first_rise_by_rank).</p>")
    return "\n".join(parts)


def _strip(rows: list[dict[str, Any]]) -> str:
    """One row per rank: the interval its rise lies in (bar) and the rise itself (tick)."""
    shown = rows[:MAX_ROWS]
    t0 = min(r["earliest_ns"] for r in shown)
    t1 = max(r["t_ns"] for r in shown)
    span = max(t1 - t0, 1)
    pad = span * 0.08 + 1
    lo, width_ns = t0 - pad, span + 2 * pad

    def x(t: int) -> float:
        return LABEL_W + (t - lo) / width_ns * PLOT_W

    height = ROW_H * len(shown) + 30
    out = [f'<svg class="lead-strip" role="img" width="{LABEL_W + PLOT_W + 20}" '
           f'height="{height}" viewBox="0 0 {LABEL_W + PLOT_W + 20} {height}" '
           'xmlns="http://www.w3.org/2000/svg"><title>When each rank of the incident rose: '
           'bar = the interval it rose in, tick = the rise</title>']
    for i, r in enumerate(shown):
        y = 6 + i * ROW_H
        color = COLORS[r["role"]]
        a, b = x(r["earliest_ns"]), x(r["t_ns"])
        out.append(f'<text x="4" y="{y + 11}" font-size="11" fill="{color}">'
                   f'{escape(r["role"])} rank {r["rank"]}</text>')
        out.append(f'<rect x="{a:.1f}" y="{y + 2}" width="{max(b - a, 2):.1f}" height="10" '
                   f'fill="{color}" fill-opacity="0.35"/>')
        out.append(f'<line x1="{b:.1f}" x2="{b:.1f}" y1="{y}" y2="{y + 14}" stroke="{color}" '
                   'stroke-width="2"/>')
    axis_y = 8 + len(shown) * ROW_H
    out.append(f'<line x1="{LABEL_W}" x2="{LABEL_W + PLOT_W}" y1="{axis_y}" y2="{axis_y}" '
               'stroke="#888"/>')
    for k in range(5):
        t = lo + width_ns * k / 4
        out.append(f'<text x="{x(int(t)):.1f}" y="{axis_y + 14}" font-size="10" '
                   f'text-anchor="middle" fill="#555">{(t - t0) / 1e9:+.1f} s</text>')
    out.append("</svg>")
    if len(rows) > MAX_ROWS:
        out.append(f'<p class="muted">{len(rows) - MAX_ROWS} more rank(s) of this incident in '
                   "the table below and the JSON report (cross_rank.incidents).</p>")
    return "".join(out)
