"""What the OpenTelemetry Collector's ``file`` exporter writes, as the file readers take it.

Derived from the exporter's source (opentelemetry-collector-contrib, ``exporter/fileexporter``:
``file_writer.go``, ``marshaller.go``, ``compression_writer.go``, ``factory.go``):

* ``format: json`` without compression: one ``ExportMetricsServiceRequest`` per line (pdata's
  JSON marshaler: the protobuf JSON mapping, camelCase, int64 as strings) — plain OTLP JSON
  lines, read as any other;
* ``compression: zstd`` as every released version writes it (and today without the
  ``exporter.file.nativeCompression`` gate): each message compressed on its own into one zstd
  frame, and written *length-prefixed* — a 4-byte big-endian length, then the frame — whatever
  ``format`` is (``exportMessageAsBuffer``). Neither ``zstd -d`` nor a JSON reader can read
  such a file; :func:`groups` turns it back into JSON lines (or, for ``format: proto``, into
  length-prefixed protobuf messages, :class:`ProtoMessages`);
* with the gate (v0.154.0 on): a standard zstd stream of the same JSON lines (a frame per
  write when rotation is on). Read like any ``.zst`` file, by content when its name does not
  say ``.zst``;
* rotation (lumberjack, then timberjack): the live file keeps ``path``; backups are renamed
  ``<stem>-<2006-01-02T15-04-05.000>[-<reason>]<ext>`` — or with timberjack's
  ``AppendTimeAfterExt`` ``<name>-<timestamp>-<reason>`` — so a backup of ``metrics.jsonl.zst``
  is ``metrics.jsonl-2026-01-02T03-04-05.678-size.zst``. :func:`rotated_inner_name` takes the
  timestamp out so a folder walk still sees ``.jsonl``.

The whole file is bounded like any other (the caller's byte limit covers the decompressed sum).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from stormotel.analyzers.sources.zstd_slices import OverBudget, inflate_frame

from stormotel.errors import SourceInputError

__all__ = ["ProtoMessages", "Records", "groups", "is_length_prefixed_zstd", "rotated_inner_name"]

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: lumberjack's and timberjack's default backup time format (``2006-01-02T15-04-05.000``) and
#: timberjack's rotation reason (``-size``, ``-time``, a sanitized custom reason: [a-z0-9_-]).
_ROTATED = re.compile(r"-\d{4}-\d{2}-\d{2}t\d{2}-\d{2}-\d{2}(?:\.\d{3})?(?:-[a-z0-9_-]{1,32})?$")


class ProtoMessages(bytes):
    """Protobuf messages, each behind a 4-byte big-endian length: what a length-prefixed zstd
    file of ``format: proto`` holds once its frames are inflated (read as protobuf whatever
    the file's name says)."""


def rotated_inner_name(inner: str) -> str:
    """``inner`` (a lower-case file name without its compression suffix) with a rotation
    timestamp taken out: ``metrics-2026-01-02t03-04-05.678-size.json`` → ``metrics.json``
    (lumberjack/timberjack before the extension) and ``metrics.json-2026-…-size`` →
    ``metrics.json`` (timberjack's ``AppendTimeAfterExt``, or an extension after the
    compression suffix)."""
    m = _ROTATED.search(inner)
    if m is not None:  # after the extension, or the name has none
        return inner[:m.start()]
    stem, dot, ext = inner.rpartition(".")
    if dot and stem:
        m = _ROTATED.search(stem)
        if m is not None:
            return f"{stem[:m.start()]}.{ext}"
    return inner


def is_length_prefixed_zstd(raw: bytes | bytearray, size: int | None = None) -> bool:
    """Whether ``raw`` (a file, or its first bytes when ``size`` says the file's size) starts
    like the file exporter's compressed records: a big-endian length that fits the file, then
    a zstd frame."""
    if len(raw) < 8 or raw[4:8] != ZSTD_MAGIC or raw[:4] == ZSTD_MAGIC:
        return False
    (n,) = struct.unpack_from(">I", raw, 0)
    return 4 <= n <= (len(raw) if size is None else size) - 4


#: JSON handed to the reader at a time: a 100 MB rotated file of zstd records inflates past
#: 1 GB, read a group of records at a time in bounded memory. Below the scratch buffer's
#: 256 MB keep limit (``sources.SCRATCH_KEEP_MAX``, with room for the record that ends a
#: group), so every group reuses the same mapped buffer.
GROUP_BYTES = 192 * 1024 * 1024
#: A records file inflates to at most this many times its size (JSON compresses ~10x), or the
#: per-file limit if larger: the bound against a bomb once the file is read by groups.
MAX_RATIO = 64


class Records(bytes):
    """A whole length-prefixed zstd file, still compressed (its records are inflated a group at
    a time by :func:`groups`)."""


def groups(raw: bytes | bytearray, path: Path | str, limit: int,
           notes: list[str] | None = None, buffer: Callable[[], bytearray] = bytearray,
           group_bytes: int | None = None) -> Iterator[bytes | bytearray]:
    """The messages of a length-prefixed zstd file, inflated a group of records at a time:
    JSON lines (``format: json``, in ``buffer()``: a reused scratch buffer, valid until the
    next group is asked for) or :class:`ProtoMessages` (``format: proto``). A last record cut
    short (a collector killed mid-write) ends the file, with a note; a length that does not
    point at a zstd frame before that is an error (this is not such a file, or it is
    damaged); a frame that is damaged inside is that record skipped, with a note. The file
    inflates to at most ``max(limit, MAX_RATIO x its size)`` in all."""
    import zstandard

    budget = max(limit, MAX_RATIO * len(raw))
    group_bytes = group_bytes or GROUP_BYTES
    out = buffer()
    n_out = 0
    is_json: bool | None = None
    total = pos = 0
    size = len(raw)
    view = memoryview(raw)
    dctx = zstandard.ZstdDecompressor()
    while pos < size:
        if not bytes(view[pos:pos + 4]).strip(b"\0") and not bytes(view[pos:]).strip(b"\0"):
            break  # zeros where a crash left the end of the file unwritten
        if size - pos < 4:
            _note(notes, f"{path}: {size - pos} byte(s) after the last record (byte {pos}): "
                  "a record cut short; read up to the record before")
            break
        (n,) = struct.unpack_from(">I", raw, pos)
        body = view[pos + 4:pos + 4 + n]
        if len(body) < n:
            _note(notes, f"{path}: its last record (byte {pos}) is cut short: {len(body)} of "
                  f"{n} bytes; read up to the record before")
            break
        if body[:4] != ZSTD_MAGIC:
            raise SourceInputError(f"{path}: byte {pos}: a length-prefixed record that is not "
                                   "a zstd frame (not the collector file exporter's zstd "
                                   "records, or damaged)")
        try:
            message = _inflate(dctx, body, budget - total, path)
        except zstandard.ZstdError as exc:
            # One record's frame damaged (its length and magic intact: the next record is
            # where it says): that record is lost, not the file.
            _note(notes, f"{path}: the record at byte {pos} is damaged ({exc}); skipped, "
                  "the records after it read")
            dctx = zstandard.ZstdDecompressor()
            pos += 4 + n
            continue
        if message is None:
            _note(notes, f"{path}: the zstd frame of the record at byte {pos} is cut short; "
                  "read up to the record before")
            break
        total += len(message)
        if is_json is None:
            is_json = message.lstrip()[:1] in (b"{", b"[")
        piece = [message, b"\n"] if is_json else [struct.pack(">I", len(message)), message]
        for part in piece:
            k = len(part)
            if n_out + k <= len(out):
                out[n_out:n_out + k] = part  # into memory already mapped: no resize
            else:
                del out[n_out:]
                out += part
            n_out += k
        pos += 4 + n
        if n_out >= group_bytes:
            yield _finish(out, n_out, is_json)
            out, n_out = buffer(), 0
    if n_out:
        yield _finish(out, n_out, is_json)


def _finish(out: bytearray, n: int, is_json: bool | None) -> bytes | bytearray:
    del out[n:]
    if is_json is False:
        data = ProtoMessages(out)
        del out[:]
        return data
    return out


def _note(notes: list[str] | None, text: str) -> None:
    if notes is not None:
        notes.append(text)


def _inflate(dctx: Any, body: memoryview, budget: int, path: Path | str) -> bytes | None:
    """One record's zstd frame inflated (None: the frame is cut short), never past ``budget``
    bytes: in one call when the frame declares its size, else a slice of input at a time."""
    import zstandard

    try:
        declared = zstandard.frame_content_size(body)
    except zstandard.ZstdError:
        declared = -1  # a header cut short: the sliced path below says so
    if 0 <= declared <= budget:
        try:
            whole = dctx.decompress(body)
        except zstandard.ZstdError:
            whole = None  # cut or damaged: the sliced path below says which
        if whole is not None and len(whole) == declared:
            return bytes(whole)
    d = dctx.decompressobj()
    try:
        whole, _ = inflate_frame(d, body, budget)
    except OverBudget:
        raise SourceInputError(f"{path}: larger than the per-file limit decompressed "
                               "(raise $STORMOTEL_MAX_FILE_BYTES if this is real telemetry)"
                               ) from None
    return whole if d.eof else None
