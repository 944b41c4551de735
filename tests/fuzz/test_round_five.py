"""Round five: the TSDB read paths that must agree — VictoriaMetrics' native export, its JSON
export and the Prometheus query API on the same REAL VictoriaMetrics — and the bugs that the
differential and the mutated-answer campaigns found, each kept as its minimal input.

* A job whose targets went away has Prometheus' staleness marker after each series' last
  sample. VictoriaMetrics keeps it (and drops every other NaN on ingestion); its native export
  carries the marker's bit pattern, which the native reader drops as remote read does, but
  its JSON export writes ``null``, which the export reader read as NaN: the same server's
  raw samples counted one ``non_finite_or_negative_bytes`` per series through one bulk API and
  none through the other. Now both drop it. The query API prints it as ``"NaN"`` — the
  same text as a NaN sample of Prometheus — and counted it too; an answer of
  VictoriaMetrics' export handler holds no other NaN, so it is dropped there as well, while
  Prometheus' ``"NaN"`` (a NaN a client wrote: its engine never answers a marker) is still
  counted (session 18, both tested at the CLI).
* A native block header claiming more rows than VictoriaMetrics allows in a block (its
  ``blockHeader.validate``: 2 x 8,192): a const or delta-const part of a few bytes holds any
  row count, and the decoder allocated arrays of that many rows (16-32 GiB for a 2^31-4e9
  claim: MemoryError, or seconds of CPU). Now refused as the server refuses it: the answer is
  not understood and the read goes through the JSON export, with a note.
* A JSON export timestamp beyond 64 bits: ``OverflowError`` out of numpy, not the
  ``ValueError`` the reader turns into a failed read.
  When every read fails so, the error now names the first read's reason (it said only
  "every range query failed").
* One flipped bit in a rank label of a real answer: neither VictoriaMetrics format has a
  checksum, so the native read lost rank 3 without a note and the JSON export gave rank 0's
  samples to a "rank 8". A series the read's selector does not select is now damage: the
  native answer is not understood (JSON export, noted), the export answer a failed read.

The campaigns themselves (production-shaped series of 16-64 ranks, 300-1,000 mutations per
answer kind, remote read against a real Prometheus) run from the session notes, not here.
One real VictoriaMetrics for the module; the damaged answers are the real server's answers
rewritten by a local proxy.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from stormotel.analyzers.analyze import analyze as analyze_timeline
from stormotel.analyzers.sinks import remote_write
from stormotel.analyzers.sources import vm_export, vm_native
from stormotel.analyzers.sources.prometheus import QueryWindow, load_prometheus
from stormotel.analyzers.timeline import Timeline

from stormotel import schema
from tests import servers
from tests.fuzz.boundary import analyze, check

pytestmark = pytest.mark.servers
STALE = float(np.array(vm_native.STALE_NAN_BITS, np.uint64).view(np.float64))
GiB = float(1 << 30)
JOB = "fd-five"
#: Host names as production clusters spell them, and one 2 KiB label value.
HOSTS = ("node-ü-0", "nöde-😀", "node\u200b-zw", "x" * 2048)


def _job(now_ms: int) -> tuple[list[tuple[str, dict[str, str], np.ndarray, np.ndarray]], int,
                               int]:
    """Four ranks: scrapes of 15 s and 30 s, starts staggered over a minute, rank 3's target
    gone 8 minutes before the end (a staleness marker after its last sample of every
    series), its OOM counter reset by a restart, rank 2 rising 40 s before the others, and
    awkward values in the allocator series (NaN, +Inf, -0.0, 1e300, 1e-300, fractions)."""
    end = now_ms - 30_000
    start = end - 30 * 60_000
    onset = start + 18 * 60_000
    out = []
    for rank in range(4):
        interval = (15_000, 30_000, 15_000, 30_000)[rank]
        t = np.arange(start + rank * 17_000, end - (8 * 60_000 if rank == 3 else 0), interval,
                      dtype=np.int64)
        n = t.size
        labels = {schema.ATTR_JOB_ID: JOB, schema.ATTR_RANK: str(rank),
                  schema.ATTR_LOCAL_RANK: str(rank), schema.ATTR_WORLD_SIZE: "4",
                  schema.ATTR_HOST: HOSTS[rank], schema.ATTR_GPU: str(rank)}
        rise = np.where(t >= onset - (40_000 if rank == 2 else 0), 6 * GiB, 0.0)
        reserved = 20 * GiB + rise + (np.arange(n) % 7) * 1e6
        allocated = reserved - 2 * GiB + 0.125 * (np.arange(n) % 5)
        allocated[[5, 9, 13, 17, 21]] = [np.nan, np.inf, -0.0, 1e300, 1e-300]
        ooms = np.zeros(n)
        if rank == 3:
            ooms[n // 3:n // 2] = 1.0  # then 0: the restarted process's counter
        series = {schema.FIELD_METRICS["reserved"].prom_aliases[0]: reserved,
                  schema.FIELD_METRICS["allocated"].prom_aliases[0]: allocated,
                  schema.FIELD_METRICS["device_used"].prom_aliases[0]: reserved + 1.5 * GiB,
                  schema.FIELD_METRICS["device_total"].prom_aliases[0]: np.full(n, 80 * GiB),
                  schema.STEP.prom: np.floor((t - t[0]) / 2000.0), schema.OOMS.prom: ooms}
        for name, v in series.items():
            if rank == 3:
                out.append((name, labels, np.append(t, t[-1] + interval), np.append(v, STALE)))
            else:
                out.append((name, labels, t, v))
    return out, start, end


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[servers.Server, int, int]]:
    with servers.victoriametrics(tmp_path_factory.mktemp("vm-five")) as server:
        series, start, end = _job(int(time.time() * 1000))
        _write(server.url, series)
        with httpx.Client(timeout=30) as c:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                c.get(server.url + "/internal/force_flush")
                got = c.get(server.url + "/api/v1/series",
                            params={"match[]": f'{{job_id="{JOB}"}}', "start": start / 1000})
                if len(got.json()["data"]) >= len(series):
                    break
                time.sleep(0.2)
        yield server, start, end


def _window(start: int, end: int) -> QueryWindow:
    return QueryWindow(JOB, (start - 60_000) * 1_000_000, (end + 60_000) * 1_000_000)


def _same_samples(a: Timeline, b: Timeline) -> None:
    assert a.rank_ids == b.rank_ids == [0, 1, 2, 3]
    for rank in a.rank_ids:
        x, y = a.ranks[rank], b.ranks[rank]
        assert x.identity == y.identity
        assert np.array_equal(x.t_ns, y.t_ns), rank
        assert sorted(x.values) == sorted(y.values)
        for name in x.values:  # bit for bit (-0.0 and 0.0 told apart)
            assert np.array_equal(x.values[name].view(np.uint64),
                                  y.values[name].view(np.uint64)), (rank, name)
        assert np.array_equal(x.markers.start_ns, y.markers.start_ns)
        assert x.markers.kind.tolist() == y.markers.kind.tolist()


# --- P8: the three read paths of one real VictoriaMetrics ------------------------------------
def test_native_export_and_query_read_the_same_samples_and_findings(vm) -> None:
    server, start, end = vm
    tl = {api: load_prometheus([server.url], _window(start, end), read_api=api)[0]
          for api in ("export-native", "export", "query")}
    assert tl["export-native"].meta["prometheus"]["read_api"] == {server.url: "vm_native"}
    assert tl["export"].meta["prometheus"]["read_api"] == {server.url: "vm_export"}
    _same_samples(tl["export-native"], tl["export"])
    _same_samples(tl["export-native"], tl["query"])
    # the staleness markers of rank 3's four byte series: no bad sample through either bulk
    # API (the JSON export counted them before); the NaN, +Inf and 1e300 of each rank are
    bulk = tl["export-native"].skipped
    assert tl["export"].skipped == bulk
    assert bulk["non_finite_or_negative_bytes"] == 4  # +Inf x 4 ranks (VM drops NaN writes)
    assert bulk["above_device_total"] == 4  # 1e300 x 4
    # the query API prints the marker as "NaN" (VictoriaMetrics answers m[d] from its export
    # handler): VictoriaMetrics stores no other NaN, so it is dropped there too, not counted
    assert tl["query"].skipped == bulk
    found = {api: [(s.rank, s.confidence) for s in analyze_timeline(t).cross_rank
                   .first_cause_suspects] for api, t in tl.items()}
    assert found["export-native"] == found["export"] == found["query"]
    assert found["query"][0][0] == 2


def _write(url: str, series: list[tuple[str, dict[str, str], np.ndarray, np.ndarray]]) -> None:
    with httpx.Client(timeout=30) as c:
        for name, labels, t, v in series:
            r = c.post(url + "/api/v1/write", headers=remote_write.HEADERS,
                       content=remote_write.encode_arrays(name, labels, t, v))
            assert r.status_code in (200, 204), r.text


def test_the_cli_reads_a_job_whose_target_went_away_alike_through_every_vm_api(
        vm, tmp_path: Path) -> None:
    """``--tsdb-read query`` on VictoriaMetrics: rank 3's staleness markers (one per series,
    printed ``"NaN"``) are the end of its series, not bad samples — the same skips, findings
    and exit as the native read, where it counted 4 more ``non_finite_or_negative_bytes``."""
    server, start, end = vm
    got = {read: _report(server.url, start, end, read, tmp_path)
           for read in ("export-native", "query")}
    (code_n, native), (code_q, query) = got["export-native"], got["query"]
    assert code_q == code_n == 1
    assert query["extra"]["source"]["read_api"] == {server.url: "query"}
    assert query["skipped"] == native["skipped"]
    assert query["skipped"]["non_finite_or_negative_bytes"] == 4  # the +Inf of each rank
    assert query["cross_rank"] == native["cross_rank"]


def test_prometheus_counts_a_nan_a_client_wrote_and_never_answers_a_staleness_marker(
        tmp_path: Path) -> None:
    """The other half of the rule, on a real Prometheus fed the same job: it keeps a NaN a
    client wrote (VictoriaMetrics drops it on ingestion) and its engine drops staleness
    markers from every range vector. Through its query API and remote read alike the NaN of
    each rank is a bad sample (counted with the +Inf: 8), the markers are nothing."""
    series, start, end = _job(int(time.time() * 1000))
    with servers.prometheus(tmp_path / "prom") as prom:
        _write(prom.url, series)
        got = {read: _report(prom.url, start, end, read, tmp_path)
               for read in ("remote-read", "query")}
    (code_r, rr), (code_q, query) = got["remote-read"], got["query"]
    assert rr["extra"]["source"]["read_api"] == {prom.url: "remote_read"}
    assert query["extra"]["source"]["read_api"] == {prom.url: "query"}
    assert code_q == code_r == 1
    assert rr["skipped"]["non_finite_or_negative_bytes"] == 8
    assert query["skipped"] == rr["skipped"]
    assert query["cross_rank"] == rr["cross_rank"]


def test_a_staleness_marker_in_the_json_export_is_no_sample() -> None:
    """The minimal input: ``null`` is the export's spelling of the marker."""
    body = (b'{"metric":{"__name__":"m"},"values":[1,2,null],'
            b'"timestamps":[1700000000000,1700000015000,1700000030000]}\n')
    (s,) = vm_export.decode_export(body, 1_699_999_999_000, 1_700_000_031_000)
    assert s.v is not None and s.t_ns is not None
    assert s.v.tolist() == [1.0, 2.0]
    assert s.t_ns.tolist() == [1_700_000_000_000_000_000, 1_700_000_015_000_000_000]


# --- damaged answers -------------------------------------------------------------------------
def _uvarint(u: int) -> bytes:
    out = bytearray()
    while u > 0x7F:
        out.append(0x80 | (u & 0x7F))
        u >>= 7
    return bytes(out + bytes([u]))


def _varint(x: int) -> bytes:
    return _uvarint((x << 1) ^ (x >> 63))


def _one_block(rows: int, t0: int = 1_700_000_000_000) -> bytes:
    """A native answer of one block: ``rows`` timestamps 15 s apart (delta const), value 5
    (const) — 20 bytes whatever the row count."""
    mn = b"m\x01k\x01v\x01"
    step = _varint(15_000)
    blk = (_varint(t0) + _varint(5) + _uvarint(rows) + _varint(0)
           + bytes([vm_native.DELTA_CONST, vm_native.CONST]) + _uvarint(len(step)) + step
           + _uvarint(0))
    span = ((t0 << 1).to_bytes(8, "big") + ((t0 + 3_600_000) << 1).to_bytes(8, "big"))
    return span + len(mn).to_bytes(4, "big") + mn + len(blk).to_bytes(4, "big") + blk


def test_a_native_block_of_more_rows_than_victoriametrics_allows_is_not_understood() -> None:
    t0 = 1_700_000_000_000
    (s,) = vm_native.decode_native(_one_block(vm_native.MAX_ROWS, t0), t0, t0 + 3_600_000)
    assert s.t_ns is not None and s.t_ns.size == 241  # 16,384 rows, cut to the hour
    for rows in (vm_native.MAX_ROWS + 1, 2**31, 4_000_000_000):
        with pytest.raises(vm_native.NativeFormatError, match="rows"):
            vm_native.decode_native(_one_block(rows, t0), t0, t0 + 3_600_000)


class _Rewriter:
    """A proxy to a real server that rewrites the answers of one path (``edit``)."""

    def __init__(self, upstream: str, path: str, edit: Callable[[bytes], bytes]) -> None:
        rewriter = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_GET(self) -> None:
                self._go("GET")

            def do_POST(self) -> None:
                self._go("POST")

            def _go(self, method: str) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                keep = ("content-type", "accept", "x-prometheus-remote-read-version")
                # the shared loopback client, as tests/job/stubs.FaultProxy: httpx.request
                # built a client and a TLS context for every forwarded request
                r = servers.loopback_client().request(
                    method, upstream + self.path, timeout=30,
                    content=self.rfile.read(size) if size else None,
                    headers={k: v for k, v in self.headers.items() if k.lower() in keep})
                body = r.content
                if self.path.split("?")[0] == path and r.status_code == 200:
                    body = edit(body)
                    rewriter.edited += 1
                self.send_response(r.status_code)
                self.send_header("Content-Type", r.headers.get("content-type", "text/plain"))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.edited = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _report(url: str, start: int, end: int, read: str, tmp: Path) -> tuple[int, dict[str, Any]]:
    out = tmp / f"{read}.json"
    result = analyze("--prometheus", url, "--job-id", JOB, "--start", str(start / 1000 - 60),
                     "--end", str(end / 1000 + 60), "--tsdb-read", read, "--http-retries",
                     "0", "--format", "json", "-o", str(out), "-q")
    check(result, out)
    return result.code, json.loads(out.read_text()) if out.exists() else {"stderr": result.stderr}


def _first_block_rows(body: bytes, rows: int) -> bytes:
    """The real answer with its first block's RowsCount replaced (the rest intact)."""
    at = 16 + 4 + int.from_bytes(body[16:20], "big")
    blen = int.from_bytes(body[at:at + 4], "big")
    blk = body[at + 4:at + 4 + blen]
    _, p = vm_native._varint(blk, 0)
    _, p = vm_native._varint(blk, p)
    _, q = vm_native._uvarint(blk, p)
    nb = blk[:p] + _uvarint(rows) + blk[q:]
    return body[:at] + len(nb).to_bytes(4, "big") + nb + body[at + 4 + blen:]


def test_a_real_native_answer_claiming_a_million_rows_reads_through_the_json_export(
        vm, tmp_path: Path) -> None:
    server, start, end = vm
    code0, clean = _report(server.url, start, end, "export-native", tmp_path)
    proxy = _Rewriter(server.url, vm_native.PATH,
                      lambda b: _first_block_rows(b, 1 << 20) if len(b) > 20 else b)
    try:
        code, rep = _report(proxy.url, start, end, "export-native", tmp_path)
    finally:
        proxy.close()
    assert proxy.edited >= 2
    assert code == code0 == 1
    assert any("not understood (a block header out of range (rows" in n
               for n in rep["notes"]), rep["notes"]
    assert rep["cross_rank"] == clean["cross_rank"]
    assert rep["skipped"] == clean["skipped"]


@pytest.mark.parametrize("stamp", [b"99999999999999999999", b"9223372036854775808"])
def test_an_export_timestamp_beyond_64_bits_is_a_failed_read_not_exit_70(
        vm, tmp_path: Path, stamp: bytes) -> None:
    server, start, end = vm

    def edit(body: bytes) -> bytes:  # the first timestamp of the answer's first line
        at = body.find(b'"timestamps":[')
        if at < 0:
            return body
        at += len(b'"timestamps":[')
        return body[:at] + stamp + body[body.index(b",", at):]

    proxy = _Rewriter(server.url, vm_export.PATH, edit)
    try:
        code, rep = _report(proxy.url, start, end, "export", tmp_path)
    finally:
        proxy.close()
    assert proxy.edited >= 1
    # every read of the job met it: a source failure that says why (it said "every range
    # query failed" and nothing more), never exit 70 (OverflowError out of numpy before)
    assert code == 3
    assert "every range query failed (the first: " in rep["stderr"]
    assert "timestamp beyond 64 bits" in rep["stderr"]


def test_a_native_answer_naming_a_series_its_selector_does_not_select_is_not_understood(
        vm) -> None:
    """One flipped bit in the first block's rank label (rank 0 -> 8, 1 -> 9, ...): the format
    has no checksum, so that block decoded as a series of a rank outside the job — its samples
    taken from their rank (counted ``rank_outside_world``, the rank short of them). A server
    answers only what its selector selects (the read asks for the batch's ranks): now the
    answer is not understood and the read goes through the JSON export."""
    server, start, end = vm
    clean, _ = load_prometheus([server.url], _window(start, end), read_api="export-native")

    def edit(body: bytes) -> bytes:
        at = body.find(b"\x01rank\x01") + len(b"\x01rank\x01")
        return body[:at] + bytes([body[at] ^ 0x08]) + body[at + 1:] if at > 6 else body

    proxy = _Rewriter(server.url, vm_native.PATH, edit)
    try:
        got, _ = load_prometheus([proxy.url], _window(start, end), read_api="export-native")
    finally:
        proxy.close()
    assert proxy.edited >= 2
    _same_samples(clean, got)
    assert got.skipped == clean.skipped
    assert any("not understood (a series the selector does not select: rank=" in n
               for n in got.notes), got.notes


def test_an_export_answer_naming_a_series_its_selector_does_not_select_is_a_failed_read(
        vm) -> None:
    """The same damage in a JSON export answer (``"rank":"0"`` -> ``"rank":"8"`` in the
    reserved-memory read): that read failed, said in the notes and the outcome, not rank 0's
    samples given to a rank 8."""
    server, start, end = vm

    reserved = schema.FIELD_METRICS["reserved"].prom_aliases[0].encode()

    def edit(body: bytes) -> bytes:  # the reserved-memory read only
        if b'"__name__":"' + reserved + b'"' not in body:
            return body
        return body.replace(b'"rank":"0"', b'"rank":"8"', 1)

    proxy = _Rewriter(server.url, vm_export.PATH, edit)
    try:
        got, outcome = load_prometheus([proxy.url], _window(start, end), read_api="export")
    finally:
        proxy.close()
    assert proxy.edited >= 2
    assert outcome.partial and outcome.ranks_failed == {proxy.url: {0, 1, 2, 3}}
    assert got.skipped["query_failed"] == 1
    assert "rank_outside_world" not in got.skipped
    assert any("a series the selector does not select: rank='8'" in n for n in got.notes), \
        got.notes
