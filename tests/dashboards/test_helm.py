"""The Helm chart, linted and rendered by the Helm library itself (helm-python-sdk bundles Helm's Go
SDK as a shared library; no helm binary), every rendered core object validated strictly against
the Kubernetes OpenAPI schemas (kubernetes-validate), and the prometheus-operator objects checked
against the fields of their CRDs that we use (kubernetes-validate ships no CRD schemas)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.dashboards.exprs import REPO
from tests.dashboards.promtool_suites import LOADER

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")

CHART = REPO / "helm" / "stormotel"
KUBE_VERSION = kubernetes_validate.latest_version()
ALL_ON = {
    "analyzer": {"jobIds": ["run-7", "Big_Job.2"], "grafanaUrl": "https://grafana.example",
                 "grafanaTokenSecret": {"name": "grafana-token"},
                 "prometheusTokenSecret": {"name": "prom-token"},
                 "pushgatewayUrl": "http://pushgateway:9091",
                 "stateVolume": {"persistentVolumeClaim": "stormotel-state"},
                 "extraArgs": ["--dry-run"]},
    "rulesConfigMap": {"enabled": True}, "serviceMonitor": {"enabled": True},
    "collector": {"enabled": True}, "prometheusRule": {"labels": {"release": "kps"}},
}
CRD_KINDS = {"PrometheusRule", "PodMonitor", "ServiceMonitor"}

_DURATION = {"type": "string", "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?"
                                          r"(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"}
_META = {"type": "object", "required": ["name"],
         "properties": {"name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
                                 "maxLength": 253},
                        "labels": {"type": "object",
                                   "additionalProperties": {"type": "string"}}}}
_SELECTOR = {"type": "object", "properties": {
    "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}},
    "additionalProperties": False}
_NS_SELECTOR = {"type": "object", "properties": {
    "any": {"type": "boolean"}, "matchNames": {"type": "array", "items": {"type": "string"}}},
    "additionalProperties": False}
_RELABEL = {"type": "object", "additionalProperties": False, "properties": {
    "sourceLabels": {"type": "array", "items": {"type": "string",
                                                "pattern": r"^[a-zA-Z_][a-zA-Z0-9_]*$"}},
    "targetLabel": {"type": "string"}, "replacement": {"type": "string"},
    "regex": {"type": "string"}, "action": {"type": "string"}}}
_ENDPOINT = {"type": "object", "required": ["port"], "additionalProperties": False,
             "properties": {"port": {"type": "string"}, "path": {"type": "string"},
                            "interval": _DURATION, "honorLabels": {"type": "boolean"},
                            "relabelings": {"type": "array", "items": _RELABEL}}}
#: The monitoring.coreos.com/v1 fields we use, as their CRDs define them (prometheus-operator
#: v0.7x), strict where we write them.
CRD_SCHEMAS: dict[str, dict[str, Any]] = {
    "PrometheusRule": {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
                       "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"}, "metadata": _META,
        "spec": {"type": "object", "required": ["groups"], "additionalProperties": False,
                 "properties": {"groups": {"type": "array", "minItems": 1, "items": {
                     "type": "object", "required": ["name", "rules"],
                     "additionalProperties": False, "properties": {
                         "name": {"type": "string", "minLength": 1}, "interval": _DURATION,
                         "rules": {"type": "array", "items": {
                             "type": "object", "required": ["expr"],
                             "additionalProperties": False,
                             "oneOf": [{"required": ["record"]}, {"required": ["alert"]}],
                             "properties": {
                                 "record": {"type": "string"}, "alert": {"type": "string"},
                                 "expr": {"type": "string", "minLength": 1}, "for": _DURATION,
                                 "labels": {"type": "object",
                                            "additionalProperties": {"type": "string"}},
                                 "annotations": {"type": "object",
                                                 "additionalProperties": {"type": "string"}},
                             }}}}}}}}}},
    "PodMonitor": {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
                   "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"}, "metadata": _META,
        "spec": {"type": "object", "required": ["selector", "podMetricsEndpoints"],
                 "additionalProperties": False, "properties": {
                     "selector": _SELECTOR, "namespaceSelector": _NS_SELECTOR,
                     "podMetricsEndpoints": {"type": "array", "minItems": 1,
                                             "items": _ENDPOINT}}}}},
    "ServiceMonitor": {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
                       "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"}, "metadata": _META,
        "spec": {"type": "object", "required": ["selector", "endpoints"],
                 "additionalProperties": False, "properties": {
                     "selector": _SELECTOR, "namespaceSelector": _NS_SELECTOR,
                     "endpoints": {"type": "array", "minItems": 1, "items": _ENDPOINT}}}}},
}


def _render(values: dict[str, Any] | None = None) -> dict[str, str]:
    with helm.Chart.load(str(CHART)) as chart:
        return chart.render(values or {}, name="so", namespace="monitoring", is_install=True)


def _yaml(text: str) -> Any:
    """YAML read by libyaml's loader where PyYAML has it (``safe_load``'s types): the rendered
    chart is 330 kB, read by ~25 tests; the pure-Python loader took 0.33 s for it, libyaml
    16 ms, for the same objects."""
    return yaml.load(text, Loader=LOADER)


def _yaml_all(text: str) -> Iterator[Any]:
    return yaml.load_all(text, Loader=LOADER)


def _objects(manifests: dict[str, str]) -> Iterator[dict[str, Any]]:
    for path, text in manifests.items():
        if path.endswith(".yaml"):
            yield from (d for d in _yaml_all(text) if d)


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return _render(ALL_ON)


def test_lint_is_clean_in_strict_mode() -> None:
    for values in ({}, ALL_ON):
        report = helm.lint(str(CHART), values, strict=True, namespace="monitoring")
        assert report["errors"] == [], report
        assert [m for m in report["messages"] if m["severity"] >= 2] == [], report


def test_core_objects_validate_strictly(rendered: dict[str, str]) -> None:
    kinds = []
    for obj in _objects(rendered):
        if obj["kind"] in CRD_KINDS:
            continue
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        kinds.append(obj["kind"])
    assert sorted(set(kinds)) == ["ConfigMap", "CronJob", "ServiceAccount"]
    assert kinds.count("CronJob") == 2


def test_validation_rejects_a_broken_object(rendered: dict[str, str]) -> None:
    """The validator is not a rubber stamp: a misspelt field in the CronJob fails it."""
    cron = next(o for o in _objects(rendered) if o["kind"] == "CronJob")
    cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicyy"] = "Never"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(cron, KUBE_VERSION, strict=True)
    rule = next(o for o in _objects(rendered) if o["kind"] == "PrometheusRule")
    rule["spec"]["groups"][0]["rules"][0]["exprr"] = "up"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(rule, CRD_SCHEMAS["PrometheusRule"])


def test_crd_objects_have_the_operator_structure(rendered: dict[str, str]) -> None:
    seen = set()
    for obj in _objects(rendered):
        if obj["kind"] in CRD_KINDS:
            jsonschema.validate(obj, CRD_SCHEMAS[obj["kind"]])
            seen.add(obj["kind"])
    assert seen == CRD_KINDS


def test_chart_ships_the_generated_rules_and_dashboards(rendered: dict[str, str]) -> None:
    objs = list(_objects(rendered))
    rules_text = (REPO / "dashboards" / "rules" / "stormotel-rules.yml").read_text()
    rule = next(o for o in objs if o["kind"] == "PrometheusRule")
    assert rule["spec"] == _yaml(rules_text)
    assert rule["metadata"]["labels"]["release"] == "kps"
    rules_cm = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"]
                    .endswith("-rules"))
    assert _yaml(rules_cm["data"]["stormotel-rules.yml"]) == _yaml(rules_text)
    boards = [o for o in objs if o["kind"] == "ConfigMap"
              and o["metadata"]["labels"].get("grafana_dashboard") == "1"]
    assert len(boards) == 2
    for cm in boards:
        (key, text), = cm["data"].items()
        assert text == (REPO / "dashboards" / key).read_text()  # same bytes
        assert json.loads(text)["uid"] == key.removesuffix(".json")
        assert cm["metadata"]["annotations"]["grafana_folder"] == "stormotel"


def test_analyzer_cronjob_is_locked_down(rendered: dict[str, str]) -> None:
    crons = [o for o in _objects(rendered) if o["kind"] == "CronJob"]
    names = [c["metadata"]["name"] for c in crons]
    assert len(set(names)) == 2 and all(len(n) <= 52 for n in names)
    assert all("--scheduled" in c["spec"]["jobTemplate"]["spec"]["template"]["spec"]
               ["containers"][0]["args"] for c in crons)
    pod = crons[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    args = container["args"]
    assert args[:6] == ["analyze", "--scheduled", "--job-id", "run-7", "--since", "1h"]
    assert "--grafana-token-file" in args and "--bearer-token-file" in args
    assert "--grafana-dashboard" in args and args[args.index("--timeout") + 1] == "5m"
    assert not any("token" in str(e.get("value", "")) for e in container.get("env", []))
    secrets = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert secrets == {"grafana-token", "prom-token"}
    # The image's USER is the uid the pod runs as.
    user = re.search(r"^USER (\d+)", (REPO / "Dockerfile").read_text(), re.M)
    assert user and int(user.group(1)) == pod["securityContext"]["runAsUser"]


def test_defaults_render_one_discovering_analyzer_and_notes_say_so() -> None:
    manifests = _render()
    kinds = sorted(o["kind"] for o in _objects(manifests))
    assert kinds == ["ConfigMap", "ConfigMap", "CronJob", "PodMonitor", "PrometheusRule",
                     "ServiceAccount"]
    cron = next(o for o in _objects(manifests) if o["kind"] == "CronJob")
    args = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--scheduled" in args and "--job-id" not in args
    notes = manifests["stormotel/templates/NOTES.txt"]
    assert "analyses every training job with telemetry in its window" in notes
    assert "stormotel / cluster overview" in notes


@pytest.mark.parametrize("values", [{}, {"analyzer": {"jobIds": ["run-7", "Big_Job.2"]}},
                                    {"analyzer": {"enabled": False}}])
def test_notes_name_the_cronjobs_to_run_by_hand(values: dict[str, Any]) -> None:
    """The install notes' ``kubectl create job --from=cronjob/...`` is copy-paste ready: it
    names every rendered CronJob (it said ``<cronjob name>``), and none without an analyzer
    (first-hour audit, helper fa)."""
    manifests = _render(values)
    crons = [o["metadata"]["name"] for o in _objects(manifests) if o["kind"] == "CronJob"]
    notes = manifests["stormotel/templates/NOTES.txt"]
    named = re.findall(r"create job --from=cronjob/(\S+) ", notes)
    assert named == crons and "<cronjob name>" not in notes


#: What a kube-prometheus-stack user sets: their stack's release label, training namespaces
#: elsewhere, 8 GPUs per pod, a CA for the TSDB, one alert off and a team label.
KPS = {
    "prometheusSelectorLabels": {"release": "monitoring-stack"},
    "podMonitor": {"ranksPerPod": 8},
    "analyzer": {"jobSelector": 'namespace="ml"', "remoteWriteUrl": "http://prom:9090/api/v1/write",
                 "grafanaUrl": "https://grafana.example", "grafanaFolder": "stormotel-incidents",
                 "extraVolumes": [{"name": "ca", "secret": {"secretName": "tsdb-ca"}}],
                 "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/stormotel/ca",
                                        "readOnly": True}],
                 "extraArgs": ["--ca-file", "/etc/stormotel/ca/ca.crt"]},
    "prometheusRule": {"alerts": {"StormotelPeakOverEstimate": {"enabled": False},
                                  "StormotelRankOutOfMemory": {"labels": {"team": "ml"}}},
                       "alertLabels": {"platform": "gpu"}},
}


@pytest.mark.parametrize("values", [{}, ALL_ON, KPS], ids=["default", "all-on", "kps"])
def test_renders_validate_with_kubernetes_validate(values: dict[str, Any]) -> None:
    for obj in _objects(_render(values)):
        if obj["kind"] in CRD_KINDS:
            jsonschema.validate(obj, CRD_SCHEMAS[obj["kind"]])
        else:
            kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


def test_kube_prometheus_stack_finds_every_rank() -> None:
    """The stack's Prometheus selects by `release`, in any namespace, and every local rank of
    an 8-GPU pod (ports 9464..9471) is a target."""
    objs = list(_objects(_render(KPS)))
    pm = next(o for o in objs if o["kind"] == "PodMonitor")
    rule = next(o for o in objs if o["kind"] == "PrometheusRule")
    for o in (pm, rule):
        assert o["metadata"]["labels"]["release"] == "monitoring-stack"
    assert pm["spec"]["namespaceSelector"] == {"any": True}
    ports = [e["relabelings"][0]["replacement"] for e in pm["spec"]["podMetricsEndpoints"]]
    assert ports == [f"${{1}}:{9464 + i}" for i in range(8)]
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert "StormotelPeakOverEstimate" not in {r["alert"] for r in alerts}
    oom = next(r for r in alerts if r["alert"] == "StormotelRankOutOfMemory")
    assert oom["labels"] == {"severity": "critical", "team": "ml", "platform": "gpu"}
    assert all(r["labels"]["platform"] == "gpu" for r in alerts)
    cron = next(o for o in objs if o["kind"] == "CronJob")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert args[args.index("--job-selector") + 1] == 'namespace="ml"'
    assert args[args.index("--grafana-folder") + 1] == "stormotel-incidents"
    assert {"name": "ca", "secret": {"secretName": "tsdb-ca"}} in pod["volumes"]
    assert any(m["mountPath"] == "/etc/stormotel/ca" for m in pod["containers"][0]["volumeMounts"])


def test_long_release_names_give_unique_names_within_63() -> None:
    values = {**ALL_ON, "analyzer": {**ALL_ON["analyzer"], "jobIds": []}}
    with helm.Chart.load(str(CHART)) as chart:
        manifests = chart.render(values, name="a-very-long-release-name-for-the-gpu-team-x42",
                                 namespace="monitoring", is_install=True)
    names = [(o["kind"], o["metadata"]["name"]) for o in _objects(manifests)]
    assert len(names) == len(set(names)), names
    assert all(len(n) <= 63 for _, n in names)
    assert all(len(n) <= 52 for k, n in names if k == "CronJob")


def test_collector_snippet_is_otlp_in_remote_write_out(rendered: dict[str, str]) -> None:
    cm = next(o for o in _objects(rendered) if o["metadata"]["name"].endswith("-collector"))
    config = _yaml(cm["data"]["relay.yaml"])
    pipeline = config["service"]["pipelines"]["metrics"]
    assert pipeline["receivers"] == ["otlp"]
    assert pipeline["exporters"] == ["prometheusremotewrite"]
    assert config["exporters"]["prometheusremotewrite"]["endpoint"].endswith("/api/v1/write")


def test_cronjob_args_are_accepted_by_stormotel_analyze(rendered: dict[str, str]) -> None:
    """The chart speaks the analyzer's real command line (parsed by its own argparse parser)."""
    from stormotel.analyzers.cli import build_parser

    for cron in (o for o in _objects(rendered) if o["kind"] == "CronJob"):
        args = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[0] == "analyze"
        parsed = build_parser().parse_args(args[1:])
        assert parsed.prometheus == ["http://prometheus-operated.monitoring.svc:9090"]
        assert parsed.pushgateway == "http://pushgateway:9091"
        assert parsed.grafana_dashboard is True and parsed.dry_run is True
        assert parsed.name_translation == "UnderscoreEscapingWithSuffixes"


def test_values_schema_rejects_mistakes_with_the_key_named() -> None:
    with helm.Chart.load(str(CHART)) as chart:
        chart.validate_schema(ALL_ON)
        with pytest.raises(helm.HelmValuesError, match="/analyzer/jobIds"):
            chart.validate_schema({"analyzer": {"jobIds": "run-7"}})
        with pytest.raises(helm.HelmValuesError, match="jobId"):  # a typo of jobIds
            chart.render({"analyzer": {"jobId": ["run-7"]}}, name="so")
        with pytest.raises(helm.HelmValuesError, match="/podMonitor/interval"):
            chart.validate_schema({"podMonitor": {"interval": "often"}})
        with pytest.raises(helm.HelmValuesError, match="podMonitr"):  # a top-level typo
            chart.validate_schema({"podMonitr": {"enabled": False}})
        for garbage in ("every 15 minutes", "*/15 * * *", "61 * * * * *"):
            with pytest.raises(helm.HelmValuesError, match="/analyzer/schedule"):
                chart.validate_schema({"analyzer": {"schedule": garbage}})
        for good in ("*/15 * * * *", "@hourly", "0 3 * * MON-FRI"):
            chart.validate_schema({"analyzer": {"schedule": good}})
        with pytest.raises(helm.HelmValuesError, match="enabeld"):
            chart.validate_schema({"prometheusRule": {"alerts": {
                "StormotelGapDrift": {"enabeld": False}}}})


def test_shards_make_an_indexed_job_whose_pods_take_their_share() -> None:
    """``shards: 4``: the discovering CronJob's Job is Indexed (4 completions, 4 at once) and
    each pod runs ``--shard 4`` (its index from JOB_COMPLETION_INDEX, parsed by the real
    parser); a listed job id stays one plain Job; one shard is the plain Job of before."""
    from stormotel.analyzers.cli import build_parser
    from stormotel.analyzers.options import Shard
    from stormotel.analyzers.options import resolve_shard as resolve

    manifests = _render({"analyzer": {"shards": 4, "jobSelector": 'namespace="ml"'}})
    for obj in _objects(manifests):
        if obj["kind"] not in CRD_KINDS:
            kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
    cron = next(o for o in _objects(manifests) if o["kind"] == "CronJob")
    spec = cron["spec"]["jobTemplate"]["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 4, 4)
    args = spec["template"]["spec"]["containers"][0]["args"]
    parsed = build_parser().parse_args(args[1:])
    assert resolve(parsed.shard, {"JOB_COMPLETION_INDEX": "2"}) == Shard(2, 4)
    assert parsed.job_selector == 'namespace="ml"'
    listed = _render({"analyzer": {"shards": 4, "jobIds": ["run-7"]}})
    cron = next(o for o in _objects(listed) if o["kind"] == "CronJob")
    spec = cron["spec"]["jobTemplate"]["spec"]
    assert "completionMode" not in spec
    assert "--shard" not in spec["template"]["spec"]["containers"][0]["args"]
    plain = next(o for o in _objects(_render()) if o["kind"] == "CronJob")["spec"]["jobTemplate"]
    assert "completionMode" not in plain["spec"]
    with helm.Chart.load(str(CHART)) as chart, pytest.raises(helm.HelmValuesError,
                                                             match="/analyzer/shards"):
        chart.validate_schema({"analyzer": {"shards": 0}})


def test_name_translation_picks_that_strategys_rules_and_dashboards() -> None:
    """``nameTranslation`` (docs/prometheus3.md) renders the files generated for that Prometheus
    3 OTLP translation strategy, and the schema rejects a strategy that does not exist."""
    strategy = "NoTranslation"
    folder = CHART / "files" / "name-translation" / strategy
    objs = list(_objects(_render({"nameTranslation": strategy,
                                  "rulesConfigMap": {"enabled": True}})))
    rule = next(o for o in objs if o["kind"] == "PrometheusRule")
    spec_text = json.dumps(rule["spec"])
    assert rule["spec"] == _yaml((folder / "rules" / "stormotel-rules.yml").read_text())
    assert '__name__=\\"hw.gpu.memory.usage\\"' in spec_text
    boards = {key: text for o in objs if o["kind"] == "ConfigMap"
              and o["metadata"]["labels"].get("grafana_dashboard") == "1"
              for key, text in o["data"].items()}
    assert sorted(boards) == sorted(p.name for p in (folder / "dashboards").glob("*.json"))
    for key, text in boards.items():
        assert text == (folder / "dashboards" / key).read_text()
    # the incident dashboards the analyzer saves through Grafana's API select the same names
    from stormotel.analyzers.cli import build_parser

    objs = list(_objects(_render({"nameTranslation": strategy,
                                  "analyzer": {"grafanaUrl": "http://grafana:3000"}})))
    cron = next(o for o in objs if o["kind"] == "CronJob")
    args = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    parsed = build_parser().parse_args(args[1:])
    assert parsed.grafana_dashboard is True and parsed.name_translation == strategy
    with pytest.raises(Exception, match="nameTranslation"):
        _render({"nameTranslation": "UnderscoreEscaping"})
