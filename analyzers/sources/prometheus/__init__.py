"""Read a job's memory telemetry from Prometheus-compatible HTTP APIs into one Timeline.

Works against anything that speaks the Prometheus query API (Prometheus, VictoriaMetrics,
Thanos, Mimir, Cortex): ranks are discovered with ``/api/v1/series``, each field is fetched with
``/api/v1/query_range`` in chunks that stay under the 11,000-points-per-series limit, queries
run concurrently with a bound, and transient failures are retried by
:mod:`stormotel.analyzers.http`.

A failure never loses what did arrive: the Timeline holds every rank that could be read, and
its ``notes``/``skipped`` say which endpoint and ranks failed and why, so the job can report a
partial result honestly instead of crashing or pretending to be complete.

Names come from :mod:`stormotel.schema`; every spelling a translator may produce is accepted
(pull exporter vs. OTLP receiver), and the tracker's rolling peak series is preferred when it
exported one, so a spike between two scrapes is not lost.

**Resolution.** Memory series are read as raw samples at their own timestamps (range-vector
selectors, chunked), never re-gridded onto a shared step: a scrape offset between two targets
is not a lead. The tracker's edge gauges (``…_edge_timestamp_seconds``) become first-rise,
threshold and OOM markers at the tracker's own sample time, with the tracker's sampling interval
as their resolution. Several endpoints (an HA pair, one per cluster) merge deterministically:
the same answer in any order, exact duplicates removed, conflicting values at one timestamp
resolved to the larger one and noted.

The package, by concern: :mod:`.plan` (step, ranks per query, the queries), :mod:`.discover`
(what an endpoint holds for the job), :mod:`.samples` (memory samples cleaned and merged),
:mod:`.markers` (edge, step and OOM markers), :mod:`.load` (:func:`load_prometheus`: all of it,
concurrently). What a read covers and what it reached (:class:`QueryWindow`,
:class:`LoadOutcome`) live in :mod:`stormotel.analyzers.sources.protocol`, so the run and the
source protocol name them without loading this package.
"""

from stormotel.analyzers.sources.prometheus.load import load_prometheus
from stormotel.analyzers.sources.prometheus.plan import DEFAULT_CONCURRENCY, choose_step, step_range
from stormotel.analyzers.sources.prometheus.samples import clean_byte_series, matrix_series
from stormotel.analyzers.sources.protocol import LoadOutcome, QueryWindow

__all__ = ["DEFAULT_CONCURRENCY", "LoadOutcome", "QueryWindow", "choose_step", "clean_byte_series",
           "load_prometheus", "matrix_series", "step_range"]
