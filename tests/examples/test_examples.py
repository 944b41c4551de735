"""The launcher examples under examples/ as a user takes them: the SLURM script runs (one
machine, a stand-in ``srun``/``scontrol``, 2 CPU ranks of the torchrun example) and its archive
is analyzed under SLURM's job id; the Kubernetes objects validate like the chart's; the
collector configuration uses only keys its components document."""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from stormotel import exitcodes
from tests.cli import REPO, run_stormotel

EXAMPLES = REPO / "examples"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _shim(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.mark.slow  # a real 2-rank torchrun job (torch import in 3 processes)
def test_slurm_script_runs_and_the_job_id_is_slurms(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # One node: srun runs its command once (dropping its own options); scontrol names the node.
    _shim(bin_dir, "srun", 'while [[ "$1" == --* ]]; do shift; done\nexec "$@"\n')
    _shim(bin_dir, "scontrol", 'echo 127.0.0.1\n')
    venv_bin = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}:{venv_bin}:{os.environ['PATH']}",
           "SLURM_JOB_ID": "4242", "SLURM_NNODES": "1", "SLURM_JOB_NODELIST": "node-a",
           "SLURM_GPUS_ON_NODE": "2", "SLURM_NTASKS_PER_NODE": "1",
           "MASTER_PORT": str(_free_port()), "STEPS": "10",
           "STORMOTEL_ARCHIVE_DIR": str(tmp_path / "telemetry"), "OMP_NUM_THREADS": "1",
           "STORMOTEL_SIM_FAULTS": "rank=1:leak@t=0.3s,rate=256MiB/s"}
    run = subprocess.run(["bash", str(EXAMPLES / "slurm" / "train.sbatch")], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert "job 4242: 2 ranks" in run.stdout
    job_dir = tmp_path / "telemetry" / "4242"
    assert sorted(p.name for p in job_dir.glob("rank-*.traces.jsonl.zst")) == [
        "rank-0.traces.jsonl.zst", "rank-1.traces.jsonl.zst"]
    out = run_stormotel("analyze", str(job_dir), "--format", "json", timeout=120)
    assert out.returncode == exitcodes.FINDINGS, out.stderr
    report = yaml.safe_load(out.stdout)  # JSON is YAML
    assert report["job_id"] == "4242" and report["participating_ranks"] == [0, 1]
    assert {f["rank"] for f in report["gap_findings"]} == {1}  # the planted leak, nothing else


def test_slurm_script_asks_slurm_for_what_it_uses() -> None:
    text = (EXAMPLES / "slurm" / "train.sbatch").read_text()
    assert subprocess.run(["bash", "-n", str(EXAMPLES / "slurm" / "train.sbatch")],
                          timeout=30).returncode == 0
    directives = dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)", text, re.M))
    assert {"nodes", "ntasks-per-node", "gpus-per-node"} <= set(directives)
    assert directives["ntasks-per-node"] == "1"  # one torchrun per node
    assert '--rdzv-id "$SLURM_JOB_ID"' in text


def _k8s_objects() -> list[dict[str, Any]]:
    text = (EXAMPLES / "kubernetes" / "training-job.yaml").read_text()
    return [d for d in yaml.safe_load_all(text) if d]


def test_kubernetes_objects_validate() -> None:
    import jsonschema

    from tests.dashboards.test_helm import CRD_SCHEMAS  # the operator fields the chart uses
    kinds = []
    for obj in _k8s_objects():
        kinds.append(obj["kind"])
        if obj["kind"] in CRD_SCHEMAS:
            jsonschema.validate(obj, CRD_SCHEMAS[obj["kind"]])
        else:
            kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)
    assert kinds == ["Service", "Job", "PodMonitor"]


def test_kubernetes_ports_ranks_and_identity_agree() -> None:
    service, job, monitor = _k8s_objects()
    pod = job["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert job["spec"]["completionMode"] == "Indexed"
    assert pod["metadata"]["labels"] == monitor["spec"]["selector"]["matchLabels"]
    assert pod["spec"]["subdomain"] == service["metadata"]["name"]
    args = container["args"][0]
    nproc = int(re.search(r"--nproc-per-node (\d+)", args)[1])  # type: ignore[index]
    base = int(re.search(r"--prometheus-port-base (\d+)", args)[1])  # type: ignore[index]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == base
    assert [ports[f"metrics-{i}"] for i in range(1, nproc)] == list(range(base + 1, base + nproc))
    scraped = [int(e["relabelings"][0]["replacement"].rsplit(":", 1)[1])
               for e in monitor["spec"]["podMetricsEndpoints"]]
    assert scraped == list(range(base, base + nproc))
    assert {e["port"] for e in monitor["spec"]["podMetricsEndpoints"]} == {"metrics"}
    env = {e["name"] for e in container["env"]}
    assert {"STORMOTEL_JOB_ID", "K8S_POD_NAME", "K8S_NAMESPACE", "K8S_NODE_NAME"} <= env
    # The flags given to the example script exist in its parser.
    train_flags = set(re.findall(r"\"(--[\w-]+)\"", (EXAMPLES / "torchrun" / "train.py")
                                 .read_text()))
    assert set(re.findall(r"train\.py((?: --[\w-]+ \S+)*)", args)[0].split()[::2]) <= train_flags


def test_kubernetes_podmonitor_is_selected_by_a_default_kube_prometheus_stack() -> None:
    """kube-prometheus-stack's Prometheus selects PodMonitors with ``release: <its release>``
    (``podMonitorSelectorNilUsesHelmValues: true``, the chart default); one without the label
    is ignored with no error anywhere. The release name is the one docs/deployment.md installs
    the stack under."""
    monitor = _k8s_objects()[2]
    deployment = (REPO / "docs" / "deployment.md").read_text()
    release = re.search(r"prometheusSelectorLabels\.release=(\S+)", deployment)
    assert release is not None
    assert monitor["metadata"].get("labels", {}).get("release") == release[1]


#: Settings each component documents (opentelemetry-collector and -contrib READMEs:
#: receiver/otlpreceiver, processor/memorylimiterprocessor, processor/batchprocessor,
#: exporter/prometheusremotewriteexporter, exporter/fileexporter), for the keys we use.
COLLECTOR_KEYS: dict[str, set[str]] = {
    "otlp": {"protocols"},
    "memory_limiter": {"check_interval", "limit_mib", "spike_limit_mib", "limit_percentage",
                       "spike_limit_percentage"},
    "batch": {"timeout", "send_batch_size", "send_batch_max_size", "metadata_keys",
              "metadata_cardinality_limit"},
    "prometheusremotewrite": {"endpoint", "headers", "namespace", "external_labels",
                              "resource_to_telemetry_conversion", "tls", "remote_write_queue",
                              "retry_on_failure", "timeout", "add_metric_suffixes",
                              "send_metadata", "target_info", "max_batch_size_bytes"},
    "file": {"path", "rotation", "format", "compression", "flush_interval", "append",
             "group_by", "encoding"},
}
ROTATION_KEYS = {"max_megabytes", "max_days", "max_backups", "localtime"}


def test_collector_config_uses_documented_keys_and_the_right_ports() -> None:
    config = yaml.safe_load((EXAMPLES / "otel-collector" / "config.yaml").read_text())
    for section in ("receivers", "processors", "exporters"):
        for name, settings in config[section].items():
            kind = name.split("/", 1)[0]
            assert set(settings) <= COLLECTOR_KEYS[kind], (name, set(settings))
            if kind == "file":
                assert set(settings.get("rotation", {})) <= ROTATION_KEYS
                assert settings["format"] == "json" and "compression" not in settings
    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"].endswith(":4317")
    assert protocols["http"]["endpoint"].endswith(":4318")
    for pipeline in config["service"]["pipelines"].values():
        for section in ("receivers", "processors", "exporters"):
            assert set(pipeline[section]) <= set(config[section])
    assert config["exporters"]["prometheusremotewrite"]["endpoint"].endswith("/api/v1/write")
