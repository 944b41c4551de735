"""Prometheus XOR (Gorilla) chunks decoded to numpy arrays, many chunks at once.

A streamed remote read (:mod:`stormotel.analyzers.sources.remote_read`) hands over the TSDB's
own chunks: up to ~120 samples each, timestamps as delta-of-delta and values as XOR against the
previous value, bit-packed (Prometheus ``tsdb/chunkenc/xor.go``). No Python library decodes
this format, so it is decoded here — not sample by sample in Python, but **vectorised across
chunks**: the chunks are ordered by length and the i-th sample of every chunk that has one is
decoded by one set of numpy operations (bit windows read as 64-bit big-endian words at each
chunk's bit position). The cost is ~120 steps of array operations per answer, whatever its
number of chunks, instead of a Python loop per sample.

The layout, as Prometheus 2.42 writes it (``xorAppender``/``xorIterator``):

* 2 bytes: number of samples (big-endian);
* sample 0: timestamp as a signed varint, value as 64 raw bits;
* sample 1: timestamp delta as an unsigned varint (byte-aligned: 2 + varint + 8 bytes before
  it), then the value's XOR;
* later samples: delta-of-delta ``0`` | ``10``+14 bits | ``110``+17 | ``1110``+20 |
  ``1111``+64 (two's complement), then the value's XOR: ``0`` (same value) | ``10`` + the
  meaningful bits in the previous window | ``11`` + 5 bits leading zeros + 6 bits meaningful
  length (0 means 64) + the meaningful bits.

Tested against chunks of a real Prometheus 2.42 remote-read answer
(``tests/analyzers/data/remote_read_prometheus_2_42.bin``) and the samples written into it.
A chunk whose bits run out or whose fields are impossible is reported in ``bad`` (its samples
are dropped by the caller, counted), never decoded into made-up values.
"""

from __future__ import annotations

import numpy as np

_U64 = np.uint64
#: Delta-of-delta control: by the top 4 bits, how many control bits and how many value bits.
_DOD_CTRL = np.array([1] * 8 + [2] * 4 + [3] * 2 + [4, 4], dtype=np.int64)
_DOD_SIZE = np.array([0] * 8 + [14] * 4 + [17] * 2 + [20, 64], dtype=np.int64)
_DOD_CTRL_U = _DOD_CTRL.astype(np.uint64)
#: Bits to advance past control and value; the right shift (after one) that leaves the value
#: (63 for no value: nothing left); values above half the range are negative (minus ``FULL``).
_DOD_ADVANCE = _DOD_CTRL + _DOD_SIZE
_DOD_SHIFT = np.where(_DOD_SIZE % 64 == 0, 63, 63 - _DOD_SIZE).astype(np.uint64)
_DOD_HALF = np.array([2**64 - 1 if s % 64 == 0 else 2 ** (s - 1) for s in _DOD_SIZE.tolist()],
                     dtype=np.uint64)
_DOD_FULL = np.array([0 if s % 64 == 0 else 2**s for s in _DOD_SIZE.tolist()], dtype=np.int64)
_PAD = 24


def _words(buf: bytes) -> np.ndarray:
    """The buffer as big-endian 64-bit words (its length a multiple of 8), native uint64."""
    return np.frombuffer(buf, dtype=">u8").astype(_U64)


def _peek(words: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The 64 bits starting at bit ``p`` (int64 array) as uint64: two aligned words."""
    q = p >> 6
    r = (p & 63).astype(_U64)
    # ``x >> 64`` is undefined: the second word moves right in two steps (1, then 63 - r).
    return (words[q] << r) | ((words[q + 1] >> _U64(1)) >> (_U64(63) - r))


def _varint(data: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unsigned varints at byte offsets ``at``: (value as uint64, bytes used, ok)."""
    val = np.zeros(at.size, dtype=_U64)
    used = np.zeros(at.size, dtype=np.int64)
    going = np.ones(at.size, dtype=bool)
    for k in range(10):
        b = data[at + k].astype(_U64)
        val |= np.where(going, (b & _U64(0x7F)) << _U64(7 * k), _U64(0))
        used += going
        going &= b >= 0x80
        if not going.any():
            break
    return val, used, ~going


#: Up to this many chunks, each is decoded sample by sample in Python integers
#: (:func:`_decode_one`): the vectorised steps cost ~60 numpy calls per sample index whatever
#: the number of chunks, ~40x the scalar loop for the one or two chunks per series of a
#: scheduled run's window (200 jobs: ~10 s of CPU per run); the answers are identical.
SCALAR_MAX_CHUNKS = 8


def decode_xor_chunks(blobs: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                   np.ndarray]:
    """Every chunk's samples: ``(counts, t_ms, values, bad)`` where ``t_ms``/``values`` hold the
    chunks' samples one chunk after the other (``counts[i]`` of them for chunk ``i``, in the
    order of ``blobs``) and ``bad[i]`` says chunk ``i`` could not be read (its count is 0)."""
    if 0 < len(blobs) <= SCALAR_MAX_CHUNKS:
        return _decode_few(blobs)
    return _decode_vectorised(blobs)


def _decode_vectorised(blobs: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                    np.ndarray]:
    """:func:`decode_xor_chunks` across chunks: one set of numpy operations per sample index."""
    n = len(blobs)
    if not n:
        e = np.empty(0, np.int64)
        return e, e, np.empty(0), np.empty(0, bool)
    sizes = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=n)
    start = np.zeros(n, np.int64)
    np.cumsum(sizes[:-1], out=start[1:])
    end_bits = (start + sizes) * 8
    joined = b"".join(blobs)
    buf = joined + bytes(_PAD + (-len(joined)) % 8)
    data = np.frombuffer(buf, dtype=np.uint8)
    words = _words(buf)
    bad = sizes < 2
    first = np.where(bad, 0, start)
    counts = (data[first].astype(np.int64) << 8) | data[first + 1]
    counts[bad] = 0
    # Sample 0 and the timestamp delta of sample 1: byte-aligned.
    u, used, ok = _varint(data, start + 2)
    t0 = (u >> _U64(1)).astype(np.int64) ^ -(u & _U64(1)).astype(np.int64)
    at = start + 2 + used
    v0 = _peek(words, at * 8)
    at += 8
    d1, used1, ok1 = _varint(data, at)
    p = (at + used1) * 8
    bad |= (counts > 0) & ~ok | (counts > 1) & ~ok1 | (counts > 0) & (at * 8 > end_bits)
    counts[bad] = 0
    # Chunks by length, longest first: the chunks still going at sample i are a prefix.
    order = np.argsort(-counts, kind="stable")
    cnt = counts[order]
    total = int(cnt.sum())
    out_at = np.zeros(n, np.int64)
    np.cumsum(cnt[:-1], out=out_at[1:])
    t_out = np.empty(total, np.int64)
    v_out = np.empty(total, _U64)
    m = int((cnt > 0).sum())
    t = t0[order][:m].copy()
    val = v0[order][:m].copy()
    if m:
        t_out[out_at[:m]] = t
        v_out[out_at[:m]] = val
    tdelta = d1.astype(np.int64)[order][:m]
    p = p[order][:m]
    end = end_bits[order][:m]
    lead = np.zeros(m, _U64)
    trail = np.zeros(m, _U64)
    broken = np.zeros(m, bool)
    oa = out_at[:m]
    # going[i]: how many chunks have more than i samples (they are the first, by length)
    going = np.searchsorted(-cnt, -np.arange(int(cnt[0]) + 1 if n else 1), side="left")
    i = 1
    while i < going.size:
        m = int(going[i])
        if not m:
            break
        if m < t.size:
            # chunks that ended here: a broken one is dropped (its flag goes with the slice)
            bad[order[m:t.size][broken[m:]]] = True
            t, val, tdelta, p, end = t[:m], val[:m], tdelta[:m], p[:m], end[:m]
            lead, trail, broken, oa = lead[:m], trail[:m], broken[:m], oa[:m]
        if i > 1:
            p, tdelta = _next_delta(words, p, tdelta)
        t = t + tdelta
        p, val, lead, trail, broken = _next_value(words, p, val, lead, trail, broken)
        broken |= p > end
        p[broken] = 0  # a broken chunk's reads stay inside the buffer (its samples are dropped)
        t_out[oa + i] = t
        v_out[oa + i] = val
        i += 1
    # Chunks that ran past their bytes or held impossible fields: dropped whole.
    if broken.any():
        gone = order[: broken.size][broken]
        bad[gone] = True
    return _in_blob_order(order, out_at, counts, bad, t_out, v_out)


def _next_delta(words: np.ndarray, p: np.ndarray,
                tdelta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One delta-of-delta per chunk still going: its control bits say how wide it is."""
    w = _peek(words, p)
    top = w >> _U64(60)
    bits = ((w << _DOD_CTRL_U[top]) >> _U64(1)) >> _DOD_SHIFT[top]
    dod = bits.view(np.int64) - _DOD_FULL[top] * (bits > _DOD_HALF[top])
    wide = top == 15
    if wide.any():
        dod[wide] = _peek(words, p[wide] + 4).view(np.int64)
    return p + _DOD_ADVANCE[top], tdelta + dod


def _next_value(words: np.ndarray, p: np.ndarray, val: np.ndarray, lead: np.ndarray,
                trail: np.ndarray, broken: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One value per chunk still going: XOR against the previous one, with the window of
    meaningful bits kept or renewed; impossible windows mark the chunk broken."""
    w = _peek(words, p)
    changed = (w >> _U64(63)) == 1
    fresh = changed & (((w >> _U64(62)) & _U64(1)) == 1)
    new_lead = (w >> _U64(57)) & _U64(0x1F)
    sig = (w >> _U64(51)) & _U64(0x3F)
    sig = np.where(sig == 0, _U64(64), sig)
    broken = broken | (fresh & (new_lead + sig > 64))
    lead = np.where(fresh, new_lead, lead)
    trail = np.where(fresh, _U64(64) - np.minimum(new_lead + sig, _U64(64)), trail)
    mbits = _U64(64) - lead - trail
    broken |= changed & (mbits == 0)
    mb = np.where(mbits == 0, _U64(1), mbits)
    ctrl = np.where(fresh, 13, np.where(changed, 2, 1))
    w2 = _peek(words, p + ctrl)
    xor = np.where(changed, (w2 >> (_U64(64) - mb)) << trail, _U64(0))
    p = p + ctrl + np.where(changed, mbits.astype(np.int64), 0)
    return p, val ^ xor, lead, trail, broken


def _in_blob_order(order: np.ndarray, out_at: np.ndarray, counts: np.ndarray, bad: np.ndarray,
                   t_out: np.ndarray, v_out: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The samples put back in the order of the blobs (they were decoded longest chunk
    first), broken chunks left out."""
    n = order.size
    back = np.empty(n, np.int64)
    back[order] = np.arange(n)
    keep_cnt = np.where(bad, 0, counts)
    src_start = out_at[back]
    idx = np.repeat(src_start - np.concatenate(([0], np.cumsum(keep_cnt)[:-1])), keep_cnt)
    idx += np.arange(int(keep_cnt.sum()))
    return keep_cnt, t_out[idx], v_out[idx].view(np.float64), bad


_M64 = (1 << 64) - 1
_SCALAR_PAD = 32  # bytes of zeros after a chunk: every read of a step that starts inside it
_CTRL = _DOD_CTRL.tolist()
_SIZE = _DOD_SIZE.tolist()
_ADVANCE = _DOD_ADVANCE.tolist()
_SHIFT = _DOD_SHIFT.tolist()
_HALF = _DOD_HALF.tolist()
_FULL = _DOD_FULL.tolist()


def _s64(x: int) -> int:
    """``x`` wrapped to a signed 64-bit integer (numpy's int64 arithmetic)."""
    return ((x + (1 << 63)) & _M64) - (1 << 63)


def _decode_few(blobs: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`decode_xor_chunks` chunk by chunk (few chunks): the same reads, in Python ints."""
    counts, bad, ts, vs = [], [], [], []
    for blob in blobs:
        t, v = _decode_one(blob)
        ok = t is not None
        counts.append(len(t) if t is not None else 0)
        bad.append(not ok)
        if t is not None:
            ts.extend(t)
            vs.extend(v)
    return (np.array(counts, np.int64), np.array(ts, np.int64),
            np.array(vs, _U64).view(np.float64), np.array(bad, bool))


def _varint_at(buf: bytes, at: int) -> tuple[int, int, bool]:
    """As :func:`_varint` for one offset: (value modulo 2**64, bytes used, ok)."""
    val = 0
    for k in range(10):
        b = buf[at + k]
        val |= ((b & 0x7F) << (7 * k)) & _M64
        if b < 0x80:
            return val, k + 1, True
    return val, 10, False


def _decode_one(blob: bytes) -> tuple[list[int] | None, list[int]]:
    """One chunk's samples (timestamps, values as raw 64-bit patterns), or None when it is bad:
    the vectorised decoder's steps for one chunk, bits past its end read as zeros (a chunk that
    reads past its end is bad either way)."""
    if len(blob) < 2:
        return None, []
    count = blob[0] << 8 | blob[1]
    if not count:
        return [], []
    buf = blob + bytes(_SCALAR_PAD)
    end = len(blob) * 8
    top_bit = len(buf) * 8 - 64
    big = int.from_bytes(buf, "big")

    def peek(p: int) -> int:
        return (big >> (top_bit - p)) & _M64

    u, used, ok = _varint_at(buf, 2)
    t = (u >> 1) ^ -(u & 1)
    at = 2 + used
    val = peek(at * 8)
    at += 8
    if not ok or at * 8 > end:
        return None, []
    ts, vs = [t], [val]
    if count == 1:
        return ts, vs
    d1, used1, ok1 = _varint_at(buf, at)
    if not ok1:
        return None, []
    p = (at + used1) * 8
    tdelta = _s64(d1)
    lead = trail = 0
    for i in range(1, count):
        if i > 1:
            w = peek(p)
            top = w >> 60
            if top == 15:
                dod = _s64(peek(p + 4))
            else:
                bits = (((w << _CTRL[top]) & _M64) >> 1) >> _SHIFT[top]
                dod = bits - (_FULL[top] if bits > _HALF[top] else 0)
            p += _ADVANCE[top]
            tdelta = _s64(tdelta + dod)
        t = _s64(t + tdelta)
        w = peek(p)
        if w >> 63:
            if (w >> 62) & 1:
                new_lead = (w >> 57) & 0x1F
                sig = (w >> 51) & 0x3F or 64
                if new_lead + sig > 64:
                    return None, []
                lead, trail = new_lead, 64 - min(new_lead + sig, 64)
                ctrl = 13
            else:
                ctrl = 2
            mbits = 64 - lead - trail
            if mbits == 0:
                return None, []
            val ^= ((peek(p + ctrl) >> (64 - mbits)) << trail) & _M64
            p += ctrl + mbits
        else:
            p += 1
        if p > end:
            return None, []
        ts.append(t)
        vs.append(val)
    return ts, vs
