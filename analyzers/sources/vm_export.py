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
import re
from typing import TYPE_CHECKING

import msgspec
import numpy as np
from stormotel.analyzers.http import EndpointError
from stormotel.analyzers.sources.prometheus_api import Series
from stormotel.analyzers.sources.promql_selector import unselected
from stormotel.analyzers.sources.raw_reader import RawReader, ms_window

if TYPE_CHECKING:
    from collections.abc import Mapping

    import httpx

PATH = "/api/v1/export"


class _Line(msgspec.Struct):
    metric: dict[str, str]
    values: list[float]
    timestamps: list[int]


class _LooseLine(msgspec.Struct):
    metric: dict[str, str]
    values: list[float | str | None]
    timestamps: list[int]


class _RawLine(msgspec.Struct):
    metric: dict[str, str]
    #: The ``[…]`` texts as they came, read by :func:`_grouped`.
    values: msgspec.Raw
    timestamps: msgspec.Raw


_LINES = msgspec.json.Decoder(list[_Line])
_LOOSE = msgspec.json.Decoder(list[_LooseLine])
_RAW = msgspec.json.Decoder(list[_RawLine])
_FLOATS = msgspec.json.Decoder(list[float])
_INTS = msgspec.json.Decoder(list[int])
#: Text per group of lines whose numbers are read together: the Python numbers of one group
#: are made, copied into an array and freed while still in cache (and never all at once).
GROUP_BYTES = 192 * 1024
#: What VictoriaMetrics writes for samples that are not finite numbers: ``+Inf``/``-Inf`` as
#: bare words, a staleness marker as ``null`` (its query API says ``"NaN"`` for the same;
#: dropped here, see :func:`_without_stale`).
_INF = re.compile(rb"(?<=[\[,])([+-]?)Inf(?=[\],])")


def decode_export(body: bytes, start_ms: int, end_ms: int) -> list[Series]:
    """The JSON lines of an export answer as series cut to ``[start_ms, end_ms]``, each sorted
    by time (ValueError for an answer that is not export lines)."""
    try:
        return _decode(body, start_ms, end_ms)
    except OverflowError:  # an integer JSON holds and int64 does not (a damaged timestamp)
        raise ValueError("an export line has a timestamp beyond 64 bits") from None


def _decode(body: bytes, start_ms: int, end_ms: int) -> list[Series]:
    text = body.strip()
    if not text:
        return []
    doc = b"[" + text.replace(b"\n", b",") + b"]"  # a newline is never inside a JSON string
    try:
        raw = _RAW.decode(doc)
    except (msgspec.DecodeError, UnicodeDecodeError):  # not JSON (bare +Inf words, bad UTF-8)
        raw = None
    got = _grouped(raw) if raw is not None else None
    if raw is not None and got is not None:
        return _series([ln.metric for ln in raw], *got, start_ms, end_ms)
    try:
        lines: list[_Line] = _LINES.decode(doc)
    except (msgspec.DecodeError, UnicodeDecodeError):
        try:  # null and bare Inf words: staleness markers (dropped) and +-Inf
            loose = _LOOSE.decode(_INF.sub(_inf, doc))
        except (msgspec.DecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"not export JSON lines ({e})") from None
        lines = [_without_stale(ln) for ln in loose]
    counts = [len(ln.values) for ln in lines]
    if any(len(ln.timestamps) != c for ln, c in zip(lines, counts, strict=True)):
        raise ValueError("an export line has more values than timestamps or fewer")
    total = sum(counts)
    t = np.fromiter(itertools.chain.from_iterable(ln.timestamps for ln in lines),
                    dtype=np.int64, count=total)
    v = np.fromiter(itertools.chain.from_iterable(ln.values for ln in lines),
                    dtype=np.float64, count=total)
    return _series([ln.metric for ln in lines], counts, t, v, start_ms, end_ms)


def _without_stale(ln: _LooseLine) -> _Line:
    """A line with its ``null`` samples dropped: ``null`` is how the export writes a NaN, and
    the only NaN VictoriaMetrics stores is Prometheus' staleness marker (``lib/storage/
    storage.go`` drops every other NaN on ingestion). The native export's reader and remote
    read drop their staleness markers: read as NaN here, a job whose targets went away
    counted one bad sample per series that the native read of the same server did not."""
    if len(ln.values) != len(ln.timestamps):
        raise ValueError("an export line has more values than timestamps or fewer")
    keep = [(t, float(x)) for t, x in zip(ln.timestamps, ln.values, strict=True)
            if x is not None]
    return _Line(ln.metric, [x for _, x in keep], [t for t, _ in keep])


def _grouped(lines: list[_RawLine]) -> tuple[list[int], np.ndarray, np.ndarray] | None:
    """(samples per line, every timestamp, every value) read a group of lines at a time, or
    None when a value is not a plain JSON number (``null``, ``+Inf``: the caller's loose
    path) or the two arrays of a line differ in length."""
    counts: list[int] = []
    ts_parts: list[np.ndarray] = []
    v_parts: list[np.ndarray] = []
    t_group: list[bytes] = []
    v_group: list[bytes] = []
    size = 0
    for i, ln in enumerate(lines):
        t_text, v_text = bytes(ln.timestamps)[1:-1].strip(), bytes(ln.values)[1:-1].strip()
        n = t_text.count(b",") + 1 if t_text else 0
        if n != (v_text.count(b",") + 1 if v_text else 0):
            return None
        counts.append(n)
        if n:
            t_group.append(t_text)
            v_group.append(v_text)
            size += len(t_text) + len(v_text)
        if t_group and (size >= GROUP_BYTES or i == len(lines) - 1):
            try:
                ts = _INTS.decode(b"[" + b",".join(t_group) + b"]")
                vs = _FLOATS.decode(b"[" + b",".join(v_group) + b"]")
            except (msgspec.DecodeError, UnicodeDecodeError):
                return None
            if len(ts) != len(vs):  # a comma inside a value: not plain numbers
                return None
            ts_parts.append(np.fromiter(ts, dtype=np.int64, count=len(ts)))
            v_parts.append(np.fromiter(vs, dtype=np.float64, count=len(vs)))
            del ts, vs
            t_group, v_group, size = [], [], 0
    if sum(counts) != sum(a.size for a in ts_parts):
        return None
    empty_t, empty_v = np.empty(0, np.int64), np.empty(0, np.float64)
    return (counts, np.concatenate(ts_parts) if ts_parts else empty_t,
            np.concatenate(v_parts) if v_parts else empty_v)


def _series(metrics: list[dict[str, str]], counts: list[int], t: np.ndarray,
            v: np.ndarray, start_ms: int, end_ms: int) -> list[Series]:
    """Each line's slice of ``t``/``v`` as a series, sorted and cut to the range."""
    clean = bool(np.isfinite(v).all() and (v >= 0).all())
    out = []
    at = 0
    for metric, n in zip(metrics, counts, strict=True):
        ts, vs = t[at:at + n], v[at:at + n]
        at += n
        if ts.size > 1 and not bool((ts[1:] > ts[:-1]).all()):
            # sorted; samples at one timestamp are kept for the caller's merge to count
            idx = np.argsort(ts, kind="stable")
            ts, vs = ts[idx], vs[idx]
        if ts.size and (ts[0] < start_ms or ts[-1] > end_ms):
            keep = (ts >= start_ms) & (ts <= end_ms)
            ts, vs = ts[keep], vs[keep]
        out.append(Series(metric, ts * 1_000_000, vs, clean))
    return out


def _inf(m: re.Match[bytes]) -> bytes:
    """A bare ``+Inf``/``-Inf`` word as a JSON string (read back with ``float``)."""
    return b'"' + m.group(0) + b'"'


def post_export(reader: RawReader, selector: str, start_s: float, end_s: float,
                headers: Mapping[str, str] | None = None) -> tuple[httpx.Response, int, int]:
    """One POST to a VictoriaMetrics export endpoint (the JSON lines and the native blocks are
    asked the same way): ``selector`` over ``[start_s, end_s]`` widened to whole milliseconds
    (``headers``: the request's own, over the endpoint's). The answer, and that window in ms,
    which the decoders cut the samples to."""
    start_ms, end_ms = ms_window(start_s, end_s)
    resp = reader.ask("POST", reader.url,
                      data={"match[]": selector, "start": f"{start_ms / 1000:.3f}",
                            "end": f"{end_ms / 1000:.3f}"}, headers=headers)
    return resp, start_ms, end_ms


class ExportReader(RawReader):
    """Raw reads of one endpoint through VictoriaMetrics' export API."""

    name = "vm_export"
    label = "VictoriaMetrics export API (/api/v1/export JSON lines)"
    #: As the query API's reads: JSON text decoded through Python numbers, ~60 B a sample.
    samples_per_read = 200_000
    path = PATH

    def read(self, selector: str, start_s: float, end_s: float) -> list[Series]:
        """Every stored sample of ``selector`` in ``[start_s, end_s]``; EndpointError when the
        server fails or answers with something that is not export lines."""
        resp, start_ms, end_ms = post_export(self, selector, start_s, end_s)
        try:
            series = decode_export(resp.content, start_ms, end_ms)
        except ValueError as e:
            raise EndpointError(self.url, str(e)) from None
        if (why := unselected(selector, (x.labels for x in series))) is not None:
            raise EndpointError(self.url, f"a series the selector does not select: {why}")
        return series
