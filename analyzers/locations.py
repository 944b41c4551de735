"""Reading where a report's ranks ran: the ``rank_attribution`` table as labels and as text.

The table is written once by :func:`stormotel.analyzers.attribution.attribute`; every reader (the
findings, the summary, the findings series, the HTML page) goes through these two functions, so
they all say the same thing. Kept apart from the writer because the writer picks its ranks from
the findings, which themselves read locations here.
"""

from __future__ import annotations

from stormotel.analyzers.report import Report

from stormotel import schema

KEY = "rank_attribution"


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
