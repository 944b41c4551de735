"""Raw samples through VictoriaMetrics' native export (``/api/v1/export/native``), in numpy.

The JSON export (:mod:`.vm_export`) costs this process a JSON number per sample; the native
export hands over VictoriaMetrics' own storage blocks (~6x fewer bytes, a third of the server's
time). Nothing outside VictoriaMetrics decodes them, so the format is ported here from its Go
source at **v1.79.5** (the ``victoria-metrics`` this project installs and tests against;
github.com/VictoriaMetrics/VictoriaMetrics, ``git show v1.79.5:<path>``):

* ``app/vmselect/prometheus/prometheus.go`` ``ExportNativeHandler``: the answer is the time range
  (two ``encoding.MarshalInt64``: big-endian zig-zag int64, ms), then per block
  ``uint32 BE len + MetricName.Marshal`` and ``uint32 BE len + Block.MarshalPortable``; blocks
  come straight from storage (``app/vmselect/netstorage`` ``ExportBlocks``: whole stored blocks,
  in any order from parallel workers, not cut to the range, not merged, not deduplicated);
* ``lib/storage/metric_name.go``: the metric group then key/value tags, each ending in byte 1,
  with bytes 0/1/2 escaped as ``0 '0'``/``0 '1'``/``0 '2'`` (the cluster build's handler writes
  ``MarshalNoAccountIDProjectID``: the same bytes);
* ``lib/storage/block.go`` ``MarshalPortable``: varint MinTimestamp, varint FirstValue, varuint
  RowsCount, varint Scale, the timestamps' and values' ``MarshalType`` bytes, then the two
  data parts as varuint length + bytes;
* ``lib/encoding/encoding.go`` ``unmarshalInt64Array``: types 1 ZSTD+nearest-delta2, 2 delta
  const, 3 const, 4 ZSTD+nearest-delta, 5 nearest-delta2, 6 nearest-delta;
  ``lib/encoding/int.go`` (zig-zag LEB128 varints, at most 10 bytes), ``nearest_delta.go``,
  ``nearest_delta2.go``, ``compress.go`` (plain zstd frames, decoded here by ``zstandard``);
* ``lib/decimal/decimal.go`` ``AppendDecimalToFloat``: value = mantissa x 10^scale (a divide
  by ``math.Pow10(-scale)`` for negative scales, Go's table-built powers reproduced in
  :data:`_POW10_HI`/:data:`_POW10_LO`), the mantissas beyond +-(2^63-3) being +Inf, -Inf and
  Prometheus' staleness NaN — so every value is the same float64, bit for bit, that the JSON
  export and the query API print *for the same stored blocks* (tests/analyzers/
  test_vm_decimal.py checks the conversion against a transcription of ``lib/decimal``). The
  server's own answer for a sample can change when it merges parts: a block of byte counts
  merged with the block holding only the series' staleness marker (exponent -1024) is
  rescaled by 10^9 (``CalibrateScale``), and 6,826,610,141 then reads 6,826,610,140.999999
  through every API of it; the analysis rounds memory samples to whole bytes
  (:func:`stormotel.analyzers.sources.prometheus.samples.whole_bytes`) so its answer does
  not depend on when the server merged;
* ``lib/storage/dedup.go`` ``DeduplicateSamples`` for the server's
  ``-dedup.minScrapeInterval`` (read from its ``/flags`` page; a server whose flags cannot be
  read is not read natively, since its answers could hold samples its queries drop).

**Format versions.** This is the block layout of VictoriaMetrics up to v1.81. From v1.82 the
portable block header also carries MaxTimestamp and PrecisionBits (``lib/storage/
block_header.go`` ``marshalPortable``); an answer in that layout (or with an unknown marshal
type, a bad varint, a part that does not end where its length says, timestamps out of order,
a time range that is not the one asked for) raises :class:`NativeFormatError`, and the reader
reads that request through the JSON export instead, with a note — never numbers from a layout
it does not know. Blocks written with ``-precisionBits`` < 64 are lossy by the server's
choice; their timestamps cannot be re-ordered as the server does (the portable header has no
MaxTimestamp), so an out-of-order block is that same fallback.

Decoding is vectorised over all blocks of an answer: a walk over the two framing lengths of
each block in Python (~one block per series), every block header's varints read at once, zstd
per compressed part, then every varint of the answer decoded at once and the per-block
(double) running sums taken as segmented cumulative sums in numpy, in int64 wrap-around
arithmetic as Go's.

What comes back is what :mod:`.vm_export` returns: each series sorted by time, cut to the
range, deduplicated as the server would, with staleness markers dropped (as queries and
remote read drop them). Requests go through :func:`stormotel.analyzers.http.request` on the
endpoint's own client: the same TLS, auth, tenant headers, timeouts, retries and deadline.

**Transfer encoding.** The native reads ask for ``Accept-Encoding: identity`` on every endpoint,
loopback or not (:func:`transfer_headers`): the blocks are already VictoriaMetrics' compressed
storage, and gzip over them took 16-21% off the bytes (810 KB -> 680 KB for a 10,000-rank read)
for ~1.1 s of this process's CPU, ~0.55 s of the server's and ~1.5 s of wall in a 10,000-rank
hour's 62 MB (measured, docs/benchmarks.md) — on a 100 Mbit/s link the ~12 MB it saves are
~1 s, on one host nothing.
A proxy that compresses anyway is still read (the HTTP layer inflates whatever
``Content-Encoding`` comes), and an ``Accept-Encoding`` the user set on the endpoint
(``--http-header``) is left as given. The JSON export and the query API keep compression
(JSON numbers shrink ~10x).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import numpy as np
import zstandard
from stormotel.analyzers.http import EndpointError
from stormotel.analyzers.sources.prometheus_api import Series
from stormotel.analyzers.sources.promql_selector import unselected
from stormotel.analyzers.sources.raw_reader import RawReader, other_format
from stormotel.analyzers.sources.vm_export import ExportReader, post_export
from stormotel.analyzers.sources.vm_native_checks import (
    CONST,
    DELTA_CONST,
    ND,
    ND2,
    ZSTD_ND,
    ZSTD_ND2,
    NativeFormatError,
    check_frame_size,
    check_span,
    check_tags,
    check_types,
    check_zstd_part,
)

if TYPE_CHECKING:
    from stormotel.analyzers.http import HttpSettings
    from stormotel.analyzers.sources.prometheus_api import PrometheusAPI

PATH = "/api/v1/export/native"
CONTENT_TYPE = "VictoriaMetrics/native"
FORMAT = "VictoriaMetrics <= v1.81 native blocks"
#: Prometheus' staleness marker as VictoriaMetrics stores it (``decimal.StaleNaN``).
STALE_NAN_BITS = 0x7FF0000000000002
_V_MAX = (1 << 63) - 3  # mantissas above/below are special (decimal.vMax / vMin)
_V_MIN = -(1 << 63) + 1
_V_INF_POS = (1 << 63) - 1
_V_INF_NEG = -(1 << 63)
_KNOWN_TYPES = frozenset((ZSTD_ND2, DELTA_CONST, CONST, ZSTD_ND, ND2, ND))
#: ``blockHeader.validate`` (lib/storage/block_header.go): RowsCount at most 2 x
#: ``maxRowsPerBlock`` (8 x 1024, lib/storage/block.go). A const or delta-const part of a few
#: bytes holds any row count, so a header beyond it (a damaged answer) would have the decode
#: allocate gigabytes: refused as the server refuses it.
MAX_ROWS = 2 * 8 * 1024
#: Go's ``math.Pow10(n)`` for 0 <= n <= 308 is ``pow10postab32[n/32] * pow10tab[n%32]``.
_POW10_LO = np.array([float(f"1e{i}") for i in range(32)])
_POW10_HI = np.array([float(f"1e{32 * i}") for i in range(10)])
_U32 = struct.Struct(">I")
_FLAG_DEDUP = re.compile(rb'^-dedup\.minScrapeInterval="?([^"\s]*)"?', re.M)
_FLAG_PRECISION = re.compile(rb'^-precisionBits="?(\d+)"?', re.M)
_DURATION = re.compile(r"(\d+(?:\.\d*)?)(ns|us|µs|ms|s|m|h)")
_UNIT_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4, "h": 3.6e6}


def transfer_headers(settings: HttpSettings) -> dict[str, str] | None:
    """The native reads' own request headers: identity encoding (the module's docstring says
    why), unless the user's headers for the endpoint name an ``Accept-Encoding``."""
    if any(k.lower() == "accept-encoding" for k, _ in settings.headers):
        return None
    return {"Accept-Encoding": "identity"}


def go_pow10(n: np.ndarray) -> np.ndarray:
    """Go's ``math.Pow10`` for non-negative ``n`` (+Inf beyond 308), elementwise."""
    n = np.asarray(n, np.int64)
    ok = n <= 308
    m = np.where(ok, n, 0)
    return np.where(ok, _POW10_HI[m // 32] * _POW10_LO[m % 32], np.inf)


def _uvarint(b: bytes, at: int) -> tuple[int, int]:
    """``encoding.UnmarshalVarUint64`` at ``at``: (value, next position)."""
    u = shift = 0
    start = at
    while True:
        if at >= len(b):
            raise NativeFormatError("a varint is cut short")
        c = b[at]
        at += 1
        u |= (c & 0x7F) << shift
        if c < 0x80:
            return u & 0xFFFFFFFFFFFFFFFF, at
        shift += 7
        if at - start >= 10:
            raise NativeFormatError("a varint is longer than 10 bytes")


def _varint(b: bytes, at: int) -> tuple[int, int]:
    """``encoding.UnmarshalVarInt64`` (zig-zag) at ``at``."""
    u, at = _uvarint(b, at)
    return (u >> 1) ^ -(u & 1), at


def _labels(mn: bytes) -> dict[str, str]:
    """``MetricName.Unmarshal``: ``__name__`` (when set) and the tags."""
    try:  # byte 1 ends each part; an escaped 1 inside a part is "0 '1'" until unescaped
        parts = ([_unescape(p).decode() for p in mn.split(b"\x01")] if b"\x00" in mn
                 else mn.decode().split("\x01"))
    except UnicodeDecodeError:
        raise NativeFormatError("a metric name is not UTF-8") from None
    if parts[-1] != "" or len(parts) % 2 != 0:
        raise NativeFormatError("a metric name does not end its tags where it should")
    keys, values = parts[1:-1:2], parts[2:-1:2]
    check_tags(keys, values)
    out = dict(zip(keys, values, strict=True))
    if parts[0]:
        out["__name__"] = parts[0]
    return out


def _unescape(p: bytes) -> bytes:
    out, at = bytearray(), 0
    while (i := p.find(b"\x00", at)) >= 0:
        out += p[at:i]
        if i + 1 >= len(p) or p[i + 1] not in b"012":
            raise NativeFormatError("a metric name has a bad escape")
        out.append(p[i + 1] - 0x30)
        at = i + 2
    return bytes(out + p[at:])


def _varints(buf: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every zig-zag varint of the concatenated parts ``buf`` (``lens`` bytes each), and how
    many each part held; each part must end on a varint's last byte."""
    nb = lens.size
    if buf.size == 0:
        return np.empty(0, np.int64), np.zeros(nb, np.int64)
    term = buf < 0x80
    ends_at = np.cumsum(lens)
    has = lens > 0
    if not bool(term[ends_at[has] - 1].all()):
        raise NativeFormatError("a block part ends inside a varint")
    last = np.flatnonzero(term)
    first = np.empty_like(last)
    first[0] = 0
    first[1:] = last[:-1] + 1
    size = last - first + 1
    if int(size.max()) > 10:
        raise NativeFormatError("a varint is longer than 10 bytes")
    if bool((buf[last[size > 1]] == 0).any()):  # MarshalVarInt64s writes no empty group
        raise NativeFormatError("a varint is not minimal (the server writes none such)")
    # Byte k of every varint that has one, k = 0, 1, ...: one gather per byte position (most
    # varints are 1-3 bytes), the 7-bit groups ORed in place.
    u = (buf[first] & 0x7F).astype(np.uint64)
    k = 1
    idx = np.flatnonzero(size > 1)
    while idx.size:
        u[idx] |= (buf[first[idx] + k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        k += 1
        idx = idx[size[idx] > k]
    vals = (u >> np.uint64(1)).astype(np.int64) ^ -(u & np.uint64(1)).astype(np.int64)
    upto = np.searchsorted(last, ends_at, side="left")  # varints ending before each part's end
    counts = np.diff(upto, prepend=0)
    return vals, counts


def _segment_cumsum(x: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The running sum of ``x`` restarted at each segment (int64, wrapping as Go does)."""
    if x.size == 0:
        return x
    c = np.cumsum(x)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    nonempty = sizes > 0
    base = np.zeros(sizes.size, np.int64)
    base[nonempty] = c[starts[nonempty]] - x[starts[nonempty]]
    return c - np.repeat(base, sizes)


def decode_int64s(kinds: np.ndarray, firsts: np.ndarray, rows: np.ndarray,
                  parts: list[bytes]) -> np.ndarray:
    """``unmarshalInt64Array`` for every block at once (parts already decompressed)."""
    unknown = set(np.unique(kinds).tolist()) - _KNOWN_TYPES
    if unknown:
        raise NativeFormatError(f"unknown marshal type(s) {sorted(unknown)} ({FORMAT})")
    lens = np.fromiter((len(p) for p in parts), np.int64, count=len(parts))
    is_nd = (kinds == ND) | (kinds == ZSTD_ND)
    is_nd2 = (kinds == ND2) | (kinds == ZSTD_ND2)
    if bool((is_nd2 & (rows < 2)).any()):
        raise NativeFormatError("a nearest-delta2 part of fewer than 2 rows")
    if bool(((kinds == CONST) & (lens > 0)).any()):
        raise NativeFormatError("data left in a const part")
    vals, counts = _varints(np.frombuffer(b"".join(parts), np.uint8), lens)
    expect = np.where(is_nd | is_nd2, rows - 1, np.where(kinds == DELTA_CONST, 1, 0))
    if not np.array_equal(counts, expect):
        raise NativeFormatError("a block part holds another number of values than its rows")
    steps = rows - 1
    # what each block's positions after its first hold: 0 nothing (const), 1 the one delta
    # (delta const), 2 a varint each (nearest delta), 3 a delta of deltas (nearest delta2)
    cat = np.where(kinds == DELTA_CONST, 1, np.where(is_nd, 2, np.where(is_nd2, 3, 0)))
    cat_at = np.repeat(cat.astype(np.uint8), steps)
    d = np.zeros(cat_at.size, np.int64)
    from_varints = cat_at >= 2
    dc = cat == 1
    if bool(dc.any()):
        owner = np.repeat(dc, counts)  # the varints of delta-const blocks
        d[from_varints] = vals[~owner]
        d[cat_at == 1] = np.repeat(vals[owner], steps[dc])
    else:
        d[from_varints] = vals
    if bool(is_nd2.any()):  # nearest-delta2 varints are deltas of the deltas
        nd2_at = cat_at == 3
        d[nd2_at] = _segment_cumsum(d[nd2_at], steps[is_nd2])
    x = np.empty(int(rows.sum()), np.int64)
    starts = np.concatenate(([0], np.cumsum(rows)[:-1]))
    rest = np.ones(x.size, bool)
    rest[starts] = False
    x[starts] = firsts
    x[rest] = d
    return _segment_cumsum(x, rows)


def decimal_to_float(v: np.ndarray, scale: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``decimal.AppendDecimalToFloat`` per block: ``v * 10^scale`` with Go's rounding."""
    f = v.astype(np.float64)
    if bool((scale != 0).any()):  # x 10^e or / 10^-e per block (x 1.0 and / 1.0 are exact)
        with np.errstate(over="ignore", invalid="ignore"):  # Go's overflow: +-Inf, silently
            f *= np.repeat(np.where(scale > 0, go_pow10(np.maximum(scale, 0)), 1.0), rows)
            f /= np.repeat(np.where(scale < 0, go_pow10(np.maximum(-scale, 0)), 1.0), rows)
    if bool((scale > 308).any()):  # the all-zeros fast path: 0, even where 0 x 10^e is NaN
        starts = np.concatenate(([0], np.cumsum(rows)[:-1]))
        nonzero = np.add.reduceat((v != 0).astype(np.int64), starts)
        f[np.repeat(nonzero == 0, rows)] = 0.0
    special = (v > _V_MAX) | (v < _V_MIN)
    if bool(special.any()):
        sv = v[special]
        f[special] = np.where(sv == _V_INF_POS, np.inf, np.where(
            sv == _V_INF_NEG, -np.inf, np.array(STALE_NAN_BITS, np.uint64).view(np.float64)))
    return f


@dataclass
class Blocks:
    """An answer's blocks as read (parts inflated, nothing decoded yet)."""

    #: Each distinct metric name, marshalled, in the order first seen.
    names: list[bytes]
    #: Per block: the index of its name.
    owner: list[int]
    #: Per block (rows): MinTimestamp, FirstValue, RowsCount, Scale, timestamps' and values'
    #: marshal type.
    head: np.ndarray
    t_parts: list[bytes]
    v_parts: list[bytes]
    #: The answer's time range (ms): the range the server searched.
    span: tuple[int, int] = (0, 0)


def read_blocks(body: bytes, start_ms: int, end_ms: int) -> Blocks:
    """The framing of an answer (NativeFormatError for anything the format does not allow):
    a walk over the two lengths of each block in Python, then every block header at once."""
    if len(body) < 16:
        raise NativeFormatError(f"{len(body)} bytes: not even the time range")
    t0, t1 = (_zigzag64(int.from_bytes(body[i:i + 8], "big")) for i in (0, 8))
    # the server keeps the start and may pull the end back (to now + 2 days, getCommonParams)
    if abs(t0 - start_ms) > 1000 or not t0 <= t1 <= end_ms + 1000:
        raise NativeFormatError(f"answers for {t0}..{t1} ms, not the range asked for")
    names: dict[bytes, int] = {}
    owner: list[int] = []
    at_list: list[int] = []
    end_list: list[int] = []
    unpack = _U32.unpack_from
    at, n = 16, len(body)
    try:
        while at < n:
            (mlen,) = unpack(body, at)
            mn = body[at + 4:at + 4 + mlen]
            at += 4 + mlen
            (blen,) = unpack(body, at)
            at_list.append(at + 4)
            at += 4 + blen
            end_list.append(at)
            idx = names.get(mn)
            if idx is None:
                idx = names[mn] = len(names)
            owner.append(idx)
    except struct.error:
        raise NativeFormatError("the answer is cut short") from None
    if at != n:  # the last length reaches past the end
        raise NativeFormatError("the answer is cut short inside a block")
    if not at_list:
        return Blocks([], [], np.empty((0, 6), np.int64), [], [], (t0, t1))
    buf = np.frombuffer(body + bytes(16), np.uint8)
    pos = np.array(at_list, np.int64)
    blk_end = np.array(end_list, np.int64)
    first_t, pos = _varints_at(buf, pos, blk_end, signed=True)
    first_v, pos = _varints_at(buf, pos, blk_end, signed=True)
    rows, pos = _varints_at(buf, pos, blk_end, signed=False)
    scale, pos = _varints_at(buf, pos, blk_end, signed=True)
    if bool((pos + 2 > blk_end).any()):
        raise NativeFormatError("a block header is cut short")
    tt, vt = buf[pos].astype(np.int64), buf[pos + 1].astype(np.int64)
    tlen, t_at = _varints_at(buf, pos + 2, blk_end, signed=False)
    if bool((t_at + tlen >= blk_end).any()):  # the values' length must follow
        raise NativeFormatError(f"a block does not end where its length says ({FORMAT})")
    vlen, v_at = _varints_at(buf, t_at + tlen, blk_end, signed=False)
    if not np.array_equal(v_at + vlen, blk_end):
        raise NativeFormatError(f"a block does not end where its length says ({FORMAT}; "
                                "a newer server's header has more fields)")
    if bool(((rows <= 0) | (rows > MAX_ROWS) | (scale < -(1 << 15))
             | (scale >= (1 << 15))).any()):
        raise NativeFormatError("a block header out of range (rows or scale)")
    known = np.array(sorted(_KNOWN_TYPES))
    if not (np.isin(tt, known).all() and np.isin(vt, known).all()):
        raise NativeFormatError(f"unknown marshal type(s) "
                                f"{sorted(set(tt.tolist()) | set(vt.tolist()) - _KNOWN_TYPES)}"
                                f" ({FORMAT})")
    dctx = zstandard.ZstdDecompressor()
    rows_l = rows.tolist()
    t_parts = [body[a:a + k] for a, k in zip(t_at.tolist(), tlen.tolist(), strict=True)]
    v_parts = [body[a:a + k] for a, k in zip(v_at.tolist(), vlen.tolist(), strict=True)]
    for kinds, parts in ((tt, t_parts), (vt, v_parts)):
        for i in np.flatnonzero((kinds == ZSTD_ND) | (kinds == ZSTD_ND2)).tolist():
            parts[i] = _inflate(dctx, parts[i], rows_l[i])
    head = np.stack([first_t, first_v, rows, scale, tt, vt], axis=1)
    return Blocks(list(names), owner, head, t_parts, v_parts, (t0, t1))


def _varints_at(buf: np.ndarray, pos: np.ndarray, end: np.ndarray, *, signed: bool
                ) -> tuple[np.ndarray, np.ndarray]:
    """The varint starting at each of ``pos`` (one per block, none reaching ``end``), as
    int64 (zig-zag decoded when ``signed``), and where each ends."""
    u = np.zeros(pos.size, np.uint64)
    cur = pos.copy()
    active = np.arange(pos.size)
    k = 0
    while active.size:
        if k == 10:
            raise NativeFormatError("a varint is longer than 10 bytes")
        at = cur[active]
        if bool((at >= end[active]).any()):
            raise NativeFormatError("a block header is cut short")
        c = buf[at]
        if k and bool((c == 0).any()):  # a last byte of 0: a group the server never writes
            raise NativeFormatError("a varint is not minimal (the server writes none such)")
        u[active] |= (c & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        cur[active] = at + 1
        active = active[c >= 0x80]
        k += 1
    if signed:
        return (u >> np.uint64(1)).astype(np.int64) ^ -(u & np.uint64(1)).astype(np.int64), cur
    if bool((u > np.uint64(1 << 62)).any()):
        raise NativeFormatError("a block length or row count out of range")
    return u.astype(np.int64), cur


def decode_native(body: bytes, start_ms: int, end_ms: int, dedup_ms: int = 0, *,
                  lossless: bool = True) -> list[Series]:
    """A native export answer as series cut to ``[start_ms, end_ms]``, each sorted by time,
    deduplicated over ``dedup_ms`` as the server does, staleness markers dropped
    (NativeFormatError for anything this format does not allow, or that the server would not
    have written: :mod:`.vm_native_checks`; the marshal types only when ``lossless``, the
    server's ``-precisionBits`` being 64)."""
    blocks = read_blocks(body, start_ms, end_ms)
    if not len(blocks.head):
        return []
    h = blocks.head
    rows_a = h[:, 2]
    t = decode_int64s(h[:, 4], h[:, 0], rows_a, blocks.t_parts)
    ends = np.cumsum(rows_a) - 1
    if t.size > 1:  # stored blocks are sorted: anything else is a layout misread
        inside = np.ones(t.size - 1, bool)
        inside[ends[:-1]] = False
        if bool((t[1:][inside] < t[:-1][inside]).any()):
            raise NativeFormatError(f"a block's timestamps go back in time ({FORMAT})")
    check_span(h[:, 0], t[ends], *blocks.span)
    mantissas = decode_int64s(h[:, 5], h[:, 1], rows_a, blocks.v_parts)
    if lossless:
        check_types("timestamps", h[:, 4], rows_a, t)
        check_types("values", h[:, 5], rows_a, mantissas)
    v = decimal_to_float(mantissas, h[:, 3], rows_a)
    return _series(blocks.names, np.array(blocks.owner, np.int64), rows_a, t, v, start_ms,
                   end_ms, dedup_ms)


def _zigzag64(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


def _inflate(dctx: zstandard.ZstdDecompressor, data: bytes, rows: int) -> bytes:
    """A zstd part inflated: at most 10 bytes a varint bounds what its rows can hold, both a
    frame that says its size (python-zstandard allocates what the header says: a damaged
    size was a MemoryError) and one that does not."""
    limit = 10 * rows + 16
    try:
        check_frame_size(zstandard.frame_content_size(data), limit)
        out = dctx.decompress(data, max_output_size=limit)
    except zstandard.ZstdError as e:
        raise NativeFormatError(f"a zstd block part does not inflate ({e})") from None
    check_zstd_part(len(data), len(out))
    return out


def _series(names: list[bytes], owner: np.ndarray, rows: np.ndarray, t: np.ndarray,
            v: np.ndarray, start_ms: int, end_ms: int, dedup_ms: int) -> list[Series]:
    """The samples of each metric name's blocks together, as :class:`Series`."""
    # A series' blocks come in any order (parallel workers) and may overlap (unmerged parts):
    # blocks grouped by series first (a stable sort of a few numbers a series), then, only
    # where a series' samples are not already in time order, one sort by (series, time).
    if owner.size > 1 and bool((owner[1:] < owner[:-1]).any()):
        by = np.argsort(owner, kind="stable")
        starts = np.concatenate(([0], np.cumsum(rows)[:-1]))
        moved = rows[by]
        take = np.arange(t.size) + np.repeat(starts[by] - (np.cumsum(moved) - moved), moved)
        owner, rows, t, v = owner[by], moved, t[take], v[take]
    so = np.repeat(owner, rows)
    if t.size > 1 and bool(((t[1:] <= t[:-1]) & (so[1:] == so[:-1])).any()):
        order = np.lexsort((t, so))
        so, t, v = so[order], t[order], v[order]
    keep = (t >= start_ms) & (t <= end_ms)
    if dedup_ms > 0:  # dedup.go DeduplicateSamples: the last sample of each interval
        bucket = -((-t) // dedup_ms)
        last = np.ones(t.size, bool)
        last[:-1] = (bucket[1:] != bucket[:-1]) | (so[1:] != so[:-1]) | ~keep[1:]
        keep &= last
    keep &= v.view(np.uint64) != STALE_NAN_BITS
    so, t, v = so[keep], t[keep], v[keep]
    clean = bool(np.isfinite(v).all() and (v >= 0).all())
    bounds = np.searchsorted(so, np.arange(len(names) + 1))
    t_ns = t * 1_000_000
    return [Series(_labels(mn), t_ns[bounds[i]:bounds[i + 1]], v[bounds[i]:bounds[i + 1]],
                   clean) for i, mn in enumerate(names)]


def parse_go_duration_ms(text: str) -> int | None:
    """A Go ``time.Duration`` flag value (``1ms``, ``30s``, ``1m30s``, ``0s``) in ms."""
    if text in ("0", ""):
        return 0
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNIT_MS[m.group(2)]
        pos = m.end()
    return int(total) if pos == len(text) and pos else None


class NativeReader(RawReader):
    """Raw reads of one endpoint through VictoriaMetrics' native export."""

    name = "vm_native"
    label = "VictoriaMetrics native export (/api/v1/export/native blocks)"
    #: ~1 byte a sample on the wire, ~70 bytes a sample at the decode's peak: as the JSON
    #: export's reads (800,000 measured the same CPU and 540 vs 405 MiB peak, 1,024 x 6 h).
    samples_per_read = 200_000
    path = PATH

    def __init__(self, api: PrometheusAPI) -> None:
        super().__init__(api)
        #: Reads that went through the JSON export because a native answer was not understood.
        self.fallbacks = 0
        self._dedup_ms: int | None = None
        #: The server's ``-precisionBits`` (64, lossless, unless its flags say otherwise).
        self.precision_bits = 64
        self._export = ExportReader(api)

    def dedup_ms(self) -> int:
        """The server's ``-dedup.minScrapeInterval`` in ms, read once from its ``/flags``
        (EndpointError when no flags page answers: its native answers could hold samples
        that its queries and JSON export drop)."""
        with self._lock:
            if self._dedup_ms is not None:
                return self._dedup_ms
        parts = urlsplit(self.api.url)
        tried = []
        for url in dict.fromkeys((self.api.url + "/flags",
                                  f"{parts.scheme}://{parts.netloc}/flags")):
            try:
                resp = self.ask("GET", url)
            except EndpointError as e:
                tried.append(str(e).split(": ", 1)[-1][:80])
                continue
            body = resp.content
            if b"-httpListenAddr" not in body and b"-dedup.minScrapeInterval" not in body:
                tried.append(f"{url} is not a flags page")
                continue
            m = _FLAG_DEDUP.search(body)
            text = m.group(1).decode(errors="replace") if m else "0"
            got = parse_go_duration_ms(text)
            if got is None:
                tried.append(f"unreadable -dedup.minScrapeInterval {text!r}")
                continue
            bits = _FLAG_PRECISION.search(body)
            with self._lock:
                self.precision_bits = int(bits.group(1)) if bits else 64
                self._dedup_ms = got
            return got
        raise EndpointError(self.api.url + "/flags", "the server's -dedup.minScrapeInterval "
                            f"could not be read ({'; '.join(tried)})")

    def read(self, selector: str, start_s: float, end_s: float) -> list[Series]:
        """Every stored sample of ``selector`` in ``[start_s, end_s]``; EndpointError when the
        server fails. An answer that is not understood is read again through the JSON
        export (counted, noted)."""
        try:
            return self._read(selector, start_s, end_s)
        except NativeFormatError as e:
            with self._lock:
                self.fallbacks += 1
                if len(self.notes) < 3:
                    self.notes.append(f"{self.api.url}: a native export answer was not "
                                      f"understood ({e}); read through the JSON export")
            try:
                return self._export.read(selector, start_s, end_s)
            except EndpointError as e2:
                raise EndpointError(self.url, f"native answer not understood "
                                    f"({e}); the JSON export failed too ({e2})") from None

    def probe(self, selector: str, start_s: float, end_s: float) -> list[Series]:
        """:meth:`read` without the fallback: EndpointError for an answer not understood."""
        try:
            return self._read(selector, start_s, end_s)
        except NativeFormatError as e:
            raise EndpointError(self.url, f"answer not understood ({e})") from None

    def _read(self, selector: str, start_s: float, end_s: float) -> list[Series]:
        resp, start_ms, end_ms = post_export(self, selector, start_s, end_s,
                                             transfer_headers(self.api.settings))
        if (other := other_format(resp, CONTENT_TYPE, CONTENT_TYPE)) is not None:
            raise NativeFormatError(other)
        # asked once a server has answered in the native format (not of a Thanos or a Mimir)
        dedup = self.dedup_ms()
        series = decode_native(resp.content, start_ms, end_ms, dedup,
                               lossless=self.precision_bits >= 64)
        if (why := unselected(selector, (x.labels for x in series))) is not None:
            raise NativeFormatError(f"a series the selector does not select: {why}")
        return series
