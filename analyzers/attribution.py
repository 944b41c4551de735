"""Where the ranks a report names ran: host, GPU, pod, namespace, node, Slurm job.

"Rank 2 went first" sends someone looking for rank 2; "rank 2 (host gpu-node-1, pod trainer-2,
namespace ml)" sends them to the right machine. Sources put what they know in each rank's
:class:`~analyzers.timeline.RankIdentity`; :func:`attribute` copies it into the report
(``extra["rank_attribution"]``) for the ranks the findings name, and every sink (summary,
annotations, findings series, HTML) reads it from there, so they all say the same thing.
"""

from __future__ import annotations

from stormotel.analyzers.report import Report
from stormotel.analyzers.timeline import Timeline

from stormotel import schema

KEY = "rank_attribution"


def named_ranks(report: Report) -> list[int]:
    """Every rank a finding names, in the report's order of importance, once."""
    order = [s.rank for s in report.cross_rank.first_cause_suspects]
    forensics = report.extra.get("oom_forensics") or {}
    order += [int(d["rank"]) for d in forensics.get("ranks", []) if "rank" in d]
    for f in report.stall_findings:
        order += list(f.ranks)
    order += [f.rank for f in report.gap_findings]
    order += [c.rank for c in report.collective_attributions]
    return list(dict.fromkeys(order))


def attribute(report: Report, timeline: Timeline) -> Report:
    """Add ``extra["rank_attribution"]``: rank → known location labels, for the named ranks."""
    table: dict[str, dict[str, str]] = {}
    for rank in named_ranks(report):
        series = timeline.ranks.get(rank)
        if series is None:
            continue
        labels = {k: str(v) for k in schema.LOCATION_LABELS
                  if (v := getattr(series.identity, k, None)) not in (None, "")}
        if labels:
            table[str(rank)] = labels
    report.extra[KEY] = table
    return report


def labels_of(report: Report, rank: int | str, keys: tuple[str, ...] | None = None
              ) -> dict[str, str]:
    """The known location labels of ``rank`` (all of them, or only ``keys``)."""
    table = report.extra.get(KEY)
    got = table.get(str(rank), {}) if isinstance(table, dict) else {}
    return {k: v for k, v in got.items() if keys is None or k in keys}


def location_text(report: Report, rank: int | str) -> str:
    """``host=… gpu=… pod=… namespace=…`` for text outputs; empty when nothing is known."""
    got = labels_of(report, rank)
    return " ".join(f"{k}={got[k]}" for k in schema.LOCATION_LABELS if k in got)
