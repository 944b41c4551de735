"""Rules and dashboards for each of Prometheus 3's OTLP name translations
(``otlp.translation_strategy``), generated with ``stormotel dashboards --name-translation``.

The names a strategy gives are spelled out here from prometheus/otlptranslator v1.0.0
(metric_namer.go: ``buildCompliantMetricName`` / ``buildMetricName``; strategy.go) and
Prometheus v3.0.0's in-tree ``normalize_name.go`` (the same names for the tracker's metrics),
independently of :func:`stormotel.schema.otlp_prom_name`.

No Prometheus 3 can be installed here. Prometheus 2.42 stands in: its promtool parses and
evaluates rules whose UTF-8 names are written as ``{__name__="…"}`` (the spelling the generator
uses, which Prometheus 3 reads the same), and its remote-write receiver stores and queries
dotted names, so the live test below runs every generated expression of every strategy against
series named the way Prometheus 3 would store them.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from stormotel.analyzers.sinks.findings_series import SeriesPoint
from stormotel.analyzers.sinks.remote_write import HEADERS, encode
from stormotel.dashboards import build, promql
from stormotel.dashboards.settings import Settings

from stormotel import schema
from tests import servers
from tests.dashboards import exprs, promtool_suites
from tests.servers import loopback_client

DEFAULT = schema.DEFAULT_NAME_TRANSLATION
STRATEGIES = schema.NAME_TRANSLATIONS

#: (metric, UnderscoreEscapingWithSuffixes, UnderscoreEscapingWithoutSuffixes,
#:  NoUTF8EscapingWithSuffixes, NoTranslation), read off the Go source by hand.
SPELLED_OUT = [
    (schema.DEVICE_USED, "hw_gpu_memory_usage_bytes", "hw_gpu_memory_usage",
     "hw.gpu.memory.usage_bytes", "hw.gpu.memory.usage"),
    (schema.GAP, "stormotel_memory_gap_bytes", "stormotel_memory_gap",
     "stormotel.memory.gap_bytes", "stormotel.memory.gap"),
    (schema.ALLOC_INACTIVE_SPLIT, "stormotel_allocator_inactive_split_bytes",
     "stormotel_allocator_inactive_split", "stormotel.allocator.inactive_split_bytes",
     "stormotel.allocator.inactive_split"),
    (schema.OOMS, "stormotel_oom_total", "stormotel_oom", "stormotel.oom_total",
     "stormotel.oom"),
    (schema.SAMPLES_DROPPED, "stormotel_tracker_samples_dropped_total",
     "stormotel_tracker_samples_dropped", "stormotel.tracker.samples.dropped_total",
     "stormotel.tracker.samples.dropped"),
    (schema.EDGE_TIMESTAMP, "stormotel_edge_timestamp_seconds", "stormotel_edge_timestamp",
     "stormotel.edge.timestamp_seconds", "stormotel.edge.timestamp"),
    (schema.STEP, "stormotel_training_step", "stormotel_training_step",
     "stormotel.training.step", "stormotel.training.step"),
    (schema.RANK_INFO, "stormotel_rank_info", "stormotel_rank_info", "stormotel.rank.info",
     "stormotel.rank.info"),
    # unit "1" gauges gain _ratio with suffixes (nothing generated reads them)
    (schema.STALLED, "stormotel_stalled_ratio", "stormotel_stalled", "stormotel.stalled_ratio",
     "stormotel.stalled"),
]
ORDER = (schema.OTLP_UNDERSCORE_WITH_SUFFIXES, schema.OTLP_UNDERSCORE_NO_SUFFIXES,
         schema.OTLP_UTF8_WITH_SUFFIXES, schema.OTLP_NO_TRANSLATION)


@pytest.mark.parametrize("row", SPELLED_OUT, ids=lambda r: r[0].name)
def test_stored_names_are_the_ones_prometheus_3_gives(row: tuple[Any, ...]) -> None:
    metric, *names = row
    for strategy, expected in zip(ORDER, names, strict=True):
        assert schema.otlp_prom_name(metric.name, metric.unit, metric.kind,
                                     strategy) == expected, strategy
        if strategy != DEFAULT or metric.unit != "1":  # the default keeps the exporter's name
            assert schema.stored_name(metric, strategy) == expected, strategy


def test_dotted_names_are_selected_by_an_equality_matcher() -> None:
    assert promql.series("stormotel.memory.gap", 'job_id=~"x"') == \
        '{__name__="stormotel.memory.gap", job_id=~"x"}'
    assert promql.series("stormotel.memory.gap") == '{__name__="stormotel.memory.gap"}'
    assert promql.series("stormotel_memory_gap_bytes", 'rank="1"') == \
        'stormotel_memory_gap_bytes{rank="1"}'
    with pytest.raises(ValueError, match="unknown name translation"):
        Settings(name_translation="UnderscoreEscaping")


def _generate(strategy: str, root: Path) -> Path:
    files = build.generate(Settings(name_translation=strategy))
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


_NAME_EQ = re.compile(r'__name__="([^"]+)"')
_BARE = re.compile(r"(?<![\w.:\"])([a-zA-Z_:][a-zA-Z0-9_:]*)(?=\{|\[| offset|\)|$| )")


def _tracker_names(text: str) -> set[str]:
    """Every tracker series name selected in ``text`` (any strategy's spelling)."""
    known = {n for m in (*schema.ALL_METRICS, schema.RANK_INFO) for s in STRATEGIES
             for base in [schema.otlp_prom_name(m.name, m.unit, m.kind, s), m.prom]
             for n in (base, f"{base}_sum", f"{base}_count", f"{base}_bucket")}
    found = set(_NAME_EQ.findall(text)) | set(_BARE.findall(text))
    return found & known


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_generated_files_select_only_that_strategys_names(strategy: str,
                                                          tmp_path: Path) -> None:
    root = _generate(strategy, tmp_path)
    allowed = {n for m in (*schema.ALL_METRICS, schema.RANK_INFO)
               for base in [schema.stored_name(m, strategy)]
               for n in (base, f"{base}_sum", f"{base}_count", f"{base}_bucket")}
    texts = {p.name: p.read_text() for p in (root / "rules" / "stormotel-rules.yml",
                                              root / "stormotel-overview.json",
                                              root / "stormotel-rank.json")}
    for name, text in texts.items():
        exprs_only = "\n".join(_exprs_of(name, text))
        used = _tracker_names(exprs_only)
        assert used, name
        assert used <= allowed, (name, sorted(used - allowed))
    if strategy in (schema.OTLP_UTF8_WITH_SUFFIXES, schema.OTLP_NO_TRANSLATION):
        assert '{__name__="hw.gpu.memory.usage' in texts["stormotel-rules.yml"]


def _exprs_of(name: str, text: str) -> list[str]:
    if name.endswith(".json"):
        return [e.expr for e in exprs.dashboard_exprs(json.loads(text), name)]
    data = yaml.safe_load(text)
    return [r["expr"] for g in data["groups"] for r in g["rules"]]


_NAME_MATCHER = re.compile(r'\{__name__="([^"]+)"(, |\})')
_DOTTED = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.\w+)+(?![\w.])")


def _renamed(data: Any, strategy: str) -> Any:
    """``data`` (a parsed rules or promtool test file of ``strategy``) with every tracker series
    name written the default strategy's way: ``{__name__="n", a="b"}`` becomes ``N{a="b"}``
    and ``{__name__="n"}`` becomes ``N``, and a name in prose becomes ``N``."""
    to_default = {schema.stored_name(m, strategy) + suffix:
                  schema.stored_name(m, DEFAULT) + suffix
                  for m in (*schema.ALL_METRICS, schema.RANK_INFO)
                  for suffix in ("", "_sum", "_count", "_bucket")}
    assert len(set(to_default.values())) == len(to_default)  # one name for one name

    def text(value: str) -> str:
        if "__name__" in value:
            value = _NAME_MATCHER.sub(lambda m: to_default.get(m.group(1), m.group(0))
                                      + ("{" if m.group(2) == ", " else ""), value)
        if "." in value:
            value = _DOTTED.sub(lambda m: to_default.get(m.group(0), m.group(0)), value)
        return value

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {walk(k): walk(v) for k, v in value.items()}
        return value

    return walk(data)


def _expects_something(group: dict[str, Any]) -> bool:
    """A group that expects an alert to fire or a query to return samples: only such a group
    can show that a selector finds the series it names (nothing found is silence too)."""
    return any(c.get("exp_alerts") for c in group.get("alert_rule_test", ())) or any(
        t.get("exp_samples") for t in group.get("promql_expr_test", ()))


@pytest.mark.slow  # promtool, a Go binary, on the whole rule set (minutes on a busy machine)
@pytest.mark.timeout(900)
@pytest.mark.parametrize("strategy", STRATEGIES[1:])  # the default: tests/dashboards/test_rules.py
def test_rules_of_each_strategy_pass_promtool(strategy: str, tmp_path: Path) -> None:
    """``promtool check rules`` for each strategy; the generated ``promtool test rules`` suite,
    with every input series named the way the strategy stores it (Prometheus 2.42's promtool),
    for ``NoTranslation``, the strategy furthest from the default on both axes (dotted names in
    ``{__name__="…"}`` and no unit suffixes). The other two strategies are one axis each of the
    same rewrite, and the live test below evaluates every one of their expressions against
    series named their way.

    NoTranslation's rules and tests are the default's with every tracker name renamed one to
    one (checked here, on the parsed files), and promtool's outcome does not depend on what a
    series is called, so each group's outcome is the default's, which
    tests/dashboards/test_rules.py runs whole. promtool runs every check here that expects
    something to fire or return (each alert firing at each severity: a renamed selector that
    finds nothing fails there), each group's against the rules those checks see
    (promtool_suites.write_expecting); a check that only expects silence (the healthy control,
    a third of the suite's promtool time, and the quiet checks beside firing ones) cannot tell
    a found series from a missing one, and its outcome is the default's by the renaming."""
    promtool = servers.require_binary("promtool")
    root = _generate(strategy, tmp_path)
    rules = root / "rules"
    check = subprocess.run([promtool, "check", "rules", "stormotel-rules.yml"], cwd=rules,
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    if strategy != schema.OTLP_NO_TRANSLATION:
        return
    suite = rules / "tests" / "stormotel-rules.test.yml"
    default = build.generate(Settings())
    for path, generated in ((rules / "stormotel-rules.yml", Path("rules/stormotel-rules.yml")),
                            (suite, Path("rules/tests/stormotel-rules.test.yml"))):
        ours = promtool_suites.load(path)
        assert _renamed(ours, strategy) == yaml.load(default[generated],
                                                     Loader=promtool_suites.LOADER), path
        assert _renamed(ours, strategy) != ours  # the strategy's names are in it
    groups = promtool_suites.load(suite)["tests"]
    keep = [i for i, g in enumerate(groups) if _expects_something(g)]
    fired = {(c["alertname"], a["exp_labels"]["severity"]) for i in keep
             for c in groups[i].get("alert_rule_test", ()) for a in c["exp_alerts"]}
    shipped = {(str(r["alert"]), r["labels"]["severity"])
               for g in promtool_suites.load(rules / "stormotel-rules.yml")["groups"]
               for r in g["rules"] if "alert" in r}
    assert fired == shipped, shipped - fired
    runs = promtool_suites.write_expecting(suite, rules / "stormotel-rules.yml")
    assert len(runs) == len(keep)
    for one in runs:
        test = subprocess.run([promtool, "test", "rules", one.name], cwd=one.parent,
                              capture_output=True, text=True, timeout=850)
        assert test.returncode == 0, test.stdout[-3000:] + test.stderr[-3000:]
        assert "SUCCESS" in test.stdout
    inputs = "".join(one.read_text() for one in runs)
    assert '{__name__="hw.gpu.memory.usage", ' in inputs


# --- live: every generated expression against series named each way ---------------------------
GiB = 2**30
STEP_S = 15
SPAN_S = 30 * 60


def _value(metric: schema.Metric, rank: int, i: int, now_s: float) -> float:
    """Plausible values: a device of 80 GiB, memory rising on rank 1, counters counting."""
    rise = (2 if rank == 1 else 0.2) * GiB * i / (SPAN_S / STEP_S)
    if metric in (schema.DEVICE_LIMIT,):
        return 80 * GiB
    if metric is schema.DEVICE_FREE:
        return 70 * GiB - rise
    if metric.kind is schema.Kind.COUNTER:
        return 10.0 * i
    if metric.unit == schema.BYTES:
        return 8 * GiB + rise
    if metric in (schema.EDGE_TIMESTAMP, schema.TRACKER_START):
        return now_s - SPAN_S
    if metric is schema.TRACKER_STOP:
        return now_s - 2 * SPAN_S
    if metric is schema.STEP:
        return float(i)
    if metric is schema.SAMPLING_INTERVAL:
        return 0.1
    return 0.0 if metric in (schema.STALLED, schema.TRACKER_STOP_REPORTED) else 1.0


def _points(strategy: str, job: str, now_ms: int) -> list[SeriesPoint]:
    out: list[SeriesPoint] = []
    n = SPAN_S // STEP_S
    for rank in (0, 1):
        base = {schema.ATTR_JOB_ID: job, schema.ATTR_RANK: str(rank),
                schema.ATTR_LOCAL_RANK: str(rank), schema.ATTR_WORLD_SIZE: "2",
                schema.ATTR_HOST: "node-a", schema.ATTR_GPU: str(rank)}
        for metric in (*schema.ALL_METRICS, schema.RANK_INFO):
            name = schema.stored_name(metric, strategy)
            labels = dict(base)
            if metric is schema.RANK_INFO:
                labels.update({schema.ATTR_GPU_UUID: f"GPU-{rank}", schema.ATTR_POD: f"p{rank}"})
            if metric in (schema.EDGE_TIMESTAMP, schema.EDGE_SIZE, schema.EDGE_GAP):
                labels[schema.ATTR_EDGE] = schema.EDGE_FIRST_RISE
            if metric is schema.SAMPLES_DROPPED:
                labels[schema.ATTR_REASON] = schema.REASON_OVERRUN
            for i in range(n + 1):
                t = now_ms - (n - i) * STEP_S * 1000
                v = _value(metric, rank, i, now_ms / 1000)
                if metric.kind is schema.Kind.HISTOGRAM:
                    out += [SeriesPoint(f"{name}_bucket", {**labels, "le": "+Inf"}, 10.0 * i, t),
                            SeriesPoint(f"{name}_bucket", {**labels, "le": "0.01"}, 9.0 * i, t),
                            SeriesPoint(f"{name}_sum", labels, 0.001 * i, t),
                            SeriesPoint(f"{name}_count", labels, 10.0 * i, t)]
                else:
                    out.append(SeriesPoint(name, labels, v, t))
    return out


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Prometheus 2.42 evaluating every strategy's rules file over one job per strategy."""
    root = tmp_path_factory.mktemp("names")
    rule_files = []
    for strategy in STRATEGIES:
        _generate(strategy, root / strategy)
        rule_files.append(root / strategy / "rules" / "stormotel-rules.yml")
    with servers.prometheus(root / "prom", rule_files=rule_files) as prom:
        now_ms = int(time.time() * 1000)
        for strategy in STRATEGIES:
            body = encode(_points(strategy, f"p3-{strategy}", now_ms))
            r = loopback_client().post(f"{prom.url}/api/v1/write", content=body, headers=HEADERS,
                                       timeout=30)
            assert r.status_code == 204, r.text
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # every strategy's rules have evaluated
            got = {s["metric"].get(schema.ATTR_JOB_ID) for s in
                   servers.query(prom, schema.REC_DEVICE_USED_RATIO)}
            if got >= {f"p3-{s}" for s in STRATEGIES}:
                break
            time.sleep(1)
        # Every query is asked at this one instant, so a slow machine cannot age the data out
        # of a rate window between the reference and a strategy (or between two panels).
        yield root, prom, time.time()


def _returning(prom: servers.Server, found: list[exprs.Expr], job: str,
               at: float) -> set[str]:
    variables = {"job_id": job, "rank": "0|1", "host": ".*", "__rate_interval": "5m",
                 "__interval": "15s", "__range": "30m"}
    out = set()
    for e in found:
        promql_text = exprs.to_promql(e.expr, variables)
        # one client: httpx.get builds one, and a TLS context, per call (36 s of CPU here)
        body = servers.loopback_client().get(f"{prom.url}/api/v1/query", timeout=10, params={
            "query": promql_text, "time": at}).json()
        assert body["status"] == "success", (e.where, body.get("error"), promql_text)
        if any(s["metric"].get(schema.ATTR_JOB_ID) == job or "job_id" not in s["metric"]
               for s in body["data"]["result"]):
            out.add(e.where)
    return out


def _found(root: Path, strategy: str) -> list[exprs.Expr]:
    out: list[exprs.Expr] = []
    for path in sorted((root / strategy).glob("*.json")):
        out += exprs.dashboard_exprs(json.loads(path.read_text()), path.name)
    out += exprs.rule_exprs(root / strategy / "rules" / "stormotel-rules.yml")
    return [e for e in out
            if "DCGM_FI_DEV_" not in e.expr and "analyzer" not in e.expr]


@pytest.mark.servers
def test_every_strategys_expressions_find_their_series(stand_in: Any) -> None:
    """Every dashboard query, variable, recording rule and alert signal of a strategy returns
    series on data named that way exactly where the default's do on default-named data; and
    the default files on NoTranslation data miss the tracker's series (the test can fail)."""
    root, prom, at = stand_in
    reference = _returning(prom, _found(root, DEFAULT), f"p3-{DEFAULT}", at)
    assert len(reference) > 40, sorted(reference)
    for strategy in STRATEGIES[1:]:
        got = _returning(prom, _found(root, strategy), f"p3-{strategy}", at)
        assert got == reference, (strategy, sorted(reference ^ got))
        ratio = servers.loopback_client().get(f"{prom.url}/api/v1/query", timeout=10, params={
            "query": f'{schema.REC_DEVICE_USED_RATIO}{{job_id="p3-{strategy}"}}', "time": at,
        }).json()["data"]["result"]
        assert len(ratio) == 2 and 0 < float(ratio[0]["value"][1]) < 1, (strategy, ratio)
    wrong = _returning(prom, _found(root, DEFAULT), f"p3-{schema.OTLP_NO_TRANSLATION}", at)
    direct = [e.where for e in _found(root, DEFAULT)
              if re.search(r"\b(hw_gpu_memory_usage_bytes|stormotel_memory_gap_bytes)\b", e.expr)
              and "stormotel:" not in e.expr]
    assert direct and not set(direct) & wrong, sorted(set(direct) & wrong)
