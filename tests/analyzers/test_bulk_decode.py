"""The bulk TSDB readers' decoders, on real server output and on damaged input.

``remote_read_prometheus_2_42.bin`` is a streamed remote-read answer of a real Prometheus 2.42
(four series remote-written into it: 500 samples at a steady 15 s, 500 with scrape jitter and
noisy values, 500 of NaN / negative / huge values, and 69 whose gaps take every
delta-of-delta width — 0, 14, 17, 20 and 64 bits, both signs — with repeated, zero, negative,
tiny, huge and infinite values), kept with the samples written (``….json``, made by the
script in ``tests/analyzers/data/README.md``); the XOR decoder must give them back bit for
bit.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import cramjam
import google_crc32c
import numpy as np
import pytest
from stormotel.analyzers.sources import prompb_read as pb
from stormotel.analyzers.sources.promql_selector import parse_selector
from stormotel.analyzers.sources.remote_read import (
    STALE_NAN_BITS,
    RemoteReadError,
    decode_answer,
    frames,
    read_request,
)
from stormotel.analyzers.sources.vm_export import decode_export
from stormotel.analyzers.sources.xor_chunks import decode_xor_chunks

DATA = Path(__file__).parent / "data"
ANSWER = (DATA / "remote_read_prometheus_2_42.bin").read_bytes()
WRITTEN = json.loads((DATA / "remote_read_prometheus_2_42.json").read_text())


def _series_chunks() -> list[tuple[dict[str, str], list[bytes]]]:
    out = []
    for data in frames(ANSWER):
        for s in pb.ChunkedReadResponse.FromString(data).chunked_series:
            out.append(({lb.name: lb.value for lb in s.labels}, [c.data for c in s.chunks]))
    return out


def test_xor_chunks_of_real_prometheus_give_back_what_was_written() -> None:
    series = _series_chunks()
    assert len(series) == 4
    for labels, blobs in series:
        counts, t, v, bad = decode_xor_chunks(blobs)
        want_t, want_v = WRITTEN[labels["rank"]]
        assert not bad.any() and int(counts.sum()) == len(want_t) and len(blobs) > 1
        assert t.tolist() == want_t
        assert np.array_equal(v, np.array(want_v), equal_nan=True)


def test_chunks_of_every_series_at_once_same_as_one_by_one() -> None:
    series = _series_chunks()
    blobs = [b for _, bs in series for b in bs]
    # Shuffled (so the decoder's longest-first order differs from the input's) and repeated.
    order = np.random.default_rng(3).permutation(len(blobs)).tolist() * 2
    counts, t, v, _ = decode_xor_chunks([blobs[i] for i in order])
    at = 0
    for i, n in zip(order, counts.tolist(), strict=True):
        c1, t1, v1, _ = decode_xor_chunks([blobs[i]])
        assert n == int(c1[0])
        assert np.array_equal(t[at:at + n], t1) and np.array_equal(v[at:at + n], v1,
                                                                   equal_nan=True)
        at += n


def test_cut_chunk_is_reported_bad_not_decoded() -> None:
    _, blobs = _series_chunks()[1]
    counts, _, _, bad = decode_xor_chunks([blobs[0][: len(blobs[0]) // 2], blobs[1], b"\x00"])
    assert bad.tolist() == [True, False, True] and counts[0] == 0 and counts[1] > 100


def test_answer_cut_to_the_range_staleness_markers_dropped() -> None:
    t0, t_end = WRITTEN["0"][0][10], WRITTEN["0"][0][99]
    series, other = decode_answer(ANSWER, t0, t_end)
    assert other == 0
    by_rank = {s.labels["rank"]: s for s in series}
    s0 = by_rank["0"]
    assert (s0.t_ns // 1_000_000).tolist() == WRITTEN["0"][0][10:100]
    # rank 2 holds NaN and negative values: kept (the caller counts them), clean is False
    assert not by_rank["2"].clean and np.isnan(by_rank["2"].v).any()
    stale = struct.unpack("<d", struct.pack("<Q", STALE_NAN_BITS))[0]
    assert np.isnan(stale)


def test_frames_check_crc_and_length() -> None:
    assert len(frames(ANSWER)) >= 1
    broken = bytearray(ANSWER)
    broken[-3] ^= 0xFF
    with pytest.raises(RemoteReadError, match="CRC32C"):
        frames(bytes(broken))
    with pytest.raises(RemoteReadError, match="cut short"):
        frames(ANSWER[:-5])
    msg = b"\x0a\x00"  # a frame whose CRC is right but that is not a ChunkedReadResponse
    junk = bytes([len(msg)]) + google_crc32c.value(msg).to_bytes(4, "big") + msg
    series, _ = decode_answer(junk, 0, 2**62)  # an empty series entry decodes as one
    assert len(series) == 1 and series[0].t_ns.size == 0


def test_read_request_is_the_protobuf_prometheus_expects() -> None:
    body = read_request('{__name__="m",job_id="a\\"b",rank=~"1|2",ns!~\'x\'}', 5, 9)
    req = pb.ReadRequest.FromString(cramjam.snappy.decompress_raw(body).read())
    q = req.queries[0]
    assert (q.start_timestamp_ms, q.end_timestamp_ms) == (5, 9)
    assert [(m.type, m.name, m.value) for m in q.matchers] == [
        (pb.EQ, "__name__", "m"), (pb.EQ, "job_id", 'a"b'), (pb.RE, "rank", "1|2"),
        (pb.NRE, "ns", "x")]
    assert list(req.accepted_response_types) == [pb.STREAMED_XOR_CHUNKS]


@pytest.mark.parametrize("bad", ['{a="x"', '{a=x}', '{a="x" b="y"}', '{a~"x"}',
                                 '{a="\\x41"}', 'rate(x[5m])'])
def test_selector_that_is_not_matchers_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_selector(bad)


def test_selector_forms() -> None:
    assert parse_selector('up{a=`b\\`, c!="d\\\\e"}') == [
        (0, "__name__", "up"), (0, "a", "b\\"), (1, "c", "d\\e")]
    assert parse_selector('{ a =~ "hw\\\\.gpu|x" , }') == [(2, "a", "hw\\.gpu|x")]


def test_export_lines_of_real_victoriametrics_shape() -> None:
    # What VictoriaMetrics 1.x writes (+Inf bare, a staleness marker as null), two lines
    # for one series (the caller's merge unites them), one out of order.
    body = (b'{"metric":{"__name__":"m","rank":"1"},"values":[1,+Inf,-2,null,3],'
            b'"timestamps":[1000,2000,3000,4000,5000]}\n'
            b'{"metric":{"__name__":"m","rank":"2"},"values":[7,6],"timestamps":[9000,8000]}\n')
    a, b = decode_export(body, 2000, 8500)
    assert a.labels == {"__name__": "m", "rank": "1"}
    assert (a.t_ns // 1_000_000).tolist() == [2000, 3000, 4000, 5000]
    assert a.v[0] == np.inf and a.v[1] == -2 and np.isnan(a.v[2]) and not a.clean
    assert (b.t_ns // 1_000_000).tolist() == [8000] and b.v.tolist() == [6.0]
    assert decode_export(b"", 0, 1) == []
    with pytest.raises(ValueError):
        decode_export(b'{"metric":{},"values":[1,2],"timestamps":[1]}', 0, 9)
    with pytest.raises(ValueError):
        decode_export(b"<html>not found</html>", 0, 9)


def test_export_lines_read_in_groups_same_as_written() -> None:
    """Many lines (several groups of numbers), an empty line, integer and fractional values."""
    rng = np.random.default_rng(5)
    want = []
    lines = []
    for i in range(300):
        n = 0 if i == 7 else int(rng.integers(1, 900))
        t = np.sort(rng.choice(10**9, n, replace=False)).astype(np.int64) + 1_700_000_000_000
        v = np.where(rng.random(n) < 0.5, rng.integers(0, 2**40, n), rng.random(n) * 1e9)
        want.append((t, v))
        lines.append(json.dumps({"metric": {"rank": str(i)}, "values": v.tolist(),
                                 "timestamps": t.tolist()}).encode())
    body = b"\n".join(lines) + b"\n"
    assert len(body) > 3 * 192 * 1024
    got = decode_export(body, 0, 2**62)
    assert len(got) == 300
    for s, (t, v) in zip(got, want, strict=True):
        assert np.array_equal(s.t_ns, t * 1_000_000) and np.array_equal(s.v, v)


def test_unreadable_chunk_is_counted_not_decoded() -> None:
    """A frame whose chunk is cut: its series comes back without those samples, and the
    chunk is counted (the loader adds it to ``skipped`` with a note)."""
    msg = pb.ChunkedReadResponse()
    s = msg.chunked_series.add()
    s.labels.add(name="rank", value="0")
    _, blobs = _series_chunks()[0]
    s.chunks.add(min_time_ms=0, max_time_ms=1, type=pb.CHUNK_XOR, data=blobs[0][:9])
    s.chunks.add(min_time_ms=0, max_time_ms=1, type=2, data=b"\x00\x01")  # a histogram chunk
    data = msg.SerializeToString()
    frame = bytes([len(data)]) + google_crc32c.value(data).to_bytes(4, "big") + data
    series, other = decode_answer(frame, 0, 2**62)
    assert other == 2 and len(series) == 1 and series[0].t_ns.size == 0


def _same(a: tuple, b: tuple) -> bool:
    return all(x.dtype == y.dtype and np.array_equal(x.view(np.uint64) if x.dtype == np.float64
                                                     else x, y.view(np.uint64)
                                                     if y.dtype == np.float64 else y)
               for x, y in zip(a, b, strict=True))


def test_few_chunks_decode_as_the_vectorised_path() -> None:
    """A few chunks (a scheduled run's per-job answer) go through the scalar decoder: the same
    counts, samples and bad flags as the vectorised one, on real chunks (2 and 8 together)
    and on chunks cut short or with flipped bits (most of them bad)."""
    from stormotel.analyzers.sources import xor_chunks as xc

    blobs = [b for _, bs in _series_chunks() for b in bs]
    groups = [blobs[:2], blobs[:8]]
    rng = np.random.default_rng(5)
    for _ in range(30):
        group = []
        for _ in range(int(rng.integers(1, 5))):
            b = bytearray(blobs[int(rng.integers(len(blobs)))])
            if rng.integers(2):
                b = b[: int(rng.integers(0, len(b) + 1))]
            else:
                for _ in range(int(rng.integers(1, 4))):
                    b[int(rng.integers(2, len(b)))] ^= 1 << int(rng.integers(8))
            group.append(bytes(b))
        groups.append(group)
    bad = 0
    for group in groups:
        few = xc._decode_few(group)
        assert _same(few, xc._decode_vectorised(group)), [g.hex() for g in group]
        bad += int(few[3].sum())
    assert bad > 10  # the broken chunks were compared too

