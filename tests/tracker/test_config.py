"""The tracker configured like an OTel component: typed frozen objects, the flat keyword form
kept for one release (with a warning naming the object), Stormlog's arguments untouched, and
every ``STORMOTEL_*`` variable named once (stormotel/environment.py) and documented."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import logging
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from stormotel import (
    ExportConfig,
    IdentityConfig,
    MemoryTracker,
    SamplingConfig,
    StallConfig,
    ThresholdConfig,
    environment,
    schema,
)
from stormotel.config import LEGACY_KEYWORDS, PARAMETER_OF

ROOT = Path(__file__).resolve().parents[2]

#: Every setting given once in the keyword form, and the same in objects.
KEYWORDS: dict[str, Any] = {
    "host": "node-a", "ring_size": 321, "peak_window": 12.0, "faults": "rank=0:leak@t=9s",
    "sampler_options": {"total_bytes": 8 * 2**30}, "archive_format": "lines",
    "archive_interval": 0.5, "otlp_endpoint": "http://127.0.0.1:9", "otlp_protocol": "grpc",
    "otlp_interval": 3.0, "otlp_timeout": 1.5, "prometheus_port": 0,
    "prometheus_addr": "127.0.0.1", "prometheus_linger": 4.0, "linger_after_event_s": 6.0,
    "dump_max_bytes": 2**20, "shutdown_timeout": 1.0, "handle_sigterm": False,
    "thresholds": {schema.THRESHOLD_WARNING: 70.0}, "hysteresis_percent": 3.0,
    "rise_bytes": 2**28, "warmup_samples": 7, "rise_rearm_s": 30.0, "estimate_bytes": 2**30,
    "stall_snapshots": False, "stall_multiple": 5.0, "stall_floor_s": 9.0,
}
OBJECTS: dict[str, Any] = {
    "identity": IdentityConfig(host="node-a"),
    "sampling": SamplingConfig(ring_size=321, peak_window_s=12.0, faults="rank=0:leak@t=9s",
                               sampler_options={"total_bytes": 8 * 2**30}),
    "export": ExportConfig(archive_format="lines", archive_interval_s=0.5,
                           otlp_endpoint="http://127.0.0.1:9", otlp_protocol="grpc",
                           otlp_interval_s=3.0, otlp_timeout_s=1.5, prometheus_port=0,
                           prometheus_addr="127.0.0.1", prometheus_linger_s=4.0,
                           linger_after_event_s=6.0, dump_max_bytes=2**20,
                           shutdown_timeout_s=1.0, handle_sigterm=False),
    "thresholds": ThresholdConfig(levels={schema.THRESHOLD_WARNING: 70.0},
                                  hysteresis_percent=3.0, rise_bytes=2**28, warmup_samples=7,
                                  rise_rearm_s=30.0, estimate_bytes=2**30),
    "stall": StallConfig(enabled=False, multiple=5.0, floor_s=9.0),
}
COMMON: dict[str, Any] = {"sampler": "simulated", "sampling_interval": 0.05, "job_id": "cfg",
                          "rank": 0, "world_size": 1, "env": {}}


def _what_it_does(t: MemoryTracker) -> dict[str, Any]:
    """What a configuration turns into inside the tracker (not just the objects it keeps)."""
    return {"identity": t.identity, "export": t.export_config, "ring": t.ring.capacity,
            "window": t.state.peak.window_s, "levels": dict(t.thresholds.thresholds),
            "hysteresis": t.thresholds.hysteresis_percent, "estimate": t.estimate_bytes,
            "rise": (t.first_rise.rise_bytes, t.first_rise.warmup_samples,
                     t.first_rise.rearm_samples),
            "stall": t.stall_config, "total": t.sampler.sample().device_total,
            "shutdown": t.shutdown_timeout, "linger": t.linger_after_event_s,
            "sigterm": t.handle_sigterm, "dump": t.dump_max_bytes}


def test_the_keyword_form_still_works_and_names_the_objects_to_use(tmp_path: Path) -> None:
    """Every old keyword, given once, lands where its object's field does: same tracker."""
    keywords = {**KEYWORDS, "archive_dir": tmp_path, "stall_dir": tmp_path / "stacks"}
    objects = {**OBJECTS,
               "export": dataclasses.replace(OBJECTS["export"], archive_dir=tmp_path),
               "stall": dataclasses.replace(OBJECTS["stall"], directory=tmp_path / "stacks")}
    assert set(keywords) == set(LEGACY_KEYWORDS)  # the test covers every keyword there is
    with pytest.warns(DeprecationWarning) as caught:
        old = MemoryTracker(**COMMON, **keywords)
    message = str(caught[0].message)
    for kind in PARAMETER_OF:
        assert f"{PARAMETER_OF[kind]}={kind.__name__}(" in message
    assert "next release" in message and "from stormotel import" in message
    assert caught[0].filename == __file__  # points at the caller's line, not at stormotel
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the object form warns about nothing
        new = MemoryTracker(**COMMON, **objects)
    assert _what_it_does(old) == _what_it_does(new)
    assert old.config == new.config


def test_each_legacy_keyword_maps_to_a_real_field() -> None:
    for keyword, (kind, attr) in LEGACY_KEYWORDS.items():
        assert attr in {f.name for f in dataclasses.fields(kind)}, keyword
        assert dataclasses.fields(kind) and kind.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_config_objects_are_frozen() -> None:
    export = ExportConfig(archive_dir="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        export.archive_dir = "y"  # type: ignore[misc]


def test_stormlog_arguments_do_not_warn(tmp_path: Path) -> None:
    """Stormlog's constructor, positional order included, is not deprecated: the identity
    keywords, oom_dump_dir and the extra options land in their objects' fields."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = MemoryTracker("cuda:0", 0.05, 777, env={environment.SAMPLER: "simulated"},
                          job_id="sl", rank=1, local_rank=1, world_size=2,
                          oom_dump_dir=tmp_path / "oom", oom_buffer_size=123,
                          oom_max_total_mb=1, enable_alerts=True,
                          enable_oom_flight_recorder=True,
                          export=ExportConfig(archive_dir=tmp_path))
    assert (t.identity.job_id, t.identity.rank, t.identity.world_size) == ("sl", 1, 2)
    assert t.sampling_interval == 0.05 and t.stormlog.max_events == 777
    assert t.ring.capacity == 123 and t.dump_max_bytes == 2**20
    assert t.oom_dump_dir == tmp_path / "oom"
    assert t.config.identity == IdentityConfig(job_id="sl", rank=1, local_rank=1, world_size=2)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"export": ExportConfig(archive_dir="a"), "archive_dir": "b"}, "both export="),
    ({"identity": IdentityConfig(job_id="a"), "job_id": "b"}, "both job_id="),
    ({"sampling": SamplingConfig(interval_s=0.2), "sampling_interval": 0.1},
     "both sampling_interval="),
    ({"export": ExportConfig(oom_dump_dir="a"), "oom_dump_dir": "b"}, "both oom_dump_dir="),
    ({"identity": ExportConfig()}, "identity= takes a IdentityConfig"),
    ({"thresholds": 80}, "neither a ThresholdConfig nor a mapping"),
    ({"no_such": 1}, "unexpected keyword argument 'no_such'"),
])
def test_contradictions_are_type_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(TypeError, match=re.escape(match)), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        MemoryTracker(sampler="simulated", env={}, **kwargs)


def test_the_environment_decides_what_the_code_leaves_open(tmp_path: Path) -> None:
    env = {environment.JOB_ID: "from-env", environment.SAMPLER: "simulated",
           environment.ARCHIVE_FORMAT: "lines", environment.LINGER_S: "7",
           environment.PROMETHEUS_LINGER: "3", environment.STALL_SNAPSHOTS: "off",
           environment.STALL_MULTIPLE: "4", environment.STALL_FLOOR_S: "11",
           "OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_PROMETHEUS_PORT": "0",
           "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1"}
    t = MemoryTracker(env=env, export=ExportConfig(archive_dir=tmp_path))
    assert t.identity.job_id == "from-env" and t.sampler.name == "simulated"
    cfg = t.export_config
    assert (cfg.archive_format, cfg.linger_after_event_s, cfg.prometheus_linger_s) == \
        ("lines", 7.0, 3.0)
    assert (cfg.prometheus_port, cfg.prometheus_addr) == (0, "127.0.0.1")
    assert t.shutdown_timeout == 2.0 + 3.0  # the stop's bound plus the last-scrape linger
    stall = t.stall_config
    assert (stall.enabled, stall.multiple, stall.floor_s) == (False, 4.0, 11.0)
    # ... and an argument given in code wins over the variable.
    t = MemoryTracker(env=env, identity=IdentityConfig(job_id="code"),
                      export=ExportConfig(archive_dir=tmp_path, archive_format="compact",
                                          linger_after_event_s=0, prometheus_linger_s=1,
                                          prometheus_addr="0.0.0.0"),
                      stall=StallConfig(enabled=True, multiple=2.0))
    assert t.identity.job_id == "code"
    assert (t.export_config.archive_format, t.export_config.linger_after_event_s,
            t.export_config.prometheus_linger_s, t.export_config.prometheus_addr) == \
        ("compact", 0.0, 1.0, "0.0.0.0")
    assert (t.stall_config.enabled, t.stall_config.multiple) == (True, 2.0)


@pytest.mark.parametrize("var", [environment.LINGER_S, environment.PROMETHEUS_LINGER,
                                 environment.ARCHIVE_FORMAT, environment.STALL_FLOOR_S,
                                 environment.STALL_MULTIPLE, environment.STALL_SNAPSHOTS])
def test_a_bad_variable_is_a_one_line_warning_naming_it_and_the_default(
        var: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A deployment's environment never stops the training: the default, and one line."""
    with caplog.at_level(logging.WARNING, logger="stormotel"):
        t = MemoryTracker(sampler="simulated", env={var: "soon"},
                          export=ExportConfig(archive_dir=tmp_path))
    lines = [r.getMessage() for r in caplog.records if var in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0] and "'soon'" in lines[0] \
        and "using the default" in lines[0]
    cfg = t.export_config
    assert (cfg.linger_after_event_s, cfg.prometheus_linger_s, cfg.archive_format) == (
        schema.LINGER_AFTER_EVENT_S_DEFAULT, 0.0, schema.ARCHIVE_FORMAT_DEFAULT)
    assert (t.stall_config.enabled, t.stall_config.floor_s, t.stall_config.multiple) == (
        True, 20.0, 20.0)


def test_an_unknown_sampler_variable_is_a_warning_then_cuda(
        caplog: pytest.LogCaptureFixture) -> None:
    from stormotel.samplers import SamplerUnavailable

    with caplog.at_level(logging.WARNING, logger="stormotel"), \
            contextlib.suppress(SamplerUnavailable):  # no GPU here: cuda's own one-line error
        MemoryTracker(env={environment.SAMPLER: "soon"}, export=ExportConfig(archive_dir="x"))
    assert f"{environment.SAMPLER}='soon' is not one of cuda, nvml, simulated" in caplog.text


def test_a_bad_argument_in_code_is_still_a_one_line_error() -> None:
    with pytest.raises(ValueError, match="linger_after_event_s"):
        MemoryTracker(sampler="simulated", env={},
                      export=ExportConfig(linger_after_event_s=1e12))


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """Every string literal of a module that is not a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def test_every_stormotel_variable_is_named_once_in_the_environment_module() -> None:
    """No module of the tracker package spells a STORMOTEL_* name but stormotel/environment.py
    (the analyzer's own limits live with the analyzer); each is documented in docs/tracker.md,
    and the docs name no variable the module does not know."""
    pattern = re.compile(r"\bSTORMOTEL_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_])")  # not STORMOTEL_STALL_*
    elsewhere = [f"{path.relative_to(ROOT)}:{line}: {text}"
                 for path in sorted((ROOT / "stormotel").rglob("*.py"))
                 if path.name != "environment.py" and "analyzers" not in path.parts
                 and "dashboards" not in path.parts
                 for line, text in _string_constants(path) if pattern.search(text)]
    assert not elsewhere, elsewhere
    defined = [v for k, v in vars(environment).items()
               if k.isupper() and isinstance(v, str) and v.startswith("STORMOTEL_")]
    assert len(defined) == len(set(defined)) == len(environment.VARIABLES)
    assert set(defined) == set(environment.VARIABLES)
    doc = (ROOT / "docs" / "tracker.md").read_text(encoding="utf-8")
    table = doc[doc.index("### Environment variables"):]
    table = table[:table.index("\n## ")]
    for name in defined:
        assert f"| `{name}` |" in table, name
    analyzer_side = {"STORMOTEL_MAX_BODY_BYTES", "STORMOTEL_MAX_FILE_BYTES",
                     "STORMOTEL_LOAD_WORKERS"}
    assert set(pattern.findall(doc)) - analyzer_side <= set(defined)
