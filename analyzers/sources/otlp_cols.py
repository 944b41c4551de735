"""A compact archive file read through its columnar companion (its layout:
stormotel/archive_format.py, a leaf; the tracker's writer, stormotel/archive_cols.py, is not
imported here).

Inflating and scanning a rank-hour of OTLP JSON costs ~130 ms of CPU; its companion holds the
same memory samples as ~1 MB of zstd arrays. This reader takes the companion's complete frames
(their samples as arrays, their context lines — the SDK-collected instruments, in the JSON's
own text — through the ordinary JSON reader), then inflates and reads from the JSON file only
the compressed bytes after the last frame's ``json_end``: what a killed writer wrote after its
last companion frame. The columns are then exactly those the JSON alone would give, in the same
order, so the Timeline is the same.

Nothing here trusts the companion: it must parse (:func:`~stormotel.archive_format.parse_frame`),
name this file's rank and number, and its frames must tile the JSON file from byte 0 with the
JSON's own bytes at each end (``json_tail``) and a zstd frame starting at each; and each frame's
digest must match the one computed here from the JSON file's compressed bytes it covers and the
frame itself (:func:`~stormotel.archive_format.frame_digest`: a hash of compressed bytes, no
inflate). The JSON is the archive of record in fact: a companion whose values, timestamps,
sample count or encoding were changed after it was written does not match and is not read.
Anything else returns ``False`` having recorded nothing, with a counted note
(``unusable_columns``), and the caller reads the whole JSON file as before. A format-1
companion (written before the digest) cannot be checked without inflating the JSON: the JSON
is read, with a counted note (``unbound_columns``). A companion from another (newer) format
version is read the same way, without a note.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from stormotel.analyzers.sources.otlp_archive import METRIC_FIELDS, OtlpFileReader, identity_from
from stormotel.analyzers.sources.otlp_fast import OtlpResource, attrs_of
from stormotel.analyzers.sources.zstd_slices import OverBudget, inflate_frame

from stormotel import schema
from stormotel.archive_format import (
    MAX_FRAME_BYTES,
    Frame,
    FrameError,
    OtherVersion,
    Unbound,
    cols_path_for,
    frame_digest,
    parse_frame,
)

__all__ = ["companion_of", "read_with_companion"]

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_NAME = re.compile(r"^" + re.escape(schema.ARCHIVE_RANK_PREFIX) + r"(\d+)\.(\d{5})"
                   + re.escape(schema.ARCHIVE_METRICS_SUFFIX) + r"\.zst$")


def companion_of(path: Path) -> Path | None:
    """The companion of a compact archive file, when the file is one and its companion exists."""
    if _NAME.match(path.name) is None:
        return None
    cols = cols_path_for(path)
    return cols if cols.is_file() else None


class _Unusable(Exception):
    """The companion cannot be used for this file; the message says why (for the note)."""

    reason = "unusable_columns"


class _Unbound(_Unusable):
    """A format-1 companion: no digest binds it to its JSON, so it is not used."""

    reason = "unbound_columns"


def _frames(raw: bytes, limit: int) -> list[bytes]:
    """Each complete zstd frame's content; a last frame cut short (a killed writer) ends the
    list. Output is bounded by ``limit`` in all (slices of input, as the JSON inflate)."""
    import zstandard

    out: list[bytes] = []
    total = 0
    data = memoryview(raw)
    while len(data):
        if not bytes(data[:4096]).strip(b"\0"):
            break  # zeros where a crash left the file's end unwritten: as cut, like the JSON's
        d = zstandard.ZstdDecompressor().decompressobj()
        try:  # past the file's limit in all, or past one frame's
            frame, pos = inflate_frame(d, data, min(limit - total, MAX_FRAME_BYTES))
        except OverBudget:
            raise _Unusable(f"inflates past {min(limit, MAX_FRAME_BYTES)} bytes") from None
        if not d.eof:
            break  # cut mid-frame: the complete frames before it stand
        total += len(frame)
        out.append(frame)
        data = data[min(pos, len(data)) - len(d.unused_data):]  # where the next frame starts
    return out


def read_with_companion(reader: OtlpFileReader, path: Path, cols_path: Path, limit: int,
                        inflate: Any) -> bool:
    """Read ``path`` into ``reader`` through its companion; False (nothing recorded) when the
    companion cannot be used, after noting why. ``inflate(raw) -> text`` is the JSON reader's
    bounded zstd inflate (used for the uncovered tail)."""
    ctx = reader.ctx
    try:
        plan = _plan(path, cols_path, limit, ctx.job_id)
    except _Unusable as exc:
        ctx.skip(exc.reason, str(cols_path), f"{exc}; the JSON file was read instead")
        return False
    except OSError as exc:
        ctx.skip("unusable_columns", str(cols_path),
                 f"cannot read ({exc.strerror or exc}); the JSON file was read instead")
        return False
    if plan is None:
        return False
    frames, tail_raw, attrs = plan
    tail = inflate(tail_raw) if tail_raw else b""
    context = b"".join(f.context for f in frames)
    reader._resource_rank(attrs)
    reader.columns_elsewhere = any(f.columns for f in frames)
    # The context lines and the uncovered tail: the JSON reader, as for any file. Context
    # lines alone rarely hold a memory column (peaks only), so the array path would decline
    # them after decoding every line: without a tail they go to the typed decoder directly
    # (the two give the same columns: tests/tracker/test_compact_read.py).
    reader.read_json_lines(context + bytes(tail) if context else tail, arrays=bool(tail))
    _merge(reader, frames)
    return True


def _plan(path: Path, cols_path: Path, limit: int, job_id: str | None
          ) -> tuple[list[Frame], bytes, dict[str, Any]] | None:
    """The companion's usable frames, the JSON bytes they leave uncovered, the resource's
    attributes; None (no note) where the JSON path must decide (another job, no rank)."""
    m = _NAME.match(path.name)
    assert m is not None
    rank, seq = int(m.group(1)), int(m.group(2))
    with open(cols_path, "rb") as fh:
        raw = fh.read(limit + 1)
    if len(raw) > limit:
        raise _Unusable(f"larger than {limit} bytes")
    try:
        contents = _frames(raw, limit)
    except _Unusable:
        raise
    except Exception as exc:  # zstandard.ZstdError (no stable import path) and the like
        raise _Unusable(f"not valid zstd ({exc})") from None
    frames: list[Frame] = []
    for i, content in enumerate(contents, start=1):
        try:
            frame = parse_frame(content)
        except Unbound as exc:
            raise _Unbound(f"frame {i}: {exc}") from None
        except OtherVersion:
            if i == 1:
                return None  # another writer's format: the JSON, without a note
            raise _Unusable(f"frame {i} is of another format version than frame 1") from None
        except FrameError as exc:
            raise _Unusable(f"frame {i}: {exc}") from None
        frames.append(frame)
    if not frames:
        return None  # killed before its first frame: the JSON is the whole record, as before
    resource = frames[0].resource
    try:
        attrs = attrs_of(msgspec.json.decode(resource, type=OtlpResource, strict=False)
                         .attributes)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # bad UTF-8: msgspec's own error
        raise _Unusable(f"frame 1: its resource is not an OTLP resource ({exc})") from None
    ident = identity_from(attrs)
    if ident is None or (job_id is not None and str(attrs.get(schema.ATTR_JOB_ID)) != job_id):
        return None  # the JSON reader counts and notes these as it always has
    if ident.rank != rank:
        raise _Unusable(f"its resource names rank {ident.rank}, the file rank {rank}")
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            return None  # the JSON path refuses (or skips) it as too large, as for any file
        expect = 0
        for i, f in enumerate(frames, start=1):
            h = f.header
            if h.rank != rank or h.seq != seq:
                raise _Unusable(f"frame {i} is rank {h.rank} file {h.seq:05d}, not rank {rank} "
                                f"file {seq:05d}")
            if f.resource != resource:
                raise _Unusable(f"frame {i} names another resource than frame 1")
            if h.json_start != expect or h.json_end > size or h.json_end - h.json_start < 16:
                raise _Unusable(f"frame {i} covers JSON bytes {h.json_start}-{h.json_end}, "
                                f"expected from {expect} within {size}")
            fh.seek(h.json_start)
            covered = fh.read(h.json_end - h.json_start)
            if covered[:4] != _ZSTD_MAGIC:
                raise _Unusable(f"frame {i}: no zstd frame at JSON byte {h.json_start}")
            if covered[-16:].hex() != h.json_tail:
                raise _Unusable(f"frame {i}: the JSON file's bytes before {h.json_end} differ "
                                "(not this file's companion)")
            digest = frame_digest(covered, f)
            if digest is None:
                raise _Unusable(f"frame {i}: its digest {h.digest_alg} cannot be computed here "
                                "(pip install xxhash)")
            if digest != h.digest:
                raise _Unusable(f"frame {i} disagrees with the JSON bytes {h.json_start}-"
                                f"{h.json_end} it covers (digest mismatch: its samples are not "
                                "the JSON's)")
            expect = h.json_end
        fh.seek(expect)
        tail = fh.read(limit + 1)
    if tail and not tail.startswith(_ZSTD_MAGIC):
        raise _Unusable(f"no zstd frame at JSON byte {expect}")
    return frames, tail, attrs


def _merge(reader: OtlpFileReader, frames: list[Frame]) -> None:
    """Put the companion's columns in front of what the JSON reader found (the tail's samples
    come after the frames'; the context's peaks are only in the JSON part), keys in the order
    the JSON file alone would have made them."""
    rank = frames[0].header.rank
    parts: dict[tuple[int, str, bool], tuple[list[np.ndarray], list[np.ndarray]]] = {}
    for f in frames:
        for name, (t, v) in f.columns.items():
            spec = METRIC_FIELDS.get(name)
            if spec is None:
                continue
            ts, vs = parts.setdefault((rank, spec[0], spec[1]), ([], []))
            ts.append(t)
            vs.append(v)
    cols = reader.cols
    old_t, old_v = cols.t, cols.v
    cols.t, cols.v = {}, {}
    for key, (ts, vs) in parts.items():
        jt, jv = old_t.pop(key, None), old_v.pop(key, None)
        if jt is None or jv is None:
            cols.t[key], cols.v[key] = _cat(ts), _cat(vs)
        elif isinstance(jt, np.ndarray) and isinstance(jv, np.ndarray):
            cols.t[key], cols.v[key] = _cat([*ts, jt]), _cat([*vs, jv])
        else:  # the tail went through the point-by-point decoder: lists, kept as lists
            cols.t[key] = _cat(ts).tolist() + list(jt)
            cols.v[key] = _cat(vs).tolist() + list(jv)
    for key in old_t:
        cols.t[key], cols.v[key] = old_t[key], old_v[key]


def _cat(arrays: list[np.ndarray]) -> np.ndarray:
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
