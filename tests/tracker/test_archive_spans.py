"""The compact archive's span file: zstd frames of the file exporter's lines, whole after a kill
or a full disk, every line an ``ExportTraceServiceRequest`` after decompression."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
import zstandard
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from stormotel import archive_spans
from stormotel.archive_spans import CompressedArchiveStream
from tests.tracker.otlp_util import TraceRequest, parse_lines, spans

RESOURCE = {"service.name": "stormotel", "job_id": "j", "rank": "0", "world_size": "1",
            "local_rank": "0", "host.name": "h", "gpu": "0"}


def _tracer(stream: CompressedArchiveStream) -> tuple[TracerProvider, Any]:
    provider = TracerProvider(resource=Resource.create(RESOURCE))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(stream=stream.open())))
    return provider, provider.get_tracer("t")


def _spans_in(path: Path) -> list[str]:
    return [s.name for _r, s in spans(parse_lines(path, TraceRequest))]


def test_frames_hold_every_line_and_the_resource_costs_once(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.traces.jsonl.zst"
    stream = CompressedArchiveStream(path, frame_bytes=20_000)
    _provider, tracer = _tracer(stream)
    for i in range(200):
        with tracer.start_as_current_span(f"step-{i}"):
            pass
    plain = sum(len(line) for line in zstandard.ZstdDecompressor().decompressobj(
        read_across_frames=True).decompress(path.read_bytes()).splitlines())
    stream.close()
    assert _spans_in(path) == [f"step-{i}" for i in range(200)]
    data = path.read_bytes()
    frames = 0
    while data:  # several complete frames, back to back
        frames += 1
        d = zstandard.ZstdDecompressor().decompressobj()
        d.decompress(data)
        assert d.eof
        data = d.unused_data
    assert frames > 1
    # 200 lines each repeating the resource compress far below a line's worth each.
    assert path.stat().st_size * 8 < plain, (path.stat().st_size, plain)


def test_a_killed_rank_leaves_every_flushed_batch(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.traces.jsonl.zst"
    stream = CompressedArchiveStream(path)
    _provider, tracer = _tracer(stream)
    for i in range(5):
        with tracer.start_as_current_span(f"s{i}"):
            pass
    # no close: the frame is open, as a SIGKILL leaves it
    assert _spans_in(path) == [f"s{i}" for i in range(5)]


def test_a_full_disk_drops_the_open_frame_and_keeps_the_file_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "rank-0.traces.jsonl.zst"
    drops: list[str] = []
    stream = CompressedArchiveStream(path, on_drop=drops.append, frame_bytes=1)  # frame per batch
    _provider, tracer = _tracer(stream)
    with tracer.start_as_current_span("before"):
        pass
    real_write = os.write

    def full(fd: int, data: Any) -> int:
        real_write(fd, bytes(data)[:7])  # a partial write, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(archive_spans.os, "write", full)
    with tracer.start_as_current_span("lost"):
        pass
    monkeypatch.setattr(archive_spans.os, "write", real_write)
    with tracer.start_as_current_span("after"):
        pass
    stream.close()
    assert drops == ["enospc"]
    assert _spans_in(path) == ["before", "after"]
