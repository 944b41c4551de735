"""File sources: turn paths (files, folders, globs) into one :class:`Timeline`.

Dispatch is by content, with the extension only as a hint: after undoing ``.gz``/``.zst``
compression, a first line mentioning ``resourceMetrics``/``resourceSpans`` is an OTLP JSON-lines
archive; other JSON (list, ``{"events": ...}`` wrapper, JSON lines) is a Stormlog export; a CSV
header with Stormlog columns is a Stormlog CSV; ``.pb``/``.binpb``/``.proto`` files are
length-prefixed OTLP protobuf. Everything lands in one :class:`TimelineBuilder`, which merges ranks
split across files and de-duplicates samples seen twice (overlapping archives).

Named files that are not telemetry are errors; files found while walking a folder that are not
telemetry are skipped and noted. No telemetry at all raises ``SourceError(no_telemetry=True)``.
"""

from __future__ import annotations

import glob
import gzip
import os
import zlib
from collections.abc import Iterable
from pathlib import Path

from analyzers.sources import stormlog
from analyzers.sources.base import LoadContext, ProgressFn, SourceError
from analyzers.sources.jsonio import JSONDecodeError, loads
from analyzers.sources.otlp_archive import OtlpFileReader, looks_like_otlp_json
from analyzers.timeline import Timeline, TimelineBuilder

__all__ = ["LoadContext", "SourceError", "expand_paths", "load_paths"]

#: Extensions walked inside folders (after stripping a compression suffix).
OOM_DUMP_SUFFIX = ".ring.jsonl"
TELEMETRY_SUFFIXES = (".jsonl", ".json", ".ndjson", ".csv", ".pb", ".binpb", ".proto")
COMPRESSION_SUFFIXES = (".gz", ".zst", ".zstd")
PROTOBUF_SUFFIXES = (".pb", ".binpb", ".proto")
#: Parse in worker processes from this many files and bytes on (fork start-up is ~ms).
PARALLEL_MIN_FILES = 4
PARALLEL_MIN_BYTES = 32 * 1024 * 1024
MAX_WORKERS = 8
#: Report progress for files at least this large, and every this many files.
PROGRESS_BYTES = 32 * 1024 * 1024
PROGRESS_FILES = 50


def _inner_name(path: Path) -> str:
    name = path.name.lower()
    for suffix in COMPRESSION_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def expand_paths(paths: Iterable[str]) -> list[tuple[Path, bool]]:
    """Files to read, each with ``explicit`` (named by the user, not found by walking)."""
    out: list[tuple[Path, bool]] = []
    seen: set[Path] = set()

    def add(p: Path, explicit: bool) -> None:
        rp = p.resolve()
        if rp not in seen:
            seen.add(rp)
            out.append((p, explicit))

    for raw in paths:
        matches = sorted(glob.glob(raw, recursive=True)) if glob.has_magic(raw) else [raw]
        if not matches:
            raise SourceError(f"{raw}: no file matches this pattern")
        for m in matches:
            p = Path(m)
            if p.is_dir():
                for root, dirs, files in os.walk(p):
                    dirs.sort()
                    for f in sorted(files):
                        fp = Path(root) / f
                        # OOM ring dumps in a job folder feed the OOM forensics, not the
                        # Timeline (analyzers/sources/oom_dumps.py reads them).
                        if _inner_name(fp).endswith(TELEMETRY_SUFFIXES) and \
                                not f.endswith(OOM_DUMP_SUFFIX):
                            add(fp, False)
            elif p.is_file():
                add(p, glob.has_magic(raw) is False)
            elif not p.exists():
                raise SourceError(f"{m}: no such file or directory")
            else:
                raise SourceError(f"{m}: not a regular file or directory")
    return out


def _read_bytes(path: Path) -> bytes:
    name = path.name.lower()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    try:
        if name.endswith(".gz"):
            return _gunzip(raw)
        if name.endswith((".zst", ".zstd")):
            import zstandard

            return zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise SourceError(f"{path}: not valid gzip ({exc})") from exc
    except Exception as exc:  # zstandard.ZstdError has no stable import path across versions
        if type(exc).__name__ == "ZstdError":
            raise SourceError(f"{path}: not valid zstd ({exc})") from exc
        raise
    return raw


def _gunzip(raw: bytes) -> bytes:
    try:
        return gzip.decompress(raw)
    except EOFError:
        # A truncated gzip (job killed mid-write): keep what decompresses, the JSON-lines reader
        # then counts the cut last line.
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        return d.decompress(raw)


def _first_line(data: bytes) -> bytes:
    end = data.find(b"\n", 0, 1 << 20)
    return data[: end if end >= 0 else 1 << 20].strip()


def load_file(path: Path, ctx: LoadContext, *, explicit: bool) -> int:
    """Load one file; returns samples added.

    A file the user named that cannot be used raises :class:`SourceError`; one found while
    walking a folder is skipped and counted (``unreadable_file``), so one corrupt file does not
    hide the rest of an archive.
    """
    try:
        return _load_file(path, ctx, explicit=explicit)
    except SourceError as exc:
        if explicit:
            raise
        ctx.skip("unreadable_file", str(path), str(exc).removeprefix(f"{path}: "))
        return 0


def _load_file(path: Path, ctx: LoadContext, *, explicit: bool) -> int:
    data = _read_bytes(path)
    where = str(path)
    inner = _inner_name(path)
    if not data.strip():
        ctx.skip("empty_file", where, "file is empty")
        return 0
    if inner.endswith(PROTOBUF_SUFFIXES):
        reader = OtlpFileReader(ctx, where)
        reader.read_protobuf(data)
        return reader.flush()
    head = _first_line(data)
    if head[:1] in (b"{", b"["):
        if looks_like_otlp_json(head):
            reader = OtlpFileReader(ctx, where)
            reader.read_json_lines(data)
            return reader.flush()
        records = _stormlog_json_records(data, where, ctx)
        if records is None:
            return _not_telemetry(where, ctx, explicit, "JSON that is neither OTLP nor Stormlog")
        return stormlog.load_records(records, where, ctx)
    if inner.endswith(".csv") or stormlog.csv_header_is_stormlog(head):
        if not stormlog.csv_header_is_stormlog(head):
            return _not_telemetry(where, ctx, explicit, "CSV without Stormlog telemetry columns")
        return stormlog.load_records(stormlog.read_csv(data, where), where, ctx)
    return _not_telemetry(where, ctx, explicit, "not JSON, CSV or protobuf telemetry")


def _stormlog_json_records(data: bytes, where: str, ctx: LoadContext) -> list | None:
    try:
        obj = loads(data)
    except JSONDecodeError as exc:
        # Not one JSON document: JSON lines (one event per line), possibly cut short.
        head = _first_line(data)
        try:
            first = loads(head)
        except JSONDecodeError:
            raise SourceError(f"{where}: line 1: not valid JSON ({exc})") from exc
        if not stormlog.looks_like_stormlog(first):
            return None
        return stormlog.read_json_lines(data, where, ctx)
    if not stormlog.looks_like_stormlog(obj):
        return None
    return stormlog.records_from_json(obj, where)


def _not_telemetry(where: str, ctx: LoadContext, explicit: bool, what: str) -> int:
    if explicit:
        raise SourceError(f"{where}: {what}")
    ctx.skip("not_telemetry", where, what)
    return 0


def _load_one(item: tuple[Path, bool, str | None]) -> tuple[TimelineBuilder, int]:
    """Worker: parse one file into a fresh builder (returned to the parent, pickled)."""
    path, explicit, job_id = item
    sub = LoadContext(job_id=job_id)
    n = load_file(path, sub, explicit=explicit)
    return sub.builder, n


def _workers(files: list[tuple[Path, bool]], total_bytes: int) -> int:
    """How many processes parse files: JSON parsing is CPU-bound and holds the GIL, so many or
    large files are split across cores (``STORMOTEL_LOAD_WORKERS`` overrides; 1 = in-process)."""
    env = os.environ.get("STORMOTEL_LOAD_WORKERS", "").strip()
    if env.isdigit() and int(env) > 0:
        return min(int(env), len(files))
    if len(files) < PARALLEL_MIN_FILES or total_bytes < PARALLEL_MIN_BYTES:
        return 1
    import multiprocessing  # only when it may be used: it is a noticeable import

    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS, len(files)))


def load_paths(paths: Iterable[str], *, progress: ProgressFn | None = None,
               ctx: LoadContext | None = None, job_id: str | None = None) -> Timeline:
    """Load every file under ``paths`` into one Timeline (merged, de-duplicated, time-sorted).

    With ``job_id``, data of other jobs is left out (counted as ``other_job``).
    """
    ctx = ctx or LoadContext(progress=progress, job_id=job_id)
    files = expand_paths(paths)
    if not files:
        raise SourceError(f"no telemetry files under {', '.join(map(str, paths))} "
                          f"(looked for {', '.join(TELEMETRY_SUFFIXES)}, optionally .gz/.zst)",
                          no_telemetry=True)
    sizes = [p.stat().st_size for p, _ in files]
    total_bytes = sum(sizes)
    loud = len(files) >= PROGRESS_FILES or total_bytes >= PROGRESS_BYTES
    workers = _workers(files, total_bytes)
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

        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
        with pool:
            items = [(p, explicit, ctx.job_id) for p, explicit in files]
            for i, (sub, n) in enumerate(pool.map(_load_one, items), start=1):
                ctx.builder.absorb(sub)
                tick(i, n)
    ctx.builder.sources.extend(str(p) for p, _ in files)
    timeline = ctx.builder.build(job_id=job_id)
    if timeline.total_samples() == 0:
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(timeline.skipped.items())) or "none"
        raise SourceError(f"no telemetry samples readable from {len(files)} file(s) "
                          f"(skipped: {reasons}); first: {files[0][0]}", no_telemetry=True)
    return timeline
