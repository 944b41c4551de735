"""OTLP JSON integer data points read straight into numpy arrays, proven canonical first.

A compact archive holds ~250,000 memory data points per rank-hour, each
``{"timeUnixNano":"<digits>","asInt":"<digits>"}``. Decoding them as objects (a struct per point,
then lists, then ``numpy.asarray``) cost more than everything else in a file's read. Here the
``dataPoints`` arrays of a whole file are joined, *checked* to be exactly that canonical text
(no attributes, no ``asDouble``, no whitespace, sign or leading zero, at most 19 digits), and
parsed by numpy in a few vectorised passes: digit runs are found from one comparison per byte,
each gap between runs is compared with the text it must be, eight bytes at a time, and each run
of digits becomes a number with the SWAR trick (eight ASCII digits in one 64-bit word, combined
pairwise by three multiplications). Anything else returns ``None`` and the caller decodes point
by point, so this is a shortcut, never a second dialect.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import msgspec

_HEAD = b'[{"timeUnixNano":"'
_PAIR = b'","asInt":"'  # between a point's time and its value
_NEXT = b'"},{"timeUnixNano":"'  # between two points of one array
_JOIN = b'"}][{"timeUnixNano":"'  # where one array ends and the next begins
_TAIL = b'"}]'
#: 19 digits hold every int64 below 9e18; a 19-digit run starting with 9 may not fit (declined
#: rather than compared: nanosecond timestamps start with 1 until the year 2286).
_MAX_DIGITS = 19
#: Bytes before the first array, so that reading the 24 bytes before any run stays inside.
_PAD = 24
_U = np.uint64
#: For k = 0..8: the last k bytes of a little-endian word (the k digits ending a run), as low
#: nibbles ('0'..'9' → 0..9).
_DIGITS_MASK = np.array([((1 << 8 * k) - 1 << 8 * (8 - k)) & 0x0F0F0F0F0F0F0F0F
                         for k in range(9)], dtype=np.uint64)


def int_points(bodies: Sequence[bytes | msgspec.Raw]) -> tuple[np.ndarray, np.ndarray,
                                                               np.ndarray] | None:
    """``(times int64, values int64, points per array)`` of several non-empty ``dataPoints``
    arrays, in order, or ``None`` unless every one is the canonical integer-point text."""
    if not bodies:
        return None
    buf = b"".join([b" " * _PAD, *bodies])
    if not (buf.startswith(_HEAD, _PAD) and buf.endswith(_TAIL)):
        return None
    text = np.frombuffer(buf, np.uint8)
    digit = (text - np.uint8(0x30)) < 10  # uint8 arithmetic wraps: one compare per byte
    edges = np.flatnonzero(digit[1:] != digit[:-1]) + 1
    starts, ends = edges[0::2], edges[1::2]  # the text starts and ends with a non-digit
    n = starts.size // 2
    if n == 0 or starts.size != 2 * n or ends.size != starts.size or \
            starts[0] != _PAD + len(_HEAD) or ends[-1] != len(buf) - len(_TAIL):
        return None
    # words[i]: the eight bytes from offset i, as one little-endian integer (a strided view).
    words = np.ndarray(shape=(len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))
    gaps = starts[1:] - ends[:-1]
    links = gaps[1::2]
    joins = links == len(_JOIN)
    link_at = ends[1:-1:2]
    if not ((gaps[0::2] == len(_PAIR)).all() and ((links == len(_NEXT)) | joins).all() and
            int(joins.sum()) == len(bodies) - 1 and _is(words, ends[0:-1:2], _PAIR) and
            _is(words, link_at[~joins], _NEXT) and _is(words, link_at[joins], _JOIN)):
        return None
    lengths = ends - starts
    lead = text[starts]
    if int(lengths.max()) > _MAX_DIGITS or ((lead == 0x30) & (lengths > 1)).any() or \
            ((lead == 0x39) & (lengths == _MAX_DIGITS)).any():
        return None
    value = _eight_digits(words, ends, np.minimum(lengths, 8))
    value += _eight_digits(words, ends - 8, np.clip(lengths - 8, 0, 8)) * _U(10**8)
    long = np.flatnonzero(lengths > 16)  # nanosecond timestamps
    if long.size:
        value[long] += _eight_digits(words, ends[long] - 16, lengths[long] - 16) * _U(10**16)
    numbers = value.view(np.int64)
    # The joins are where the arrays meet (``][`` occurs nowhere else in valid JSON).
    last_of_body = np.append(np.flatnonzero(joins), n - 1)
    return numbers[0::2], numbers[1::2], np.diff(last_of_body, prepend=-1)


def _is(words: np.ndarray, at: np.ndarray, text: bytes) -> bool:
    """Whether ``text`` (8 bytes or more) stands at every offset in ``at``."""
    offsets = sorted({*range(0, len(text) - 8, 8), len(text) - 8})
    return all(bool((words[at + o] == _U(int.from_bytes(text[o:o + 8], "little"))).all())
               for o in offsets)


def _eight_digits(words: np.ndarray, end: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The number the ``k`` (0..8) digits before each offset in ``end`` spell (uint64)."""
    v = words[end - 8]
    v &= _DIGITS_MASK[k]
    v *= _U(10 * 256 + 1)  # pairs: 2 digits per 16 bits
    v >>= _U(8)
    v &= _U(0x00FF00FF00FF00FF)
    v *= _U(100 * 65536 + 1)  # 4 digits per 32 bits
    v >>= _U(16)
    v &= _U(0x0000FFFF0000FFFF)
    v *= _U(10000 * 2**32 + 1)  # 8 digits
    v >>= _U(32)
    return v
