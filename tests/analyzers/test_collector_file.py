"""The OTel Collector's ``file`` exporter output, read at the CLI like the tracker's own archive.

A simulated job (``benchmarks/bench_archive_scale.py``'s ranks and planted faults, written
through the tracker's real archive writer) is re-batched the way a collector writes it
(``benchmarks/bench_collector_file.py``: many ranks' resources per request line, rotation with
timberjack's backup names) in each on-disk form the exporter's source has: JSON lines, zstd
records behind 4-byte lengths (every released version), and a native zstd stream. Every form
must give the same Timeline and the same report findings as the archive itself; the lines must
parse as ``ExportMetricsServiceRequest`` with the official protobuf classes; cut and foreign
records are reported, not read as data.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zstandard
from stormotel.analyzers.sources import collector_file, expand_paths, load_paths
from stormotel.analyzers.sources.base import LoadContext

from stormotel.errors import SourceInputError
from tests.bench_modules import load_benchmark

RANKS, HOURS = 4, 0.02



@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The job's own compact archive (JSON + companions), written by the tracker's writer."""
    scale = load_benchmark("bench_archive_scale")
    folder = tmp_path_factory.mktemp("job")
    for rank in range(RANKS):
        scale.write_rank((rank, RANKS, HOURS, 10.0, str(folder)))
    return folder / scale.JOB_ID


def _collector(archive: Path, out: Path, compression: str, rotate_bytes: int) -> Path:
    bench = load_benchmark("bench_collector_file")
    out.mkdir(parents=True)
    name = "metrics.jsonl.zst" if compression == "zstd-native" else "metrics.jsonl"
    exporter = bench.FileExporter(out / name, compression, rotate_bytes)
    for rms, t_ns in bench.batches(archive):
        exporter.export(bench._PREFIX + b",".join(rms) + bench._SUFFIX, t_ns)
    exporter.close()
    return out


def _same_timeline(a, b) -> None:
    assert a.rank_ids == b.rank_ids
    for r in a.rank_ids:
        np.testing.assert_array_equal(a.ranks[r].t_ns, b.ranks[r].t_ns)
        for f in ("allocated", "reserved", "active", "device_used", "device_total"):
            np.testing.assert_array_equal(a.ranks[r].field(f), b.ranks[r].field(f))


@pytest.mark.parametrize("compression", ["none", "zstd", "zstd-native"])
def test_every_form_reads_like_the_archive(job: Path, tmp_path: Path, compression: str) -> None:
    out = _collector(job, tmp_path / "otelcol", compression,
                     400_000 if compression == "none" else 60_000)
    files = sorted(out.iterdir())
    assert len(files) >= 2, "rotation made backups"
    backups = [f.name for f in files if "-size" in f.name]
    assert backups and all(n.startswith("metrics") for n in backups)
    if compression == "zstd":  # 4-byte length, then a zstd frame: not a zstd stream
        raw = files[0].read_bytes()
        assert raw[4:8] == collector_file.ZSTD_MAGIC and raw[:4] != collector_file.ZSTD_MAGIC
    # a folder walk finds every file, rotated ones included
    assert {p.name for p, _ in expand_paths([str(out)])} == {f.name for f in files}
    ref = load_paths([str(job)])
    got = load_paths([str(out)])
    _same_timeline(ref, got)
    assert got.total_samples() == ref.total_samples()
    assert not got.skipped


def test_a_large_file_is_read_a_group_of_records_at_a_time(
        job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rotated 100 MB file of records inflates past the per-file limit: it is read in groups
    (here forced small), each below the limit, into the same Timeline."""
    out = _collector(job, tmp_path / "otelcol", "zstd", 1 << 30)
    ref = load_paths([str(out)])
    inflated = sum(len(g) for g in collector_file.groups(
        (out / "metrics.jsonl").read_bytes(), "x", 1 << 30))
    monkeypatch.setattr(collector_file, "GROUP_BYTES", 100_000)
    monkeypatch.setenv("STORMOTEL_MAX_FILE_BYTES", str(inflated // 4))
    seen = []
    real = collector_file.groups

    def counted(*args, **kwargs):
        for g in real(*args, **kwargs):
            seen.append(len(g))
            yield g

    monkeypatch.setattr(collector_file, "groups", counted)
    got = load_paths([str(out)])
    assert len(seen) > 4 and max(seen) < inflated // 4
    _same_timeline(ref, got)


def test_many_ranks_per_line_parse_as_official_requests(job: Path, tmp_path: Path) -> None:
    from google.protobuf import json_format
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )

    out = _collector(job, tmp_path / "otelcol", "none", 1 << 30)
    lines = (out / "metrics.jsonl").read_bytes().splitlines()
    ranks_per_line = []
    for line in lines:
        req = json_format.Parse(line, ExportMetricsServiceRequest())
        ranks = {kv.value.string_value for rm in req.resource_metrics
                 for kv in rm.resource.attributes if kv.key == "rank"}
        ranks_per_line.append(len(ranks))
    assert max(ranks_per_line) == RANKS  # a batch mixes every rank's requests


def test_cli_findings_equal_the_archive(job: Path, tmp_path: Path) -> None:
    out = _collector(job, tmp_path / "otelcol", "zstd", 60_000)
    reports = {}
    for label, folder in (("archive", job), ("collector", out)):
        report = tmp_path / f"{label}.json"
        proc = subprocess.run([sys.executable, "-m", "stormotel", "analyze", str(folder),
                               "--format", "json", "-o", str(report)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode in (0, 1, 2), proc.stderr[-2000:]
        reports[label] = load_benchmark("bench_collector_file").findings(report)
    assert reports["collector"] == reports["archive"]
    leak, spike = load_benchmark("bench_archive_scale").planted(RANKS)
    gap = reports["collector"]["gap"]
    assert any(r == leak and c == "persistent_drift" for r, c, *_ in gap)
    assert any(r == spike and c == "transient_spike" for r, c, *_ in gap)


def _records(messages: list[bytes]) -> bytes:
    cctx = zstandard.ZstdCompressor()
    return b"".join(struct.pack(">I", len(f)) + f for f in (cctx.compress(m) for m in messages))


def test_a_cut_last_record_keeps_the_ones_before(job: Path, tmp_path: Path) -> None:
    out = _collector(job, tmp_path / "otelcol", "zstd", 1 << 30)
    path = out / "metrics.jsonl"
    whole = path.read_bytes()
    (n_first,) = struct.unpack(">I", whole[:4])
    cut = tmp_path / "cut" / "metrics.jsonl"
    cut.parent.mkdir()
    cut.write_bytes(whole[:len(whole) - 100])
    full = load_paths([str(out)])
    part = load_paths([str(cut.parent)])
    assert 0 < part.total_samples() < full.total_samples()
    assert any("cut short" in n for n in part.notes)
    assert n_first > 0


def test_protobuf_records_read_whatever_the_name(job: Path, tmp_path: Path) -> None:
    """``format: proto`` + zstd: protobuf messages inside the length-prefixed frames."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )

    src = _collector(job, tmp_path / "json", "none", 1 << 30)
    messages = [json_format.Parse(line, ExportMetricsServiceRequest()).SerializeToString()
                for line in (src / "metrics.jsonl").read_bytes().splitlines()]
    target = tmp_path / "proto" / "metrics.data"
    target.parent.mkdir()
    target.write_bytes(_records(messages))
    _same_timeline(load_paths([str(src)]), load_paths([str(target)]))


def test_a_length_that_points_at_no_frame_is_an_error(tmp_path: Path) -> None:
    good = _records([b'{"resourceMetrics":[]}'])
    bad = good + struct.pack(">I", 8) + b"notzstd!"
    path = tmp_path / "metrics.json"
    path.write_bytes(bad)
    with pytest.raises(SourceInputError, match="not a zstd frame"):
        load_paths([str(path)])
    ctx = LoadContext()
    with pytest.raises(Exception):  # noqa: B017 - a folder walk counts it instead
        load_paths([str(tmp_path)], ctx=ctx)
    assert ctx.builder.skipped.get("unreadable_file") == 1


def test_a_bomb_record_stops_at_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    monkeypatch.setenv("STORMOTEL_MAX_FILE_BYTES", str(1 << 20))
    path = tmp_path / "metrics.json"
    path.write_bytes(_records([b"{" + b" " * (4 << 20) + b"}"]))
    with pytest.raises(SourceInputError, match="larger than"):
        load_paths([str(path)])


@pytest.mark.parametrize(("name", "inner"), [
    ("metrics-2026-01-02t03-04-05.678-size.jsonl", "metrics.jsonl"),
    ("metrics-2026-01-02t03-04-05.678.json", "metrics.json"),  # lumberjack
    ("metrics.jsonl-2026-01-02t03-04-05.678-size", "metrics.jsonl"),  # AppendTimeAfterExt
    ("metrics.jsonl", "metrics.jsonl"),
    ("rank-3.00001.metrics.jsonl", "rank-3.00001.metrics.jsonl"),
])
def test_rotated_names(name: str, inner: str) -> None:
    assert collector_file.rotated_inner_name(name) == inner

