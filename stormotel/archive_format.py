"""The compact archive's columnar companion: its layout, shared by the writer and the analyzer.

The archive of record stays ``rank-R.NNNNN.metrics.jsonl.zst`` (OTLP JSON lines in zstd, what a
collector's ``otlpjsonfile`` receiver replays). Reading it back costs a zstd inflate and a scan
of ~34 MB of JSON per rank-hour, ~45 ms of CPU at best: a 1,024-rank hour cannot be analysed in
30 s on 2 cores that way. Beside each file the writer thread keeps ``rank-R.NNNNN.metrics.cols.zst``
holding what the analyzer takes from the JSON, so that a reader inflates ~2.3 MB (0.6 MB on
disk) per rank-hour instead:

* a sequence of **frames**, each one zstd frame (with zstd's content checksum) covering a span of
  samples (``ArchiveLimits.cols_frame_samples`` or ``cols_frame_s``, and at rotation/close);
* each frame is ``MAGIC``, a little-endian ``u32`` header length, a JSON :class:`Header`, then
  the payload the header declares, in order: the resource (OTLP JSON), the *context lines*
  (OTLP JSON lines holding the resource and every SDK-collected instrument of that span, exactly
  as in the JSON file, without the per-sample gauges), the timestamps (``<i8``, delta-encoded)
  and one column per per-sample memory gauge the analyzer reads (:data:`COLUMN_METRICS`;
  integers ``<i8`` delta-encoded, other numbers ``<f8``), each preceded by a presence bitmap
  (``numpy.packbits``, big bit order) when some samples have no value. Every 8-byte array is
  stored *byte-planed* (all first bytes, then all second bytes, ...): zstd then finds the
  mostly-zero high bytes of the differences as runs (-14 % on disk on the benchmark's noisy
  ranks, measured with 600-sample frames);
* the JSON file's zstd frame ends where each companion frame ends, and the header records
  which compressed bytes of the JSON file it covers (``json_start``, ``json_end``) and the last
  16 of them (``json_tail``, hex): a reader inflates only the JSON after the last complete
  frame, and a companion that does not belong to its JSON file is caught;
* since format 2 the header also holds a **digest** (``digest_alg``, ``digest``: xxh3-128 where
  the ``xxhash`` package is installed, else BLAKE2b-128) of the exact compressed JSON bytes the
  frame covers, followed by the frame itself (its header with ``digest`` empty, then its
  payload). The JSON is the archive of record: a reader uses a frame only when the digest it
  computes from the JSON file's bytes and the frame matches (:func:`frame_digest`), so a
  companion whose values, timestamps, sample count or encoding disagree with the JSON it was
  written beside is never read, and checking costs a hash of compressed bytes, not an inflate.
  A format-1 frame (no digest) cannot be checked without inflating the JSON: readers do not use
  it (:class:`Unbound`) and read the JSON instead.

No pickle and nothing executable: every length is declared, bounded (:data:`MAX_FRAME_SAMPLES`,
:data:`MAX_HEADER_BYTES`, :data:`MAX_TEXT_BYTES`, :data:`MAX_FRAME_BYTES` inflated) and checked
against the bytes present by :func:`parse_frame`. A frame is written only after the JSON frame
it covers is complete on disk, so a writer killed at any instant leaves a companion whose
complete frames all describe JSON that is there; the samples after them are read from the JSON.
Format changes bump :data:`VERSION`; a reader meeting another version reads the JSON.

This is a leaf (stdlib, numpy, msgspec and :mod:`stormotel.schema` only), like ``schema``: the
tracker's writer (:mod:`stormotel.archive_cols`) and the analyzer's reader
(``stormotel.analyzers.sources.otlp_cols``) both read the format here, so the analyzer never
imports the writer.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec
import numpy as np

from stormotel import schema

__all__ = [
    "COLS_SUFFIX",
    "COLUMN_METRICS",
    "MAGIC",
    "MAX_FRAME_BYTES",
    "MAX_FRAME_SAMPLES",
    "MAX_TEXT_BYTES",
    "VERSION",
    "Column",
    "Dtype",
    "Frame",
    "FrameError",
    "Header",
    "OtherVersion",
    "Unbound",
    "cols_path_for",
    "encode_frame",
    "frame_digest",
    "new_json_digest",
    "parse_frame",
    "plane",
]

MAGIC = b"STORMCOL"
VERSION = 2
#: The format before the digest: its frames are not bound to their JSON (:class:`Unbound`).
UNBOUND_VERSION = 1
COLS_SUFFIX = ".metrics.cols.zst"
#: The per-sample gauges a frame holds as columns: those the analyzer reads into the Timeline
#: (the other per-sample gauges stay in the JSON only). Named by metric name in the header.
COLUMN_METRICS: tuple[schema.Metric, ...] = (
    schema.DEVICE_USED, schema.DEVICE_LIMIT, schema.DEVICE_FREE, schema.ALLOC_ALLOCATED,
    schema.ALLOC_RESERVED, schema.ALLOC_ACTIVE, schema.ALLOC_INACTIVE_SPLIT)
#: Bounds a reader enforces before trusting a declared length.
MAX_FRAME_SAMPLES = 1 << 20
#: A frame's inflated size: a reader refuses a larger one (a zstd bomb stops here) and the writer
#: never writes one (samples and context text are bounded above; at most ~90 MB).
MAX_FRAME_BYTES = 256 << 20
MAX_HEADER_BYTES = 1 << 16
MAX_TEXT_BYTES = 8 << 20
MAX_COLUMNS = 64
TAIL_BYTES = 16
_U32 = struct.Struct("<I")
_PREFIX = len(MAGIC) + _U32.size


def cols_path_for(json_path: Path) -> Path:
    """The companion of ``rank-R.NNNNN.metrics.jsonl.zst``."""
    name = json_path.name
    suffix = schema.ARCHIVE_METRICS_SUFFIX + ".zst"
    if not name.endswith(suffix):
        raise ValueError(f"{json_path} is not a compact archive file")
    return json_path.with_name(name[: -len(suffix)] + COLS_SUFFIX)


#: A column's stored type: int64 (delta-encoded or not) or float64, little-endian.
Dtype = Literal["<i8", "<f8"]


class Column(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    name: str  # the OTLP metric name
    dtype: Dtype
    delta: bool  # int64 stored as the first value and the differences (wrapping)
    count: int  # values present (== samples unless ``mask``)
    mask: bool  # a presence bitmap of ``samples`` bits precedes the values


class Header(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    version: int
    rank: int
    seq: int  # the file's number (NNNNN)
    samples: int
    t_first: int
    t_last: int
    json_start: int  # compressed offsets of the JSON file this frame covers
    json_end: int
    json_tail: str  # hex of the JSON file's 16 bytes before json_end
    resource_bytes: int
    context_bytes: int
    columns: list[Column]
    digest_alg: str = ""  # format 2: DIGESTS key
    digest: str = ""  # format 2: hex of frame_digest over the JSON bytes and this frame


def _xxh3_128() -> Any:
    import xxhash

    return xxhash.xxh3_128()


def _blake2b_128() -> Any:
    return hashlib.blake2b(digest_size=16)


#: Each digest a frame may name → a fresh hasher. xxh3-128 hashes ~10 GB/s on one core (the
#: check reads every compressed JSON byte), BLAKE2b ~0.5 GB/s: the fallback without ``xxhash``.
DIGESTS: dict[str, Callable[[], Any]] = {"xxh3_128": _xxh3_128, "blake2b_128": _blake2b_128}


def new_json_digest() -> tuple[str, Any]:
    """(name, hasher) of the best digest installed, for the writer to feed JSON bytes to."""
    try:
        return "xxh3_128", _xxh3_128()
    except ImportError:
        return "blake2b_128", _blake2b_128()


_header_decoder = msgspec.json.Decoder(Header)
_encoder = msgspec.json.Encoder()


class FrameError(ValueError):
    """A frame that is not what it declares (its message says what)."""


class OtherVersion(FrameError):
    """A frame of another format version (a newer or older writer): not an error, not read."""


class Unbound(FrameError):
    """A format-1 frame: no digest binds it to its JSON, so it is not read (the JSON is)."""


@dataclass(frozen=True)
class Frame:
    header: Header
    resource: bytes
    context: bytes
    t: np.ndarray  # int64, one per sample
    columns: dict[str, tuple[np.ndarray, np.ndarray]]  # metric name -> (times, float64 values)
    payload: bytes = b""  # what the header declares, as stored (the digest covers it)


def _unsigned_header(h: Header) -> bytes:
    """The header as the digest covers it: canonical encoding, ``digest`` empty."""
    return _encoder.encode(msgspec.structs.replace(h, digest=""))


def frame_digest(json_bytes: Any, frame: Frame | None = None, *, header: Header | None = None,
                 payload: Sequence[bytes] = ()) -> str | None:
    """The digest binding a frame to the JSON it covers: ``json_bytes`` (a hasher of the
    frame's algorithm already fed the compressed JSON bytes — the writer's — or those bytes —
    the reader's), then the header with ``digest`` empty, then the payload. None when the
    header names an algorithm this install cannot compute."""
    h = frame.header if frame is not None else header
    assert h is not None
    if isinstance(json_bytes, bytes | bytearray | memoryview):
        try:
            hasher = DIGESTS[h.digest_alg]()
        except (KeyError, ImportError):
            return None
        hasher.update(json_bytes)
    else:
        hasher = json_bytes
    hasher.update(_unsigned_header(h))
    for part in ([frame.payload] if frame is not None else payload):
        hasher.update(part)
    return str(hasher.hexdigest())


def _mask_bytes(samples: int) -> int:
    return (samples + 7) // 8


def _payload_bytes(h: Header) -> int:
    n = h.resource_bytes + h.context_bytes + 8 * h.samples
    for c in h.columns:
        n += 8 * c.count + (_mask_bytes(h.samples) if c.mask else 0)
    return n


def _check_header(h: Header) -> None:
    if h.version == UNBOUND_VERSION:
        raise Unbound("format 1, written without a digest binding it to its JSON")
    if h.version != VERSION:
        raise OtherVersion(f"format version {h.version}, this reader knows {VERSION}")
    if h.digest_alg not in DIGESTS or not 16 <= len(h.digest) <= 128:
        raise FrameError(f"declares an unknown digest {h.digest_alg[:40]!r}")
    if not 0 <= h.samples <= MAX_FRAME_SAMPLES:
        raise FrameError(f"declares {h.samples} samples (at most {MAX_FRAME_SAMPLES})")
    if not (0 <= h.resource_bytes <= MAX_TEXT_BYTES and 0 <= h.context_bytes <= MAX_TEXT_BYTES):
        raise FrameError("declares a resource or context text out of bounds")
    if not 0 <= h.json_start <= h.json_end or h.rank < 0 or h.seq < 0:
        raise FrameError("declares a negative rank, number or JSON range")
    if len(h.json_tail) != 2 * TAIL_BYTES or len(h.columns) > MAX_COLUMNS:
        raise FrameError("declares a malformed JSON tail or too many columns")
    names = set()
    for c in h.columns:
        if c.name in names:
            raise FrameError(f"column {c.name!r} twice")
        names.add(c.name)
        if not 0 <= c.count <= h.samples or (not c.mask and c.count != h.samples):
            raise FrameError(f"column {c.name!r} declares {c.count} of {h.samples} values")
        if c.delta and c.dtype != "<i8":
            raise FrameError(f"column {c.name!r}: delta encoding of {c.dtype}")


def plane(a: np.ndarray) -> bytes:
    """An 8-byte array's bytes as 8 planes (byte 0 of every value, then byte 1, ...)."""
    return a.view(np.uint8).reshape(-1, 8).T.tobytes()


def _unplane(buf: memoryview, dtype: str) -> np.ndarray:
    n = len(buf) // 8
    return np.frombuffer(buf, np.uint8).reshape(8, n).T.copy().view(dtype).reshape(n)


def _undelta(a: np.ndarray) -> np.ndarray:
    return np.cumsum(a, dtype=np.int64)  # wraps exactly as the writer's differences did


def parse_frame(data: bytes | bytearray | memoryview) -> Frame:
    """One frame's content (a whole inflated zstd frame) checked and decoded; arrays are
    copies. Raises :class:`FrameError` for anything that is not exactly a valid frame."""
    view = memoryview(data)
    if len(view) < _PREFIX or bytes(view[: len(MAGIC)]) != MAGIC:
        raise FrameError("no frame magic")
    (hlen,) = _U32.unpack_from(view, len(MAGIC))
    if hlen > MAX_HEADER_BYTES or _PREFIX + hlen > len(view):
        raise FrameError(f"declares a {hlen}-byte header")
    try:
        h = _header_decoder.decode(view[_PREFIX:_PREFIX + hlen])
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # bad UTF-8: msgspec's own error
        raise FrameError(f"bad header ({exc})") from None
    _check_header(h)
    pos = _PREFIX + hlen
    if len(view) - pos != _payload_bytes(h):
        raise FrameError(f"declares {_payload_bytes(h)} payload bytes, holds {len(view) - pos}")

    def take(n: int) -> memoryview:
        nonlocal pos
        out = view[pos:pos + n]
        pos += n
        return out

    payload = bytes(view[pos:])
    resource = bytes(take(h.resource_bytes))
    context = bytes(take(h.context_bytes))
    t = _undelta(_unplane(take(8 * h.samples), "<i8"))
    if h.samples and (int(t[0]) != h.t_first or int(t[-1]) != h.t_last):
        raise FrameError("timestamps do not match the header's first/last")
    columns: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for c in h.columns:
        stamps = t
        if c.mask:
            bits = np.unpackbits(np.frombuffer(take(_mask_bytes(h.samples)), np.uint8),
                                 count=h.samples).astype(bool)
            if int(bits.sum()) != c.count:
                raise FrameError(f"column {c.name!r}: presence bitmap and count differ")
            stamps = t[bits]
        raw = _unplane(take(8 * c.count), c.dtype)
        values = (_undelta(raw) if c.delta else raw).astype(np.float64)
        columns[c.name] = (stamps, values)
    return Frame(h, resource, context, t, columns, payload)


def encode_frame(h: Header, resource: bytes, context: bytes, arrays: Sequence[bytes]) -> bytes:
    head = _encoder.encode(h)
    return b"".join([MAGIC, _U32.pack(len(head)), head, resource, context, *arrays])
