"""Every OTLP JSON shape real producers write reads into the same Timeline as stormotel's lines.

Inputs are built with the official ``opentelemetry.proto`` classes and protobuf's JSON mapping
(int64 as strings), then reshaped the way other producers write them: the collector's file
exporter (empty resource/scope objects, rank only in data-point attributes), one pretty-printed
document, bare ``ResourceMetrics`` per line (the Java SDK's logging exporter), enum names, delta
sums. The typed decoder (analyzers/sources/otlp_fast.py) is also compared with the generic dict
walker it replaced on the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from stormotel.analyzers.sources import load_paths
from stormotel.analyzers.sources.base import LoadContext
from stormotel.analyzers.sources.otlp_archive import OtlpFileReader

from stormotel import schema
from tests.analyzers.otlp_fixtures import json_lines, metrics_requests, write_archive
from tests.analyzers.synth import healthy


def _requests_json(rank_in_points: bool = False) -> list[dict]:
    data = healthy(2, 40)
    reqs = [r for d in data for r in metrics_requests(d, rank_in_points=rank_in_points)]
    return [json.loads(line) for line in json_lines(reqs).splitlines()]


def _write(path: Path, lines: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _same(a, b) -> None:
    assert a.rank_ids == b.rank_ids
    for r in a.rank_ids:
        np.testing.assert_array_equal(a.ranks[r].t_ns, b.ranks[r].t_ns)
        for f in ("allocated", "reserved", "device_used", "device_total"):
            np.testing.assert_array_equal(a.ranks[r].field(f), b.ranks[r].field(f))


def test_pretty_printed_document_reads_like_lines(tmp_path: Path) -> None:
    reqs = _requests_json()
    ref = load_paths([str(_write(tmp_path / "a" / "m.jsonl", reqs))])
    merged = {"resourceMetrics": [rm for r in reqs for rm in r["resourceMetrics"]]}
    doc = tmp_path / "b" / "export.json"
    doc.parent.mkdir()
    doc.write_text(json.dumps(merged, indent=2))
    got = load_paths([str(doc)])
    _same(ref, got)
    assert not got.skipped


def test_bare_resource_metrics_per_line(tmp_path: Path) -> None:
    reqs = _requests_json()
    ref = load_paths([str(_write(tmp_path / "a" / "m.jsonl", reqs))])
    bare = [rm for r in reqs for rm in r["resourceMetrics"]]
    got = load_paths([str(_write(tmp_path / "b" / "java.jsonl", bare))])
    _same(ref, got)


def test_collector_file_exporter_shape(tmp_path: Path) -> None:
    """Empty resource and scope, identity on the points, int64 strings, enum names on sums."""
    reqs = _requests_json(rank_in_points=True)
    ref = load_paths([str(_write(tmp_path / "a" / "m.jsonl", _requests_json()))])
    for r in reqs:
        for rm in r["resourceMetrics"]:
            rm["resource"] = {}
            for sm in rm["scopeMetrics"]:
                sm["scope"] = {}
                for m in sm["metrics"]:  # as a cumulative non-monotonic sum, enum by name
                    m["sum"] = {**m.pop("gauge"),
                                "aggregationTemporality": "AGGREGATION_TEMPORALITY_CUMULATIVE"}
    got = load_paths([str(_write(tmp_path / "b" / "collector.json", reqs))])
    _same(ref, got)
    assert isinstance(reqs[0]["resourceMetrics"][0]["scopeMetrics"][0]["metrics"][0]["sum"][
        "dataPoints"][0]["timeUnixNano"], str)


def test_delta_sums_are_summed_into_levels(tmp_path: Path) -> None:
    reqs = _requests_json()
    ref = load_paths([str(_write(tmp_path / "a" / "m.jsonl", reqs))])
    previous: dict[tuple[str, str], int] = {}
    for r in reqs:
        rank = next(a["value"]["stringValue"] for a in
                    r["resourceMetrics"][0]["resource"]["attributes"] if a["key"] == "rank")
        for m in r["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]:
            body = m.pop("gauge")
            for dp in body["dataPoints"]:
                level = int(dp["asInt"])
                dp["asInt"] = str(level - previous.get((rank, m["name"]), 0))
                previous[(rank, m["name"])] = level
            m["sum"] = {**body, "aggregationTemporality": 1, "isMonotonic": False}
    got = load_paths([str(_write(tmp_path / "b" / "delta.jsonl", reqs))])
    _same(ref, got)
    assert any("delta sum" in n for n in got.notes)


def test_metrics_without_gpu_memory_say_what_was_found(tmp_path: Path) -> None:
    line = {"resourceMetrics": [{"resource": {"attributes": [
        {"key": "rank", "value": {"stringValue": "0"}}]}, "scopeMetrics": [{"metrics": [
            {"name": "http.server.duration", "gauge": {"dataPoints": [
                {"timeUnixNano": "1700000000000000000", "asDouble": 1.5}]}}]}]}]}
    ctx = LoadContext()
    reader = OtlpFileReader(ctx, str(tmp_path / "other.jsonl"))
    reader.read_json_lines(json.dumps(line).encode() + b"\n")
    assert reader.flush() == 0
    notes = [n for n in ctx.builder.notes if "no GPU memory series" in n]
    assert len(notes) == 1 and "http.server.duration" in notes[0]
    assert schema.DEVICE_USED.name in notes[0] or "stormotel reads" in notes[0]


def test_typed_decoder_matches_the_generic_walker(tmp_path: Path) -> None:
    folder = write_archive(tmp_path / "job", healthy(3, 50))
    for path in sorted(folder.iterdir()):
        data = path.read_bytes()
        outs = []
        for method in ("read_json_lines", "read_json_lines_generic"):
            ctx = LoadContext()
            reader = OtlpFileReader(ctx, str(path))
            getattr(reader, method)(data)
            n = reader.flush()
            outs.append((n, ctx.builder.build()))
        assert outs[0][0] == outs[1][0]
        _same(outs[0][1], outs[1][1])


def test_cli_says_what_a_file_without_gpu_memory_holds(tmp_path: Path) -> None:
    import subprocess
    import sys

    line = {"resourceMetrics": [{"resource": {}, "scopeMetrics": [{"metrics": [
        {"name": "process.cpu.time", "sum": {"dataPoints": [
            {"timeUnixNano": "1700000000000000000", "asDouble": 1.5}],
            "aggregationTemporality": "AGGREGATION_TEMPORALITY_CUMULATIVE"}}]}]}]}
    path = _write(tmp_path / "app.jsonl", [line])
    out = subprocess.run([sys.executable, "-m", "stormotel", "analyze", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 3
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "no GPU memory series" in lines[0]
    assert "process.cpu.time" in lines[0] and "Traceback" not in out.stderr
