"""Which API reads a TSDB endpoint's raw samples: a bulk API where the server offers one.

The query API works everywhere but hands samples over as JSON pairs, one number at a time. Two
bulk APIs hand over the same raw samples:

* Prometheus (and Mimir, Cortex) **remote read** with streamed XOR chunks
  (:mod:`.remote_read`): the TSDB's own compressed chunks, ~1-2 bytes a sample; measured on
  Prometheus 2.42 its answers cost the server a fifteenth of the query API's;
* VictoriaMetrics' **native export** (:mod:`.vm_native`): its own storage blocks (~1 byte a
  sample), decoded into numpy without a Python number per sample;
* VictoriaMetrics' **export API** (:mod:`.vm_export`): each series as two number arrays, no
  per-sample pair; measured cheaper than the query API for long windows (6 h) and about the
  same for short ones (docs/benchmarks.md). Read where the native export is not understood
  (a newer block layout) or its server's deduplication setting cannot be read.

Each endpoint is probed once per run, with a read of the job's series over the last second of
the window (a few bytes): remote read first, then the native export, then the JSON export.
The first that answers in its own format (or refuses the probe for its size, a server's series
limit: the API is there, and its reads are split like the query API's) reads every raw series
of the endpoint; if none does
(Thanos, a proxy that only passes the query API, remote read switched off), the query API
reads it and a note says why. ``--tsdb-read`` forces one API (a forced API that fails its
probe still falls back, noted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from stormotel.analyzers.http import EndpointError
from stormotel.analyzers.sources.prometheus_api import is_too_large
from stormotel.analyzers.sources.remote_read import RemoteReader
from stormotel.analyzers.sources.vm_export import ExportReader
from stormotel.analyzers.sources.vm_native import NativeReader

if TYPE_CHECKING:
    from stormotel.analyzers.sources.prometheus_api import PrometheusAPI, Series

#: ``--tsdb-read`` choices: probe (the default), the query API only, or one bulk API.
READ_APIS = ("auto", "query", "remote-read", "export-native", "export")
QUERY_LABEL = "Prometheus query API (range-vector reads, JSON)"


class BulkReader(Protocol):
    """Reads every raw sample of a selector over a window (what ``query_raw_series`` gives)."""

    name: str
    label: str
    skipped_chunks: int
    #: What the reads met that the report should say (a fallback taken, ...).
    notes: list[str]
    #: Samples one read may bring back (sizes the rank batches, as for the query API).
    samples_per_read: int

    def read(self, selector: str, start_s: float, end_s: float) -> list[Series]: ...


def choose_reader(api: PrometheusAPI, selector: str, end_s: float, mode: str = "auto"
                  ) -> tuple[BulkReader | None, str]:
    """The reader for ``api`` (None: the query API) and a note saying which and why."""
    if mode == "query":
        return None, f"{api.url}: read through the {QUERY_LABEL} (--tsdb-read query)"
    candidates: list[BulkReader] = []
    if mode in ("auto", "remote-read"):
        candidates.append(RemoteReader(api))
    if mode in ("auto", "export-native"):
        candidates.append(NativeReader(api))
    if mode in ("auto", "export"):
        candidates.append(ExportReader(api))
    why = []
    for reader in candidates:
        try:  # a native answer not understood fails its probe (its reads fall back instead)
            getattr(reader, "probe", reader.read)(selector, end_s - 1.0, end_s)
        except EndpointError as e:
            if not is_too_large(e):  # refused for its size: the API is there (reads split)
                why.append(f"{reader.name}: {str(e).split(': ', 1)[-1][:160]}")
                continue
        native_why = [w for w in why if w.startswith(NativeReader.name)]
        return reader, (f"{api.url}: raw samples read through the {reader.label}"
                        + (f" (not the native export: {native_why[0]})" if native_why else ""))
    return None, (f"{api.url}: read through the {QUERY_LABEL}: no bulk read API answered "
                  f"({'; '.join(why)})")
