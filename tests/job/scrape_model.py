"""What a Prometheus server stores when it scrapes ``stormotel track`` ranks, derived from a
model of the scrape rather than typed in, and remote-written into a real server.

Each server scrapes each target at its own phase within its interval and stamps the sample with
the time the scrape *started*; the value is the tracker's state when the exporter *answered*:
the rolling device-used peak, the edge gauge (the tracker's own sample time of its latest edge,
with its gap gauge) once the edge exists, the sampling interval. A starved exporter answers
every scrape started in its starved window at the window's end. Used by the job tests that
check first cause under late answers and late-starting ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx
import numpy as np
from stormotel.analyzers.sinks import remote_write

from stormotel import schema
from tests.job import planted

GIB = float(1 << 30)
TRACKER_INTERVAL_S = 0.1
ANSWER_S = 0.01  # an exporter's usual answer time


@dataclass(frozen=True)
class Rank:
    """One rank, times in s after the job's epoch."""

    start_s: float  # the tracker's first sample
    edge_s: float  # its first-rise edge (the incident), on the tracker's own clock
    #: (time, GiB) steps of its device memory before the incident, from its start (a warm-up)
    warmup: tuple[tuple[float, float], ...] = ()
    edge_kind: str = schema.EDGE_FIRST_RISE
    #: the exporter starved: scrapes started in [from, to) are answered at ``to``
    starved: tuple[float, float] | None = None


@dataclass(frozen=True)
class Server:
    every_s: float
    phase_s: dict[int, float] = field(default_factory=dict)  # per rank, s after the epoch


BASE_GIB = 5.52
INCIDENT_GIB = 1.0


def scrapes(server: Server, rank: int, r: Rank, epoch: float, end_s: float
            ) -> tuple[np.ndarray, np.ndarray]:
    """(stamps, answer times), s since the Unix epoch, of every scrape of a running rank."""
    k = np.arange(-40, 40)
    stamp = epoch + server.phase_s[rank] + k * server.every_s
    stamp = stamp[(stamp >= epoch + r.start_s) & (stamp <= epoch + end_s)]
    answer = stamp + ANSWER_S
    if r.starved is not None:
        lo, hi = r.starved
        held = (stamp >= epoch + lo) & (stamp < epoch + hi)
        answer = np.where(held, epoch + hi, answer)
    return stamp, answer


def write_job(url: str, job: str, ranks: dict[int, Rank], server: Server, epoch: float,
              end_s: float, *, gap_gauge: bool = True) -> int:
    """Remote-write what ``server`` would have stored for every rank; returns the series count
    (for :func:`tests.job.planted.wait_visible`)."""
    n = 0
    with httpx.Client(timeout=30) as client:
        for rank, r in ranks.items():
            stamp, answer = scrapes(server, rank, r, epoch, end_s)
            edge = epoch + r.edge_s
            risen = answer >= edge
            used = np.full(stamp.shape, BASE_GIB * GIB)
            for at_s, gib in r.warmup:
                used = np.where(answer >= epoch + at_s, gib * GIB, used)
            used = used + np.where(risen, INCIDENT_GIB * GIB, 0.0)
            t_ms = np.rint(stamp * 1000).astype(np.int64)
            edge_label = {schema.ATTR_EDGE: r.edge_kind}
            series = [(schema.DEVICE_USED_PEAK.prom, {}, t_ms, used),
                      (schema.DEVICE_USED.prom, {}, t_ms, used),
                      (schema.FIELD_METRICS["device_total"].prom, {}, t_ms,
                       np.full(t_ms.shape, 80 * GIB)),
                      (schema.SAMPLING_INTERVAL.prom, {}, t_ms,
                       np.full(t_ms.shape, TRACKER_INTERVAL_S)),
                      (schema.EDGE_TIMESTAMP.prom, edge_label, t_ms[risen],
                       np.full(int(risen.sum()), round(edge, 3)))]
            if gap_gauge:
                series.append((schema.EDGE_GAP.prom, edge_label, t_ms[risen],
                               np.full(int(risen.sum()), TRACKER_INTERVAL_S)))
            for name, extra, t, v in series:
                if not t.size:
                    continue
                labels = {**planted.labels_for(job, rank), **extra,
                          schema.ATTR_WORLD_SIZE: str(len(ranks))}
                body = remote_write.encode_arrays(name, labels, t, v)
                resp = client.post(url + "/api/v1/write", content=body,
                                   headers=remote_write.HEADERS)
                assert resp.status_code in (200, 204), (resp.status_code, resp.text)
                n += 1
    return n
