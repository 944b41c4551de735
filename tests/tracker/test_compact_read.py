"""The tracker's compact archive read into arrays gives exactly what the typed decoder gives.

A real tracker (simulated sampler, a planted spike so there is an edge) writes its default
archive; the array path (analyzers/sources/otlp_compact.py) and the general typed decoder read the
same files, and every sample, every field (NaN where unreported), every peak point, every marker
(edges from the traces archive), the identity, the estimate, notes and skips must be equal.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest
import zstandard
from stormotel.analyzers.sources import load_paths, otlp_compact
from stormotel.analyzers.sources.base import LoadContext
from stormotel.analyzers.sources.otlp_archive import OtlpFileReader
from stormotel.analyzers.timeline import Timeline

from stormotel import schema
from stormotel.samplers.simulated import SimulatedSampler
from stormotel.tracker import MemoryTracker

SPIKE = "rank=1:first_spike@t=1.5s,delta=1GiB,lead=1ms"


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A default tracker's archive folder: compact metrics (zstd) plus the traces file."""
    folder = tmp_path_factory.mktemp("compact") / "archive"
    sampler = SimulatedSampler(rank=1, faults=SPIKE)
    tracker = MemoryTracker(sampler=sampler, sampling_interval=0.02, job_id="t-job", rank=1,
                            local_rank=1, world_size=2, host="node-a", env={},
                            archive_dir=folder, archive_interval=0.25, warmup_samples=5)
    sampler.epoch_ns = time.time_ns() - 700_000_000  # past the simulated warm-up
    tracker.start_tracking()
    try:
        while sampler.elapsed_s() < 2.2:
            time.sleep(0.05)
    finally:
        tracker.stop_tracking()
    assert tracker.stats["first_rise_ns"] is not None
    return folder


def _metrics_bytes(folder: Path) -> list[tuple[Path, bytes]]:
    files = sorted(folder.rglob(f"*{schema.ARCHIVE_METRICS_SUFFIX}.zst"))
    assert files
    return [(f, zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
             .decompress(f.read_bytes()))
            for f in files]


def _read(path: Path, data: bytes, *, arrays: bool) -> tuple[OtlpFileReader, LoadContext, int]:
    ctx = LoadContext()
    reader = OtlpFileReader(ctx, str(path))
    reader.read_json_lines(data, arrays=arrays)
    return reader, ctx, reader.flush()


def _assert_same(a: Timeline, b: Timeline) -> None:
    assert a.rank_ids == b.rank_ids and a.rank_ids
    for r in a.rank_ids:
        x, y = a.ranks[r], b.ranks[r]
        assert x.identity == y.identity
        np.testing.assert_array_equal(x.t_ns, y.t_ns)
        assert set(x.values) == set(y.values)
        for name in x.values:  # NaN where a field was not reported: equal positions too
            np.testing.assert_array_equal(x.field(name), y.field(name))
        np.testing.assert_array_equal(x.markers.start_ns, y.markers.start_ns)
        np.testing.assert_array_equal(x.markers.end_ns, y.markers.end_ns)
        assert list(x.markers.kind) == list(y.markers.kind)
        assert list(x.markers.name) == list(y.markers.name)
        assert x.markers.attrs == y.markers.attrs
    assert a.skipped == b.skipped and a.notes == b.notes and a.meta == b.meta
    assert a.job_id == b.job_id and a.world_size == b.world_size


def test_arrays_match_the_typed_decoder_on_every_sample_and_peak(archive: Path) -> None:
    for path, data in _metrics_bytes(archive):
        probe = OtlpFileReader(LoadContext(), str(path))
        assert otlp_compact.read_compact(probe, data)  # the array path takes this file
        fast, fast_ctx, n_fast = _read(path, data, arrays=True)
        typed, typed_ctx, n_typed = _read(path, data, arrays=False)
        assert n_fast == n_typed > 10
        assert set(fast.cols.t) == set(typed.cols.t)
        peaks = [k for k in fast.cols.t if k[2]]
        assert peaks, "the archive carries peak series"
        for key in fast.cols.t:  # every point of every series, peaks included
            np.testing.assert_array_equal(fast.cols.t[key], np.asarray(typed.cols.t[key]))
            np.testing.assert_array_equal(fast.cols.v[key],
                                          np.asarray(typed.cols.v[key], dtype=np.float64))
        assert fast.estimates == typed.estimates and fast.identities == typed.identities
        assert fast.records == typed.records
        _assert_same(fast_ctx.builder.build(), typed_ctx.builder.build())


def test_load_paths_same_timeline_with_and_without_arrays(
        archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = load_paths([str(archive)])
    series = fast.ranks[1]
    assert len(series) > 50 and (series.markers.kind == "first_rise").any()  # edges too
    monkeypatch.setattr(otlp_compact, "read_compact", lambda reader, data: False)
    _assert_same(fast, load_paths([str(archive)]))


def test_cut_last_line_is_counted_the_same(archive: Path) -> None:
    """A SIGKILLed writer leaves half a line: the array path still reads the file, and counts
    the cut line exactly as the typed decoder does."""
    path, data = _metrics_bytes(archive)[0]
    cut = data + data.split(b"\n")[1][:500]
    _, fast_ctx, n_fast = _read(path, cut, arrays=True)
    _, typed_ctx, n_typed = _read(path, cut, arrays=False)
    assert otlp_compact.read_compact(OtlpFileReader(LoadContext(), str(path)), cut)
    assert n_fast == n_typed and fast_ctx.builder.skipped == {"truncated_line": 1}
    _assert_same(fast_ctx.builder.build(), typed_ctx.builder.build())


_USED = f'"name":"{schema.DEVICE_USED.name}"'.encode()


@pytest.mark.parametrize(("anchor", "old", "new"), [
    (_USED, rb'"asInt":"(\d+)"', rb'"asDouble":\1.5'),  # a float value: not integer points
    (_USED, b'{"timeUnixNano":"', b'{"attributes":[],"timeUnixNano":"'),  # per-point attributes
    (_USED, b'"gauge":{"dataPoints"', b'"sum":{"aggregationTemporality":1,"dataPoints"'),  # delta
    (_USED, rb'"asInt":"', rb'"asInt":"0'),  # a leading zero
    (_USED, b'},{"timeUnixNano"', b'}, {"timeUnixNano"'),  # whitespace
    (b"", b'{"key":"rank","value":{"stringValue":"1"}},', b""),  # no rank in the resource
    (b"", b'{"resourceMetrics":', b'{"resourceSpans":[],"resourceMetrics":'),
])
def test_other_shapes_leave_no_trace_and_read_as_before(
        archive: Path, anchor: bytes, old: bytes, new: bytes) -> None:
    """A file the array path declines is untouched by it, and reads exactly as the typed
    decoder reads it."""
    path, data = _metrics_bytes(archive)[0]
    at = data.index(anchor)  # the first one after the anchor
    changed = data[:at] + re.sub(old, new, data[at:], count=1)
    assert changed != data
    ctx = LoadContext()
    probe = OtlpFileReader(ctx, str(path))
    assert not otlp_compact.read_compact(probe, changed)
    assert not probe.cols.t and not probe.identities and not probe.estimates
    assert probe.records == 0 and not ctx.builder.notes and not ctx.builder.skipped
    _, fast_ctx, n_fast = _read(path, changed, arrays=True)
    _, typed_ctx, n_typed = _read(path, changed, arrays=False)
    assert n_fast == n_typed
    _assert_same(fast_ctx.builder.build(), typed_ctx.builder.build())


def test_rank_hour_split_over_files_merges_without_resorting(
        archive: Path, tmp_path: Path) -> None:
    """A rank's archive rotated into several files loads as one series (in order or not)."""
    _, data = _metrics_bytes(archive)[0]
    lines = data.splitlines(keepends=True)
    half = len(lines) // 2
    z = zstandard.ZstdCompressor()
    for name, part in (("rank-1.00001.metrics.jsonl.zst", lines[half:]),  # newer file first
                       ("rank-1.00000.metrics.jsonl.zst", lines[:half])):
        (tmp_path / name).write_bytes(z.compress(b"".join(part)))
    whole = tmp_path / "whole"
    whole.mkdir()
    (whole / "rank-1.00000.metrics.jsonl.zst").write_bytes(z.compress(data))
    split, one = load_paths([str(tmp_path / "rank-1.0000*")]), load_paths([str(whole)])
    np.testing.assert_array_equal(split.ranks[1].t_ns, one.ranks[1].t_ns)
    for name in one.ranks[1].values:
        np.testing.assert_array_equal(split.ranks[1].field(name), one.ranks[1].field(name))
    assert not split.skipped and not one.skipped


def test_same_samples_twice_are_counted_as_duplicates(archive: Path, tmp_path: Path) -> None:
    _, data = _metrics_bytes(archive)[0]
    z = zstandard.ZstdCompressor()
    for name in ("rank-1.00000.metrics.jsonl.zst", "rank-1.00001.metrics.jsonl.zst"):
        (tmp_path / name).write_bytes(z.compress(data))
    twice = load_paths([str(tmp_path)])
    once = load_paths([str(tmp_path / "rank-1.00000.metrics.jsonl.zst")])
    np.testing.assert_array_equal(twice.ranks[1].t_ns, once.ranks[1].t_ns)
    assert twice.skipped["duplicate_sample"] == len(once.ranks[1])


def test_peaks_stand_in_for_missing_values_the_same_way(archive: Path) -> None:
    """Without the value series, the peak series are read instead (with a note each), in the
    same order and with the same points on both paths."""
    path, data = _metrics_bytes(archive)[0]
    for metric in (schema.DEVICE_USED, schema.ALLOC_ALLOCATED):
        data = data.replace(f'"name":"{metric.name}"'.encode(), b'"name":"not.memory"')
    assert otlp_compact.read_compact(OtlpFileReader(LoadContext(), str(path)), data)
    _, fast_ctx, n_fast = _read(path, data, arrays=True)
    _, typed_ctx, n_typed = _read(path, data, arrays=False)
    assert n_fast == n_typed
    fast = fast_ctx.builder.build()
    assert sum("taken from its peak series" in n for n in fast.notes) == 2
    assert np.isfinite(fast.ranks[1].field("device_used")).any()
    _assert_same(fast, typed_ctx.builder.build())
