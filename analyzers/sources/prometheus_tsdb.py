"""stormotel's own series (``stormotel_*``) from Prometheus-compatible endpoints, with the
trackers' GPU/pod info series joined in: the default TSDB source of
:mod:`stormotel.analyzers.sources.tsdb`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stormotel.analyzers.options import JobOptions
from stormotel.analyzers.sources.protocol import Progress, TsdbSource

if TYPE_CHECKING:
    import httpx
    from stormotel.analyzers.http import Deadline
    from stormotel.analyzers.sources.protocol import LoadOutcome, QueryWindow
    from stormotel.analyzers.timeline import Timeline


class PrometheusSource(TsdbSource):
    """``--prometheus URL…`` (without ``--dcgm``)."""

    @classmethod
    def selected(cls, job: JobOptions) -> bool:
        return not job.tsdb.dcgm

    def load(self, client: httpx.Client, qw: QueryWindow, deadline: Deadline | None,
             progress: Progress) -> tuple[Timeline, LoadOutcome]:
        from stormotel.analyzers.sources.prometheus import load_prometheus
        from stormotel.analyzers.sources.rank_info import with_rank_info

        tsdb, settings = self.job.tsdb, self.job.http
        timeline, outcome = load_prometheus(tsdb.prometheus, qw, settings=settings,
                                            client=client, deadline=deadline,
                                            concurrency=tsdb.concurrency, progress=progress.fn,
                                            read_api=tsdb.read_api)
        with_rank_info(timeline, list(tsdb.prometheus), qw, settings, client, deadline)
        return timeline, outcome
