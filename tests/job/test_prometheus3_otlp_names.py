"""The tracker's OTLP sent straight to Prometheus 3 (its native OTLP receiver): the series are
named by the server's ``otlp.translation_strategy``. The analyzer must find a job under each
strategy, with the resource attributes promoted to labels beside the tracker's own; the names
come from :func:`stormotel.schema.otlp_prom_name`, a port of prometheus/otlptranslator (the
code Prometheus 3 runs), checked here against the translator's own documented examples.

No Prometheus 3 can be installed here: the series are written as Prometheus 3 would store them
into a real VictoriaMetrics (which, like Prometheus 3, stores any UTF-8 name), and the real
analyzer reads them back through the Prometheus HTTP API.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from stormotel import exitcodes, schema
from tests import servers
from tests.job import planted
from tests.job.conftest import run_cli
from tests.servers import loopback_client

pytestmark = pytest.mark.servers


def test_translator_examples() -> None:
    """otlptranslator's doc examples (metric_namer.go: Build; strategy.go) and the
    OTel→Prometheus compatibility spec's rules, for the shapes the tracker uses."""
    with_suffixes = schema.OTLP_UNDERSCORE_WITH_SUFFIXES
    assert schema.otlp_prom_name("http.server.duration", "s", schema.Kind.HISTOGRAM,
                                 with_suffixes) == "http_server_duration_seconds"
    assert schema.otlp_prom_name("requests.count", "1", schema.Kind.COUNTER,
                                 with_suffixes) == "requests_count_total"
    assert schema.otlp_prom_name("memory.usage", "By", schema.Kind.GAUGE,
                                 with_suffixes) == "memory_usage_bytes"
    utf8 = schema.OTLP_UTF8_WITH_SUFFIXES
    assert schema.otlp_prom_name("hw.gpu.memory.usage", "By", schema.Kind.UPDOWN_COUNTER,
                                 utf8) == "hw.gpu.memory.usage_bytes"
    assert schema.otlp_prom_name("stormotel.oom", "{oom}", schema.Kind.COUNTER,
                                 utf8) == "stormotel.oom_total"
    assert schema.otlp_prom_name("hw.gpu.memory.utilization", "1", schema.Kind.GAUGE,
                                 utf8) == "hw.gpu.memory.utilization_ratio"
    assert schema.otlp_prom_name("stormotel.memory.gap", "By", schema.Kind.GAUGE,
                                 schema.OTLP_NO_TRANSLATION) == "stormotel.memory.gap"


def test_rules_and_dashboards_read_the_names_prometheus_3_stores_by_default() -> None:
    """Under UnderscoreEscapingWithSuffixes (Prometheus 3's default) every series the shipped
    rules and dashboards read has the pull exporter's name; only unit-"1" gauges differ
    (``_ratio``), and nothing shipped reads those."""
    from tests.dashboards import exprs

    text = "\n".join(e.expr for e in exprs.all_exprs())
    for metric in schema.ALL_METRICS:
        default = schema.otlp_prom_name(metric.name, metric.unit, metric.kind,
                                        schema.OTLP_UNDERSCORE_WITH_SUFFIXES)
        if default != metric.prom:
            assert metric.unit == "1", metric
            assert metric.prom not in text, f"{metric.prom} is read but Prometheus 3 " \
                                             f"stores {default}"
        assert default in metric.prom_aliases  # the analyzer accepts it


def _resource_labels(strategy: str, rank: int) -> dict[str, str]:
    """Resource attributes as Prometheus 3 promotes them (promote_resource_attributes), named
    under the strategy, plus the job/instance it derives from service.name/instance.id."""
    utf8 = strategy in (schema.OTLP_UTF8_WITH_SUFFIXES, schema.OTLP_NO_TRANSLATION)
    attrs = {"service.name": "trainer", "service.instance.id": f"trainer-{rank}",
             "host.name": f"node-{rank // 2}", "k8s.pod.name": f"trainer-{rank}"}
    out = {(k if utf8 else k.replace(".", "_")): v for k, v in attrs.items()}
    out.update({"job": "trainer", "instance": f"trainer-{rank}"})
    return out


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.Server]:
    with servers.victoriametrics(tmp_path_factory.mktemp("vm3")) as server:
        yield server


@pytest.mark.parametrize("strategy", schema.OTLP_STRATEGIES)
def test_analyzer_finds_the_job_under_each_translation_strategy(
        vm: servers.Server, strategy: str, tmp_path: Path) -> None:
    job = f"p3-{strategy}"
    p, data = planted.make(job_id=job)
    lines = []
    for (rank, field), (t, v) in data.items():
        metric = schema.FIELD_METRICS[field]
        name = schema.otlp_prom_name(metric.name, metric.unit, metric.kind, strategy)
        labels = {"__name__": name, **_resource_labels(strategy, rank),
                  **planted.labels_for(job, rank)}
        lines.append(json.dumps({"metric": labels, "values": [float(x) for x in v],
                                 "timestamps": [int(x) for x in t]}))
    r = loopback_client().post(vm.url + "/api/v1/import", content="\n".join(lines), timeout=30)
    assert r.status_code == 204, r.text
    planted.wait_visible(vm.url, job, len(data))
    out = tmp_path / "r.json"
    run = run_cli("--prometheus", vm.url, "--job-id", job, "--start", str(p.start_ms / 1000),
                  "--end", str(p.end_ms / 1000 + 1), "--format", "json", "-o", str(out))
    assert run.returncode in (exitcodes.OK, exitcodes.FINDINGS), run.stderr
    report = json.loads(out.read_text())
    assert report["participating_ranks"] == [0, 1, 2, 3], (strategy, report["notes"])
    suspects = report["cross_rank"]["first_cause_suspects"]
    assert suspects and suspects[0]["rank"] == p.fault_rank, (strategy, suspects)
