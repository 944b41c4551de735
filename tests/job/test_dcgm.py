"""dcgm-exporter mode against a REAL Prometheus holding planted DCGM_FI_DEV_FB_* series (MiB).

Four training GPUs on two hosts (pods trainer-0..3 in namespace ``train``) plus one GPU of an
unrelated workload; the GPU of rank 2 fills first. Ranks come from a mapping file or a label.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest
from stormotel.analyzers.options import DCGM_FIELDS_ENV
from stormotel.analyzers.sinks import remote_write
from stormotel.analyzers.sources.dcgm import DcgmOptions, load_dcgm
from stormotel.analyzers.sources.prometheus import QueryWindow

from stormotel import exitcodes, schema
from tests import servers
from tests.job import planted
from tests.job.conftest import run_cli

pytestmark = pytest.mark.servers
JOB = "dcgm-job"
TOTAL_MIB = 81920.0
DRIVER_RESERVED_MIB = 512.0


def _gpu_labels(i: int, hostname: str = "Hostname") -> dict[str, str]:
    if i == 4:  # another team's GPU on node-1
        return {"gpu": "2", "UUID": "GPU-other", hostname: "node-1",
                "exported_pod": "inference-7", "exported_namespace": "serving",
                "modelName": "NVIDIA H100 80GB HBM3"}
    return {"gpu": str(i % 2), "UUID": f"GPU-{i:04d}", hostname: f"node-{i // 2}",
            "exported_pod": f"trainer-{i}", "exported_namespace": "train",
            "modelName": "NVIDIA H100 80GB HBM3", "job": "dcgm-exporter"}


@dataclass(frozen=True)
class Generation:
    """How one dcgm-exporter generation spells the framebuffer: names, unit, hostname label."""

    used: str
    free: str
    reserved: str
    unit: int  # bytes per reported unit
    hostname: str


#: Up to 4.8.2: MiB, ``Hostname``; 4.8.3: ``hostname`` (upstream d5e5f51); 4.9 / DCGM 4.7:
#: bytes, under the same names (told apart by size only) or renamed (names that spell the unit:
#: the 4.9 names could not be confirmed upstream, docs/dcgm.md, so both shapes are covered).
GENERATIONS = {
    "legacy-mib-Hostname": Generation(schema.DCGM_FB_USED, schema.DCGM_FB_FREE,
                                      schema.DCGM_FB_RESERVED, schema.DCGM_UNIT_BYTES,
                                      "Hostname"),
    "4.8.3-mib-hostname": Generation(schema.DCGM_FB_USED, schema.DCGM_FB_FREE,
                                     schema.DCGM_FB_RESERVED, schema.DCGM_UNIT_BYTES,
                                     "hostname"),
    "4.9-bytes-same-names": Generation(schema.DCGM_FB_USED, schema.DCGM_FB_FREE,
                                       schema.DCGM_FB_RESERVED, 1, "hostname"),
    "4.9-bytes-renamed": Generation("DCGM_FI_DEV_FB_USED_BYTES", "DCGM_FI_DEV_FB_FREE_BYTES",
                                    "DCGM_FI_DEV_FB_RESERVED_BYTES", 1, "hostname"),
}


@pytest.fixture(scope="module", params=list(GENERATIONS))
def dcgm_tsdb(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[tuple[servers.Server, planted.Planted]]:
    gen = GENERATIONS[request.param]
    p, data = planted.make(job_id=JOB)
    with servers.prometheus(tmp_path_factory.mktemp("dcgm")) as prom, \
            httpx.Client(timeout=30) as client:
        for i in range(5):
            t, used_bytes = data[(i % 4, "device_used")]
            used = np.round(used_bytes / schema.DCGM_UNIT_BYTES)
            free = TOTAL_MIB - used - DRIVER_RESERVED_MIB
            scale = schema.DCGM_UNIT_BYTES / gen.unit
            for name, v in ((gen.used, used), (gen.free, free),
                            (gen.reserved, np.full(used.shape, DRIVER_RESERVED_MIB))):
                body = remote_write.encode_arrays(name, _gpu_labels(i, gen.hostname), t,
                                                  v * scale)
                r = client.post(prom.url + "/api/v1/write", content=body,
                                headers=remote_write.HEADERS)
                assert r.status_code == 204, r.text
        yield prom, p


def _window(p: planted.Planted) -> list[str]:
    return ["--job-id", JOB, "--start", str(p.start_ms / 1000 - 2),
            "--end", str(p.end_ms / 1000 + 2)]


def test_map_file_mode_finds_first_cause_and_says_what_it_skipped(dcgm_tsdb, tmp_path: Path
                                                                  ) -> None:
    prom, p = dcgm_tsdb
    mapping = tmp_path / "ranks.csv"
    mapping.write_text("rank,uuid\n" + "".join(f"{i},GPU-{i:04d}\n" for i in range(5)))
    out = tmp_path / "r.json"
    r = run_cli("--prometheus", prom.url, "--dcgm", "--gpu-rank-map", str(mapping),
                *_window(p), "--format", "json", "-o", str(out))
    assert r.returncode == exitcodes.FINDINGS, r.stderr
    report = json.loads(out.read_text())
    assert report["participating_ranks"] == [0, 1, 2, 3]
    assert report["missing_ranks"] == [4]  # mapped, but GPU-0004 reported nothing
    assert report["cross_rank"]["first_cause_suspects"][0]["rank"] == p.fault_rank
    assert report["gap_findings"] == [] and report["collective_attributions"] == []
    assert set(report["extra"]["skipped_analyses"]) == {"gap_analysis",
                                                        "collective_attribution"}
    assert any(n.startswith("dcgm mode: device memory only") for n in report["notes"])


def test_rank_label_mode_with_selector(dcgm_tsdb) -> None:
    prom, p = dcgm_tsdb
    window = QueryWindow(JOB, p.start_ns, p.end_ns)
    timeline, outcome = load_dcgm([prom.url], window, DcgmOptions(
        rank_label="exported_pod", selector='exported_namespace="train"'))
    assert timeline.rank_ids == [0, 1, 2, 3] and not outcome.partial
    s = timeline.ranks[3]
    assert s.identity.host == "node-1" and s.identity.gpu_uuid == "GPU-0003"
    total = s.values["device_total"]
    assert np.allclose(total, TOTAL_MIB * schema.DCGM_UNIT_BYTES)
    assert np.isnan(s.values["reserved"]).all()  # no allocator data in this mode


def test_unmapped_gpus_are_counted(dcgm_tsdb, tmp_path: Path) -> None:
    prom, p = dcgm_tsdb
    mapping = tmp_path / "ranks.json"
    mapping.write_text(json.dumps([{"rank": i, "hostname": f"node-{i // 2}", "gpu": str(i % 2)}
                                   for i in range(4)]))
    from stormotel.analyzers.sources.dcgm import GpuRankMap

    window = QueryWindow(JOB, p.start_ns, p.end_ns)
    timeline, _ = load_dcgm([prom.url], window, DcgmOptions(rank_map=GpuRankMap.load(mapping)))
    assert timeline.rank_ids == [0, 1, 2, 3]
    assert timeline.skipped["gpu_without_rank"] == 1  # the serving GPU


@pytest.mark.parametrize("content, message", [
    ("rank,uuid\n0,GPU-0000\nx,GPU-0001\n", "line 3: rank is not an integer"),
    ("rank,uuid\n0,GPU-0000\n0,GPU-0001\n", "line 3: rank 0 already mapped on line 2"),
    ("rank,colour\n0,blue\n", "line 2: unknown column(s) ['colour']"),
])
def test_bad_map_file_is_a_one_line_usage_error(tmp_path: Path, content: str,
                                                message: str) -> None:
    mapping = tmp_path / "map.csv"
    mapping.write_text(content)
    down = f"http://127.0.0.1:{servers.free_port()}"
    r = run_cli("--prometheus", down, "--dcgm", "--gpu-rank-map", str(mapping), "--job-id", JOB,
                "--since", "5m")
    assert r.returncode == exitcodes.USAGE
    assert f"{mapping} {message}" in r.stderr and "Traceback" not in r.stderr


def test_dcgm_takes_one_rank_source(tmp_path: Path) -> None:
    mapping = tmp_path / "map.csv"
    mapping.write_text("rank,uuid\n0,GPU-0000\n")
    r = run_cli("--prometheus", "http://127.0.0.1:1", "--dcgm", "--job-id", JOB,
                "--gpu-rank-map", str(mapping), "--rank-label", "exported_pod")
    assert r.returncode == exitcodes.USAGE
    assert "--dcgm takes --gpu-rank-map FILE or --rank-label LABEL, not both" in r.stderr


def test_dcgm_without_map_label_or_info_series_says_what_to_give(
        dcgm_tsdb: tuple[servers.Server, planted.Planted]) -> None:
    """The planted TSDB has DCGM series but no stormotel_rank_info: no guessing."""
    prom, p = dcgm_tsdb
    r = run_cli("--prometheus", prom.url, "--dcgm", "--job-id", JOB, "--start",
                str(p.start_ns / 1e9), "--end", str(p.end_ns / 1e9))
    assert r.returncode == exitcodes.SOURCE_FAILURE, r.stderr
    assert "no stormotel_rank_info series" in r.stderr and "--gpu-rank-map" in r.stderr
    assert "Traceback" not in r.stderr


def test_units_are_told_per_gpu_by_the_values_not_the_name() -> None:
    """An idle 4.9 GPU whose used is 4 MiB in bytes (below 2**24) is still bytes: its free says
    so. A legacy GPU is MiB. The "not supported" codes do not count as a size."""
    from stormotel.analyzers.sources.dcgm import _units_by_gpu
    from stormotel.analyzers.timeline import TimelineBuilder

    def res(uuid: str, *values: float) -> dict[str, object]:
        return {"metric": {"UUID": uuid}, "values": [[i, str(v)] for i, v in enumerate(values)]}

    names = {schema.DCGM_FB_USED: ("used", None), schema.DCGM_FB_FREE: ("free", None)}
    sentinel = float(schema.DCGM_INT32_BLANK)
    answered = [(schema.DCGM_FB_USED, [res("GPU-new", 4 * 2**20, 4 * 2**20),
                                       res("GPU-old", 4, sentinel)]),
                (schema.DCGM_FB_FREE, [res("GPU-new", 80e9), res("GPU-old", 81000)])]
    units = _units_by_gpu(answered, names, TimelineBuilder())
    assert units[(("UUID", "GPU-new"), ("GPU_I_ID", ""))] == 1
    assert units[(("UUID", "GPU-old"), ("GPU_I_ID", ""))] == schema.DCGM_UNIT_BYTES


def test_configured_fields_from_flag_and_environment() -> None:
    from stormotel.analyzers.sources.dcgm_tsdb import configured_fields

    from stormotel.errors import UsageError
    env = {DCGM_FIELDS_ENV: "used=DCGM_FI_X:bytes,free=DCGM_FI_Y"}
    got = configured_fields((("free", "DCGM_FI_Z", schema.DCGM_UNIT_BYTES),), env)
    assert got == {"used": ("DCGM_FI_X", 1), "free": ("DCGM_FI_Z", schema.DCGM_UNIT_BYTES)}
    assert configured_fields((), {}) is None
    with pytest.raises(UsageError, match=DCGM_FIELDS_ENV):
        configured_fields((), {DCGM_FIELDS_ENV: "colour=DCGM_FI_X"})


def test_a_bad_dcgm_field_flag_is_a_usage_error(tmp_path: Path) -> None:
    r = run_cli("--prometheus", "http://127.0.0.1:1", "--dcgm", "--job-id", JOB,
                "--rank-label", "pod", "--dcgm-field", "used=DCGM_FI_X:furlongs")
    assert r.returncode == exitcodes.USAGE and "unit must be bytes or mib" in r.stderr
