"""The chart's receiver (`stormotel serve`): off by default; on, a Deployment + Service (probes,
the CronJob's pod security, optional PVC, the analyzer's TSDB/Grafana settings), an
AlertmanagerConfig routing stormotel's alerts to it, and every alert's report_url pointing at
it. Linted and validated the way tests/dashboards/test_helm.py checks the rest of the chart."""

from __future__ import annotations

from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from tests.dashboards import test_helm as th

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")

ON: dict[str, Any] = {
    "analyzer": {"grafanaUrl": "https://grafana.example", "remoteWriteUrl": "http://prom/api/v1/write",
                 "prometheusTokenSecret": {"name": "prom-token"},
                 "grafanaTokenSecret": {"name": "grafana-token"}},
    "receiver": {"enabled": True, "webhookTokenSecret": {"name": "am-token"},
                 "persistence": {"enabled": True, "storageClassName": "fast"}},
}
_SECRET_KEY = {"type": "object", "required": ["name", "key"], "additionalProperties": False,
               "properties": {"name": {"type": "string", "minLength": 1},
                              "key": {"type": "string", "minLength": 1}}}
_AUTH = {"type": "object", "additionalProperties": False,
         "properties": {"type": {"type": "string"}, "credentials": _SECRET_KEY}}
#: monitoring.coreos.com/v1alpha1 AlertmanagerConfig, the fields we write (prometheus-operator
#: v0.7x CRD: route.matchers[].matchType, webhookConfigs[].httpConfig.authorization).
AMC_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1alpha1"}, "metadata": th._META,
        "spec": {"type": "object", "additionalProperties": False, "required": ["route"],
                 "properties": {
            "route": {"type": "object", "additionalProperties": False, "required": ["receiver"],
                      "properties": {
                "receiver": {"type": "string"}, "continue": {"type": "boolean"},
                "groupBy": {"type": "array", "items": {"type": "string"}},
                "groupWait": th._DURATION, "groupInterval": th._DURATION,
                "repeatInterval": th._DURATION,
                "matchers": {"type": "array", "items": {
                    "type": "object", "required": ["name"], "additionalProperties": False,
                    "properties": {"name": {"type": "string", "minLength": 1},
                                   "value": {"type": "string"},
                                   "matchType": {"enum": ["=", "!=", "=~", "!~"]}}}}}},
            "receivers": {"type": "array", "items": {
                "type": "object", "required": ["name"], "additionalProperties": False,
                "properties": {"name": {"type": "string", "minLength": 1}, "webhookConfigs": {
                    "type": "array", "items": {
                        "type": "object", "additionalProperties": False, "properties": {
                            "url": {"type": "string", "pattern": "^https?://"},
                            "sendResolved": {"type": "boolean"},
                            "httpConfig": {"type": "object", "additionalProperties": False,
                                           "properties": {"authorization": _AUTH}}}}}}}}}}}}


def _objs(values: dict[str, Any]) -> list[dict[str, Any]]:
    return list(th._objects(th._render(values)))


def test_off_by_default_and_rules_unchanged() -> None:
    objs = _objs({})
    assert not [o for o in objs if o["metadata"]["name"].endswith("-receiver")]
    rule = next(o for o in objs if o["kind"] == "PrometheusRule")
    assert not [r for g in rule["spec"]["groups"] for r in g["rules"]
                if "report_url" in r.get("annotations", {})]


def test_lint_and_every_object_validates() -> None:
    report = helm.lint(str(th.CHART), ON, strict=True, namespace="monitoring")
    assert report["errors"] == [] and not [m for m in report["messages"]
                                           if m["severity"] >= 2], report
    kinds = []
    for obj in _objs(ON):
        if obj["kind"] == "AlertmanagerConfig":
            jsonschema.validate(obj, AMC_SCHEMA)
        elif obj["kind"] in th.CRD_KINDS:
            jsonschema.validate(obj, th.CRD_SCHEMAS[obj["kind"]])
        else:
            kubernetes_validate.validate(obj, th.KUBE_VERSION, strict=True)
        kinds.append(obj["kind"])
    for kind in ("Deployment", "Service", "PersistentVolumeClaim", "AlertmanagerConfig"):
        assert kinds.count(kind) == 1, kinds
    broken = next(o for o in _objs(ON) if o["kind"] == "AlertmanagerConfig")
    broken["spec"]["route"]["groupByy"] = ["job_id"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, AMC_SCHEMA)


def test_deployment_is_locked_down_probed_and_speaks_stormotel_serve() -> None:
    from stormotel.analyzers.serve.options import build_parser, options_from_args

    objs = _objs(ON)
    dep = next(o for o in objs if o["kind"] == "Deployment")
    cron = next(o for o in objs if o["kind"] == "CronJob")
    pod = dep["spec"]["template"]["spec"]
    cron_pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert pod["securityContext"] == cron_pod["securityContext"]
    assert c["securityContext"] == cron_pod["containers"][0]["securityContext"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"
    out = next(v for v in pod["volumes"] if v["name"] == "out")
    assert out["persistentVolumeClaim"]["claimName"] == "so-stormotel-receiver"
    args = c["args"]
    assert args[0] == "serve"
    opts = options_from_args(build_parser().parse_args(args[1:]))
    assert opts.base.job.tsdb.prometheus == ("http://prometheus-operated.monitoring.svc:9090",)
    assert opts.base.job.sinks.grafana_url == "https://grafana.example"
    assert opts.base.job.sinks.remote_write == ("http://prom/api/v1/write",)
    assert str(opts.token_file).startswith("/var/run/secrets/stormotel/webhook/")
    assert opts.port == 9810 and str(opts.out) == "/var/lib/stormotel"
    svc = next(o for o in objs if o["kind"] == "Service")
    assert svc["spec"]["ports"][0]["port"] == 9810


def test_alerts_link_the_receiver_and_alertmanager_routes_to_it() -> None:
    objs = _objs(ON)
    rule = next(o for o in objs if o["kind"] == "PrometheusRule")
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    base = "http://so-stormotel-receiver.monitoring.svc:9810"
    assert alerts and all(a["annotations"]["report_url"] ==
                          "{{ if $labels.job_id }}" + base + "/jobs/{{ $labels.job_id | "
                          "urlquery }}/{{ end }}" for a in alerts)
    assert all(a["annotations"]["runbook_url"] for a in alerts)
    amc = next(o for o in objs if o["kind"] == "AlertmanagerConfig")
    hook = amc["spec"]["receivers"][0]["webhookConfigs"][0]
    assert hook["url"] == base + "/alertmanager" and hook["sendResolved"] is True
    assert hook["httpConfig"]["authorization"]["credentials"] == {"name": "am-token",
                                                                  "key": "token"}
    assert amc["spec"]["route"]["groupBy"] == ["job_id"]
    public = {**ON, "receiver": {**ON["receiver"], "publicUrl": "https://so.example.org/"}}
    rule = next(o for o in _objs(public) if o["kind"] == "PrometheusRule")
    first = next(r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r)
    assert "https://so.example.org/jobs/" in first["annotations"]["report_url"]


def test_values_schema_rejects_receiver_mistakes() -> None:
    with helm.Chart.load(str(th.CHART)) as chart:
        chart.validate_schema(ON)
        with pytest.raises(helm.HelmValuesError, match="/receiver/publicUrl"):
            chart.validate_schema({"receiver": {"publicUrl": "so.example.org"}})
        with pytest.raises(helm.HelmValuesError, match="/receiver/minInterval"):
            chart.validate_schema({"receiver": {"minInterval": "often"}})
        with pytest.raises(helm.HelmValuesError, match=r"receivr|additional"):
            chart.validate_schema({"receivr": {"enabled": True}})
