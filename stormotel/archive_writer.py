"""The compact archive: every sample kept, many per OTLP line, zstd, off the sampling thread.

The per-sample SDK path (collect every instrument, encode a whole request, one JSON line per
sample) costs ~1.6 ms of CPU and ~14 KB per sample. This writer keeps the bytes standard — each
line is one ``ExportMetricsServiceRequest`` in the protobuf JSON mapping, parsed back by the
official ``opentelemetry.proto`` classes and replayable through a collector — but shapes them the
way a batch is meant to look in OTLP:

* one line per batch (``batch_s``, default 1 s, or ``batch_max`` samples), the identity once in
  the resource, one data point per sample per gauge, no per-point attributes, each description
  only in the first line of a file;
* the sampling thread only appends ``(sample, step, duration)`` to a bounded deque (a full deque
  counts ``samples.dropped{reason="archive_queue_full"}``); a writer thread encodes (msgspec) and
  compresses;
* the gauges a :class:`~stormotel.samplers.Sample` carries are written per sample; every other
  instrument the tracker registers (peaks, counters, estimate, and any gauge added to
  ``stormotel/schema.py`` later) is collected through the official SDK reader once every
  ``context_s`` (default 10 s) and at the end, so the peak-since-last-collect gauges stay exact;
* zstd, flushed to a block boundary after every batch: a SIGKILL loses at most the batch being
  built; ``zstd -dc``/``zstdcat``, python-zstandard and the analyzer read the file up to its last
  complete block. With the columnar companion on (the default) the file is a sequence of zstd
  frames, one ended wherever a companion frame ends (every ``cols_frame_samples`` samples or
  ``cols_frame_s``); a file of concatenated frames is still one zstd stream to every reader;
* beside each file, ``rank-R.NNNNN.metrics.cols.zst``: the same samples as columns
  (:mod:`stormotel.archive_cols`, its layout in :mod:`stormotel.archive_format`), which the
  analyzer reads instead of inflating and scanning the JSON (~15x less to inflate); built by
  the same writer thread from the lists it already makes;
* files rotate by size and age (``rank-R.NNNNN.metrics.jsonl.zst``) and the oldest beyond
  ``max_files`` are deleted, so the archive is bounded on disk.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from stormotel import schema
from stormotel.archive_cols import ColumnsFile
from stormotel.archive_format import COLUMN_METRICS, cols_path_for, new_json_digest
from stormotel.samplers.base import Sample

__all__ = ["PER_SAMPLE_GAUGES", "PER_SAMPLE_NAMES", "ArchiveLimits", "CompactArchiveWriter",
           "compact_archive_glob"]

log = logging.getLogger("stormotel.archive")

#: Gauges whose value is a property of one sample: written once per sample. Everything else the
#: tracker registers comes from the SDK collection (so new instruments flow in unchanged).
PER_SAMPLE_GAUGES: tuple[tuple[schema.Metric, str], ...] = (
    (schema.DEVICE_USED, "device_used"), (schema.DEVICE_LIMIT, "device_total"),
    (schema.DEVICE_FREE, "device_free"), (schema.PROCESS_USED, "process_used"),
    (schema.ALLOC_ALLOCATED, "allocated"), (schema.ALLOC_RESERVED, "reserved"),
    (schema.ALLOC_ACTIVE, "active"), (schema.ALLOC_INACTIVE_SPLIT, "inactive_split"),
    (schema.GAP, "gap"), (schema.DEVICE_UTILIZATION, "utilization"),
)
#: Every instrument the writer takes per sample from ``put`` (the SDK reader need not have them).
PER_SAMPLE_NAMES = frozenset(m.name for m, _ in PER_SAMPLE_GAUGES) | {
    schema.STEP.name, schema.SAMPLE_DURATION.name}
_COMPACT_SUFFIX = schema.ARCHIVE_METRICS_SUFFIX + ".zst"
_SEQ = re.compile(r"\.(\d{5})" + re.escape(_COMPACT_SUFFIX) + "$")  # rank-R.NNNNN.metrics...
_encoder = msgspec.json.Encoder()


def compact_archive_glob(rank: int) -> str:
    """Glob of one rank's compact archive files, oldest first when sorted."""
    return f"{schema.ARCHIVE_RANK_PREFIX}{rank}.*{_COMPACT_SUFFIX}"


@dataclass(frozen=True)
class ArchiveLimits:
    """How a compact archive is batched, compressed, rotated and bounded."""

    batch_s: float = 1.0  # one line per this many seconds ...
    batch_max: int = 600  # ... or per this many samples, whichever comes first
    context_s: float = 10.0  # SDK collection of the non-per-sample instruments
    queue_max: int = 100_000  # samples waiting for the writer before new ones are dropped
    file_max_bytes: int = 64 * 2**20  # rotate at this compressed size (JSON + companion) ...
    file_max_age_s: float = 6 * 3600.0  # ... or this age
    max_files: int = 32  # oldest files beyond this are deleted (bound on disk)
    zstd_level: int = 1  # measured: faster than 3 and no larger on tracker batches
    #: Write the columnar companion (``.metrics.cols.zst``) beside each file.
    columns: bool = True
    #: A companion frame (and the JSON file's zstd frame) ends after this many samples ...
    cols_frame_samples: int = 3000
    #: ... or this many seconds, whichever comes first: what a killed writer leaves for readers
    #: to take from the JSON (inflated and scanned) instead of the companion.
    cols_frame_s: float = 300.0


def _any_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def _attributes(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _any_value(v)} for k, v in attrs.items()]


def _number(dp: dict[str, Any], value: float | int) -> dict[str, Any]:
    if isinstance(value, int) and not isinstance(value, bool):
        dp["asInt"] = str(value)
    else:
        dp["asDouble"] = float(value)
    return dp


class _ZstdFile:
    """One rotated archive file: zstd frames, flushed to a block per batch, each frame ended
    when the companion's frame is (:meth:`end_frame`)."""

    def __init__(self, path: Path, level: int) -> None:
        import zstandard

        self.path = path
        self.opened = time.monotonic()
        self.size = 0
        self.tail = b""  # the last bytes written (a companion frame names them)
        #: (algorithm, hasher) of the bytes written since the companion's last frame
        self.digest = new_json_digest()
        self.lines = 0  # lines since the frame began
        self._flush_block = zstandard.COMPRESSOBJ_FLUSH_BLOCK
        self._cctx = zstandard.ZstdCompressor(level=level)
        self._z: Any = None
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)

    def _out(self, out: bytes) -> None:
        os.write(self._fd, out)
        self.size += len(out)
        self.tail = (self.tail + out)[-64:]
        self.digest[1].update(out)

    def take_digest(self) -> tuple[str, Any]:
        """The digest of the bytes since the last call (a companion frame covers them)."""
        out, self.digest = self.digest, new_json_digest()
        return out

    def write(self, data: bytes) -> None:
        if self._z is None:
            self._z = self._cctx.compressobj()
        self._out(self._z.compress(data) + self._z.flush(self._flush_block))
        self.lines += 1

    def end_frame(self) -> None:
        """End the zstd frame (the next line starts a new one)."""
        if self._z is not None:
            z, self._z = self._z, None
            self._out(z.flush())
            self.lines = 0

    def close(self) -> None:
        try:
            self.end_frame()  # end of frame: the file is complete
        finally:
            os.close(self._fd)


class CompactArchiveWriter:
    """Writes one rank's compact metrics archive. ``put`` is the only call on the sampling thread.

    ``collect`` returns the SDK ``MetricsData`` of the archive's own reader (or ``None``);
    ``on_failure(reason)`` counts an export failure; ``on_drop(reason, n)`` counts dropped samples.
    """

    def __init__(self, directory: Path, rank: int, resource_attrs: Mapping[str, Any],
                 point_attrs: Mapping[str, Any], *, collect: Callable[[], Any] | None,
                 on_failure: Callable[[str], None], on_drop: Callable[[str, int], None],
                 limits: ArchiveLimits | None = None) -> None:
        self.limits = limits or ArchiveLimits()
        self.directory = Path(directory)
        self.rank = rank
        resource = dict(resource_attrs)
        for key, value in point_attrs.items():  # identity once, in the resource
            resource.setdefault(key, value)
        self._identity = {k: str(v) for k, v in point_attrs.items()}
        self._resource = {"attributes": _attributes(resource)}
        self._resource_json = _encoder.encode(self._resource)
        self._scope = {"name": schema.INSTRUMENTATION_SCOPE, "version": schema.SCHEMA_VERSION}
        self._collect = collect
        self._on_failure = on_failure
        self._on_drop = on_drop
        self._queue: collections.deque[tuple[Sample, int | None, float | None]] = \
            collections.deque()
        self._io = threading.Lock()  # one batch at a time (writer thread, flush, close)
        self._wake = threading.Event()
        self._closing = False
        self._file: _ZstdFile | None = None
        self._cols: ColumnsFile | None = None
        self._described = False
        self._last_context = 0.0
        self._seq = self._next_seq()
        self.batches = 0
        self.failed = False
        self._thread = threading.Thread(target=self._run, name="stormotel-archive", daemon=True)
        self._thread.start()

    # -- sampling thread ----------------------------------------------------------------------
    def put(self, sample: Sample, step: int | None, duration_s: float | None) -> None:
        """Queue one sample (no encoding here). Never blocks, never raises."""
        if len(self._queue) >= self.limits.queue_max:
            self._on_drop(schema.REASON_ARCHIVE_QUEUE_FULL, 1)
            return
        self._queue.append((sample, step, duration_s))
        if len(self._queue) >= self.limits.batch_max:
            self._wake.set()

    # -- writer -------------------------------------------------------------------------------
    @property
    def files(self) -> list[Path]:
        """This rank's compact archive files, oldest first."""
        return sorted(self.directory.glob(compact_archive_glob(self.rank)))

    @property
    def current_file(self) -> Path:
        return self._path(self._seq)

    def _path(self, seq: int) -> Path:
        return self.directory / f"{schema.ARCHIVE_RANK_PREFIX}{self.rank}.{seq:05d}" \
            f"{_COMPACT_SUFFIX}"

    def _next_seq(self) -> int:
        seqs = [int(m.group(1)) for p in self.files if (m := _SEQ.search(p.name))]
        return max(seqs) + 1 if seqs else 0

    def _run(self) -> None:
        while not self._closing:
            self._wake.wait(self.limits.batch_s)
            self._wake.clear()
            if self._closing:
                break
            self.flush(context=False)

    def flush(self, context: bool = True) -> None:
        """Write what is queued as one line now (``context``: also the SDK-collected
        instruments). Safe from any thread; never raises."""
        with self._io:
            try:
                self._write_batch(force_context=context)
            except Exception as e:
                self._fail(e)

    def close(self) -> None:
        """Write the last batch with the full context, end the zstd frame, stop the thread."""
        self._closing = True
        self._wake.set()
        self._thread.join(timeout=10.0)
        with self._io:
            try:
                self._write_batch(force_context=True)
            except Exception as e:
                self._fail(e)
            try:
                self._close_file()
            except OSError as e:
                self._fail(e)

    def _fail(self, e: BaseException) -> None:
        errno_name = errno.errorcode.get(e.errno) if isinstance(e, OSError) and e.errno else None
        self._on_failure((errno_name or type(e).__name__).lower())
        if not self.failed:
            self.failed = True
            log.warning("stormotel: the compact archive in %s could not be written (%s: %s); "
                        "failures are counted and not logged again", self.directory,
                        type(e).__name__, e)

    def _write_batch(self, force_context: bool) -> None:
        items = []
        queue = self._queue
        while queue:
            items.append(queue.popleft())
        now = time.monotonic()
        with_context = force_context or now - self._last_context >= self.limits.context_s
        if not items and not force_context:
            return
        metrics, stamps, columns = self._per_sample_metrics(items)
        context: list[dict[str, Any]] = []
        if with_context and self._collect is not None:
            self._last_context = now
            context = self._context_metrics()
        if not metrics and not context:
            return
        out = self._open()
        if not self._described:
            self._described = True
        else:
            for m in metrics + context:
                m.pop("description", None)
        line = self._line(metrics + context)
        out.write(line)
        self.batches += 1
        cols = self._cols
        if cols is not None:
            if stamps:
                cols.add(stamps, columns)
            if context:
                cols.add_context(self._line(context))
            lim = self.limits
            if cols.full(lim.cols_frame_samples) or now - cols.started >= lim.cols_frame_s:
                self._end_frame()

    def _line(self, metrics: list[dict[str, Any]]) -> bytes:
        return _encoder.encode({"resourceMetrics": [{
            "resource": self._resource,
            "scopeMetrics": [{"scope": self._scope, "metrics": metrics}]}]}) + b"\n"

    def _end_frame(self) -> None:
        """End the JSON file's zstd frame, then write the companion frame that covers it (in
        that order: a companion frame never names JSON that is not complete on disk)."""
        out, cols = self._file, self._cols
        if out is None or out.lines == 0:
            return
        out.end_frame()
        digest = out.take_digest()
        if cols is None or cols.broken:
            return
        try:
            cols.frame(out.size, out.tail[-16:], self._resource_json, digest)
        except Exception as e:  # the JSON stays whole; readers take the rest from it
            self._fail(e)

    def _close_file(self) -> None:
        if self._file is None:
            return
        try:
            self._end_frame()
        finally:
            file, cols = self._file, self._cols
            self._file = self._cols = None
            try:
                if cols is not None:
                    cols.close()
            finally:
                file.close()

    def _per_sample_metrics(self, items: list[tuple[Sample, int | None, float | None]]
                            ) -> tuple[list[dict[str, Any]], list[int], dict[str, list[Any]]]:
        """One gauge per per-sample field, one data point per sample that has a value: the
        writer thread's whole per-sample cost, so built column by column in comprehensions.
        Also the raw timestamps and the companion's columns (the same lists, not copies)."""
        if not items:
            return [], [], {}
        samples = [s for s, _, _ in items]
        raw_stamps = [s.timestamp_ns for s in samples]
        stamps = [str(t) for t in raw_stamps]
        columns = [(metric, [getattr(s, field) for s in samples])
                   for metric, field in PER_SAMPLE_GAUGES]
        columns.append((schema.STEP, [step for _, step, _ in items]))
        columns.append((schema.SAMPLE_DURATION, [duration for _, _, duration in items]))
        out = []
        for metric, values in columns:
            dps = [{"timeUnixNano": t, "asInt": str(v)} if type(v) is int else
                   _number({"timeUnixNano": t}, v)
                   for t, v in zip(stamps, values, strict=True) if v is not None]
            if dps:
                out.append(self._metric(metric, {"gauge": {"dataPoints": dps}}))
        by_name = {metric.name: values for metric, values in columns}
        return out, raw_stamps, {m.name: by_name[m.name] for m in COLUMN_METRICS}

    def _metric(self, metric: schema.Metric, body: dict[str, Any]) -> dict[str, Any]:
        return {"name": metric.name, "description": metric.description, "unit": metric.unit,
                **body}

    def _context_metrics(self) -> list[dict[str, Any]]:
        """Every SDK-registered instrument that is not per-sample, one point per attribute set."""
        assert self._collect is not None
        data = self._collect()
        out: list[dict[str, Any]] = []
        if data is None:
            return out
        identity = self._identity
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name in PER_SAMPLE_NAMES:
                        continue
                    is_sum = hasattr(m.data, "aggregation_temporality")
                    dps = []
                    for p in m.data.data_points:
                        dp: dict[str, Any] = {}
                        extra = {k: v for k, v in (p.attributes or {}).items()
                                 if identity.get(k) != str(v)}
                        if extra:
                            dp["attributes"] = _attributes(extra)
                        if is_sum and p.start_time_unix_nano:
                            dp["startTimeUnixNano"] = str(p.start_time_unix_nano)
                        dp["timeUnixNano"] = str(p.time_unix_nano)
                        dps.append(_number(dp, p.value))
                    if not dps:
                        continue
                    body: dict[str, Any] = {"dataPoints": dps}
                    if is_sum:
                        body["aggregationTemporality"] = int(m.data.aggregation_temporality)
                        body["isMonotonic"] = bool(m.data.is_monotonic)
                    out.append({"name": m.name, "description": m.description or "",
                                "unit": m.unit or "", "sum" if is_sum else "gauge": body})
        return out

    def _open(self) -> _ZstdFile:
        """The file to write the next line to, rotated first when it is over its size or age
        (before writing, so the last line of a run never starts an empty file)."""
        out, lim = self._file, self.limits
        size = 0 if out is None else out.size + (self._cols.size if self._cols else 0)
        if out is not None and (size >= lim.file_max_bytes or
                                time.monotonic() - out.opened >= lim.file_max_age_s):
            self._rotate()
        if self._file is None:  # a directory that cannot be made fails this batch, counted
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self._path(self._seq)
            self._file = _ZstdFile(path, self.limits.zstd_level)
            self._described = False
            if self.limits.columns:
                try:
                    self._cols = ColumnsFile(cols_path_for(path), self.rank, self._seq,
                                             self.limits.zstd_level)
                except OSError as e:  # the JSON file alone is a complete archive
                    self._fail(e)
        return self._file

    def _rotate(self) -> None:
        self._close_file()
        self._seq += 1
        files = self.files
        for old in files[:max(0, len(files) - self.limits.max_files + 1)]:
            try:
                cols_path_for(old).unlink(missing_ok=True)  # the companion first: never
                old.unlink()  # a companion without its JSON file
                log.info("stormotel: archive bound reached, deleted %s", old)
            except OSError as e:
                self._fail(e)
