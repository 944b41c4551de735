"""The TSDB readers under generated server answers (a stub Prometheus HTTP API on loopback,
decoded by the real client): Prometheus/VictoriaMetrics series, raw and range answers, the
dcgm-exporter series, job discovery and the window read-back. A report, a counted skip or exit
2/3 — never exit 70, a traceback, a secret or a raw control character."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stormotel import schema
from tests.fuzz.boundary import StubTsdb, analyze, check, mutate


@pytest.fixture(scope="module")
def stub():
    s = StubTsdb()
    yield s
    s.close()


def _ok(data: object) -> dict:
    return {"status": "success", "data": data}


def _matrix(labels: list[dict], value: float) -> dict:
    now = time.time()
    values = [[now - 300 + 15 * i, str(value)] for i in range(20)]
    return {"resultType": "matrix", "result": [{"metric": m, "values": values} for m in labels]}


def _stormotel_labels() -> list[dict]:
    name = schema.FIELD_METRICS["allocated"].prom_aliases[0]
    return [{"__name__": name, "job_id": "j", "rank": str(r), "world_size": "2",
             "host": f"node-{r}"} for r in range(2)]


def _dcgm_labels() -> list[dict]:
    return [{"__name__": schema.DCGM_FB_USED, "gpu": str(r), "UUID": f"GPU-{r}",
             "Hostname": "node", "pod": f"train-{r}", "job_id": "j"} for r in range(2)]


@given(st.data())
def test_prometheus_answers(stub, data):
    labels = _stormotel_labels()
    stub.answers = {
        "series": mutate(_ok(labels), data, 3),
        "query": mutate(_ok(_matrix(labels, 4 * 1024**3)), data, 3),
        "query_range": mutate(_ok(_matrix(labels, 4 * 1024**3)), data, 3)}
    check(analyze("--prometheus", stub.url, "--job-id", "j", "--since", "10m",
                  "--http-retries", "0", "--format", "json", "-q"))


@given(st.data())
def test_dcgm_answers(stub, data):
    labels = _dcgm_labels()
    stub.answers = {
        "series": mutate(_ok(labels), data, 3),
        "query": mutate(_ok(_matrix(labels, 30_000)), data, 3),
        "query_range": mutate(_ok(_matrix(labels, 30_000)), data, 3)}
    check(analyze("--prometheus", stub.url, "--dcgm", "--rank-label", "pod", "--job-id", "j",
                  "--since", "10m", "--http-retries", "0", "--format", "json", "-q"))


@given(st.data())
def test_scheduled_discovery_and_read_back(stub, tmp_path_factory, data):
    labels = _stormotel_labels()
    vector = {"resultType": "vector", "result": [
        {"metric": {"job_id": "j"}, "value": [time.time(), str(time.time() - 60)]}]}
    stub.answers = {"series": _ok(labels), "query": mutate(_ok(vector), data, 4),
                    "query_range": _ok(_matrix(labels, 4 * 1024**3)),
                    "write": _ok({})}
    state = tmp_path_factory.mktemp("state") / "state.json"
    check(analyze("--prometheus", stub.url, "--scheduled", "--since", "10m", "--settle", "0s",
                  "--http-retries", "0", "--remote-write", f"{stub.url}/api/v1/write",
                  "--state-file", str(state), "-q"),
          codes=(0, 1, 2, 3, 4))
