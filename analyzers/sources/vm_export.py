"""Raw samples through VictoriaMetrics' export API (``/api/v1/export``), JSON lines.

The query API gives a ``[time, "value"]`` pair per sample; the export API gives each series as
one line of two plain number arrays, ``{"metric":{…},"values":[…],"timestamps":[…]}`` — the raw
samples as stored (after the server's own deduplication), no lookback, no step. The whole
answer is decoded by msgspec in one call into typed structs and the numbers go into numpy in one
pass (no Python object per sample survives).

What comes back is what a range-vector query returns: every stored sample of the matching
series in ``[start, end]`` at its own timestamp (cut to the range here too, and sorted: a
series may come in several lines, which the caller's merge unites). VictoriaMetrics' binary
``/api/v1/export/native`` is not used: its block format has no published decoder outside
VictoriaMetrics itself.

Requests go through :func:`stormotel.analyzers.http.request` on the endpoint's own client: the
same TLS, auth, tenant headers, timeouts, retries and deadline as every query (a vmselect URL
such as ``…/select/0/prometheus`` carries its tenant in the path, as for queries).
"""

from __future__ import annotations

import itertools
import math
import re
from typing import TYPE_CHECKING

import msgspec
import numpy as np
from stormotel.analyzers.http import EndpointError, request
from stormotel.analyzers.sources.prometheus_api import Series

if TYPE_CHECKING:
    from stormotel.analyzers.sources.prometheus_api import PrometheusAPI

PATH = "/api/v1/export"


class _Line(msgspec.Struct):
    metric: dict[str, str]
    values: list[float]
    timestamps: list[int]


class _LooseLine(msgspec.Struct):
    metric: dict[str, str]
    values: list[float | str | None]
    timestamps: list[int]


_LINES = msgspec.json.Decoder(list[_Line])
_LOOSE = msgspec.json.Decoder(list[_LooseLine])
#: What VictoriaMetrics writes for samples that are not finite numbers: ``+Inf``/``-Inf`` as
#: bare words, a staleness marker as ``null`` (its query API says ``"NaN"`` for the same).
_INF = re.compile(rb"(?<=[\[,])([+-]?)Inf(?=[\],])")


def decode_export(body: bytes, start_ms: int, end_ms: int) -> list[Series]:
    """The JSON lines of an export answer as series cut to ``[start_ms, end_ms]``, each sorted
    by time (ValueError for an answer that is not export lines)."""
    text = body.strip()
    if not text:
        return []
    doc = b"[" + text.replace(b"\n", b",") + b"]"  # a newline is never inside a JSON string
    try:
        lines: list[_Line] = _LINES.decode(doc)
    except msgspec.DecodeError:
        try:  # null and bare Inf words: read as NaN and +-Inf (the caller counts them as bad)
            loose = _LOOSE.decode(_INF.sub(_inf, doc))
        except msgspec.DecodeError as e:
            raise ValueError(f"not export JSON lines ({e})") from None
        lines = [_Line(ln.metric, [math.nan if x is None else float(x) for x in ln.values],
                       ln.timestamps) for ln in loose]
    counts = [len(ln.values) for ln in lines]
    if any(len(ln.timestamps) != c for ln, c in zip(lines, counts, strict=True)):
        raise ValueError("an export line has more values than timestamps or fewer")
    total = sum(counts)
    t = np.fromiter(itertools.chain.from_iterable(ln.timestamps for ln in lines),
                    dtype=np.int64, count=total)
    v = np.fromiter(itertools.chain.from_iterable(ln.values for ln in lines),
                    dtype=np.float64, count=total)
    clean = bool(np.isfinite(v).all() and (v >= 0).all())
    out = []
    at = 0
    for ln, n in zip(lines, counts, strict=True):
        ts, vs = t[at:at + n], v[at:at + n]
        at += n
        if ts.size > 1 and not bool((ts[1:] > ts[:-1]).all()):
            # sorted; samples at one timestamp are kept for the caller's merge to count
            idx = np.argsort(ts, kind="stable")
            ts, vs = ts[idx], vs[idx]
        if ts.size and (ts[0] < start_ms or ts[-1] > end_ms):
            keep = (ts >= start_ms) & (ts <= end_ms)
            ts, vs = ts[keep], vs[keep]
        out.append(Series(ln.metric, ts * 1_000_000, vs, clean))
    return out


def _inf(m: re.Match[bytes]) -> bytes:
    """A bare ``+Inf``/``-Inf`` word as a JSON string (read back with ``float``)."""
    return b'"' + m.group(0) + b'"'


class ExportReader:
    """Raw reads of one endpoint through VictoriaMetrics' export API."""

    name = "vm_export"
    label = "VictoriaMetrics export API (/api/v1/export JSON lines)"
    #: As the query API's reads: JSON text decoded through Python numbers, ~60 B a sample.
    samples_per_read = 200_000

    def __init__(self, api: PrometheusAPI) -> None:
        self.api = api
        self.skipped_chunks = 0

    def read(self, selector: str, start_s: float, end_s: float) -> list[Series]:
        """Every stored sample of ``selector`` in ``[start_s, end_s]``; EndpointError when the
        server fails or answers with something that is not export lines."""
        start_ms, end_ms = int(start_s * 1000), math.ceil(end_s * 1000)
        url = self.api.url + PATH
        resp = request(self.api.client, "POST", url, settings=self.api.settings,
                       deadline=self.api.deadline,
                       data={"match[]": selector, "start": f"{start_ms / 1000:.3f}",
                             "end": f"{end_ms / 1000:.3f}"}, ok_statuses=(200,))
        try:
            return decode_export(resp.content, start_ms, end_ms)
        except ValueError as e:
            raise EndpointError(url, str(e)) from None
