"""Raw samples through Prometheus remote read (``POST /api/v1/read``), streamed XOR chunks.

The query API hands samples over as JSON text, one ``[time, "value"]`` pair at a time; remote
read hands over the TSDB's own compressed chunks (~1-2 bytes a sample), the format Prometheus
stores them in. A request is a snappy-compressed protobuf ``ReadRequest`` asking for
``STREAMED_XOR_CHUNKS``; the answer is a stream of frames (uvarint length, CRC32C, protobuf
``ChunkedReadResponse``), each frame's series carrying their chunks. The messages are the
protobuf runtime's (:mod:`.prompb_read`), snappy is cramjam's, the CRC is google-crc32c's, and
the chunks are decoded for all series of an answer at once (:mod:`.xor_chunks`).

What comes back is what a range-vector query returns (:meth:`PrometheusAPI.query_raw_series`):
every stored sample of the matching series in ``[start, end]`` (ms, both ends included) at its
own timestamp — the chunks may reach outside the range and are cut to it, and Prometheus'
staleness markers (a NaN of one bit pattern, which queries never show) are dropped.

Requests go through :func:`stormotel.analyzers.http.request` on the endpoint's own client: the
same TLS, bearer/basic auth, tenant and extra headers, timeouts, retries and deadline as every
query. Mimir and Cortex serve the same API under their Prometheus prefix.
"""

from __future__ import annotations

import cramjam
import google_crc32c
import numpy as np
from stormotel.analyzers.http import EndpointError
from stormotel.analyzers.sources import prompb_read as pb
from stormotel.analyzers.sources.prometheus_api import Series
from stormotel.analyzers.sources.promql_selector import parse_selector
from stormotel.analyzers.sources.raw_reader import RawReader, ms_window, other_format
from stormotel.analyzers.sources.xor_chunks import decode_xor_chunks

PATH = "/api/v1/read"
STREAMED_TYPE = "application/x-streamed-protobuf"
HEADERS = {"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf",
           "X-Prometheus-Remote-Read-Version": "0.1.0"}
#: Prometheus' staleness marker: a NaN with this bit pattern (``value.StaleNaN``).
STALE_NAN_BITS = 0x7FF0000000000002


class RemoteReadError(ValueError):
    """An answer that is not a well-formed stream of chunked frames."""


def read_request(selector: str, start_ms: int, end_ms: int) -> bytes:
    """The snappy-compressed ``ReadRequest`` for one selector over ``[start_ms, end_ms]``
    (ValueError for a selector that cannot be put as label matchers)."""
    req = pb.ReadRequest()
    q = req.queries.add(start_timestamp_ms=start_ms, end_timestamp_ms=end_ms)
    for op, name, value in parse_selector(selector):
        q.matchers.add(type=op, name=name, value=value)
    req.accepted_response_types.append(pb.STREAMED_XOR_CHUNKS)
    return bytes(cramjam.snappy.compress_raw(req.SerializeToString()))


def frames(body: bytes) -> list[bytes]:
    """The protobuf messages of a streamed answer, each frame's CRC32C checked."""
    out = []
    at, n = 0, len(body)
    while at < n:
        size = shift = 0
        while True:
            if at >= n or shift > 63:
                raise RemoteReadError("frame length cut short")
            b = body[at]
            at += 1
            size |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        if at + 4 + size > n:
            raise RemoteReadError(f"frame of {size} bytes cut short at byte {at}")
        crc = int.from_bytes(body[at:at + 4], "big")
        data = body[at + 4:at + 4 + size]
        if google_crc32c.value(data) != crc:
            raise RemoteReadError(f"frame at byte {at} fails its CRC32C")
        out.append(data)
        at += 4 + size
    return out


def decode_answer(body: bytes, start_ms: int, end_ms: int) -> tuple[list[Series], int]:
    """The series of a streamed answer cut to ``[start_ms, end_ms]``, and how many chunks of
    another encoding (native histograms) or unreadable bits were passed over."""
    labels: list[dict[str, str]] = []
    blobs: list[bytes] = []
    per_series: list[int] = []
    other = 0
    for data in frames(body):
        try:
            msg = pb.ChunkedReadResponse()
            msg.ParseFromString(data)
        except Exception as e:  # protobuf's DecodeError: the frame is not the message
            raise RemoteReadError(f"frame is not a ChunkedReadResponse ({e})") from None
        for s in msg.chunked_series:
            labels.append({lb.name: lb.value for lb in s.labels})
            k = 0
            for c in s.chunks:
                if c.type == pb.CHUNK_XOR:
                    blobs.append(c.data)
                    k += 1
                else:
                    other += 1
            per_series.append(k)
    counts, t_ms, v, bad = decode_xor_chunks(blobs)
    other += int(bad.sum())
    # Samples per series, then cut to the range and without staleness markers (vectorised).
    edges = np.zeros(len(per_series) + 1, np.int64)
    np.cumsum(per_series, out=edges[1:])
    chunk_ends = np.concatenate(([0], np.cumsum(counts)))
    series_ends = chunk_ends[edges]
    keep = (t_ms >= start_ms) & (t_ms <= end_ms) & (v.view(np.uint64) != STALE_NAN_BITS)
    kept_before = np.concatenate(([0], np.cumsum(keep)))
    t_ns = t_ms[keep] * 1_000_000
    vals = v[keep]
    clean = bool(np.isfinite(vals).all() and (vals >= 0).all())
    out = []
    for i, lab in enumerate(labels):
        a, b = int(kept_before[series_ends[i]]), int(kept_before[series_ends[i + 1]])
        t, x = t_ns[a:b], vals[a:b]
        if t.size > 1 and not bool((t[1:] > t[:-1]).all()):  # overlapping chunks: merged
            t, idx = np.unique(t, return_index=True)
            x = x[idx]
        out.append(Series(lab, t, x, clean))
    return out, other


class RemoteReader(RawReader):
    """Raw reads of one endpoint through its remote-read API."""

    name = "remote_read"
    label = "Prometheus remote read (streamed XOR chunks)"
    #: ~1-2 bytes a sample on the wire and 16 decoded: 4x the query API's reads, ~13 MB each.
    #: The chunks of one read are decoded together, so a bigger read costs less per sample.
    samples_per_read = 800_000
    path = PATH

    def read(self, selector: str, start_s: float, end_s: float) -> list[Series]:
        """Every stored sample of ``selector`` in ``[start_s, end_s]``; EndpointError when the
        server fails or answers with something that is not a chunk stream."""
        start_ms, end_ms = ms_window(start_s, end_s)
        try:
            body = read_request(selector, start_ms, end_ms)
        except ValueError as e:
            raise EndpointError(self.url, f"the selector is not label matchers ({e})") from None
        resp = self.ask("POST", self.url, content=body, headers=HEADERS)
        if (other := other_format(resp, STREAMED_TYPE, "streamed chunks")) is not None:
            raise EndpointError(self.url, other)
        try:
            series, other_chunks = decode_answer(resp.content, start_ms, end_ms)
        except RemoteReadError as e:
            raise EndpointError(self.url, str(e)) from None
        with self._lock:
            self.skipped_chunks += other_chunks
        return series
