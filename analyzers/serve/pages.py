"""The receiver's own page: recent analyses, newest first (job, trigger, verdict, top rank,
link). Everything shown comes from alert labels or reports — input — so every value is
HTML-escaped and every link is built from the job id percent-encoded; no script runs on the
page (and the response forbids one: ``Content-Security-Policy``)."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

#: Served with every page of ours: nothing but inline styles, no script at all.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def job_link(base: str, job_id: str) -> str:
    """``<base>/jobs/<job_id>/`` with the id percent-encoded as one path segment."""
    return f"{base.rstrip('/')}/jobs/{quote(job_id, safe='')}/"


def _when(ns: object) -> str:
    if not isinstance(ns, int):
        return "-"
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def index_page(metas: list[dict[str, Any]], base: str = "") -> str:
    """The ``GET /`` page."""
    e = html.escape
    rows = []
    for m in metas:
        job = str(m.get("job_id", ""))
        status = "final (resolved)" if m.get("final") else str(m.get("status", ""))
        top = m.get("top_rank")
        rows.append(
            "<tr>"
            f"<td><a href=\"{e(job_link(base, job))}\">{e(job)}</a></td>"
            f"<td>{e(_when(m.get('analysed_at_ns')))}</td>"
            f"<td>{e(', '.join(map(str, m.get('trigger') or [])))}</td>"
            f"<td>{e(status)}</td>"
            f"<td>{e(str(m.get('outcome', '')))}</td>"
            f"<td>{e('-' if top is None else str(top))}</td>"
            f"<td>{e(str(m.get('headline', '')))}</td>"
            f"<td><a href=\"{e(job_link(base, job))}report.json\">json</a></td>"
            "</tr>")
    body = "\n".join(rows) or "<tr><td colspan=8>no analysis yet</td></tr>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>stormotel serve</title>
<style>body{{font:14px system-ui,sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}}</style>
</head><body><h1>stormotel: recent analyses</h1>
<p>Newest first. Each row is the latest analysis of a job that paged; the link opens its
report.</p>
<table><tr><th>job</th><th>analysed</th><th>trigger</th><th>status</th><th>outcome</th>
<th>top rank</th><th>verdict</th><th>report</th></tr>
{body}
</table></body></html>
"""
