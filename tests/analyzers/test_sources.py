"""File sources: OTLP archives (JSON lines, protobuf, gzip/zstd) and Stormlog exports."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest
import zstandard
from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.sources import load_paths
from stormotel.analyzers.timeline import MixedJobsError

from stormotel import exitcodes
from stormotel.errors import NoTelemetryError, SourceInputError
from tests.analyzers.otlp_fixtures import (
    json_lines,
    length_prefixed,
    metrics_requests,
    trace_request,
    write_archive,
)
from tests.analyzers.synth import INTERVAL, seed_example

DATA = Path(__file__).parent / "data"


def _seed_with_markers():
    data = seed_example()
    for d in data:
        t0 = int(d.t_ns[0])
        d.markers = [(t0 + k * 10 * INTERVAL, t0 + k * 10 * INTERVAL + 1000, f"step {k}", "step")
                     for k in range(5)]
        d.markers.append((t0 + 15 * INTERVAL, t0 + 16 * INTERVAL, "nccl:all_reduce", "collective"))
    return data


# --- OTLP JSON lines --------------------------------------------------------------------------
def test_archive_round_trip_finds_the_planted_rank(tmp_path):
    data = _seed_with_markers()
    write_archive(tmp_path / "job", data)
    tl = load_paths([str(tmp_path / "job")])
    assert tl.rank_ids == [0, 1, 2, 3] and tl.world_size == 4 and tl.job_id == "job-otlp"
    s = tl.ranks[2]
    assert len(s) == 60
    np.testing.assert_array_equal(s.t_ns, data[2].t_ns)
    np.testing.assert_allclose(s.values["device_used"], np.trunc(data[2].device_used))
    assert np.isnan(s.values["active"]).all()
    kinds = list(s.markers.kind)
    assert kinds.count("step") == 5 and kinds.count("collective") == 1
    assert "nccl:all_reduce" in list(s.markers.name)
    assert tl.ranks[2].identity.host == "node-0"
    top = analyze(tl).cross_rank.first_cause_suspects[0]
    assert (top.rank, top.confidence) == (2, "high")


def test_identity_from_data_point_attributes(tmp_path):
    data = seed_example()
    blob = b"".join(json_lines(metrics_requests(d, rank_in_points=True)) for d in data)
    (tmp_path / "merged-by-collector.jsonl").write_bytes(blob)
    tl = load_paths([str(tmp_path)])
    assert tl.rank_ids == [0, 1, 2, 3]
    assert all(len(s) == 60 for s in tl.ranks.values())


def test_many_files_globs_overlap_deduplicated(tmp_path):
    data = seed_example()
    for d in data:
        reqs = metrics_requests(d)
        # two overlapping files per rank (a rotated archive and its copy)
        (tmp_path / f"rank-{d.rank}.a.jsonl").write_bytes(json_lines(reqs[:4]))
        (tmp_path / f"rank-{d.rank}.b.jsonl").write_bytes(json_lines(reqs[2:]))
    tl = load_paths([str(tmp_path / "rank-*.a.jsonl"), str(tmp_path / "rank-*.b.jsonl")])
    assert all(len(s) == 60 for s in tl.ranks.values())
    assert tl.skipped["duplicate_sample"] == 20 * 4  # 20 samples twice, on each of 4 ranks
    assert len(tl.sources) == 8


def test_traces_only_file_is_no_telemetry(tmp_path):
    data = _seed_with_markers()
    (tmp_path / "rank-0.traces.jsonl").write_bytes(json_lines([trace_request(data[0])]))
    with pytest.raises(NoTelemetryError) as e:
        load_paths([str(tmp_path)])
    assert e.value.exit_code == exitcodes.SOURCE_FAILURE


@pytest.mark.parametrize("codec", ["gz", "zst"])
def test_compressed_archives(tmp_path, codec):
    data = seed_example()
    for d in data:
        raw = json_lines(metrics_requests(d))
        blob = gzip.compress(raw) if codec == "gz" else zstandard.ZstdCompressor().compress(raw)
        (tmp_path / f"rank-{d.rank}.metrics.jsonl.{codec}").write_bytes(blob)
    tl = load_paths([str(tmp_path)])
    assert tl.total_samples() == 240


def test_zstd_files_read_in_a_row_match_their_plain_text(tmp_path, monkeypatch):
    """zstd files inflate into one reused buffer: a shorter file after a longer one, in one
    process, must read exactly as the same files uncompressed (nothing of the previous text
    left over, nothing mixed)."""
    monkeypatch.setenv("STORMOTEL_LOAD_WORKERS", "1")
    plain, packed = tmp_path / "plain", tmp_path / "zst"
    plain.mkdir()
    packed.mkdir()
    for d in seed_example():
        raw = json_lines(metrics_requests(d)) * (3 if d.rank == 0 else 1)  # rank 0 longest
        (plain / f"rank-{d.rank}.metrics.jsonl").write_bytes(raw)
        (packed / f"rank-{d.rank}.metrics.jsonl.zst").write_bytes(
            zstandard.ZstdCompressor().compress(raw))
    a, b = load_paths([str(plain)]), load_paths([str(packed)])
    assert a.rank_ids == b.rank_ids and len(a.rank_ids) > 1
    for r in a.rank_ids:
        np.testing.assert_array_equal(a.ranks[r].t_ns, b.ranks[r].t_ns)
        for name, values in a.ranks[r].values.items():
            np.testing.assert_array_equal(values, b.ranks[r].values[name])
    assert a.skipped == b.skipped and a.skipped["duplicate_sample"] > 0


def test_scratch_buffer_is_never_reused_under_a_live_view():
    from stormotel.analyzers.sources import loader as sources

    buf = sources.scratch_buffer()
    buf[:] = b"previous file"
    assert sources.scratch_buffer() is buf  # nothing refers to it: reused
    view = memoryview(buf)[:8]
    fresh = sources.scratch_buffer()
    assert fresh is not buf and bytes(view) == b"previous"  # the old text stays intact
    view.release()
    fresh[:] = b"x" * (sources.SCRATCH_KEEP_MAX + 1)  # one huge file: not kept for the next
    assert sources.scratch_buffer() is not fresh


@pytest.mark.parametrize("varint", [False, True])
def test_length_prefixed_protobuf(tmp_path, varint):
    data = _seed_with_markers()
    for d in data:
        (tmp_path / f"rank-{d.rank}.metrics.pb").write_bytes(
            length_prefixed(metrics_requests(d), varint=varint))
        (tmp_path / f"rank-{d.rank}.traces.pb").write_bytes(
            length_prefixed([trace_request(d)], varint=varint))
    tl = load_paths([str(tmp_path)])
    assert tl.total_samples() == 240
    assert len(tl.ranks[1].markers) == 6
    assert analyze(tl).cross_rank.first_cause_suspects[0].rank == 2


def test_real_sdk_file_exporter_output_parses(tmp_path):
    """Lines written by the official OTel JSON file exporter (not our fixture builder)."""
    from opentelemetry.exporter.otlp.json.file import FileMetricExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource

    from stormotel import schema

    path = tmp_path / "rank-1.metrics.jsonl"
    values = iter([1.0e9, 1.5e9, 2.0e9])
    current = {"v": 0.0}

    def cb(_options):
        from opentelemetry.metrics import Observation

        yield Observation(current["v"])

    try:
        exporter = FileMetricExporter(file_path=str(path))
    except TypeError:
        exporter = FileMetricExporter(str(path))
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=10**9)
    provider = MeterProvider(metric_readers=[reader], resource=Resource.create(
        {schema.ATTR_RANK: "1", schema.ATTR_JOB_ID: "sdk", schema.ATTR_WORLD_SIZE: "2"}))
    meter = provider.get_meter(schema.INSTRUMENTATION_SCOPE)
    meter.create_observable_gauge(schema.DEVICE_USED.name, [cb], unit=schema.DEVICE_USED.unit)
    for v in values:
        current["v"] = v
        reader.collect()
    provider.shutdown()
    tl = load_paths([str(path)])
    assert tl.job_id == "sdk" and tl.rank_ids == [1]
    # shutdown() exports once more, so the last value may appear a fourth time
    assert list(tl.ranks[1].values["device_used"])[:3] == [1.0e9, 1.5e9, 2.0e9]


# --- bad input --------------------------------------------------------------------------------
def test_truncated_last_line_is_counted_and_noted(tmp_path):
    data = seed_example()
    write_archive(tmp_path, data)
    p = tmp_path / "rank-1.metrics.jsonl"
    raw = p.read_bytes()
    p.write_bytes(raw[: len(raw) - 200])  # the job died mid-write
    tl = load_paths([str(tmp_path)])
    assert tl.skipped["truncated_line"] == 1
    assert any("rank-1.metrics.jsonl:6" in n and "not valid JSON" in n for n in tl.notes)
    assert len(tl.ranks[1]) == 50


def test_wrong_types_nan_and_negative_bytes_are_counted(tmp_path):
    data = seed_example()
    lines = json_lines(metrics_requests(data[0])).decode().splitlines()
    obj = json.loads(lines[0])
    pts = obj["resourceMetrics"][0]["scopeMetrics"][0]["metrics"][2]["gauge"]["dataPoints"]
    pts[0].pop("asInt")
    pts[0]["asDouble"] = "NaN"
    pts[1]["asInt"] = "-5"
    pts[2]["asInt"] = {"oops": 1}
    lines[0] = json.dumps(obj)
    lines.insert(1, '"just a string"')
    (tmp_path / "rank-0.metrics.jsonl").write_text("\n".join(lines) + "\n")
    tl = load_paths([str(tmp_path)])
    assert tl.skipped["nan_bytes"] == 1
    assert tl.skipped["negative_bytes"] == 1
    assert tl.skipped["wrong_type"] == 2
    assert len(tl.ranks[0]) == 60  # other fields of those samples survive
    assert int(np.isnan(tl.ranks[0].values["device_used"]).sum()) == 3


def test_empty_file_and_empty_folder(tmp_path):
    (tmp_path / "rank-0.metrics.jsonl").write_bytes(b"")
    with pytest.raises(NoTelemetryError, match="no telemetry samples") as e:
        load_paths([str(tmp_path)])
    assert e.value.exit_code == exitcodes.SOURCE_FAILURE
    empty = tmp_path / "nothing"
    empty.mkdir()
    (empty / "README.txt").write_text("hello")
    with pytest.raises(NoTelemetryError, match="no telemetry files") as e:
        load_paths([str(empty)])
    assert e.value.exit_code == exitcodes.SOURCE_FAILURE


def test_missing_path_and_non_telemetry_file(tmp_path):
    with pytest.raises(SourceInputError, match="no such file"):
        load_paths([str(tmp_path / "nope.jsonl")])
    junk = tmp_path / "junk.json"
    junk.write_text('{"hello": 1}')
    with pytest.raises(SourceInputError, match="neither OTLP nor Stormlog"):
        load_paths([str(junk)])


def test_no_rank_uses_file_name_with_a_note(tmp_path):
    data = seed_example()
    reqs = metrics_requests(data[3])
    for r in reqs:
        attrs = r.resource_metrics[0].resource.attributes
        keep = [a for a in attrs if a.key != "rank"]
        del attrs[:]
        attrs.extend(keep)
    (tmp_path / "rank-3.metrics.jsonl").write_bytes(json_lines(reqs))
    tl = load_paths([str(tmp_path)])
    assert tl.rank_ids == [3]
    assert any("rank taken from the file name" in n for n in tl.notes)


# --- Stormlog exports (files written by the real stormlog 0.4.3 package) ----------------------
def test_real_stormlog_exports_find_rank_2():
    files = sorted(str(p) for p in DATA.glob("stormlog_events_rank*.json"))
    tl = load_paths(files)
    assert tl.rank_ids == [0, 1, 2, 3] and tl.job_id == "sl-fixture" and tl.world_size == 4
    assert all(np.isfinite(s.values["device_used"]).all() for s in tl.ranks.values())
    top = analyze(tl).cross_rank.first_cause_suspects[0]
    assert top.rank == 2 and top.confidence == "high"
    assert top.delta_bytes == pytest.approx(384 * 2**20, rel=0.01)


def test_real_stormlog_csv_matches_json():
    a = load_paths([str(DATA / "stormlog_events_rank1.csv")]).ranks[1]
    b = load_paths([str(DATA / "stormlog_events_rank1.json")]).ranks[1]
    np.testing.assert_array_equal(a.t_ns, b.t_ns)
    for f in ("allocated", "reserved", "device_used", "device_total", "device_free"):
        np.testing.assert_array_equal(a.values[f], b.values[f])


def test_stormlog_wrappers_jsonl_and_v2(tmp_path):
    events = json.loads((DATA / "stormlog_events_rank2.json").read_text())
    (tmp_path / "wrapped.json").write_text(json.dumps({"events": events}))
    v2 = [{k: v for k, v in e.items() if k != "session_id"} | {"schema_version": 2}
          for e in events if e["device_used_bytes"] is not None]
    (tmp_path / "v2.jsonl").write_text("\n".join(json.dumps(e) for e in v2) + "\n")
    for name in ("wrapped.json", "v2.jsonl"):
        tl = load_paths([str(tmp_path / name)])
        assert tl.rank_ids == [2] and len(tl.ranks[2]) == len(v2), name


def test_stormlog_legacy_field_names(tmp_path):
    legacy = [{"timestamp": 1700000000.0 + i * 0.1, "type": "sample", "device": "cuda:0",
               "memory_allocated": 1_000_000 * (10 + i), "memory_reserved": 2_000_000_000,
               "total_memory": 16_000_000_000, "rank": 1, "world_size": 2,
               "message": "nccl:all_reduce" if i == 5 else None} for i in range(20)]
    (tmp_path / "legacy.json").write_text(json.dumps(legacy))
    tl = load_paths([str(tmp_path / "legacy.json")])
    s = tl.ranks[1]
    assert len(s) == 20 and s.t_ns[1] - s.t_ns[0] == pytest.approx(100_000_000, abs=1000)
    assert s.values["allocated"][3] == 13_000_000
    assert s.values["device_used"][3] == 13_000_000  # Stormlog: used defaults to allocated
    assert s.values["device_total"][0] == 16_000_000_000
    assert list(s.markers.kind) == ["collective"]


def test_stormlog_bad_records_are_counted(tmp_path):
    events = json.loads((DATA / "stormlog_events_rank0.json").read_text())
    events[5]["device_used_bytes"] = "lots"
    events[6]["schema_version"] = 9
    events[7] = ["not", "an", "event"]
    (tmp_path / "bad.json").write_text(json.dumps(events))
    tl = load_paths([str(tmp_path / "bad.json")])
    assert tl.skipped["wrong_type"] == 2  # the string value and the list
    assert tl.skipped["unsupported_schema"] == 1


def test_progress_is_reported_for_many_files(tmp_path, monkeypatch):
    from stormotel.analyzers.sources import loader as sources

    monkeypatch.setattr(sources, "PROGRESS_FILES", 2)
    write_archive(tmp_path, seed_example())
    messages: list[str] = []
    load_paths([str(tmp_path)], progress=messages.append)
    assert messages[-1].startswith("loaded 4/4 files") and "240 samples" in messages[-1]


def test_parallel_loading_matches_in_process(tmp_path, monkeypatch):
    data = _seed_with_markers()
    write_archive(tmp_path, data)
    (tmp_path / "copy").mkdir()
    write_archive(tmp_path / "copy", data)  # duplicates, merged across worker processes
    monkeypatch.setenv("STORMOTEL_LOAD_WORKERS", "1")
    one = load_paths([str(tmp_path)])
    monkeypatch.setenv("STORMOTEL_LOAD_WORKERS", "2")
    two = load_paths([str(tmp_path)])
    assert one.rank_ids == two.rank_ids and one.skipped == two.skipped
    assert one.skipped["duplicate_sample"] == 240
    for r in one.rank_ids:
        np.testing.assert_array_equal(one.ranks[r].t_ns, two.ranks[r].t_ns)
        np.testing.assert_array_equal(one.ranks[r].values["device_used"],
                                      two.ranks[r].values["device_used"])
        assert list(one.ranks[r].markers.name) == list(two.ranks[r].markers.name)


def test_job_id_filter_keeps_one_job(tmp_path):
    data = seed_example()
    write_archive(tmp_path / "a", data, job_id="job-a")
    write_archive(tmp_path / "b", seed_example(), job_id="job-b")
    with pytest.raises(MixedJobsError, match=r"'job-a', 'job-b'.*--job-id"):
        load_paths([str(tmp_path)])  # merging two jobs' ranks would be a wrong answer
    only_a = load_paths([str(tmp_path)], job_id="job-a")
    assert only_a.job_id == "job-a" and only_a.total_samples() == 240
    assert only_a.skipped["other_job"] > 0


def test_stormlog_nan_tokens_are_counted_not_fatal(tmp_path):
    events = json.loads((DATA / "stormlog_events_rank3.json").read_text())
    samples = [e for e in events if e["device_used_bytes"] is not None]
    samples[4]["device_used_bytes"] = float("nan")  # json.dump writes a bare NaN token
    samples[5]["allocator_reserved_bytes"] = -1
    (tmp_path / "nan.json").write_text(json.dumps(samples))
    tl = load_paths([str(tmp_path / "nan.json")])
    assert tl.skipped["nan_bytes"] == 1 and tl.skipped["negative_bytes"] == 1
    assert len(tl.ranks[3]) == len(samples)


def test_corrupt_file_in_a_folder_is_skipped_but_fatal_when_named(tmp_path):
    write_archive(tmp_path, seed_example())
    bad = tmp_path / "rank-9.metrics.jsonl.gz"
    bad.write_bytes(b"this is not gzip")
    tl = load_paths([str(tmp_path)])
    assert tl.skipped["unreadable_file"] == 1 and tl.rank_ids == [0, 1, 2, 3]
    assert any("not valid gzip" in n for n in tl.notes)
    with pytest.raises(SourceInputError, match="not valid gzip"):
        load_paths([str(bad)])


def test_file_size_limit_is_exact_and_holds_when_a_file_grows(tmp_path, monkeypatch):
    """A regular file is read with a buffer of its own size; the per-file limit still holds to
    the byte, also for a file that grew after its size was taken (still being written)."""
    from stormotel.analyzers.sources.loader import _read_raw

    f = tmp_path / "events.json"
    f.write_bytes(b"x" * 1000)
    assert _read_raw(f, 1000) == b"x" * 1000
    with pytest.raises(SourceInputError, match="larger than 999 bytes"):
        _read_raw(f, 999)
    real_fstat = os.fstat

    def fstat_before_growth(fd: int) -> os.stat_result:
        st = list(real_fstat(fd))
        st[6] = 400  # st_size as it was when the writer had written 400 bytes
        return os.stat_result(st)

    monkeypatch.setattr(os, "fstat", fstat_before_growth)
    assert _read_raw(f, 1000) == b"x" * 1000
    with pytest.raises(SourceInputError, match="larger than 999 bytes"):
        _read_raw(f, 999)


def test_parallel_batches_of_stormlog_exports_match_in_process(tmp_path, monkeypatch):
    """Files reach the workers in batches (several per message): the Timeline, notes, skips and
    identities are those of an in-process load, in the same order."""
    from stormotel.analyzers.sources import loader as sources

    real = json.loads((DATA / "stormlog_events_rank1.json").read_bytes())
    for r in range(24):
        events = [{**e, "rank": r % 10, "world_size": 10, "session_id": f"s{r}", "host": f"h{r}"}
                  for e in real]
        if r % 5 == 0:
            events[3]["device_used_bytes"] = -1  # a counted skip in some batches
        (tmp_path / f"events_rank{r:02}.json").write_text(json.dumps(events))
    monkeypatch.setattr(sources, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setenv("STORMOTEL_LOAD_WORKERS", "1")
    one = load_paths([str(tmp_path)])
    monkeypatch.setenv("STORMOTEL_LOAD_WORKERS", "2")
    two = load_paths([str(tmp_path)])
    assert -(-24 // (2 * sources.CHUNKS_PER_WORKER)) > 1  # several files per batch
    assert one.rank_ids == two.rank_ids == list(range(10))
    assert one.skipped == two.skipped and one.skipped["negative_bytes"] == 5
    assert one.meta == two.meta and one.sources == two.sources
    # Each file has its own context in a worker, so a reason's notes are capped per file there.
    assert set(one.notes) <= set(two.notes)
    for r in one.rank_ids:
        a, b = one.ranks[r], two.ranks[r]
        assert a.identity == b.identity
        np.testing.assert_array_equal(a.t_ns, b.t_ns)
        for k in a.values:
            np.testing.assert_array_equal(a.values[k], b.values[k])
        assert list(a.markers.name) == list(b.markers.name)


def test_parallel_threshold_weighs_compressed_files(monkeypatch):
    """64 plain Stormlog exports of 5.2 MB load in-process (about a second: workers would cost
    more CPU than the wall time they save); the same bytes of .zst archives are ~8x the work and
    go to workers, as do 1.3 GB of plain JSON."""
    from stormotel.analyzers.sources.loader import _work_bytes, _workers

    monkeypatch.delenv("STORMOTEL_LOAD_WORKERS", raising=False)
    json_files = [(Path(f"events_rank{r}.json"), False) for r in range(64)]
    zst_files = [(Path(f"rank{r}.jsonl.zst"), False) for r in range(64)]
    size = 5_200_000
    assert _work_bytes(json_files, [size] * 64) == 64 * size
    assert _work_bytes(zst_files, [size] * 64) == 8 * 64 * size
    assert _workers(json_files, _work_bytes(json_files, [size] * 64)) == 1
    many = json_files * 4
    cores = min(os.cpu_count() or 1, 8)
    assert _workers(zst_files, _work_bytes(zst_files, [size] * 64)) == cores
    assert _workers(many, _work_bytes(many, [size] * 256)) == cores


def test_a_job_id_in_none_of_the_files_names_the_jobs_they_hold(tmp_path):
    """``stormotel analyze DIR --job-id run-8`` on a folder of job ``job-otlp``: exit 3 as
    before, and the one line now says the id matched nothing and which job the files hold (it
    said only ``skipped: other_job=N``; first-hour audit, helper fa)."""
    import subprocess
    import sys

    archive = write_archive(tmp_path / "a", seed_example(), job_id="job-otlp")
    out = subprocess.run([sys.executable, "-m", "stormotel", "analyze", str(archive),
                          "--job-id", "run-8"], capture_output=True, text=True, timeout=120)
    assert out.returncode == exitcodes.SOURCE_FAILURE, out.stderr
    assert "Traceback" not in out.stderr
    assert "--job-id 'run-8' is in none of them; they hold job 'job-otlp'" in out.stderr, \
        out.stderr
