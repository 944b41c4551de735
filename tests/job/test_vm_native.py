"""VictoriaMetrics' native export (``/api/v1/export/native``) decoded against a REAL server.

Series of every shape VictoriaMetrics stores differently (counters, gauges, non-integer floats,
constants, short series, irregular timestamps, +-Inf, tiny and huge values, staleness markers,
label values with the bytes its metric names escape, one series written in two overlapping
batches) are remote-written into a real VictoriaMetrics; the native answer must decode to
exactly the samples its JSON export prints (values bit for bit), every block marshal type must
have been met, and an answer the decoder does not understand (a newer block layout, an unknown
marshal type, bytes cut off or flipped) must be an error the reader turns into a JSON-export
read with a note, never other numbers.
"""

from __future__ import annotations

import contextlib
import gzip
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from stormotel.analyzers.http import HttpSettings
from stormotel.analyzers.sinks import remote_write
from stormotel.analyzers.sources import vm_native
from stormotel.analyzers.sources.prometheus import load_prometheus
from stormotel.analyzers.sources.prometheus_api import PrometheusAPI, Series
from stormotel.analyzers.sources.vm_export import ExportReader, decode_export
from stormotel.analyzers.sources.vm_native import NativeFormatError, NativeReader

from stormotel import schema
from tests import servers
from tests.job import planted
from tests.job.stubs import FaultProxy
from tests.job.test_bulk_read import _same_timeline, _window
from tests.job.test_tsdb_job import victoriametrics_dedup

pytestmark = pytest.mark.servers
T0 = 1_700_000_000_000
STALE = np.array(vm_native.STALE_NAN_BITS, np.uint64).view(np.float64)
SELECTOR = '{__name__=~"native_.*"}'


def _shapes() -> dict[str, tuple[dict[str, str], np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(7)
    n = 2000
    t = T0 + np.arange(n, dtype=np.int64) * 15_000
    jitter = t + rng.integers(-900, 900, n)
    stale = rng.normal(5e9, 1e8, n)
    stale[[100, 101, 700, n - 1]] = STALE
    special = rng.normal(0, 1e3, n)
    special[[3, 50]] = np.inf
    special[9] = -np.inf
    special[[10, 11, 12]] = [1e-300, 1e300, -2.5e-7]
    return {
        "counter": ({}, t, np.cumsum(rng.integers(0, 10_000, n)).astype(np.float64)),
        "bytes_gauge": ({}, t, np.round(rng.random(n) * 8e10)),
        "float_gauge": ({}, jitter, rng.normal(0, 1e6, n)),
        "fraction": ({}, t, rng.random(n) * 1e-5),
        "const": ({}, t, np.full(n, 3.25)),
        "ones": ({}, t, np.ones(n)),
        "short_gauge": ({}, t[:12], rng.normal(50, 20, 12).round(1)),
        "short_counter": ({}, t[:12], np.arange(12, dtype=np.float64) * 3),
        "single": ({}, t[:1], np.array([42.5])),
        "special": ({}, t, special),
        "stale": ({}, t, stale),
        "escaped": ({"odd": "a\x00b\x01c\x02d", "uni": "rang-ü"}, t, rng.normal(1, 1, n)),
    }


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.Server]:
    with servers.victoriametrics(tmp_path_factory.mktemp("vm-native")) as server:
        with httpx.Client(timeout=30) as c:
            for name, (labels, t, v) in _shapes().items():
                body = remote_write.encode_arrays(f"native_{name}", {"shape": name, **labels},
                                                  t, v)
                assert c.post(server.url + "/api/v1/write", content=body,
                              headers=remote_write.HEADERS).status_code in (200, 204)
            c.get(server.url + "/internal/force_flush")
            # a second, overlapping batch of one series: another part, blocks of one series
            t, v = _shapes()["float_gauge"][1:]
            body = remote_write.encode_arrays("native_float_gauge", {"shape": "float_gauge"},
                                              t[500:900] + 7, v[500:900] * 2)
            c.post(server.url + "/api/v1/write", content=body, headers=remote_write.HEADERS)
            c.get(server.url + "/internal/force_flush")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                r = c.get(server.url + "/api/v1/series", params={"match[]": SELECTOR})
                if len(r.json()["data"]) >= len(_shapes()):
                    break
                time.sleep(0.2)
        yield server


def _both(url: str, selector: str = SELECTOR) -> tuple[bytes, bytes, int, int]:
    start, end = T0 - 60_000, T0 + 2000 * 15_000 + 60_000
    form = {"match[]": selector, "start": f"{start / 1000:.3f}", "end": f"{end / 1000:.3f}"}
    with httpx.Client(timeout=30) as c:
        js = c.post(url + "/api/v1/export", data=form)
        nat = c.post(url + "/api/v1/export/native", data=form)
    assert js.status_code == nat.status_code == 200
    assert nat.headers["content-type"].startswith(vm_native.CONTENT_TYPE)
    return js.content, nat.content, start, end


def _by_labels(series: list[Series]) -> dict[tuple[tuple[str, str], ...], Series]:
    out = {}
    for s in series:
        assert s.labels is not None
        key = tuple(sorted(s.labels.items()))
        assert key not in out  # one series per name (blocks of a series united)
        out[key] = s
    return out


def test_native_answer_is_the_json_export_bit_for_bit(vm: servers.Server) -> None:
    js, nat, start, end = _both(vm.url)
    assert len(nat) * 3 < len(js)  # what the native export is for
    a, b = _by_labels(decode_export(js, start, end)), _by_labels(
        vm_native.decode_native(nat, start, end))
    assert set(a) == set(b) and len(a) == len(_shapes())
    for key, x in a.items():
        y = b[key]
        assert x.t_ns is not None and x.v is not None and y.t_ns is not None and y.v is not None
        assert np.array_equal(x.t_ns, y.t_ns), key
        assert np.array_equal(x.v.view(np.uint64), y.v.view(np.uint64)), key
    # VictoriaMetrics keeps the staleness markers (the JSON export prints them as null); both
    # readers drop them (round five: the export reader read them as NaN samples)
    assert js.count(b"null") == 4 and not any(np.isnan(s.v).any() for s in a.values())
    shape = {dict(k)["shape"]: s for k, s in b.items()}
    assert dict(next(iter(k for k in b if dict(k)["shape"] == "escaped")))["odd"] == \
        "a\x00b\x01c\x02d"
    assert np.isinf(shape["special"].v).sum() == 3
    assert not shape["special"].clean  # -Inf and negatives: the byte readers' cleaning runs
    assert shape["float_gauge"].t_ns.size == 2000 + 400  # both batches, sorted together
    assert bool((np.diff(shape["float_gauge"].t_ns) > 0).all())


def test_each_shape_alone_is_the_json_export_bit_for_bit(vm: servers.Server) -> None:
    """One series an answer: answers whose blocks all share one marshal type (every
    timestamp part delta-const, every value part nearest-delta: the decoder's per-kind masks
    select all or nothing) give the JSON export's numbers as the mixed answer does."""
    one_kind = {"t": 0, "v": 0}
    for name in _shapes():
        js, nat, start, end = _both(vm.url, f'{{__name__="native_{name}"}}')
        (x,), (y,) = decode_export(js, start, end), vm_native.decode_native(nat, start, end)
        assert x.t_ns is not None and x.v is not None and y.t_ns is not None and y.v is not None
        keep = ~np.isnan(x.v)
        assert np.array_equal(x.t_ns[keep], y.t_ns), name
        assert np.array_equal(x.v[keep].view(np.uint64), y.v.view(np.uint64)), name
        head = vm_native.read_blocks(nat, start, end).head
        one_kind["t"] += bool((head[:, 4] == vm_native.DELTA_CONST).all())
        one_kind["v"] += bool(np.isin(head[:, 5], (vm_native.ND, vm_native.ZSTD_ND)).all())
    assert one_kind["t"] >= 3 and one_kind["v"] >= 2, one_kind


def test_every_marshal_type_was_met(vm: servers.Server) -> None:
    """The data above reaches each of VictoriaMetrics' six marshal types, so the equality
    test decoded every one of them."""
    _, nat, start, end = _both(vm.url)
    blocks = vm_native.read_blocks(nat, start, end)
    kinds = {k for h in blocks.head for k in h[4:]}
    assert kinds == {vm_native.ZSTD_ND2, vm_native.DELTA_CONST, vm_native.CONST,
                     vm_native.ZSTD_ND, vm_native.ND2, vm_native.ND}, kinds


def _to_v182_layout(nat: bytes) -> bytes:
    """The same answer as VictoriaMetrics >= v1.82 writes it: MaxTimestamp after
    MinTimestamp and PrecisionBits after the two marshal types (block_header.go)."""
    out = bytearray(nat[:16])
    at = 16
    while at < len(nat):
        mlen = int.from_bytes(nat[at:at + 4], "big")
        out += nat[at:at + 4 + mlen]
        at += 4 + mlen
        blen = int.from_bytes(nat[at:at + 4], "big")
        b = nat[at + 4:at + 4 + blen]
        at += 4 + blen
        first_t, p = vm_native._varint(b, 0)
        p0 = p
        _, p = vm_native._varint(b, p)
        _, p = vm_native._uvarint(b, p)
        _, p = vm_native._varint(b, p)
        zz = (first_t + 3_600_000) << 1  # a MaxTimestamp, zig-zag varint
        mx = bytearray()
        while zz > 0x7F:
            mx.append(0x80 | (zz & 0x7F))
            zz >>= 7
        mx.append(zz)
        nb = b[:p0] + bytes(mx) + b[p0:p + 2] + bytes([64]) + b[p + 2:]
        out += len(nb).to_bytes(4, "big") + nb
    return bytes(out)


def test_answers_it_does_not_understand_are_errors_not_numbers(vm: servers.Server) -> None:
    _, nat, start, end = _both(vm.url)
    with pytest.raises(NativeFormatError):
        vm_native.decode_native(_to_v182_layout(nat), start, end)
    # an unknown marshal type in the first block
    at = 16 + 4 + int.from_bytes(nat[16:20], "big") + 4
    b0 = at
    for read in (vm_native._varint, vm_native._varint, vm_native._uvarint, vm_native._varint):
        _, at = read(nat, at)
    assert at > b0
    with pytest.raises(NativeFormatError, match="unknown marshal type"):
        vm_native.decode_native(nat[:at] + bytes([9]) + nat[at + 1:], start, end)
    # cut anywhere inside a block, or one byte flipped: an error or, where the flip lands in
    # a label or a timestamp/value, an answer that differs — never an exception of another kind
    rng = np.random.default_rng(3)
    ends = set()
    at = 16
    while at < len(nat):
        at += 4 + int.from_bytes(nat[at:at + 4], "big")
        at += 4 + int.from_bytes(nat[at:at + 4], "big")
        ends.add(at)
    for cut in rng.integers(17, len(nat) - 1, 60):
        if int(cut) not in ends:
            with pytest.raises(NativeFormatError):
                vm_native.decode_native(nat[:cut], start, end)
    for pos in rng.integers(0, len(nat), 200):
        bad = bytearray(nat)
        bad[pos] ^= 0x5A
        with contextlib.suppress(NativeFormatError):
            vm_native.decode_native(bytes(bad), start, end)
    with pytest.raises(NativeFormatError, match="range"):
        vm_native.decode_native(nat, start + 10_000, end)


@pytest.fixture(scope="module")
def planted_vm(tmp_path_factory: pytest.TempPathFactory):
    with victoriametrics_dedup(tmp_path_factory.mktemp("vm-planted")) as server:
        p = planted.fill(server.url, "native-1")
        yield server, p


def _cutting_proxy(upstream: str, keep: int, no_flags: bool = False) -> FaultProxy:
    """A proxy whose native answers over ``keep`` bytes lose their last 7 bytes, and (with
    ``no_flags``) whose ``/flags`` is not there."""
    proxy = FaultProxy(upstream)
    handler = proxy.httpd.RequestHandlerClass
    send = handler._send  # type: ignore[attr-defined]

    def _send(self, status: int, body: bytes, ctype: str) -> None:  # type: ignore[no-untyped-def]
        path = self.path.split("?")[0]
        if no_flags and path.endswith("/flags"):
            return send(self, 404, b"not here", "text/plain")
        if path.endswith("/export/native") and len(body) > keep:
            body = body[:-7]
        return send(self, status, body, ctype)

    proxy.httpd.RequestHandlerClass = type("CutHandler", (handler,), {"_send": _send})
    return proxy


def test_a_cut_native_answer_is_read_through_the_json_export(planted_vm) -> None:
    server, p = planted_vm
    query, _ = load_prometheus([server.url], _window(p), read_api="query")
    with _cutting_proxy(server.url, keep=4096) as proxy:
        tl, outcome = load_prometheus([proxy.url], _window(p))
    assert not outcome.partial
    assert tl.meta["prometheus"]["read_api"] == {proxy.url: "vm_native"}
    said = " ".join(tl.notes)
    assert "native export answer was not understood" in said and "cut short" in said, said
    _same_timeline(query, tl)


def test_without_the_dedup_setting_the_json_export_reads(planted_vm) -> None:
    server, p = planted_vm
    query, _ = load_prometheus([server.url], _window(p), read_api="query")
    with _cutting_proxy(server.url, keep=1 << 30, no_flags=True) as proxy:
        tl, _ = load_prometheus([proxy.url], _window(p))
    assert tl.meta["prometheus"]["read_api"] == {proxy.url: "vm_export"}
    said = " ".join(tl.notes)
    assert "not the native export" in said and "dedup.minScrapeInterval" in said, said
    _same_timeline(query, tl)


def _gzipping_proxy(upstream: str) -> FaultProxy:
    """A proxy that gzips every answer whatever the client accepts (some do)."""
    proxy = FaultProxy(upstream)
    handler = proxy.httpd.RequestHandlerClass

    def _send(self, status: int, body: bytes, ctype: str) -> None:  # type: ignore[no-untyped-def]
        packed = gzip.compress(body, 1)
        self.send_response(status)
        for name, value in (("Content-Type", ctype), ("Content-Encoding", "gzip"),
                            ("Content-Length", str(len(packed)))):
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(packed)

    proxy.httpd.RequestHandlerClass = type("GzipHandler", (handler,), {"_send": _send})
    return proxy


@pytest.mark.parametrize("user_header", [False, True])
def test_native_reads_ask_for_identity_encoding(planted_vm, user_header: bool) -> None:
    """The native blocks are compressed already: their reads ask ``identity`` even where every
    other request asks gzip (a remote endpoint: ``identity_on_loopback`` off), an
    ``Accept-Encoding`` the user set stays theirs, and a proxy that gzips anyway is read."""
    server, p = planted_vm
    query, _ = load_prometheus([server.url], _window(p), read_api="query")
    headers = (("X-Scope-OrgID", "team-a"),) + ((("Accept-Encoding", "gzip"),)
                                                if user_header else ())
    settings = HttpSettings(identity_on_loopback=False, headers=headers)
    with _gzipping_proxy(server.url) as proxy:
        tl, outcome = load_prometheus([proxy.url], _window(p), settings=settings)
        seen = list(proxy.headers_seen)
    assert not outcome.partial
    assert tl.meta["prometheus"]["read_api"] == {proxy.url: "vm_native"}
    _same_timeline(query, tl)
    native = [h for h in seen if h["path"] == vm_native.PATH]
    others = [h for h in seen if h["path"] != vm_native.PATH]
    assert len(native) >= 2 and others  # the probe and the reads; discovery, flags
    assert all(h.get("x-scope-orgid") == "team-a" for h in seen)
    want = "gzip" if user_header else "identity"
    assert {h.get("accept-encoding") for h in native} == {want}
    assert all("gzip" in h.get("accept-encoding", "") for h in others)


def test_dedup_as_the_server_does(tmp_path: Path) -> None:
    """With ``-dedup.minScrapeInterval=30s`` and two unmerged parts of 15 s samples, the native
    reader keeps the samples the server's own JSON export keeps."""
    with victoriametrics_dedup(tmp_path, "-dedup.minScrapeInterval=30s") as server, \
            httpx.Client(timeout=30) as c:
        t = T0 + np.arange(400, dtype=np.int64) * 15_000
        v = np.arange(400, dtype=np.float64) * 1.5
        for sl in (slice(0, 250), slice(150, 400)):
            body = remote_write.encode_arrays("native_dedup", {"k": "x"}, t[sl] + 3, v[sl])
            c.post(server.url + "/api/v1/write", content=body, headers=remote_write.HEADERS)
            c.get(server.url + "/internal/force_flush")
        time.sleep(1.5)
        api = PrometheusAPI(server.url, c, HttpSettings())
        reader = NativeReader(api)
        assert reader.dedup_ms() == 30_000
        start_s, end_s = (T0 - 60_000) / 1000, (T0 + 400 * 15_000) / 1000
        nat = reader.probe('{__name__="native_dedup"}', start_s, end_s)
        js = ExportReader(api).read('{__name__="native_dedup"}', start_s, end_s)
    assert len(nat) == len(js) == 1
    assert nat[0].t_ns is not None and js[0].t_ns is not None
    assert 150 < nat[0].t_ns.size < 300
    assert np.array_equal(nat[0].t_ns, js[0].t_ns)
    assert np.array_equal(nat[0].v, js[0].v)


def test_go_duration_and_pow10() -> None:
    assert vm_native.parse_go_duration_ms("1m30s") == 90_000
    assert vm_native.parse_go_duration_ms("1ms") == 1
    assert vm_native.parse_go_duration_ms("0s") == 0
    assert vm_native.parse_go_duration_ms("soon") is None
    # Go's math.Pow10: pow10postab32[n/32] * pow10tab[n%32], +Inf beyond 308
    got = vm_native.go_pow10(np.array([0, 5, 32, 40, 308, 309]))
    assert got.tolist() == [1.0, 1e5, 1e32, 1e32 * 1e8, 1e288 * 1e20, np.inf]


def _merged(url: str, selector: str, start_ms: int, end_ms: int, timeout_s: float = 30.0
            ) -> None:
    """Ask VictoriaMetrics to merge its parts and wait until ``selector``'s blocks are one."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=30) as c:
        c.get(url + "/internal/force_merge")
        form = {"match[]": selector, "start": f"{start_ms / 1000:.3f}",
                "end": f"{end_ms / 1000:.3f}"}
        while time.monotonic() < deadline:
            nat = c.post(url + vm_native.PATH, data=form).content
            if len(vm_native.read_blocks(nat, start_ms, end_ms).head) == 1:
                return
            time.sleep(0.3)
    raise AssertionError(f"{selector}: still more than one block after {timeout_s} s")


def test_a_merge_that_rescales_a_block_changes_no_byte_the_analysis_reads(tmp_path: Path
                                                                           ) -> None:
    """VictoriaMetrics' own answer for a stored integer changes when it merges its parts: the
    staleness marker its scraper writes when a target goes away lands alone in a block of
    scale -1024 (``lib/decimal`` leaves special values out of the block's exponent), and
    merging it with the series' integer block (``CalibrateScale``) multiplies the integers by
    10^9; beyond 2^53 ``float64(v) / 1e9`` is one ulp off, so the same sample of a job read
    6,826,610,141.0 before the merge and 6,826,610,140.999999 after it (the production
    fleet's ``leak`` through the native export against the query API). Every API of the server
    answers the merged value alike and the native decoder with them, bit for bit; the analysis
    reads byte fields as whole bytes, so its timeline is the same before and after the merge,
    through the native export and the query API alike."""
    p, data = planted.make(job_id="native-merge", minutes=2)
    v_dev = data[(0, "device_used")][1]  # a leak like the fleet's, from its value on
    v_dev[:] = 6826610141.0 + 4_194_304 * np.maximum(np.arange(v_dev.size) - 5, 0)
    with victoriametrics_dedup(tmp_path) as server, httpx.Client(timeout=30) as c:
        planted.write(server.url + "/api/v1/write", p.job_id, data)
        planted.wait_visible(server.url, p.job_id, len(data))
        for (rank, fname), (t, _) in data.items():  # each series' staleness marker, apart
            name = schema.FIELD_METRICS[fname].prom_aliases[1 if rank == 3 else 0]
            body = remote_write.encode_arrays(name, planted.labels_for(p.job_id, rank),
                                              t[-1:] + 1000, np.array([STALE]))
            assert c.post(server.url + "/api/v1/write", content=body,
                          headers=remote_write.HEADERS).status_code in (200, 204)
        c.get(server.url + "/internal/force_flush")
        time.sleep(1.5)
        before = {api: load_prometheus([server.url], _window(p), read_api=api)[0]
                  for api in ("export-native", "query")}
        sel = (f'{{__name__="{schema.DEVICE_USED.prom_aliases[0]}",'
               f'{schema.ATTR_JOB_ID}="{p.job_id}",{schema.ATTR_RANK}="0"}}')
        start, end = p.start_ms - 60_000, p.end_ms + 60_000
        _merged(server.url, sel, start, end)
        form = {"match[]": sel, "start": f"{start / 1000:.3f}", "end": f"{end / 1000:.3f}"}
        js, nat = (c.post(server.url + path, data=form).content
                   for path in ("/api/v1/export", vm_native.PATH))
        q = c.get(server.url + "/api/v1/query",
                  params={"query": f"{sel}[{(end - start) // 1000}s]",
                          "time": f"{end / 1000:.3f}"}).json()["data"]["result"]
        after = {api: load_prometheus([server.url], _window(p), read_api=api)[0]
                 for api in ("export-native", "query")}
    (x,), (y,) = decode_export(js, start, end), vm_native.decode_native(nat, start, end)
    assert x.v is not None and y.v is not None
    keep = ~np.isnan(x.v)
    qv = np.array([float(v) for _, v in q[0]["values"]])
    qv = qv[~np.isnan(qv)]
    assert np.array_equal(x.v[keep].view(np.uint64), y.v.view(np.uint64))
    assert np.array_equal(qv.view(np.uint64), y.v.view(np.uint64))
    assert vm_native.read_blocks(nat, start, end).head[0, 3] < 0  # rescaled by the merge
    assert y.v[5] == 6826610140.999999 and bool((y.v != v_dev).any())  # the server's own
    assert after["export-native"].meta["prometheus"]["read_api"] == {server.url: "vm_native"}
    for api in ("export-native", "query"):
        for rank in range(4):
            got = after[api].ranks[rank].values["device_used"]
            want = data[(rank, "device_used")][1]
            assert np.array_equal(got, want), (api, rank)
            assert np.array_equal(before[api].ranks[rank].values["device_used"], got)
    assert after["export-native"].ranks[0].values["device_used"][5] == 6826610141.0
