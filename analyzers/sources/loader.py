"""The file loader: paths (files, folders, globs) into one :class:`Timeline`.

This is the machinery behind :func:`load_paths` (moved out of the package's ``__init__``, which
re-exports its public names lazily so importing a sibling module loads none of it).

Dispatch is by content, with the extension only as a hint: after undoing ``.gz``/``.zst``
compression, a first line mentioning ``resourceMetrics``/``resourceSpans`` is an OTLP JSON-lines
archive; other JSON (list, ``{"events": ...}`` wrapper, JSON lines) is a Stormlog export; a CSV
header with Stormlog columns is a Stormlog CSV; ``.pb``/``.binpb``/``.proto`` files are
length-prefixed OTLP protobuf. Everything lands in one :class:`TimelineBuilder`, which merges ranks
split across files and de-duplicates samples seen twice (overlapping archives).

Named files that are not telemetry are errors; files found while walking a folder that are not
telemetry are skipped and noted. No telemetry at all raises ``NoTelemetryError``.
"""

from __future__ import annotations

import glob
import os
import re
import stat
import threading
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from stormotel.analyzers.sources import collector_file, stormlog, stormlog_fast
from stormotel.analyzers.sources.base import LoadContext, ProgressFn
from stormotel.analyzers.sources.jsonio import (
    MAX_DEPTH,
    JSONDecodeError,
    first_byte,
    loads,
    looks_like_otlp_json,
)
from stormotel.analyzers.timeline import Timeline, TimelineBuilder

from stormotel.errors import NoTelemetryError, SourceInputError

if TYPE_CHECKING:
    from stormotel.analyzers.sources.otlp_archive import OtlpFileReader

__all__ = ["LoadContext", "expand_paths", "load_paths"]

#: Extensions walked inside folders (after stripping a compression suffix).
OOM_DUMP_SUFFIX = ".ring.jsonl"
TELEMETRY_SUFFIXES = (".jsonl", ".json", ".ndjson", ".csv", ".pb", ".binpb", ".proto")
COMPRESSION_SUFFIXES = (".gz", ".zst", ".zstd")
PROTOBUF_SUFFIXES = (".pb", ".binpb", ".proto")
#: Parse in worker processes from this many files and this much work on, in bytes of plain
#: JSON (compressed files count :data:`COMPRESSED_WORK` times their size). Workers cost CPU the
#: in-process load does not (fork, the pool's imports, results pickled back: 5-20 % for 64
#: Stormlog exports, 333 MB, measured on 2 cores); below ~0.5 GB of plain JSON the run takes
#: about a second in one process, so the wall time saved does not pay for it.
PARALLEL_MIN_FILES = 4
PARALLEL_MIN_BYTES = 512 * 1024 * 1024
#: A compressed file is that much work per byte on disk (zstd archives inflate 10-15x into OTLP
#: JSON, which decodes slower per byte than Stormlog's): 64 MB of .zst is already parallel.
COMPRESSED_WORK = 8
MAX_WORKERS = 8
#: Files go to workers in this many batches per worker: one message and one result pickle per
#: batch instead of per file (256 Stormlog exports on 2 workers: the parent's CPU 0.36 -> 0.22 s)
#: while a slow batch still leaves the others to balance the load.
CHUNKS_PER_WORKER = 4
#: ... but no batch above this much work (bytes of plain JSON, as :data:`PARALLEL_MIN_BYTES`):
#: a batch's parsed columns travel back as one pickle, held whole by the worker (columns and
#: pickle) and by the parent (pickle and columns) at once. 1,024 compact rank-hours made
#: batches of 128 files, ~300 MB of columns each, several of them in flight: most of a 3.7 GB
#: peak above the Timeline's own 2.4 GB. ~10 rank-hours per batch keeps that to tens of MB.
CHUNK_MAX_WORK = 256 * 1024 * 1024
#: Report progress for files at least this large, and every this many files.
PROGRESS_BYTES = 32 * 1024 * 1024
PROGRESS_FILES = 50


def _inner_name(path: Path) -> str:
    name = path.name.lower()
    for suffix in COMPRESSION_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


#: Largest file (after decompression) one source reads into memory; a larger one is refused
#: (a named file) or skipped and counted (found in a folder). ``STORMOTEL_MAX_FILE_BYTES``
#: overrides. It bounds decompression bombs: a 200 KB .zst that would inflate to 6 GiB stops here.
MAX_FILE_BYTES = 1024 * 1024 * 1024
ENV_MAX_FILE_BYTES = "STORMOTEL_MAX_FILE_BYTES"
_CHUNK = 1 << 20


def max_file_bytes() -> int:
    env = os.environ.get(ENV_MAX_FILE_BYTES, "").strip()
    return int(env) if env.isdigit() and int(env) > 0 else MAX_FILE_BYTES


def _is_regular(p: Path) -> tuple[bool, str]:
    """True for a regular file (symlinks followed); else False and what it is instead."""
    try:
        mode = os.stat(p).st_mode
    except OSError as exc:
        return False, f"cannot stat ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return True, ""
    kind = ("named pipe" if stat.S_ISFIFO(mode) else "device" if stat.S_ISCHR(mode)
            or stat.S_ISBLK(mode) else "socket" if stat.S_ISSOCK(mode) else "special file")
    return False, f"{kind}, not a regular file"


def expand_paths(paths: Iterable[str], ctx: LoadContext | None = None
                 ) -> list[tuple[Path, bool]]:
    """Files to read, each with ``explicit`` (named by the user, not found by walking).

    Inside folders (and glob matches) only regular files are read: a named pipe would block
    forever and a symlink to ``/dev/zero`` never ends, so those are counted skips
    (``not_regular_file``). A path named on the command line may be a pipe (``<(zcat ...)``);
    its reading is bounded by :data:`MAX_FILE_BYTES` like any file.
    """
    out: list[tuple[Path, bool]] = []
    seen: set[Path] = set()

    def add(p: Path, explicit: bool) -> None:
        rp = p.resolve()
        if rp not in seen:
            seen.add(rp)
            out.append((p, explicit))

    def walked(p: Path) -> None:
        regular, why = _is_regular(p)
        if regular:
            add(p, False)
        elif ctx is not None:
            ctx.skip("not_regular_file", str(p), why)

    for raw in paths:
        matches = sorted(glob.glob(raw, recursive=True)) if glob.has_magic(raw) else [raw]
        if not matches:
            raise SourceInputError(f"{raw}: no file matches this pattern")
        for m in matches:
            p = Path(m)
            if p.is_dir():
                for root, dirs, files in os.walk(p):
                    dirs.sort()
                    for f in sorted(files):
                        fp = Path(root) / f
                        # OOM ring dumps in a job folder feed the OOM forensics, not the
                        # Timeline (analyzers/sources/oom_dumps.py reads them).
                        if collector_file.rotated_inner_name(_inner_name(fp)).endswith(
                                TELEMETRY_SUFFIXES) and \
                                not f.endswith(OOM_DUMP_SUFFIX):
                            walked(fp)
            elif glob.has_magic(raw) and p.exists():
                walked(p)
            elif p.is_file():
                add(p, True)
            elif not p.exists():
                raise SourceInputError(f"{m}: no such file or directory")
            elif stat.S_ISFIFO(os.stat(p).st_mode) or stat.S_ISCHR(os.stat(p).st_mode):
                add(p, True)
            else:
                raise SourceInputError(f"{m}: not a regular file or directory")
    return out


_ZSTD_SLICE = 4096  # compressed bytes per decompress call: bounds one call's output


def _too_large(path: Path, limit: int, what: str = "") -> SourceInputError:
    return SourceInputError(f"{path}: larger than {limit} bytes{what} (the per-file limit; raise "
                       f"${ENV_MAX_FILE_BYTES} if this is real telemetry)")


def _read_raw(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes of the file; more is an error, never a hang or an exhaustion.

    A regular file is read with a buffer of its own size (plus one byte, to see it grow): asking
    for ``limit + 1`` bytes made every read map, fault in and unmap a fresh 1 GiB buffer, six
    times the cost of reading a 5 MB export into a reused one.
    """
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        regular = stat.S_ISREG(st.st_mode)
        if regular and st.st_size > limit:
            raise _too_large(path, limit)
        data = fh.read(min(st.st_size, limit) + 1 if regular else limit + 1)
        if regular and len(data) > st.st_size:  # it grew since fstat: read on, to the limit
            data += fh.read(limit + 1 - len(data))
    if len(data) > limit:
        raise _too_large(path, limit)
    return data


def _read_bytes(path: Path, ctx: LoadContext | None = None) -> bytes | bytearray:
    """The file's bytes, decompressed; a ``.zst`` file's are the reused scratch buffer."""
    name = path.name.lower()
    limit = max_file_bytes()
    try:
        raw = _read_raw(path, limit)
    except OSError as exc:
        raise SourceInputError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    try:
        if collector_file.is_length_prefixed_zstd(raw):  # the collector's zstd records
            return collector_file.Records(raw)  # inflated a group at a time (_load_records)
        if name.endswith(".gz"):
            return _gunzip(raw, path, limit)
        if name.endswith((".zst", ".zstd")) or raw[:4] == collector_file.ZSTD_MAGIC:
            return _unzstd(raw, path, limit, ctx)
    except (OSError, EOFError, zlib.error) as exc:
        raise SourceInputError(f"{path}: not valid gzip ({exc})") from exc
    except SourceInputError:
        raise
    except Exception as exc:  # zstandard.ZstdError has no stable import path across versions
        if type(exc).__name__ == "ZstdError":
            raise SourceInputError(f"{path}: not valid zstd ({exc})") from exc
        raise
    return raw


def _gunzip(raw: bytes, path: Path, limit: int) -> bytes:
    """Decompress gzip (concatenated members too) without ever holding more than ``limit``
    bytes of output; a truncated file (job killed mid-write) keeps what decompresses, and the
    JSON-lines reader then counts the cut last line."""
    out = bytearray()
    data = raw
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending = data
        while pending and not d.eof:
            out += d.decompress(pending, limit + 1 - len(out))
            if len(out) > limit:
                raise _too_large(path, limit, " decompressed")
            pending = d.unconsumed_tail
        data = d.unused_data if d.eof else b""
        if not d.eof:
            break
        if not data.strip(b"\0"):
            break
    return bytes(out)


def _unzstd(raw: bytes, path: Path, limit: int, ctx: LoadContext | None = None) -> bytearray:
    """Decompress every zstd frame without ever holding much more than ``limit`` bytes.

    Input goes in small slices (a compressed block expands at most ~32,768-fold), so a bomb is
    stopped within a slice's worth of output. A last frame cut mid-way (a writer killed before
    it ended the frame) keeps every complete block, with a note of what may be missing.

    The output is this thread's reused scratch buffer (:func:`scratch_buffer`): a rank-hour
    inflates to ~34 MB, above glibc's largest mmap threshold, so a fresh buffer per file was
    mapped, faulted in page by page, copied once more into ``bytes`` and unmapped — 2-3 times
    the cost of decompressing (1,024 rank-hours: ~40 s of CPU). Callers copy it to ``bytes``
    wherever the text may outlive the file (:func:`_load_file` does, except for the OTLP reader,
    whose compact path keeps nothing).
    """
    import zstandard

    out = scratch_buffer()
    n = 0
    data = memoryview(raw)
    while len(data):
        d = zstandard.ZstdDecompressor().decompressobj()
        pos = 0
        while pos < len(data) and not d.eof:
            chunk = d.decompress(data[pos:pos + _ZSTD_SLICE])
            pos += _ZSTD_SLICE
            k = len(chunk)
            if n + k <= len(out):
                out[n:n + k] = chunk  # a copy into memory already mapped: no resize
            else:
                del out[n:]
                out += chunk
            n += k
            if n > limit:
                out.clear()  # a bomb's gigabyte is not kept for the next file
                raise _too_large(path, limit, " decompressed")
        if not d.eof:
            if ctx is not None:
                ctx.note(f"{path}: {open_frame_cause(path)}; read up to its last complete "
                         f"block, {n:,} bytes — at most the batch being written is missing")
            break
        # The next frame starts where this one's input ended: the unused part of the last
        # slice fed, then everything after that slice.
        data = data[min(pos, len(data)) - len(d.unused_data):]
        if not bytes(data[:4096]).strip(b"\0"):
            break
    del out[n:]  # its length is the text's; the allocation stays for the next file
    return out


#: A compressed archive file written to within this long is a live job's (its writer flushes
#: a block every --archive-interval, 1 s by default, and ends the frame only at rotation or
#: stop), not one whose writer died: the open frame is then expected, not a fault.
LIVE_WRITER_S = 30.0


def open_frame_cause(path: Path | str, now: float | None = None) -> str:
    """Why a zstd file ends inside a frame, as its modification time says: still being written
    (a live job, the normal case while it runs) or left open by a writer that stopped without
    closing it (killed, node lost)."""
    import time

    try:
        age = (time.time() if now is None else now) - os.stat(path).st_mtime
    except OSError:
        return "the zstd stream stops mid-frame"
    if age < LIVE_WRITER_S:
        return (f"the zstd stream's last frame is open and was written {max(age, 0):.0f}s "
                "ago: a running job's current batch (or a writer stopped moments ago)")
    return (f"the zstd stream stops mid-frame and was last written {age:.0f}s ago (its writer "
            "did not close it, e.g. killed)")


#: One buffer per thread: two threads loading files at once never share one.
_scratch = threading.local()
#: A text longer than this (a rare huge file) is not kept as the next file's buffer.
SCRATCH_KEEP_MAX = 256 * 1024 * 1024


def scratch_buffer() -> bytearray:
    """This thread's reusable decompression buffer, or a fresh one while the previous text is
    still referenced. A bytearray with a live view (a memoryview, a msgspec ``Raw`` of a line)
    refuses to change size (``BufferError``): that refusal is the proof nothing reads the old
    text any more, so it is never overwritten under a reader."""
    buf: bytearray | None = getattr(_scratch, "buf", None)
    if buf is not None and len(buf) <= SCRATCH_KEEP_MAX:
        try:
            buf.append(0)  # a size change: refused while any view is alive
            buf.pop()
            return buf
        except BufferError:
            pass
    _scratch.buf = buf = bytearray()
    return buf


def _first_line(data: bytes | bytearray) -> bytes:
    """The first non-blank line (its first MB). Blank lines first happen: a collector's
    native-zstd file rotated between a message and its newline starts with that newline."""
    start = 0
    while start < len(data) and data[start] in b" \t\r\n":
        start += 1
    end = data.find(b"\n", start, start + (1 << 20))
    return bytes(data[start:end if end >= 0 else start + (1 << 20)].strip())


def load_file(path: Path, ctx: LoadContext, *, explicit: bool) -> int:
    """Load one file; returns samples added.

    A file the user named that cannot be used raises :class:`SourceInputError`; one found while
    walking a folder is skipped and counted (``unreadable_file``), so one corrupt file does not
    hide the rest of an archive.
    """
    try:
        try:
            return _load_file(path, ctx, explicit=explicit)
        except RecursionError:  # the one guard for every decoder (msgspec, json, the walkers)
            raise SourceInputError(f"{path}: JSON nested too deeply (more than about "
                                   f"{MAX_DEPTH} levels)") from None
    except SourceInputError as exc:
        if explicit:
            raise
        ctx.skip("unreadable_file", str(path), str(exc).removeprefix(f"{path}: "))
        return 0


def _load_file(path: Path, ctx: LoadContext, *, explicit: bool) -> int:
    read = _read_with_companion(path, ctx)
    if read is not None:
        return read
    data = _read_bytes(path, ctx)
    where = str(path)
    if isinstance(data, collector_file.Records):
        return _load_records(data, path, ctx)
    inner = _inner_name(path)
    if not first_byte(data):
        ctx.skip("empty_file", where, "file is empty")
        return 0
    head = _first_line(data)
    got = _read_as(data, head, where, inner, ctx)
    if isinstance(got, str):  # not telemetry by its first line: was that line damaged?
        later = _later_json_line(data, head)
        if later is not None:  # the first later line that is JSON decides instead
            again = _read_as(data, later, where, inner, ctx)
            got = got if isinstance(again, str) else again
    if isinstance(got, str):
        return _not_telemetry(where, ctx, explicit, got)
    return got


def _read_as(data: bytes | bytearray, head: bytes, where: str, inner: str, ctx: LoadContext
             ) -> int | str:
    """Samples read from ``data`` in the format ``head`` (a line of it) says; the reason as
    text when that format is not telemetry."""
    if head[:1] in (b"{", b"[") and not inner.endswith(PROTOBUF_SUFFIXES) and \
            not isinstance(data, collector_file.ProtoMessages) and \
            looks_like_otlp_json(head if len(head) > 1 else bytes(data[:4096])):
        # OTLP JSON: the one reader given the scratch buffer itself (it copies what it keeps)
        reader = _otlp_reader(ctx, where)
        reader.read_json_lines(data)
        return reader.flush()
    if isinstance(data, bytearray):  # every other reader may keep views of its text
        data = bytes(data)
    if inner.endswith(PROTOBUF_SUFFIXES) or isinstance(data, collector_file.ProtoMessages):
        reader = _otlp_reader(ctx, where)
        reader.read_protobuf(data)
        return reader.flush()
    if head[:1] in (b"{", b"["):
        records = _stormlog_json_records(data, where, ctx)
        if records is None:
            return "JSON that is neither OTLP nor Stormlog"
        return stormlog.load_records(records, where, ctx)
    if inner.endswith(".csv") or stormlog.csv_header_is_stormlog(head):
        if not stormlog.csv_header_is_stormlog(head):
            return "CSV without Stormlog telemetry columns"
        return stormlog.load_records(stormlog.read_csv(data, where), where, ctx)
    return "not JSON, CSV or protobuf telemetry"


def _later_json_line(data: bytes | bytearray, head: bytes) -> bytes | None:
    """The first of the lines after ``head`` (the first, when it is not JSON itself) among
    the file's first :data:`SNIFF_LINES` that is a JSON object or array; None otherwise."""
    if head[:1] in (b"{", b"[") and head[-1:] in (b"}", b"]"):
        try:
            loads(head)
            return None  # line 1 is JSON: it said what the file is
        except JSONDecodeError:
            pass
    start = data.find(head) + len(head) if head else 0
    for _ in range(SNIFF_LINES):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        line = bytes(data[start:end]).strip()
        start = end + 1
        if line[:1] in (b"{", b"["):
            try:
                loads(line)
                return line
            except JSONDecodeError:
                pass
        if start >= len(data):
            break
    return None


def _load_records(raw: bytes, path: Path, ctx: LoadContext) -> int:
    """A collector's length-prefixed zstd file (:mod:`.collector_file`): each group of records
    read as a file of its own (OTLP JSON lines, or protobuf), merged by the builder."""
    notes: list[str] = []
    samples = 0
    try:
        for group in collector_file.groups(raw, path, max_file_bytes(), notes, scratch_buffer):
            reader = _otlp_reader(ctx, str(path))
            if isinstance(group, collector_file.ProtoMessages):
                reader.read_protobuf(group)
            else:
                reader.read_json_lines(group)
            samples += reader.flush()
    except Exception as exc:  # zstandard.ZstdError, as in _read_bytes
        if type(exc).__name__ == "ZstdError":
            raise SourceInputError(f"{path}: not valid zstd ({exc})") from exc
        raise
    for note in notes:
        ctx.note(note)
    return samples


def _read_with_companion(path: Path, ctx: LoadContext) -> int | None:
    """Samples read from a compact archive file through its columnar companion, or None when
    it has none or it cannot be used (then the JSON file is read whole, as always)."""
    if not path.name.endswith(".metrics.jsonl.zst"):
        return None  # not the tracker's compact archive: nothing to import or look for
    from stormotel.analyzers.sources.otlp_cols import companion_of, read_with_companion

    cols = companion_of(path)
    if cols is None:
        return None
    limit = max_file_bytes()
    reader = _otlp_reader(ctx, str(path))

    def inflate(raw: bytes) -> bytearray:
        try:
            return _unzstd(raw, path, limit, ctx)
        except SourceInputError:
            raise
        except Exception as exc:  # zstandard.ZstdError, as in _read_bytes
            if type(exc).__name__ == "ZstdError":
                raise SourceInputError(f"{path}: not valid zstd ({exc})") from exc
            raise

    if not read_with_companion(reader, path, cols, limit, inflate):
        return None
    return reader.flush()


def _otlp_reader(ctx: LoadContext, where: str) -> OtlpFileReader:
    """The OTLP reader, imported on first use: a run over Stormlog exports never loads it."""
    from stormotel.analyzers.sources.otlp_archive import OtlpFileReader

    return OtlpFileReader(ctx, where)


def _stormlog_json_records(data: bytes, where: str, ctx: LoadContext) -> list | None:
    events = stormlog_fast.decode_events(data)  # typed: only the used keys, no dicts
    if events is not None:
        return events
    try:
        obj = loads(data)
    except JSONDecodeError as exc:
        # Not one JSON document: JSON lines (one event per line), possibly cut short.
        first = _first_json_line(data)
        if first is None:
            raise SourceInputError(f"{where}: line 1: not valid JSON ({exc})") from exc
        if not stormlog.looks_like_stormlog(first):
            return None
        return stormlog.read_json_lines(data, where, ctx)
    if not stormlog.looks_like_stormlog(obj):
        return None
    return stormlog.records_from_json(obj, where)


#: Lines of a JSON-lines file looked at for the first that is JSON (the format's witness).
SNIFF_LINES = 8


def _first_json_line(data: bytes) -> object | None:
    """The first of the file's first :data:`SNIFF_LINES` non-blank lines that is JSON, decoded;
    None when none is. A damaged first line (a flipped bit) is then one counted bad line, as
    the same damage on line 2 always was, not the whole file refused."""
    start = seen = 0
    while start < len(data) and seen < SNIFF_LINES:
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        line = data[start:end]
        start = end + 1
        if not line.strip():
            continue
        seen += 1
        try:
            return loads(line)
        except JSONDecodeError:
            continue
    return None


def _not_telemetry(where: str, ctx: LoadContext, explicit: bool, what: str) -> int:
    if explicit:
        raise SourceInputError(f"{where}: {what}")
    ctx.skip("not_telemetry", where, what)
    return 0


def _load_one(item: tuple[Path, bool, str | None]) -> tuple[TimelineBuilder, int]:
    """Worker: parse one file into a fresh builder (returned to the parent, pickled)."""
    path, explicit, job_id = item
    sub = LoadContext(job_id=job_id)
    n = load_file(path, sub, explicit=explicit)
    return sub.builder, n


#: glibc ``mallopt`` parameters, and the values workers set (see :func:`_keep_freed_buffers`).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 32 * 2**20  # the largest glibc accepts on 64-bit
_TRIM_THRESHOLD = 2**30


def _keep_freed_buffers() -> None:
    """Worker start-up: keep freed buffers in the heap for the next file (glibc only).

    A worker frees and allocates again ~100 MB of buffers per file (the decompressed text, the
    joined data points, the columns). With glibc's sliding thresholds in a forked worker, they
    went back to the kernel and were faulted in again: 5x the page faults and ~50 % more CPU
    than the same files parsed in one process (16 compact rank-hours: 363k vs 76k minor
    faults, 4.4 vs 2.9 s CPU). Fixed thresholds keep them; the workers end with the load."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (or no libc symbols): nothing to tune
        return
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)


def _work_bytes(files: list[tuple[Path, bool]], sizes: list[int]) -> int:
    """The files' parsing work in bytes of plain JSON (see :data:`COMPRESSED_WORK`)."""
    return sum(size * (COMPRESSED_WORK if _compressed(path) else 1)
               for (path, _), size in zip(files, sizes, strict=True))


def _compressed(path: Path) -> bool:
    """By its name, else by its first bytes (a collector's zstd records keep the name the
    exporter's ``path`` gives them, often ``.json``). A named pipe (``<(zcat …)``) is never
    opened here: it can be read once, and this peek took its first bytes and closed it, so its
    writer died of SIGPIPE and the real read waited for a writer forever."""
    if path.name.lower().endswith(COMPRESSION_SUFFIXES):
        return True
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as fh:
            head = fh.read(8)
            size = os.fstat(fh.fileno()).st_size
    except OSError:
        return False
    return head[:4] == collector_file.ZSTD_MAGIC or \
        collector_file.is_length_prefixed_zstd(head, size)


def _workers(files: list[tuple[Path, bool]], work_bytes: int) -> int:
    """How many processes parse files: JSON parsing is CPU-bound and holds the GIL, so many or
    large files are split across cores (``STORMOTEL_LOAD_WORKERS`` overrides; 1 = in-process)."""
    env = os.environ.get("STORMOTEL_LOAD_WORKERS", "").strip()
    if env.isdigit() and int(env) > 0:
        return min(int(env), len(files))
    if len(files) < PARALLEL_MIN_FILES or work_bytes < PARALLEL_MIN_BYTES:
        return 1
    import multiprocessing  # only when it may be used: it is a noticeable import

    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    from stormotel.analyzers.cpus import usable_cpus

    return max(1, min(usable_cpus(), MAX_WORKERS, len(files)))


def load_paths(paths: Iterable[str], *, progress: ProgressFn | None = None,
               ctx: LoadContext | None = None, job_id: str | None = None) -> Timeline:
    """Load every file under ``paths`` into one Timeline (merged, de-duplicated, time-sorted).

    With ``job_id``, data of other jobs is left out (counted as ``other_job``).
    """
    ctx = ctx or LoadContext(progress=progress, job_id=job_id)
    files = expand_paths(paths, ctx)
    if not files:
        raise NoTelemetryError(f"no telemetry files under {', '.join(map(str, paths))} "
                          f"(looked for {', '.join(TELEMETRY_SUFFIXES)}, optionally .gz/.zst)")
    sizes = [p.stat().st_size for p, _ in files]
    total_bytes = sum(sizes)
    loud = len(files) >= PROGRESS_FILES or total_bytes >= PROGRESS_BYTES
    workers = _workers(files, _work_bytes(files, sizes))
    done_bytes = samples = 0

    def tick(i: int, n: int) -> None:
        nonlocal done_bytes, samples
        samples += n
        done_bytes += sizes[i - 1]
        if loud and (i % PROGRESS_FILES == 0 or i == len(files) or sizes[i - 1] >= PROGRESS_BYTES):
            ctx.report(f"loaded {i}/{len(files)} files, {done_bytes / 1e6:.1f} MB, "
                       f"{samples} samples" + (f" ({workers} processes)" if workers > 1 else ""))

    if workers == 1:
        for i, (path, explicit) in enumerate(files, start=1):
            tick(i, load_file(path, ctx, explicit=explicit))
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                   initializer=_keep_freed_buffers)
        with pool:
            items = [(p, explicit, ctx.job_id) for p, explicit in files]
            chunk = -(-len(items) // (workers * CHUNKS_PER_WORKER))
            per_file = _work_bytes(files, sizes) / len(files)
            chunk = max(1, min(chunk, int(CHUNK_MAX_WORK // max(1.0, per_file))))
            for i, (sub, n) in enumerate(pool.map(_load_one, items, chunksize=chunk), start=1):
                ctx.builder.absorb(sub)
                tick(i, n)
    ctx.builder.sources.extend(str(p) for p, _ in files)
    timeline = ctx.builder.build(job_id=job_id)
    if timeline.total_samples() == 0:
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(timeline.skipped.items())) or "none"
        found = next((n for n in timeline.notes if "no GPU memory series" in n), None)
        raise NoTelemetryError(f"no telemetry samples readable from {len(files)} file(s) "
                          f"(skipped: {reasons}); first: {files[0][0]}"
                          + (f" — {found}" if found else "") + _other_jobs_hint(timeline, job_id))
    return timeline


def _other_jobs_hint(timeline: Timeline, job_id: str | None) -> str:
    """When ``--job-id`` matched nothing, the jobs the files do hold (from the first skipped
    records' notes): a typo or a job id from another run is then one glance, not a hunt."""
    if job_id is None or not timeline.skipped.get("other_job"):
        return ""
    seen = sorted({m for n in timeline.notes
                   for m in re.findall(r"^skipped other_job at .*: job ('.*')", n)})
    held = f"; they hold job {', '.join(seen)}" if seen else ""
    return f" — --job-id {job_id!r} is in none of them{held}"

