"""Planted-fault telemetry for the job tests, remote-written into real TSDBs.

Four ranks sampled every second over the last ``minutes`` minutes (Prometheus 2.42 refuses
samples older than its head block, so everything is recent). Rank 2's allocator and device memory
rise 20 s before the others (the first cause); every rank's series carries the schema's names,
with rank 3 written in the OTLP-receiver spelling so the source must accept both.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import httpx
import numpy as np
from stormotel.analyzers.sinks import remote_write

from stormotel import schema
from tests import servers

GiB = float(1 << 30)


@dataclass
class Planted:
    job_id: str
    start_ms: int
    end_ms: int
    fault_rank: int
    fault_ms: int
    ranks: int = 4

    @property
    def start_ns(self) -> int:
        return self.start_ms * 1_000_000

    @property
    def end_ns(self) -> int:
        return self.end_ms * 1_000_000


def make(job_id: str = "planted-1", minutes: float = 10.0, interval_ms: int = 1000,
         fault_rank: int = 2, lead_s: float = 20.0, now_ms: int | None = None
         ) -> tuple[Planted, dict[tuple[int, str], tuple[np.ndarray, np.ndarray]]]:
    """(description, {(rank, field): (t_ms, bytes)})."""
    end = (now_ms or int(time.time() * 1000)) - 5_000
    end -= end % interval_ms
    n = int(minutes * 60_000 / interval_ms)
    t = end - interval_ms * np.arange(n)[::-1]
    fault = int(t[int(n * 0.6)])
    data: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}
    rng = np.random.default_rng(7)
    for rank in range(4):
        onset = fault if rank == fault_rank else fault + int(lead_s * 1000)
        rise = np.where(t >= onset, 6 * GiB, 0.0)
        reserved = 20 * GiB + rise + rng.normal(0, 1e6, n).round()
        allocated = reserved - 2 * GiB
        device_used = reserved + 1.5 * GiB
        data[(rank, "reserved")] = (t, reserved)
        data[(rank, "allocated")] = (t, allocated)
        data[(rank, "device_used")] = (t, device_used)
        data[(rank, "device_total")] = (t, np.full(n, 80 * GiB))
    return Planted(job_id, int(t[0]), int(t[-1]), fault_rank, fault), data


def labels_for(job_id: str, rank: int) -> dict[str, str]:
    return {schema.ATTR_JOB_ID: job_id, schema.ATTR_RANK: str(rank),
            schema.ATTR_LOCAL_RANK: str(rank % 2), schema.ATTR_WORLD_SIZE: "4",
            schema.ATTR_HOST: f"node-{rank // 2}", schema.ATTR_GPU: str(rank % 2)}


def _client() -> contextlib.nullcontext[httpx.Client]:
    """The tests' shared loopback client (tests.servers.loopback_client), left open: a client
    of its own per call built a TLS context from certifi's bundle (~50 ms of CPU) each time."""
    return contextlib.nullcontext(servers.loopback_client())


def write(url: str, job_id: str,
          data: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]],
          *, alias_rank: int | None = 3, peak_fields: tuple[str, ...] = ()) -> None:
    """Remote-write every series; ``alias_rank`` uses the second schema spelling."""
    with _client() as client:
        for (rank, fname), (t, v) in data.items():
            metric = schema.FIELD_PEAK_METRICS[fname] if fname in peak_fields \
                else schema.FIELD_METRICS[fname]
            aliases = metric.prom_aliases
            name = aliases[1] if rank == alias_rank and len(aliases) > 1 else aliases[0]
            body = remote_write.encode_arrays(name, labels_for(job_id, rank), t, v)
            r = client.post(url, content=body, headers=remote_write.HEADERS, timeout=30)
            assert r.status_code in (200, 204), (r.status_code, r.text)


def wait_visible(base_url: str, job_id: str, expect_series: int, timeout_s: float = 10.0
                 ) -> None:
    """Wait until the TSDB's index serves what was written (VictoriaMetrics buffers ~1 s)."""
    deadline = time.monotonic() + timeout_s
    got = 0
    with _client() as client:
        # VictoriaMetrics; 404 on Prometheus
        client.get(base_url + "/internal/force_flush", timeout=5)
        while time.monotonic() < deadline:
            r = client.get(base_url + "/api/v1/series",
                           params={"match[]": f'{{{schema.ATTR_JOB_ID}="{job_id}"}}',
                                   "start": time.time() - 7200, "end": time.time()}, timeout=5)
            got = len(r.json().get("data", []))
            if got >= expect_series:
                return
            time.sleep(0.2)
    raise AssertionError(f"{base_url} shows {got} of {expect_series} series for {job_id}")


def write_markers(url: str, job_id: str, t: np.ndarray, step_ms: int = 2000,
                  oom_rank: int | None = 2, oom_at_ms: int | None = None) -> None:
    """The step gauge (one step every ``step_ms``) for 4 ranks and an OOM counter that
    increments once on ``oom_rank`` at ``oom_at_ms``."""
    step = ((t - t[0]) // step_ms).astype(np.float64)
    with _client() as client:
        for rank in range(4):
            series = [(schema.STEP.prom, step)]
            if oom_rank is not None:
                ooms = np.where(t >= (oom_at_ms or int(t[-1])) , 1.0, 0.0) if rank == oom_rank \
                    else np.zeros(t.shape)
                series.append((schema.OOMS.prom, ooms))
            for name, v in series:
                body = remote_write.encode_arrays(name, labels_for(job_id, rank), t, v)
                r = client.post(url, content=body, headers=remote_write.HEADERS, timeout=30)
                assert r.status_code in (200, 204), (r.status_code, r.text)


def fill(base_url: str, job_id: str, minutes: float = 8) -> Planted:
    """A planted job in a running TSDB, as the bulk-read tests read it: the memory series (with
    the device-used peak gauge), the step gauge and one OOM counter rise half-way through,
    waited on until every series is served."""
    p, data = make(job_id=job_id, minutes=minutes)
    write(base_url + "/api/v1/write", p.job_id, data, peak_fields=("device_used",))
    t = next(iter(data.values()))[0]
    write_markers(base_url + "/api/v1/write", p.job_id, t, oom_at_ms=int(t[len(t) // 2]))
    wait_visible(base_url, p.job_id, len(data) + 8)
    return p
