"""dcgm-exporter's device-memory series, mapped to ranks (``--dcgm``): a TSDB source of
:mod:`stormotel.analyzers.sources.tsdb` for jobs that run without the tracker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stormotel.analyzers.options import DCGM_FIELDS_ENV, JobOptions
from stormotel.analyzers.sources.protocol import Progress, TsdbSource

if TYPE_CHECKING:
    import httpx
    from stormotel.analyzers.http import Deadline
    from stormotel.analyzers.sources.protocol import LoadOutcome, QueryWindow
    from stormotel.analyzers.timeline import Timeline


class DcgmSource(TsdbSource):
    """``--prometheus URL --dcgm`` (with ``--gpu-rank-map`` or ``--rank-label``)."""

    @classmethod
    def selected(cls, job: JobOptions) -> bool:
        return job.tsdb.dcgm

    def load(self, client: httpx.Client, qw: QueryWindow, deadline: Deadline | None,
             progress: Progress) -> tuple[Timeline, LoadOutcome]:
        from stormotel.analyzers.sources.dcgm import DcgmOptions, GpuRankMap, load_dcgm

        tsdb = self.job.tsdb
        options = DcgmOptions(
            rank_map=GpuRankMap.load(tsdb.gpu_rank_map) if tsdb.gpu_rank_map else None,
            rank_label=tsdb.rank_label, selector=tsdb.dcgm_selector,
            fields=configured_fields(tsdb.dcgm_fields))
        timeline, outcome = load_dcgm(tsdb.prometheus, qw, options, settings=self.job.http,
                                      client=client, deadline=deadline,
                                      concurrency=tsdb.concurrency, progress=progress.fn)
        timeline.notes.append(
            f"dcgm-exporter collects every {tsdb.dcgm_collect_interval_s:g} s "
            "(--dcgm-collect-interval): a scraped value may be that old, so no lead "
            "shorter than that is claimed")
        return timeline, outcome


def configured_fields(flags: tuple[tuple[str, str, int | None], ...],
                      environ: dict[str, str] | None = None
                      ) -> dict[str, tuple[str, int | None]] | None:
    """$STORMOTEL_DCGM_FIELDS, then each --dcgm-field over it; a bad variable is a usage error
    naming it."""
    import os

    from stormotel import schema
    from stormotel.errors import UsageError

    env = os.environ if environ is None else environ
    fields: dict[str, tuple[str, int | None]] = {}
    raw = env.get(DCGM_FIELDS_ENV, "").strip()
    if raw:
        try:
            fields.update(schema.parse_dcgm_fields(raw))
        except ValueError as e:
            raise UsageError(f"{DCGM_FIELDS_ENV}: {e}") from None
    fields.update({role: (metric, unit) for role, metric, unit in flags})
    return fields or None
