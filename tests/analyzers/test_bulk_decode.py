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
    # What VictoriaMetrics 1.x writes (+Inf bare, a staleness marker as null: dropped, as the
    # native and remote-read readers drop theirs), two lines for one series (the caller's
    # merge unites them), one out of order.
    body = (b'{"metric":{"__name__":"m","rank":"1"},"values":[1,+Inf,-2,null,3],'
            b'"timestamps":[1000,2000,3000,4000,5000]}\n'
            b'{"metric":{"__name__":"m","rank":"2"},"values":[7,6],"timestamps":[9000,8000]}\n')
    a, b = decode_export(body, 2000, 8500)
    assert a.labels == {"__name__": "m", "rank": "1"}
    assert (a.t_ns // 1_000_000).tolist() == [2000, 3000, 5000]
    assert a.v.tolist() == [np.inf, -2.0, 3.0] and not a.clean
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


#: Two of this suite's real chunks with bits flipped and the header's sample count raised (to
#: 250), found by a random search (numpy seed 7, 300 groups): the vectorised decoder read past
#: its buffer on both, an IndexError — a traceback for a corrupt answer.
_CORRUPT_CHUNKS = [bytes.fromhex(
    "00fa82c0aabfc468421e01f0c06c00009875dd07f86ba0aaff4b8f605fe15522ebf516862501a404182ffa7e"
    "e895f538855cbe62efac17e54045ca00959891408b40a34be04087c17d814387a064c8e0f5ff1a7516809d8f"
    "5417f8b9f01a026a41595f74ff6c0803a3b145035d176fa008ce0ec5f22f7a5880773d499037cf556a021712"
    "9f5fe4e1d86bf9fac67d015f1d6820b0fed3741641a532bf51852a17f6315d7afe372fcb4059e1a5280e7613"
    "e17fc58c932079fb9a240ec562d481562a2e5013e03f7207415baa40c7da3ac812c9eb497e4434d3aff5bfaf"
    "b40231cc24bfc15e3c1001333852ffa7d9284025e64c2bf725e1f101c1c1492061f78d15f1c42c7a80dd6749"
    "5016cb98d201835576406f15976bfc2bd715112eec84afd0019e240c1582e081656204d05d12340af59452a7"
    "5f8bba93681bba1fd17d331202a03c0ce7340fe59188bef8ca131026b6dd720566c0624034e6226bfb2ab9c9"
    "7e22e8e42b54a96215ef3237ea803c4f9900"), bytes.fromhex(
    "00fa82e3cebdc468621dfb0b851000009875e8d6c43de6afe9fb84a6a5a62c8a10a5b9dfdbc2dcb741fcb736"
    "2abec5dc68d02e0ae642014b9b484050ae28cbf40b61ed7db998ba2f8c728de40378b57880932d3c900813b6"
    "5205ef8b5f40b72398a81a21b9ed7e62f96e2fa3c8399405875b00804cdf8f90115c5a0a016dc6d340993f56"
    "e81e012a1501893a07202aae2981fc56ed7e81d33b3c1024ea51c201f490955f6986656be091cd617eb60cc0"
    "afe10e25f40f2d1e4abc21a94557bf5a995afa91b5765f389d08cbe385082d025dcf9f2fecb2c8a40577457a"
    "808e2b47d7e4c5979a011d0afb5fc812bf4bf1cf95c1035ccc3cafa1c2f34405eba82e80b5176bd7eec95c3a"
    "fdf743615f122c0e0be61b58d17e273bdc2fcbb50ff40d6e9da4be42e7c2d0162e90caffec6938409cba98c8"
    "1856afd17ce4749e2facbe2f44065cdfd082a10f94d789b25eea04924b535f11f326cbff04dcd500d3d477af"
    "922bd6540c07488cbe50673557fbd293aa025ed40740cc9e3dabe7b50c197e0439482ff95367740643345880"
    "3795a757d8945e9206dff4445fd5f64f4bf91186bd00d7bace2fc988ce2402eb17c080706b3e90300ec27af9"
    "f9163240062e1d4bf1e61f5d7f38f898af87a572140e91cac080f4e46e17cf52af52fe695ab85f7b49ab4806"
    "12674d012338c5a0538e1a15fe8e331283470c6c57af81da8af826406640b0d79de817e462957fbea2c1a074"
    "070eb5fcd69ca6bfa0e2d540")]


def test_corrupt_chunks_are_bad_chunks_not_a_crash() -> None:
    """A chunk whose reads run past the answer is flagged bad (its samples dropped), alone or
    beside a readable chunk, on both decoding paths."""
    from stormotel.analyzers.sources import xor_chunks as xc

    good = next(b for _, bs in _series_chunks() for b in bs)
    for corrupt in _CORRUPT_CHUNKS:
        for group in ([corrupt], [good, corrupt]):
            vectorised = xc._decode_vectorised(group)
            assert _same(xc._decode_few(group), vectorised)
            assert vectorised[3].tolist() == [False] * (len(group) - 1) + [True]
            assert vectorised[0][-1] == 0 and (len(group) == 1 or vectorised[0][0] > 0)
