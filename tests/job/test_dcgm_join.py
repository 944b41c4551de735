"""GPU attribution end to end, against a REAL Prometheus scraping real trackers and a DCGM endpoint.

Four ranks run real ``MemoryTracker`` s (simulated devices) on their own Prometheus endpoints,
each with the environment a Kubernetes pod in a Slurm allocation has (``K8S_*`` from the
downward API, ``SLURM_JOB_ID``/``SLURM_STEP_ID``). Next to them a dcgm-exporter-style endpoint
serves ``DCGM_FI_DEV_FB_*`` with label sets copied from real dcgm-exporter output
(tests/data/dcgm/exposition_samples.txt: both hostname spellings, pod labels, a GPU shared by
two pods repeated per pod, MIG instances, unrelated GPUs), only the UUIDs swapped for the ranks'.
Rank 2's GPU fills 4 s before the others', in the trackers and in DCGM alike.

Checked: the shipped join query gives one series per rank with job/rank labels; ``--dcgm`` with
no map file finds rank 2 through ``stormotel_rank_info``; the findings series, annotation text
and report carry the host/GPU/pod/namespace the ranks ran on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from stormotel.dashboards import promql
from stormotel.dashboards.panels import Selection

from stormotel import exitcodes, schema
from stormotel.samplers.simulated import SimulatedSampler
from stormotel.tracker import MemoryTracker
from tests import servers
from tests.job.conftest import run_cli
from tests.job.stubs import GrafanaStub
from tests.servers import loopback_client

pytestmark = [pytest.mark.servers, pytest.mark.slow]
JOB = "attrib-4"
WORLD = 4
LEADER = 2
RISE_AT_S, LEAD_S = 12.0, 4.0
#: The analysis sets aside a rise within 2 s of a rank's first sample as warm-up: the window
#: must open this long before the planted rise for the truth to hold (a loaded host starts the
#: trackers and Prometheus late).
LEAD_IN_S = 3.0
FAULT = f"rank={LEADER}:first_spike@t={RISE_AT_S:g}s,delta=4GiB,lead={LEAD_S:g}s"
UUIDS = [f"GPU-5b0e3f2a-9c4d-4e6f-8a1b-{r:012d}" for r in range(WORLD)]
SAMPLES = Path(__file__).resolve().parents[1] / "data" / "dcgm" / "exposition_samples.txt"
TOTAL_MIB = 81920.0
TOKEN = "attribution-token"


def pod_env(rank: int) -> dict[str, str]:
    return {"K8S_POD_NAME": f"trainer-{rank}", "K8S_NAMESPACE": "ml-team",
            "K8S_NODE_NAME": f"gpu-node-{rank // 2}", "SLURM_JOB_ID": "918273",
            "SLURM_STEP_ID": "0"}


def real_label_sets() -> list[tuple[str, dict[str, str], float]]:
    """(metric, labels, value) of every real sample line, verbatim."""
    out = []
    for fam in text_string_to_metric_families(SAMPLES.read_text()):
        out += [(s.name, dict(s.labels), s.value) for s in fam.samples]
    return out


def rank_gpu_labels() -> dict[int, list[dict[str, str]]]:
    """Per rank, the label sets its GPU's series carry (real shapes, our UUIDs).

    Rank 0: Hostname + pod labels (gpu-operator #340). Rank 1: a GPU shared by two pods, one
    series per pod (dcgm-exporter #432). Ranks 2-3: lowercase ``hostname`` (dcgm-exporter #736).
    """
    real = real_label_sets()
    t4 = real[0][1]
    shared = [labels for name, labels, _ in real if "vgpu" in labels]
    lower = real[1][1]
    shapes = {0: [t4], 1: shared, 2: [lower], 3: [lower]}
    return {r: [{**labels, schema.DCGM_LABEL_UUID: UUIDS[r], "gpu": str(r % 2)}
                for labels in shapes[r]] for r in range(WORLD)}


class DcgmExporter:
    """Serves the exposition a dcgm-exporter on these nodes would, values following the plant."""

    def __init__(self, port: int) -> None:
        self.epoch_ns = time.time_ns()
        self.gpus = rank_gpu_labels()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self.server, _ = start_http_server(port, addr="127.0.0.1", registry=self.registry)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.server_port}"

    def used_mib(self, rank: int) -> float:
        t = (time.time_ns() - self.epoch_ns) / 1e9
        rise_at = RISE_AT_S if rank == LEADER else RISE_AT_S + LEAD_S
        return 20_000.0 + (4096.0 if t >= rise_at else 0.0) + rank

    def collect(self) -> Iterator[Metric]:
        used = Metric(schema.DCGM_FB_USED, "Framebuffer memory used (in MiB).", "gauge")
        free = Metric(schema.DCGM_FB_FREE, "Framebuffer memory free (in MiB).", "gauge")
        for rank, label_sets in self.gpus.items():
            for labels in label_sets:
                mib = self.used_mib(rank)
                used.add_sample(schema.DCGM_FB_USED, labels, mib)
                # Rank 3's driver does not support FB_FREE: DCGM sends its sentinel.
                free.add_sample(schema.DCGM_FB_FREE, labels,
                                float(schema.DCGM_INT64_NOT_SUPPORTED) if rank == 3
                                else TOTAL_MIB - mib)
        for name, labels, value in real_label_sets():  # other GPUs, served verbatim
            (used if name == schema.DCGM_FB_USED else free).add_sample(name, labels, value)
        yield used
        yield free

    def close(self) -> None:
        self.server.shutdown()


def start_trackers(epoch_ns: int, ports: list[int]) -> list[MemoryTracker]:
    trackers = []
    for r in range(WORLD):
        sampler = SimulatedSampler(rank=r, faults=FAULT, device_index=r % 2, epoch_ns=epoch_ns,
                                   step_period_s=0.5)
        sampler.gpu_uuid = UUIDS[r]
        trackers.append(MemoryTracker(
            sampler=sampler, sampling_interval=0.1, job_id=JOB, rank=r, local_rank=r % 2,
            world_size=WORLD, host=f"gpu-node-{r // 2}", prometheus_port=ports[r],
            prometheus_addr="127.0.0.1", env=pod_env(r)).start_tracking())
    return trackers


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[servers.Server, float, float]]:
    ports = [servers.free_port() for _ in range(WORLD + 1)]
    targets = [f"127.0.0.1:{p}" for p in ports]
    trackers: list[MemoryTracker] = []
    dcgm: DcgmExporter | None = None
    try:
        with servers.prometheus(tmp_path_factory.mktemp("prom"), scrape_targets=targets,
                                scrape_interval="1s") as prom:
            # The plant's clock starts once Prometheus is up, so the window sees the rise.
            dcgm = DcgmExporter(ports[-1])
            trackers = start_trackers(dcgm.epoch_ns, ports[:WORLD])
            start = None
            while start is None and time.time_ns() - dcgm.epoch_ns < (RISE_AT_S - LEAD_IN_S) * 1e9:
                time.sleep(0.25)
                if len(servers.query(prom, f'{schema.RANK_INFO.prom}{{job_id="{JOB}"}}')) == WORLD \
                        and servers.query(prom, schema.DCGM_FB_USED):
                    start = time.time()
            assert start is not None, (
                f"trackers or the DCGM endpoint did not show up {LEAD_IN_S:g} s before the "
                "planted rise (host too loaded): the planted truth would not hold")
            done_at = dcgm.epoch_ns / 1e9 + RISE_AT_S + LEAD_S + 3.0
            time.sleep(max(0.0, done_at - time.time()))
            yield prom, start, time.time()
    finally:
        if dcgm is not None:
            dcgm.close()
        for t in trackers:
            t.stop_tracking()


def test_rank_info_carries_gpu_pod_and_slurm_labels(scraped) -> None:
    prom, _, _ = scraped
    got = {int(r["metric"]["rank"]): r["metric"]
           for r in servers.query(prom, f'{schema.RANK_INFO.prom}{{job_id="{JOB}"}}')}
    assert sorted(got) == list(range(WORLD))
    for r, labels in got.items():
        assert labels[schema.ATTR_GPU_UUID] == UUIDS[r]
        assert labels[schema.ATTR_POD] == f"trainer-{r}"
        assert labels[schema.ATTR_NAMESPACE] == "ml-team"
        assert labels[schema.ATTR_NODE] == f"gpu-node-{r // 2}"
        assert labels[schema.ATTR_SLURM_JOB_ID] == "918273"
        assert labels[schema.ATTR_SLURM_STEP_ID] == "0"
        assert all(v != "" for v in labels.values())


def test_shipped_join_gives_one_series_per_rank(scraped) -> None:
    prom, _, _ = scraped
    expr = promql.dcgm_by_rank(f'job_id="{JOB}"')
    result = servers.query(prom, expr)
    ranks = sorted(int(r["metric"][schema.ATTR_RANK]) for r in result)
    assert ranks == list(range(WORLD)), result  # the shared GPU's two pod copies count once
    by_rank = {int(r["metric"]["rank"]): r for r in result}
    for r, row in by_rank.items():
        assert row["metric"][schema.ATTR_JOB_ID] == JOB
        assert row["metric"][schema.DCGM_LABEL_UUID] == UUIDS[r]
        mib = float(row["value"][1]) / schema.DCGM_UNIT_BYTES
        assert mib == pytest.approx(20_000 + 4096 + r)  # bytes, and never a sum of copies
    # The real, unrelated GPUs of the sample file join no rank.
    assert not {r["metric"][schema.DCGM_LABEL_UUID] for r in result} - set(UUIDS)
    # The dashboard ships the same expression (with its variables).
    board = (Path(__file__).resolve().parents[2] / "dashboards" / "stormotel-rank.json")
    shipped = promql.dcgm_by_rank(Selection.dashboard().tracker)
    assert json.dumps(shipped)[1:-1] in board.read_text()


def test_dcgm_mode_finds_the_planted_rank_without_a_map(scraped, tmp_path: Path) -> None:
    prom, start, end = scraped
    report = tmp_path / "dcgm.json"
    # The stub computes its values when scraped: a collection interval of (under) a second.
    r = run_cli("--prometheus", prom.url, "--dcgm", "--job-id", JOB, "--start", str(start),
                "--end", str(end), "--format", "json", "-o", str(report),
                "--dcgm-collect-interval", "1s")
    assert r.returncode == exitcodes.FINDINGS, r.stderr
    doc = json.loads(report.read_text())
    assert doc["cross_rank"]["first_cause_suspects"][0]["confidence"] == "high"
    assert doc["participating_ranks"] == list(range(WORLD)) and doc["world_size"] == WORLD
    # The shared GPU's per-pod copies are one GPU, not a rank matching two GPUs.
    assert "rank_mapped_twice" not in doc["skipped"]
    assert doc["skipped"].get("dcgm_not_supported_sentinel", 0) > 0  # rank 3's FB_FREE
    top = doc["cross_rank"]["first_cause_suspects"][0]
    assert top["rank"] == LEADER, doc["cross_rank"]
    where = doc["extra"]["rank_attribution"][str(LEADER)]
    assert where["pod"] == f"trainer-{LEADER}" and where["namespace"] == "ml-team"
    assert where["gpu_uuid"] == UUIDS[LEADER]


def test_dcgm_values_as_old_as_the_collection_interval_claim_no_short_lead(
        scraped, tmp_path: Path) -> None:
    """dcgm-exporter collects every 30 s by default, so a value scraped now may be 30 s old: a
    follower seen low may already have risen then. The planted 4 s lead is not claimed (a tie,
    with the reason) unless the collection interval is said to be shorter."""
    prom, start, end = scraped
    report = tmp_path / "dcgm.json"
    r = run_cli("--prometheus", prom.url, "--dcgm", "--job-id", JOB, "--start", str(start),
                "--end", str(end), "--format", "json", "-o", str(report))
    assert r.returncode == exitcodes.FINDINGS, r.stderr
    doc = json.loads(report.read_text())
    assert doc["settings"]["clock_tolerance_s"] == 30.0
    assert not [s for s in doc["cross_rank"]["first_cause_suspects"]
                if s["confidence"] in ("high", "medium")]
    assert any("--dcgm-collect-interval" in n for n in doc["notes"])


def test_attribution_end_to_end_tracker_series_to_annotations(scraped, tmp_path: Path) -> None:
    """tracker → Prometheus → analyzer findings (series, annotation text, report)."""
    prom, start, end = scraped
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    report = tmp_path / "report.json"
    with GrafanaStub(TOKEN) as grafana, servers.pushgateway(tmp_path / "pgw") as pushgateway:
        r = run_cli("--prometheus", prom.url, "--job-id", JOB, "--start", str(start),
                    "--end", str(end), "--grafana-url", grafana.url, "--grafana-token-file",
                    str(token_file), "--pushgateway", pushgateway.url, "--format", "json",
                    "-o", str(report), "--html", str(tmp_path / "report.html"))
        pushed = loopback_client().get(pushgateway.url + "/metrics", timeout=5).text
    assert r.returncode == exitcodes.FINDINGS, r.stderr
    doc = json.loads(report.read_text())
    assert doc["cross_rank"]["first_cause_suspects"][0]["rank"] == LEADER
    where = doc["extra"]["rank_attribution"][str(LEADER)]
    assert where == {"host": f"gpu-node-{LEADER // 2}", "gpu": str(LEADER % 2),
                     "gpu_uuid": UUIDS[LEADER], "pod": f"trainer-{LEADER}",
                     "namespace": "ml-team", "node": f"gpu-node-{LEADER // 2}",
                     "slurm_job_id": "918273"}
    first = next(a for a in grafana.annotations if "first_cause" in a["tags"]
                 and f"rank={LEADER}" in a["tags"])
    assert f"pod=trainer-{LEADER}" in first["text"] and "namespace=ml-team" in first["text"]
    assert f"host=gpu-node-{LEADER // 2}" in first["text"]
    series = [ln for ln in pushed.splitlines()
              if ln.startswith(schema.AN_FIRST_CAUSE + "{") and f'rank="{LEADER}"' in ln]
    assert series, pushed
    assert f'pod="trainer-{LEADER}"' in series[0] and 'namespace="ml-team"' in series[0]
    assert f'host="gpu-node-{LEADER // 2}"' in series[0] and f'gpu="{LEADER % 2}"' in series[0]
    page = (tmp_path / "report.html").read_text()  # --html works in the scheduled-job mode too
    assert f"Rank {LEADER} went first" in page and f"pod=trainer-{LEADER}" in page
