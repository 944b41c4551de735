"""How a Prometheus read is cut into queries: the step (raw samples at their own times, never finer
than the storage), ranks per query, and one :class:`QueryTask` per field, rank batch and
endpoint."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from stormotel.analyzers.sources.bulk_read import BulkReader
from stormotel.analyzers.sources.prometheus.discover import Discovery
from stormotel.analyzers.sources.prometheus_api import (
    PrometheusAPI,
    label_selector,
    with_matcher,
)
from stormotel.analyzers.sources.protocol import QueryWindow

from stormotel import schema

#: Upper bound on points fetched per series over the whole window (sets the coarsest step).
MAX_POINTS_PER_SERIES = 200_000
#: Ranks per query: failures are reported per batch, long selectors stay reasonable.
RANK_BATCH = 64
DEFAULT_CONCURRENCY = 4
#: Samples one raw read may bring back (a short window reads more ranks per query: 10,000 ranks
#: x 1 h in 64-rank reads was 1,256 requests, most of their cost per request, not per sample).
TARGET_SAMPLES_PER_READ = 200_000
#: Ranks per read at most: the rank alternation stays ~6 KB, under VictoriaMetrics'
#: ``-search.maxQueryLen`` (16 KiB).
MAX_RANK_BATCH = 1000
#: Never query finer than this (ms resolution is what Prometheus stores).
MIN_STEP_S = 1.0


def step_range(step_s: float) -> str:
    """Range literal for "the step before this point": one ms short of the step, because
    Prometheus 2 ranges are closed at both ends and would otherwise see a sample twice."""
    return f"{max(1, round(step_s * 1000) - 1)}ms"


def choose_step(window: QueryWindow, native_interval_s: float | None,
                max_points_per_series: int = MAX_POINTS_PER_SERIES) -> float:
    """The finest step worth asking for: the data's own spacing, bounded by total points."""
    if window.step_s:
        return float(window.step_s)
    step = native_interval_s or 15.0
    step = max(step, window.seconds / max_points_per_series, MIN_STEP_S)
    return round(step, 3)


def adaptive_rank_batch(window: QueryWindow, step: float,
                        target: int = TARGET_SAMPLES_PER_READ) -> int:
    """Ranks per raw read: ``RANK_BATCH`` for long windows, more for short ones, so each read
    returns about ``target`` samples (one series per rank)."""
    per_series = max(1.0, window.seconds / max(step, MIN_STEP_S))
    return int(min(MAX_RANK_BATCH, max(RANK_BATCH, target // per_series)))


@dataclass
class QueryTask:
    api: PrometheusAPI
    fname: str
    selector: str
    ranks: list[int]
    peak: bool
    start_s: float
    end_s: float
    #: "field" (a sample field), "marker" (step gauge, OOM counter) or "edge" (edge gauge).
    what: str = "field"
    #: The selector without its rank matcher (a refused read is asked again per rank set).
    base: str = ""
    #: The endpoint's bulk API (None: the query API).
    reader: BulkReader | None = None

    def split(self) -> list[QueryTask]:
        """Two tasks over half the ranks each (a read the server refused as too large)."""
        half = len(self.ranks) // 2
        return [replace(self, ranks=part, selector=rank_selector(self.base, part))
                for part in (self.ranks[:half], self.ranks[half:])]


def rank_selector(base: str, ranks: list[int]) -> str:
    """``base`` narrowed to ``ranks``."""
    return with_matcher(base, f'{schema.ATTR_RANK}=~"{"|".join(map(str, ranks))}"')


def plan_queries(discoveries: list[Discovery], window: QueryWindow, step: float,
                  rank_batch: int) -> list[QueryTask]:
    start_s = window.start_ns / 1e9
    end_s = window.end_ns / 1e9
    tasks = []
    for d in discoveries:
        ranks = d.ranks
        for start in range(0, len(ranks), rank_batch):
            batch = ranks[start:start + rank_batch]
            wanted = [(fname, name, "field") for fname, names in d.names.items()
                      for name in names]
            wanted += [(kind, name, "marker") for kind, names in d.marker_names.items()
                       for name in names]
            wanted += [(schema.ATTR_EDGE, name, "edge") for name in d.edge_names]
            wanted += [(schema.ATTR_EDGE, name, "edge_gap") for name in d.gap_names]
            for fname, name, what in wanted:
                base = label_selector({"__name__": name, schema.ATTR_JOB_ID: window.job_id},
                                      None, window.extra_matchers)
                tasks.append(QueryTask(d.api, fname, rank_selector(base, batch), batch,
                                   fname in d.peak_fields, start_s, end_s, what, base,
                                   d.reader))
    return tasks

Parts = dict[tuple[int, str], list[tuple[np.ndarray, np.ndarray]]]
#: A rank's field reads, each with the endpoint (URL) that answered it: one server's reads (its
#: time chunks, its spellings) are one replica; another server's, another replica.
SampleParts = dict[tuple[int, str], list[tuple[np.ndarray, np.ndarray, str]]]
