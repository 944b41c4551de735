"""Push samples to anything that accepts Prometheus remote write 1.0.

Prometheus (``--web.enable-remote-write-receiver``), VictoriaMetrics (``/api/v1/write``), Mimir,
Cortex and Thanos Receive all take the same request: a snappy-compressed (block format)
``prometheus.WriteRequest`` protobuf. Messages come from :mod:`stormotel.analyzers.sinks.prompb`
(the official protobuf runtime), compression from ``cramjam``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import cramjam
import httpx
import numpy as np
from google.protobuf.message import Message
from stormotel.analyzers.http import Deadline, HttpSettings, request
from stormotel.analyzers.sinks import prompb
from stormotel.analyzers.sinks.findings_series import SeriesPoint

HEADERS = {"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf",
           "X-Prometheus-Remote-Write-Version": "0.1.0"}
#: Keep one request well under receivers' default body limits.
MAX_SAMPLES_PER_REQUEST = 50_000


def encode(points: Iterable[SeriesPoint]) -> bytes:
    """Group points into series (labels sorted, ``__name__`` included) and encode + compress."""
    series: dict[tuple[tuple[str, str], ...], list[tuple[int, float]]] = {}
    for p in points:
        labels = tuple(sorted({**p.labels, "__name__": p.name}.items()))
        series.setdefault(labels, []).append((p.timestamp_ms, p.value))
    req = prompb.WriteRequest()
    for labels, samples in series.items():
        ts = req.timeseries.add()
        for k, v in labels:
            ts.labels.add(name=k, value=v)
        for t, value in sorted(samples):
            ts.samples.add(value=value, timestamp=t)
    return compress(req.SerializeToString())


def encode_arrays(name: str, labels: dict[str, str], t_ms: np.ndarray,
                  values: np.ndarray) -> bytes:
    """One series from arrays (bulk loads, e.g. planting test data or backfills)."""
    req = prompb.WriteRequest()
    ts = req.timeseries.add()
    for k, v in sorted({**labels, "__name__": name}.items()):
        ts.labels.add(name=k, value=v)
    order = np.argsort(t_ms, kind="stable")
    ts.samples.extend(prompb.Sample(value=float(v), timestamp=int(t))
                      for t, v in zip(np.asarray(t_ms)[order].tolist(),
                                      np.asarray(values)[order].tolist(), strict=True))
    return compress(req.SerializeToString())


def compress(payload: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(payload))


def decode(body: bytes) -> Message:
    """Inverse of :func:`encode` (used by tests and the local receivers): a ``WriteRequest``."""
    req = prompb.WriteRequest()
    req.ParseFromString(bytes(cramjam.snappy.decompress_raw(body)))
    return req


def post(client: httpx.Client, url: str, body: bytes, *, settings: HttpSettings,
         deadline: Deadline | None = None) -> None:
    """Send one encoded request; raises ``EndpointError`` (after retries on 5xx)."""
    request(client, "POST", url, settings=settings, deadline=deadline, content=body,
            headers=HEADERS)


def write(client: httpx.Client, url: str, points: Sequence[SeriesPoint], *,
          settings: HttpSettings, deadline: Deadline | None = None) -> int:
    """Write all points in batches; returns how many samples were sent."""
    for i in range(0, len(points), MAX_SAMPLES_PER_REQUEST):
        post(client, url, encode(points[i:i + MAX_SAMPLES_PER_REQUEST]), settings=settings,
             deadline=deadline)
    return len(points)
