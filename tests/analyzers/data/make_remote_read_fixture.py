"""Writes ``remote_read_prometheus_2_42.{bin,json}``: a streamed remote-read answer of a REAL
Prometheus (the project's 2.42 from ``scripts/bootstrap.sh``) and the samples written into it.

Four series are remote-written (see ``tests/analyzers/test_bulk_decode.py`` for what each
exercises), then read back with ``accepted_response_types: STREAMED_XOR_CHUNKS``; the answer's
bytes are kept as they came. Timestamps follow the clock, so a regenerated file differs.

    .venv/bin/python tests/analyzers/data/make_remote_read_fixture.py
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import cramjam
import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from stormotel.analyzers.sinks import prompb  # noqa: E402
from stormotel.analyzers.sources import prompb_read  # noqa: E402
from stormotel.analyzers.sources.remote_read import HEADERS  # noqa: E402

from tests import servers  # noqa: E402

HERE = Path(__file__).resolve().parent


def _series(wr: object, rank: int) -> object:
    ts = wr.timeseries.add()  # type: ignore[attr-defined]
    for k, v in (("__name__", "m"), ("job_id", "j"), ("rank", str(rank))):
        ts.labels.add(name=k, value=v)
    return ts


def main() -> None:
    now = int(time.time() * 1000) - 600_000
    wr = prompb.WriteRequest()
    rng = np.random.default_rng(1)
    for k in range(3):
        ts = _series(wr, k)
        t = now + np.cumsum(rng.integers(14990, 15010, 500)) if k else now + 15000 * np.arange(500)
        vals = ([float(30 * 2**30 + int(x)) for x in rng.normal(0, 2**26, 500)] if k != 2
                else [1.5, 2.25, float("nan"), -3.0, 1e300] * 100)
        for tt, v in zip(t.tolist(), vals, strict=True):
            ts.samples.add(value=v, timestamp=int(tt))
    ts = _series(wr, 3)
    deltas = [1000, 1000, 1000, 1005, 990, 31000, 1000, 200000, 1000, 700000, 1, 1, 900000, 3,
              50, 60000, 120, 15000, 15000, 14999, 15001, 400000, 2]
    vals = [0.0, 0.0, 1.0, 1.0, -1.0, 2.0**62, 1e-300, 3.5, 3.5, 3.25, 1e300, -0.0, 42.0, 7.0,
            float("inf"), 5.0, 6.0, 6.0, 6.0, 123456789.125, 1.0, 2.0, 3.0]
    tt = now - 2_400_000
    for dlt, v in zip(deltas * 3, vals * 3, strict=True):
        tt += dlt
        ts.samples.add(value=v, timestamp=tt)
    with tempfile.TemporaryDirectory() as tmp, servers.prometheus(Path(tmp)) as s:
        r = httpx.post(s.url + "/api/v1/write",
                       content=bytes(cramjam.snappy.compress_raw(wr.SerializeToString())),
                       headers={"Content-Encoding": "snappy",
                                "Content-Type": "application/x-protobuf"})
        r.raise_for_status()
        rq = prompb_read.ReadRequest()
        q = rq.queries.add(start_timestamp_ms=now - 10**7, end_timestamp_ms=now + 10**8)
        q.matchers.add(type=prompb_read.EQ, name="__name__", value="m")
        rq.accepted_response_types.append(prompb_read.STREAMED_XOR_CHUNKS)
        r = httpx.post(s.url + "/api/v1/read", headers=HEADERS,
                       content=bytes(cramjam.snappy.compress_raw(rq.SerializeToString())))
        r.raise_for_status()
    (HERE / "remote_read_prometheus_2_42.bin").write_bytes(r.content)
    written = {s.labels[2].value: [[x.timestamp for x in s.samples],
                                   [x.value for x in s.samples]] for s in wr.timeseries}
    (HERE / "remote_read_prometheus_2_42.json").write_text(json.dumps(written))



if __name__ == "__main__":
    main()
