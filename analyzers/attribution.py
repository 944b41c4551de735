"""Where the ranks a report names ran: host, GPU, pod, namespace, node, Slurm job.

"Rank 2 went first" sends someone looking for rank 2; "rank 2 (host gpu-node-1, pod trainer-2,
namespace ml)" sends them to the right machine. Sources put what they know in each rank's
:class:`~stormotel.analyzers.timeline.RankIdentity`; :func:`attribute` copies it into the report
(``extra["rank_attribution"]``) for the ranks the findings name, and every sink (summary,
annotations, findings series, HTML) reads it from there through
:mod:`stormotel.analyzers.locations`, so they all say the same thing.
"""

from __future__ import annotations

from stormotel.analyzers.findings import by_importance, ranks_named
from stormotel.analyzers.locations import KEY
from stormotel.analyzers.report import Report
from stormotel.analyzers.timeline import Timeline

from stormotel import schema


def named_ranks(report: Report) -> list[int]:
    """Every rank a finding names, in the report's order of importance, once."""
    return ranks_named(by_importance(report.findings()))


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
