"""The Prometheus and Alertmanager configurations the docs hand out are valid as written and
give the timings the runbook promises.

A reader pastes them into a server: a route without a default receiver is refused at start-up
(``amtool check-config``), and a Prometheus left at its default ``evaluation_interval`` of 1m
pages up to 1½ minutes after the deadlines the runbook measured at 15 s. Blocks are found by
their ``<!-- doc-test: promtool-config -->`` / ``amtool-config`` markers, so a new snippet is
checked by marking it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests import servers
from tests.docs.doc_blocks import REPO, Block, all_blocks

PROM_BLOCKS = [b for b in all_blocks() if b.mode == "promtool-config"]
AM_BLOCKS = [b for b in all_blocks() if b.mode == "amtool-config"]
RULES = REPO / "dashboards" / "rules" / "stormotel-rules.yml"
RULE_TESTS = REPO / "dashboards" / "rules" / "tests" / "stormotel-rules.test.yml"
#: Where the chart's rules ConfigMap is mounted in the snippet; the check reads the checkout's
#: copy of the same file (the chart's files/ are byte for byte the same, tests/dashboards).
MOUNTED_RULES = "/etc/prometheus/stormotel/stormotel-rules.yml"
#: kubernetes_sd_configs roles (Prometheus docs, configuration: <kubernetes_sd_config>).
K8S_ROLES = {"node", "service", "pod", "endpoints", "endpointslice", "ingress"}


def test_the_docs_have_both_snippets() -> None:
    assert PROM_BLOCKS and AM_BLOCKS  # a marker lost in an edit would skip the checks below


@pytest.mark.parametrize("block", PROM_BLOCKS, ids=lambda b: b.where)
def test_prometheus_snippet_passes_promtool_and_states_the_tested_interval(
        block: Block, tmp_path: Path) -> None:
    promtool = servers.require_binary("promtool")
    doc = yaml.safe_load(block.text.replace(MOUNTED_RULES, str(RULES)))
    for job in doc.get("scrape_configs", []):
        # Debian builds Prometheus without Kubernetes service discovery (its promtool refuses
        # the key): check the roles here, and the rest of the job with promtool.
        for sd in job.pop("kubernetes_sd_configs", []):
            assert sd.get("role") in K8S_ROLES, f"{block.where}: kubernetes_sd role {sd}"
            job.setdefault("static_configs", []).append({"targets": ["127.0.0.1:9464"]})
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump(doc))
    out = subprocess.run([promtool, "check", "config", str(config)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, (
        f"{block.where}: promtool check config:\n{out.stdout}{out.stderr}")
    stated = yaml.safe_load(block.text).get("global", {}).get("evaluation_interval")
    tested = yaml.safe_load(RULE_TESTS.read_text())["evaluation_interval"]
    assert stated == tested, (
        f"{block.where}: evaluation_interval {stated!r}, but the runbook's deadlines are "
        f"measured at {tested} (dashboards/rules/tests)")


@pytest.mark.parametrize("block", AM_BLOCKS, ids=lambda b: b.where)
def test_alertmanager_snippet_passes_amtool(block: Block, tmp_path: Path) -> None:
    amtool = servers.require_binary("amtool")
    config = tmp_path / "alertmanager.yml"
    config.write_text(block.text)
    out = subprocess.run([amtool, "check-config", str(config)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, f"{block.where}: amtool check-config:\n{out.stdout}{out.stderr}"


@pytest.mark.parametrize("block", AM_BLOCKS, ids=lambda b: b.where)
def test_alertmanager_route_sends_one_page_per_job(block: Block, tmp_path: Path) -> None:
    """The route does what the runbook says: two ranks of one job in one group, another job in
    its own (``amtool config routes test`` walks the real routing tree)."""
    amtool = servers.require_binary("amtool")
    config = tmp_path / "alertmanager.yml"
    config.write_text(block.text)
    out = subprocess.run([amtool, "config", "routes", "test", f"--config.file={config}",
                          "--verify.receivers=training-oncall",
                          "alertname=StormotelGapDrift", "job_id=run-7", "rank=3"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    other = subprocess.run([amtool, "config", "routes", "test", f"--config.file={config}",
                            "--verify.receivers=default", "alertname=NodeDown"],
                           capture_output=True, text=True, timeout=60)
    assert other.returncode == 0, other.stdout + other.stderr
    route = yaml.safe_load(block.text)["route"]["routes"][0]
    assert "job_id" in route["group_by"] and "rank" not in route["group_by"]
