"""What VictoriaMetrics would have written: consistency checks on a decoded native answer.

The native export (:mod:`.vm_native`) has no checksum, and a damaged answer that still parses
is read as numbers (measured: a flipped bit at a uniformly drawn byte of real answers decoded
silently ~63% of the time; docs/benchmarks.md). The format has no redundancy to spare, but
VictoriaMetrics writes it deterministically, so much of what damage produces is something the
server never writes. Each check below is a rule of its Go source at v1.79.5 (unchanged since
2019 unless said), and an answer that breaks one is damaged — :class:`NativeFormatError`, and
the read goes through the JSON export with a note:

* **the marshal type the data gets** (``lib/encoding/encoding.go`` ``marshalInt64Array``): a
  block of equal values is ``Const``, a constant step ``DeltaConst``, otherwise a gauge
  (``isGauge``: a negative first value, a fall below ``prev >> 3`` or to a negative value,
  or more than two resets and more than one per 8 rows) nearest-delta and anything else
  nearest-delta2 — timestamps included (``MarshalTimestamps`` is the same function). Checked
  only where the encoding is lossless (``-precisionBits`` 64, the default: the flag is read
  from the server's ``/flags``), since a lossy block's decoded numbers are not the ones the
  server classified (a cluster's vmselect does not show its vmstorage's flag: a lossy
  cluster's native answers are refused by this rule and read through the JSON export, noted
  — slower, never other numbers);
* **when a part is zstd** (``minCompressibleBlockSize`` 128 and the ``0.9`` ratio there): a
  zstd part inflates to at least 128 bytes and is at most 0.9 of its inflated size; a frame
  whose header claims more content than the rows can hold is refused before it is inflated;
* **varints are minimal** (``lib/encoding/int.go`` ``MarshalVarInt64s``: 7-bit groups until
  the rest is under 0x80): a multi-byte varint never ends in a zero byte;
* **a block overlaps the answer's time range** (``lib/storage/part_search.go``: a block is
  searched only when ``bh.MaxTimestamp >= tr.MinTimestamp`` and ``bh.MinTimestamp <=
  tr.MaxTimestamp``; the answer's first 16 bytes are that ``tr``);
* **a metric name is canonical** (``lib/storage/metric_name.go``): ingestion drops labels with
  empty values (``MarshalMetricNameRaw``), ``sortTags`` orders tags by key — job-like and
  instance-like keys first, through ``commonTagKeys`` — and keeps one tag per key; an empty
  tag key is the metric group, never a tag.

What no check can see: a changed digit inside a varint that keeps the block's type (a sample's
value or timestamp moved), a changed label value, an answer cut exactly between blocks (the
format has no count or end marker; HTTP's chunked framing or Content-Length catches a cut in
transit, and a server failing mid-answer appends its error text: trailing bytes, refused).
"""

from __future__ import annotations

import numpy as np

#: ``encoding.MarshalType`` (as :mod:`.vm_native` names them).
ZSTD_ND2, DELTA_CONST, CONST, ZSTD_ND, ND2, ND = 1, 2, 3, 4, 5, 6
#: ``minCompressibleBlockSize``: a part shorter than this is never compressed.
MIN_COMPRESSIBLE = 128
#: A compressed part at most this share of its inflated size (else stored plain).
MAX_ZSTD_RATIO = 0.9
#: Marshal type -> its family (zstd or not), indexed by type.
_FAMILY_OF = np.array([0, ND2, DELTA_CONST, CONST, ND, ND2, ND], np.int64)
_TYPE_NAMES = {CONST: "const", DELTA_CONST: "delta-const", ND: "nearest-delta (gauge)",
               ND2: "nearest-delta2 (counter)"}


class NativeFormatError(ValueError):
    """An answer this module does not understand (read through the JSON export instead)."""


def _common_tag_keys() -> dict[str, str]:
    """``commonTagKeys``: job-like keys sort first, instance-like second, each also with its
    first letter upper-cased (as text: UTF-8 orders as code points do, so comparing the
    decoded keys is comparing Go's byte strings)."""
    lower = {"namespace": 0x0000, "ns": 0x0001, "datacenter": 0x0008, "dc": 0x0009,
             "environment": 0x000C, "env": 0x000D, "cluster": 0x0010, "service": 0x0018,
             "job": 0x0020, "model": 0x0028, "type": 0x0030, "sensor_type": 0x0038,
             "SensorType": 0x0038, "db": 0x0040, "instance": 0x0100, "host": 0x0108,
             "server": 0x0110, "pod": 0x0118, "node": 0x0120, "device": 0x0128,
             "tenant": 0x0130, "client": 0x0138, "name": 0x0140, "measurement": 0x0148}
    out = {}
    for k, code in lower.items():
        key = "\x00" + chr(code >> 8) + chr(code & 0xFF)
        out[k] = key
        out[k[:1].upper() + k[1:]] = key
    return out


_COMMON_TAG_KEYS = _common_tag_keys()


#: Tag key sequences already found in the server's order (every series of a job has the same
#: few): a metric name's check is then a set lookup, not a sort (140,000 names a read at
#: 10,000 ranks).
_KEYS_SEEN: set[tuple[str, ...]] = set()


def check_tags(keys: list[str], values: list[str]) -> None:
    """A metric name's tags (after the group) as ``sortTags`` and ingestion leave them."""
    if "" in values:
        raise NativeFormatError("a metric name has a tag without a value (never stored)")
    seq = tuple(keys)
    if seq in _KEYS_SEEN:
        return
    if "" in keys:
        raise NativeFormatError("a metric name has a tag without a key")
    if len(set(keys)) != len(keys):
        raise NativeFormatError("a metric name has a tag key twice")
    order = [_COMMON_TAG_KEYS.get(k, k) for k in keys]
    if order != sorted(order):
        raise NativeFormatError("a metric name's tags are not in the server's order")
    if len(_KEYS_SEEN) < 4096:
        _KEYS_SEEN.add(seq)


def check_zstd_part(compressed: int, inflated: int) -> None:
    """A zstd part as ``marshalInt64Array`` keeps one (else it stores the part plain)."""
    if inflated < MIN_COMPRESSIBLE or compressed > MAX_ZSTD_RATIO * inflated:
        raise NativeFormatError(f"a zstd block part of {compressed} bytes inflating to "
                                f"{inflated}: one the server would have stored plain")


def check_frame_size(declared: int, limit: int) -> None:
    """A zstd frame's declared content size (-1: not declared) within what its rows hold."""
    if declared > limit:
        raise NativeFormatError(f"a zstd block part claims {declared} bytes, more than its "
                                "rows can hold")


def canonical_types(rows: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Per block, the marshal type family ``marshalInt64Array`` picks for its decoded int64s
    ``x`` (blocks of ``rows`` each, every row count >= 1): CONST, DELTA_CONST, ND or ND2."""
    starts = np.concatenate(([0], np.cumsum(rows)[:-1]))
    d = np.empty_like(x)
    d[0] = 0
    np.subtract(x[1:], x[:-1], out=d[1:])  # wraps as Go's int64 arithmetic
    d[starts] = 0  # a block's first row has no step
    const = ~np.logical_or.reduceat(d != 0, starts)
    first_d = np.where(rows >= 2, d[np.minimum(starts + 1, x.size - 1)], 0)
    other_step = d != np.repeat(first_d, rows)
    other_step[starts] = False
    delta_const = (rows >= 2) & ~np.logical_or.reduceat(other_step, starts)
    # isGauge: the falls (v < prev, compared as Go does, not through a wrapping difference)
    falls = np.zeros(x.size, bool)
    np.less(x[1:], x[:-1], out=falls[1:])
    falls[starts] = False
    at = np.flatnonzero(falls)
    v, prev = x[at], x[at - 1]
    gauge_fall = (v < 0) | (v > (prev >> 3))
    owner = np.searchsorted(starts, at, side="right") - 1
    nb = rows.size
    resets = np.bincount(owner[~gauge_fall], minlength=nb)
    gauge = ((x[starts] < 0) | (np.bincount(owner[gauge_fall], minlength=nb) > 0)
             | ((resets > 2) & (resets > (rows >> 3))))
    return np.where(const, CONST, np.where(delta_const, DELTA_CONST,
                                           np.where(gauge, ND, ND2)))


def check_types(what: str, kinds: np.ndarray, rows: np.ndarray, x: np.ndarray) -> None:
    """Each block's marshal type is the one the server gives its decoded numbers (``kinds``
    are known marshal types, checked before)."""
    want = canonical_types(rows, x)
    got = _FAMILY_OF[kinds]
    bad = np.flatnonzero(got != want)
    if bad.size:
        i = int(bad[0])
        raise NativeFormatError(
            f"{bad.size} block(s) whose {what} are marshalled as "
            f"{_TYPE_NAMES[int(got[i])]} where the server marshals such data as "
            f"{_TYPE_NAMES[int(want[i])]}")


def check_span(first_t: np.ndarray, last_t: np.ndarray, t0: int, t1: int) -> None:
    """Every block overlaps the answer's time range ``[t0, t1]`` (ms), as the search keeps."""
    if bool(((last_t < t0) | (first_t > t1)).any()):
        raise NativeFormatError("a block outside the answer's time range (its timestamps "
                                "were damaged)")
