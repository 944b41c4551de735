"""The compact array path and the general typed decoder give the same Timeline on odd files.

:mod:`stormotel.analyzers.sources.otlp_compact` decodes a file's lines in one tight loop, picks
memory metrics by each metrics list's layout and parses the ``dataPoints`` texts of the whole
file with numpy; anything outside that shape must leave the file to the general decoder
(:mod:`stormotel.analyzers.sources.otlp_fast`) with the result it always had. Each case below is
a file of OTLP JSON lines shaped like the tracker's and the collector's (int64 as strings,
compact separators), changed in one place: the case says whether the array path takes it, and
both paths must build equal Timelines (every sample, identity, note and skip).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from stormotel.analyzers.sources import otlp_compact
from stormotel.analyzers.sources.base import LoadContext
from stormotel.analyzers.sources.otlp_archive import OtlpFileReader
from stormotel.analyzers.timeline import Timeline

from stormotel import schema

JOB = "fast-path"
T0 = 1_790_000_000_000_000_000
STEP = 100_000_000  # 10 Hz
PER_LINE = 10
LINES = 24
MEMORY = (schema.DEVICE_USED.name, schema.DEVICE_LIMIT.name, schema.ALLOC_ALLOCATED.name,
          schema.ALLOC_RESERVED.name)

Line = list[dict[str, Any]]  # one request's resourceMetrics


def _resource(rank: int, host: str | None = None, *, int_rank: bool = False) -> dict[str, Any]:
    rank_value = {"intValue": str(rank)} if int_rank else {"stringValue": str(rank)}
    return {"attributes": [
        {"key": "service.name", "value": {"stringValue": "stormotel"}},
        {"key": schema.ATTR_JOB_ID, "value": {"stringValue": JOB}},
        {"key": schema.ATTR_RANK, "value": rank_value},
        {"key": schema.ATTR_WORLD_SIZE, "value": {"stringValue": "4"}},
        {"key": schema.ATTR_HOST, "value": {"stringValue": host or f"node-{rank}"}}]}


def _points(line: int, rank: int, k: int) -> list[dict[str, Any]]:
    out = []
    for j in range(PER_LINE):
        t = T0 + (line * PER_LINE + j) * STEP + rank * 7_000_000
        out.append({"timeUnixNano": str(t), "asInt": str((rank + 1) * 2**30 + k * 2**20 + j)})
    return out


def _metrics(line: int, rank: int) -> list[dict[str, Any]]:
    metrics: list[dict[str, Any]] = [{"name": name, "unit": "By",
                                      "gauge": {"dataPoints": _points(line, rank, k)}}
                                     for k, name in enumerate(MEMORY)]
    metrics.append({"name": schema.DEVICE_UTILIZATION.name, "unit": "1", "gauge": {"dataPoints": [
        {"timeUnixNano": p["timeUnixNano"], "asDouble": 0.25 + j / 100}
        for j, p in enumerate(_points(line, rank, 0))]}})
    if line % 5 == 4:  # context metrics every few lines, as the tracker writes them
        t = str(T0 + (line + 1) * PER_LINE * STEP)
        metrics.append({"name": schema.SAMPLING_INTERVAL.name, "unit": "s", "gauge": {
            "dataPoints": [{"timeUnixNano": t, "asDouble": 0.1}]}})
        metrics.append({"name": schema.OOMS.name, "sum": {
            "aggregationTemporality": 2, "isMonotonic": True,
            "dataPoints": [{"timeUnixNano": t, "asInt": "0"}]}})
    return metrics


def _rm(line: int, rank: int, **resource: Any) -> dict[str, Any]:
    return {"resource": _resource(rank, **resource),
            "scopeMetrics": [{"scope": {"name": "stormotel"}, "metrics": _metrics(line, rank)}]}


def _encode(lines: list[Line]) -> bytes:
    return b"".join(json.dumps({"resourceMetrics": rms}, separators=(",", ":")).encode() + b"\n"
                    for rms in lines)


def _tracker_file(ranks: tuple[int, ...] = (1,)) -> list[Line]:
    """One resource per line (the tracker's archive), ranks taking turns when several."""
    return [[_rm(i, ranks[i % len(ranks)])] for i in range(LINES)]


def _collector_file() -> list[Line]:
    """Many resources per line, of every rank (the collector's batch processor), rank as an
    ``intValue`` string (the protobuf JSON mapping of int64)."""
    return [[_rm(i, r, int_rank=True) for r in (2, 0, 3)] for i in range(LINES)]


def _replace_once(data: bytes, line: int, old: bytes, new: bytes) -> bytes:
    lines = data.split(b"\n")
    assert old in lines[line], (line, old)
    lines[line] = lines[line].replace(old, new, 1)
    return b"\n".join(lines)


def _insert_line(data: bytes, line: int, text: bytes) -> bytes:
    lines = data.split(b"\n")
    return b"\n".join([*lines[:line], text, *lines[line:]])


def _read(data: bytes, *, arrays: bool) -> tuple[Timeline, int]:
    ctx = LoadContext()
    reader = OtlpFileReader(ctx, "fast-path.metrics.jsonl")
    reader.read_json_lines(data, arrays=arrays)
    n = reader.flush()
    return ctx.builder.build(), n


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
        assert list(x.markers.kind) == list(y.markers.kind)
        assert x.markers.attrs == y.markers.attrs
    assert a.skipped == b.skipped and a.notes == b.notes and a.meta == b.meta
    assert a.job_id == b.job_id and a.world_size == b.world_size


_BASE = _encode(_tracker_file())
_USED = f'"name":"{schema.DEVICE_USED.name}"'.encode()
#: line 13's first memory value (rank 1, device_used, its first point)
_FIRST_13 = 2 * 2**30

#: name → (the file, whether the array path takes it)
CASES: dict[str, tuple[Callable[[], bytes], bool]] = {
    "tracker file": (lambda: _BASE, True),
    "ranks taking turns line by line": (lambda: _encode(_tracker_file((1, 0, 3))), True),
    "collector: many resources a line, intValue ranks": (lambda: _encode(_collector_file()),
                                                         True),
    "a rank's resource changes mid-file (new host)": (lambda: _encode(
        [[_rm(i, 1, host="node-a" if i < 11 else "node-b")] for i in range(LINES)]), True),
    "no trailing newline": (lambda: _BASE.rstrip(b"\n"), True),
    "CRLF line ends": (lambda: _BASE.replace(b"\n", b"\r\n"), True),
    "a blank line mid-file": (lambda: _insert_line(_BASE, 9, b""), True),
    "a whitespace line mid-file": (lambda: _insert_line(_BASE, 9, b"  \t"), True),
    "a line that is not JSON mid-file": (lambda: _insert_line(_BASE, 9, b"{not json"), True),
    "the last line cut short": (lambda: _BASE + _BASE.split(b"\n")[3][:700], True),
    "an empty memory dataPoints array": (lambda: _replace_once(
        _BASE, 6, b'"gauge":{"dataPoints":[{', b'"gauge":{"dataPoints":[]},"x":{"a":[{'), True),
    "a memory gauge of doubles mid-file": (lambda: _replace_once(
        _BASE, 13, b'"asInt":"%d"' % _FIRST_13, b'"asDouble":%d.5' % _FIRST_13), False),
    "asInt as a JSON number mid-file": (lambda: _replace_once(
        _BASE, 13, b'"asInt":"%d"' % _FIRST_13, b'"asInt":%d' % _FIRST_13), False),
    "a memory sum mid-file": (lambda: _replace_once(
        _BASE, 8, _USED + b',"unit":"By","gauge":{',
        _USED + b',"unit":"By","sum":{"aggregationTemporality":2,'), False),
    "a spans line mid-file": (lambda: _insert_line(
        _BASE, 12, b'{"resourceSpans":[{"resource":{},"scopeSpans":[]}]}'), False),
    "JSON of another shape mid-file": (lambda: _insert_line(_BASE, 12, b"[1,2,3]"), False),
    "a resource without a rank mid-file": (lambda: _replace_once(
        _BASE, 15, b'{"key":"rank","value":{"stringValue":"1"}},', b""), False),
    "a point with attributes mid-file": (lambda: _replace_once(
        _BASE, 20, b'{"timeUnixNano":"', b'{"attributes":[],"timeUnixNano":"'), False),
}


def _timestamp_as_number(data: bytes) -> bytes:
    """Line 17's first memory point with its time as a bare JSON number."""
    lines = data.split(b"\n")
    at = lines[17].index(b'{"timeUnixNano":"')
    end = lines[17].index(b'"', at + len(b'{"timeUnixNano":"'))
    lines[17] = (lines[17][:at] + b'{"timeUnixNano":' + lines[17][at + 17:end] +
                 lines[17][end + 1:])
    return b"\n".join(lines)


CASES["timeUnixNano as a JSON number mid-file"] = (lambda: _timestamp_as_number(_BASE), False)


@pytest.mark.parametrize("case", list(CASES))
def test_array_path_and_typed_decoder_build_the_same_timeline(case: str) -> None:
    make, taken = CASES[case]
    data = make()
    probe_ctx = LoadContext()
    probe = OtlpFileReader(probe_ctx, "fast-path.metrics.jsonl")
    assert otlp_compact.read_compact(probe, data) is taken
    if not taken:  # declined: nothing recorded, the general decoder reads the whole file
        assert not probe.cols.t and not probe.identities and probe.records == 0
        assert not probe_ctx.builder.notes and not probe_ctx.builder.skipped
    fast, n_fast = _read(data, arrays=True)
    typed, n_typed = _read(data, arrays=False)
    assert n_fast == n_typed > 0
    _assert_same(fast, typed)


def test_the_cases_read_what_was_written() -> None:
    """Not just equal to each other: the plain files hold every point written, the odd lines
    are counted (bad JSON, a cut line) and a changed resource keeps the rank's first host."""
    tl, n = _read(_BASE, arrays=True)
    assert n == LINES * PER_LINE and tl.rank_ids == [1]
    used = tl.ranks[1].field("device_used")
    assert used[0] == 2 * 2**30 and used[-1] == 2 * 2**30 + PER_LINE - 1
    collector, n = _read(_encode(_collector_file()), arrays=True)
    assert collector.rank_ids == [0, 2, 3] and n == 3 * LINES * PER_LINE
    assert collector.ranks[3].field("allocated")[0] == 4 * 2**30 + 2 * 2**20
    assert _read(CASES["a line that is not JSON mid-file"][0](), arrays=True)[0].skipped == \
        {"bad_json": 1}
    cut = _read(CASES["the last line cut short"][0](), arrays=True)[0]
    assert cut.skipped == {"truncated_line": 1}
    moved = _read(CASES["a rank's resource changes mid-file (new host)"][0](), arrays=True)[0]
    assert moved.ranks[1].identity.host == "node-a"
    doubles = _read(CASES["a memory gauge of doubles mid-file"][0](), arrays=True)[0]
    assert (doubles.ranks[1].field("device_used") == _FIRST_13 + 0.5).sum() == 1
