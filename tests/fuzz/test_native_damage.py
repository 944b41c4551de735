"""Damaged native answers of a REAL VictoriaMetrics: what decodes silently, and the checks
that refuse what the server never writes (:mod:`stormotel.analyzers.sources.vm_native_checks`).

The native export has no checksum. Round five found one damaged answer in eight decoding to
other numbers; this module damages real answers at every field class — a flipped bit, a byte
set to another value, a cut — and holds the decoder to what it must do: never an exception
other than ``NativeFormatError`` (a damaged zstd frame size was a ``MemoryError``), never a
cut inside a block read as numbers, never a damaged length, row count or marshal type read
as numbers, and the share the new checks refuse kept. Each check also has its minimal input:
one field of a real answer's first block rewritten as damage would leave it. At the CLI a
damaged answer is read through the JSON export (same findings, a note), and when that fails
too the run ends in exit 3 with the reason, never a traceback.

The counted table over many seeds is benchmarks/bench_native_damage.py (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from stormotel.analyzers.sources import vm_export, vm_native

from tests import servers
from tests.fuzz import native_damage as nd
from tests.fuzz.boundary import analyze, check
from tests.fuzz.test_round_five import _Rewriter

pytestmark = pytest.mark.servers
JOB = "fd-damage"
RANKS = 16
MINUTES = 60


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory
       ) -> Iterator[tuple[servers.Server, list[nd.Answer], int, int]]:
    end = int(time.time() * 1000) - 60_000
    start = end - (MINUTES + 1) * 60_000
    with servers.victoriametrics(tmp_path_factory.mktemp("vm-damage")) as server:
        names = nd.load_job(server.url, JOB, RANKS, MINUTES, end, seed=3)
        answers = nd.fetch_answers(server.url, JOB, names, RANKS, start, end + 60_000)
        yield server, answers, start, end + 60_000


def test_the_answers_hold_every_field_class(vm) -> None:
    """The campaign below means something only if the real answers have each field and the
    part kinds that damage treats differently (plain and zstd values, const values)."""
    _, answers, _, _ = vm
    assert {c for a in answers for c in a.classes} == set(nd.CLASSES)
    kinds = {int(k) for a in answers
             for k in vm_native.read_blocks(a.body, a.start_ms, a.end_ms).head[:, 5]}
    assert {vm_native.ND, vm_native.ZSTD_ND2, vm_native.CONST} <= kinds


def test_damage_is_refused_or_read_never_an_exception(vm) -> None:
    _, answers, _, _ = vm
    tally = nd.campaign(answers, seed=7, per_class=6)
    assert tally.all() == 3 * 6 * len(nd.CLASSES) * len(answers)
    assert tally.total("crash") == 0, tally.examples
    # framing, lengths, row counts and marshal types: every damage refused
    for cls in ("block_len", "rows", "types", "t_len", "v_len"):
        assert tally.total("refused", None, cls) == tally.all(None, cls), cls
    # the answer's own time range: refused or (a bit the check's 1 s slack allows) the same
    assert tally.total("silent", None, "range") == 0
    # the checks of this session: a block's first timestamp damaged (a flipped bit or a byte
    # set) is refused half the time or more (measured over 2,880 each: 31% before, 65% after)
    refused = tally.total("refused", "flip", "first_t") + tally.total("refused", "byte",
                                                                      "first_t")
    n = tally.all("flip", "first_t") + tally.all("byte", "first_t")
    assert refused >= 0.5 * n, (refused, n)


def test_a_cut_is_read_only_where_it_falls_between_blocks(vm) -> None:
    """The format has no count or end marker: an answer cut exactly where a block starts is
    whole blocks (HTTP's framing catches such a cut in transit); any other cut is refused."""
    _, answers, _, _ = vm
    for a in answers[:4]:
        starts = {i for i, c in enumerate(a.classes)
                  if c == "name_len" and a.classes[i - 1] != "name_len"}
        for at in range(16, len(a.body), 7):
            what, detail = nd.outcome(a, a.body[:at])
            if at in starts:
                assert what in ("silent", "same"), (at, detail)
            else:
                assert what == "refused", (at, a.classes[at], what)


def _first(answers: list[nd.Answer], want: Callable[[nd.Answer], bool]) -> nd.Answer:
    return next(a for a in answers if want(a))


def _head(a: nd.Answer) -> list[int]:
    return [int(x) for x in vm_native.read_blocks(a.body, a.start_ms, a.end_ms).head[0]]


def _refused(a: nd.Answer, body: bytes, reason: str) -> None:
    what, detail = nd.outcome(a, body)
    assert (what, reason in detail) == ("refused", True), (what, detail)


def test_a_marshal_type_the_server_never_gives_such_data_is_refused(vm) -> None:
    """A gauge block's values (nearest-delta) relabelled nearest-delta2: the deltas read as
    deltas of deltas decode without error — to numbers the server would have marshalled as a
    gauge."""
    _, answers, _, _ = vm
    a = _first(answers, lambda x: _head(x)[5] == vm_native.ND)
    types = bytes([_head(a)[4], vm_native.ND2])
    _refused(a, nd.with_field(a.body, "types", types), "where the server marshals such data")


def test_a_zstd_frame_claiming_a_huge_size_is_refused_not_a_memory_error(vm) -> None:
    """The campaign's crash: one bit of a zstd frame's descriptor (its content-size field
    widened to 8 bytes) made python-zstandard allocate what the header then claimed."""
    _, answers, _, _ = vm
    a = _first(answers, lambda x: _head(x)[5] == vm_native.ZSTD_ND2)
    lo, hi = nd.first_block(a.body)["v_data"]
    frame = bytearray(a.body[lo:hi])
    assert frame[:4] == b"\x28\xb5\x2f\xfd"
    frame[4] |= 0xC0  # Frame_Content_Size_flag 3: an 8-byte size
    _refused(a, nd.with_field(a.body, "v_data", bytes(frame)), "")


def test_a_varint_the_server_never_writes_is_refused(vm) -> None:
    """A block's scale written in two bytes where one holds it (0x80 0x00 for 0)."""
    _, answers, _, _ = vm
    a = answers[0]
    lo, hi = nd.first_block(a.body)["scale"]
    assert hi - lo == 1
    grown = bytes([a.body[lo] | 0x80, 0])
    _refused(a, nd.with_field(a.body, "scale", grown), "not minimal")


def test_a_block_outside_the_answers_time_range_is_refused(vm) -> None:
    """The first timestamp moved a day on (a high bit of it flipped): still in order, but the
    server searches only blocks that overlap the range it answers for."""
    _, answers, _, _ = vm
    a = answers[0]
    t0 = _head(a)[0] + 86_400_000
    _refused(a, nd.with_field(a.body, "first_t", _zigzag(t0)), "outside the answer's time")


def test_a_metric_name_the_server_never_stores_is_refused(vm) -> None:
    """Tags in another order than ``sortTags`` leaves them, a tag key twice, an empty value."""
    _, answers, _, _ = vm
    a = answers[0]
    lo, hi = nd.first_block(a.body)["name"]
    parts = a.body[lo:hi].split(b"\x01")
    tags = list(zip(parts[1:-1:2], parts[2:-1:2], strict=True))
    for edit, reason in ((tags[::-1], "not in the server's order"),
                         ([tags[0], tags[0], *tags[1:]], "twice"),
                         ([(tags[0][0], b""), *tags[1:]], "without a value")):
        name = b"\x01".join([parts[0], *(b for kv in edit for b in kv), b""])
        _refused(a, nd.with_field(a.body, "name", name), reason)


def _zigzag(x: int) -> bytes:
    u = (x << 1) ^ (x >> 63)
    out = bytearray()
    while u > 0x7F:
        out.append(0x80 | (u & 0x7F))
        u >>= 7
    return bytes(out + bytes([u]))


def _run(url: str, start: int, end: int, tmp: Path) -> tuple[int, dict, str]:
    out = tmp / "report.json"
    out.unlink(missing_ok=True)
    result = analyze("--prometheus", url, "--job-id", JOB, "--start", str(start / 1000),
                     "--end", str(end / 1000), "--tsdb-read", "export-native",
                     "--http-retries", "0", "--format", "json", "-o", str(out), "-q")
    check(result, out)
    rep = json.loads(out.read_text()) if out.exists() else {}
    return result.code, rep, result.stderr


def _run_damaged(url: str, edit: Callable[[bytes], bytes], start: int, end: int,
                 tmp: Path) -> tuple[int, dict]:
    """:func:`_run` behind a proxy that rewrites every native answer with ``edit``."""
    proxy = _Rewriter(url, vm_native.PATH, edit)
    try:
        code, rep, _ = _run(proxy.url, start, end, tmp)
    finally:
        proxy.close()
    assert proxy.edited >= 2
    return code, rep


def test_the_cli_reads_a_damaged_native_answer_through_the_json_export(
        vm, tmp_path: Path) -> None:
    """Every native answer's first zstd frame given an 8-byte content size (a MemoryError and
    exit 70 before): the same findings and skips as the undamaged run, and a note."""
    server, _, start, end = vm
    code0, clean, _ = _run(server.url, start, end, tmp_path)

    def edit(body: bytes) -> bytes:
        at = body.find(b"\x28\xb5\x2f\xfd")
        return body if at < 0 else body[:at + 4] + bytes([body[at + 4] | 0xC0]) + \
            body[at + 5:]

    code, rep = _run_damaged(server.url, edit, start, end, tmp_path)
    assert code == code0
    assert rep["cross_rank"] == clean["cross_rank"]
    assert rep["skipped"] == clean["skipped"]
    assert any("not understood (a zstd block part claims" in n for n in rep["notes"]), \
        rep["notes"]


def test_the_cli_ends_in_exit_3_when_the_json_export_is_damaged_too(
        vm, tmp_path: Path) -> None:
    """Every native answer cut inside its first block and every JSON export answer cut
    mid-line: no read succeeds — exit 3, the reason on stderr, no traceback."""
    server, _, start, end = vm

    proxy = _Rewriter(server.url, vm_native.PATH, lambda b: b[:40])
    inner = _Rewriter(proxy.url, vm_export.PATH, lambda b: b[:len(b) // 2 + 1])
    try:
        code, _, stderr = _run(inner.url, start, end, tmp_path)
    finally:
        inner.close()
        proxy.close()
    assert code == 3
    assert "Traceback" not in stderr
    assert "native answer not understood" in stderr and "the JSON export failed too" in stderr


def test_a_lossy_servers_answers_are_read_natively_not_refused(tmp_path: Path) -> None:
    """``-precisionBits=4``: the server classifies a block by its exact numbers and stores
    rounded ones, so the marshal-type rule cannot hold for what decodes. The reader reads the
    flag from ``/flags`` and skips that rule: the answers decode (no fallback) to what the
    server's own JSON export prints; with the rule forced they would be refused."""
    import httpx
    import numpy as np
    from stormotel.analyzers.http import HttpSettings
    from stormotel.analyzers.sinks import remote_write
    from stormotel.analyzers.sources.prometheus_api import PrometheusAPI

    t0 = 1_700_000_000_000
    t = t0 + np.arange(600, dtype=np.int64) * 15_000
    rng = np.random.default_rng(5)
    shapes = {"noisy": np.round(2e10 + rng.normal(0, 3e7, t.size)),
              "falls": np.cumsum(rng.integers(-900, 1000, t.size)).astype(np.float64) + 1e6,
              "counter": np.cumsum(rng.integers(0, 9, t.size)).astype(np.float64)}
    selector = '{__name__=~"lossy_.*"}'
    with servers.victoriametrics(tmp_path / "vm", ["-precisionBits=4"]) as server, \
            httpx.Client(timeout=30) as c:
        for name, v in shapes.items():
            r = c.post(server.url + "/api/v1/write", headers=remote_write.HEADERS,
                       content=remote_write.encode_arrays(f"lossy_{name}", {}, t, v))
            assert r.status_code in (200, 204)
        c.get(server.url + "/internal/force_flush")
        time.sleep(1.5)
        api = PrometheusAPI(server.url, c, HttpSettings())
        reader = vm_native.NativeReader(api)
        start_s, end_s = (t0 - 60_000) / 1000, (t0 + 600 * 15_000) / 1000
        got = reader.probe(selector, start_s, end_s)
        assert reader.precision_bits == 4
        js = vm_export.ExportReader(api).read(selector, start_s, end_s)
        raw, start_ms, end_ms = vm_export.post_export(reader, selector, start_s, end_s)
    assert len(got) == len(js) == 3
    by_name = {s.labels["__name__"]: s for s in js if s.labels}
    for s in got:
        assert s.labels is not None and s.v is not None and s.t_ns is not None
        x = by_name[s.labels["__name__"]]
        assert np.array_equal(s.t_ns, x.t_ns) and np.array_equal(s.v, x.v)
    with pytest.raises(vm_native.NativeFormatError, match="marshalled as"):
        vm_native.decode_native(raw.content, start_ms, end_ms, lossless=True)


@pytest.mark.parametrize("kind", nd.KINDS)
def test_the_cli_meets_damage_of_each_kind_with_a_documented_exit(
        vm, tmp_path: Path, kind: str) -> None:
    """Every native answer of a run damaged at a drawn offset (one kind per run, fixed seeds):
    a documented exit, no traceback, and the damage that was refused noted."""
    import random

    server, _, start, end = vm
    rng = random.Random(f"cli-{kind}")

    def edit(body: bytes) -> bytes:
        if len(body) <= 16:
            return body
        at = rng.randrange(16, len(body))
        if kind == "cut":
            return body[:at]
        x = 1 << rng.randrange(8) if kind == "flip" else rng.randrange(1, 256)
        return body[:at] + bytes([body[at] ^ x]) + body[at + 1:]

    code, rep = _run_damaged(server.url, edit, start, end, tmp_path)
    assert code in (0, 1)  # the JSON export, undamaged, reads what the native answers lost
    assert kind != "cut" or any("a native export answer was not understood" in n
                                for n in rep["notes"]), rep["notes"]
