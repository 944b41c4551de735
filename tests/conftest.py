"""Shared fixtures, and the marks that keep ``make test-fast`` under a minute.

Real servers come from tests/servers.py and are stopped by PID. A test that uses a server
fixture is marked ``servers``; one that uses a fixture generating real multi-process torch
output is marked ``slow``; so a new test gets the right mark by using the fixture, without
remembering to add it. ``make test`` runs everything; ``make test-fast`` deselects both.
"""

from __future__ import annotations

import importlib.abc
import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import servers

_REPO = Path(__file__).resolve().parents[1]

#: The Go binaries the suite runs (promtool evaluating rule files step by step, Prometheus
#: evaluating 2,048 ranks' rules, VictoriaMetrics) collect garbage at GOGC=400 rather than Go's
#: default 100: test_rules 62 -> 53 s of CPU, test_rules_live 50 -> 38 s (docs/benchmarks.md,
#: "The suite's own time, session 18"), promtool's resident memory 120 MB instead of 68. What
#: they compute is the same; set in the environment here, it reaches them through their
#: inherited environment on every worker. A GOGC already set is kept.
os.environ.setdefault("GOGC", "400")
#: Fixtures that start real Prometheus-family servers on loopback.
SERVER_FIXTURES = frozenset({"prometheus_server", "victoriametrics_server", "pushgateway_server"})
#: Fixtures that run real multi-process torch jobs or many torch subprocesses (tens of seconds
#: to minutes on a 2-core machine): Flight Recorder dumps (tests/stalls/conftest.py,
#: test_fr_real.py, test_fr_scale.py) and the estimator's CLI runs (tests/estimate/test_cli.py).
SLOW_FIXTURES = frozenset({"fr_dumps", "torch_runs", "scale", "runs", "stack_runs"})
#: Folders whose every test runs the CLI as a user would, in a memory-limited subprocess
#: (about a hundred interpreter start-ups): the hostile-input corpus; and the fuzz set
#: (hypothesis properties over every reader and writer, about 40 s).
SLOW_FOLDERS = ("hostile", "fuzz")
#: Modules where most tests start a fresh interpreter (a command at its boundary), wait out a
#: deliberately hanging endpoint, or import torch: together about 60 s of a 100 s fast run.
SLOW_MODULES = frozenset({
    "tests/analyzers/test_cli.py", "tests/tracker/test_track_cli.py",
    "tests/tracker/test_resilience.py", "tests/tracker/test_otel_env.py",
    "tests/stalls/test_bad_input.py", "tests/estimate/test_core.py",
    # a fresh interpreter per test (stormotel track / analyze as a user runs them)
    "tests/tracker/test_track_export_outcome.py", "tests/analyzers/test_first_hour_outcomes.py",
})


#: Seconds each module of 20 s or more took (wall, summed over its tests, setup and teardown
#: included) in session 20's run of ``make test`` from a fresh clone beside two CPU-bound
#: neighbours (three workers on 2 cores, ``STORMOTEL_SUITE_TIMES`` below; docs/benchmarks.md,
#: "The suite's own time, session 21"); test_rehearse (a 30 s test more) and the new
#: test_newcomer_hangs4 from session 21's, test_rehearse (two rehearsals, one with a rank
#: started 18 s late: ~174 s at load 9-34) from session 22's. ``make test`` passes
#: ``--no-loadscope-reorder``, so pytest-xdist hands out work in the order collected here:
#: longest first, then the rest by
#: test count (xdist's own default order). With xdist's order alone the one-test 2048-rank
#: rules module came last and ran alone for five minutes at the end of the run; with only the
#: longest dozen listed, 20-30 s modules of few tests (the alerts, DCGM and spinning-rank
#: modules) came last and the three workers ended 24 s apart. Every module of 20 s or more is
#: listed so that only short ones are left for the end. Refresh the table when a module's time
#: changes a lot; the figures only order the modules.
LONG_MODULES: dict[str, int] = {
    "tests/test_rehearse.py": 140,
    "tests/production/test_production.py": 130,
    "tests/docs/test_doc_blocks.py": 126,
    "tests/dashboards/test_rules_live.py": 113,
    "tests/dashboards/test_rules.py": 96,
    "tests/hostile/test_round_three.py": 75,
    "tests/stalls/test_newcomer_hangs4.py": 54,
    "tests/stalls/test_fr_scale.py": 51,
    "tests/tracker/test_track_cli.py": 51,
    "tests/job/test_shards.py": 49,
    "tests/stalls/test_fr_real.py": 49,
    "tests/job/test_tracker_scraped.py": 47,
    "tests/estimate/test_cli.py": 46,
    "tests/tracker/test_demo.py": 46,
    "tests/serve/test_serve.py": 43,
    "tests/stalls/test_pattern_backtracking.py": 42,
    "tests/dashboards/test_name_translation.py": 40,
    "tests/estimate/test_core.py": 40,
    "tests/hostile/test_files.py": 40,
    "tests/tracker/test_linger_live.py": 39,
    "tests/tracker/test_prometheus_scrape.py": 34,
    "tests/analyzers/test_plugin_points.py": 33,
    "tests/stalls/test_newcomer_hangs.py": 31,
    "tests/tracker/test_launchers.py": 30,
    "tests/tracker/test_stall_writers.py": 30,
    "tests/stalls/test_user_hangs.py": 29,
    "tests/analyzers/test_html_report.py": 28,
    "tests/examples/test_examples.py": 28,
    "tests/serve/test_serve_live.py": 27,
    "tests/hostile/test_servers.py": 26,
    "tests/job/test_vm_native.py": 26,
    "tests/stalls/test_stack_snapshots.py": 25,
    "tests/dashboards/test_alerts_live.py": 24,
    "tests/fuzz/test_file_readers.py": 24,
    "tests/hostile/test_dumps_logs.py": 24,
    "tests/stalls/test_newcomer_hangs3.py": 23,
    "tests/analyzers/test_oom_counter.py": 22,
    "tests/tracker/test_track_export_outcome.py": 22,
    "tests/job/test_dcgm_join.py": 21,
    "tests/analyzers/test_rise_batch.py": 20,
    "tests/stalls/test_fresh5.py": 20,
}


#: Modules whose tests share no fixture broader than a test and mostly wait (a tracked job
#: running its seconds of real time, a 31 s pause for new time, promtool on one rule set): each
#: test is its own unit of work, so a module's waits overlap on several workers instead of
#: queueing on one. Every other module stays whole on one worker (its module fixtures, a fleet
#: of jobs or a Prometheus, run once).
SPLIT_MODULES = frozenset({
    "tests/dashboards/test_rules.py",  # three promtool suites
    "tests/dashboards/test_build.py",  # a promtool suite, the CLI a dozen times
    "tests/serve/test_report_url_rules.py",  # a promtool suite
    "tests/test_rehearse.py",  # a 30 s rehearsal beside promtool and flag checks
    "tests/job/test_state_modes.py",  # a Prometheus and four CLI runs, a quick test
    "tests/stalls/test_pattern_backtracking.py",  # seconds of regex per test
})


def _longest_first(items: list[pytest.Item]) -> None:
    """Modules in ``LONG_MODULES`` order, then the others by test count; each module's own
    tests keep their order (fixtures scoped to a module are built once either way)."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.path.relative_to(_REPO).as_posix(), []).append(item)
    order = sorted(modules, key=lambda m: (-LONG_MODULES.get(m, 0), -len(modules[m])))
    items[:] = [item for m in order for item in modules[m]]


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, the controller rewrites the test modules' asserts once before the
    workers start, rather than every worker rewriting all of them (tests/rewrite_once.py)."""
    from tests.rewrite_once import rewrite_test_modules

    rewrite_test_modules(config, _REPO / "tests")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _longest_first(items)
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & SERVER_FIXTURES:
            item.add_marker(pytest.mark.servers)
        module = item.path.relative_to(_REPO).as_posix()
        if used & SLOW_FIXTURES or item.path.parent.name in SLOW_FOLDERS \
                or module in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


def _cpu_seconds() -> tuple[float, float]:
    """This process's CPU seconds, and its reaped children's (servers, torch jobs, CLI runs;
    the runs :mod:`tests.prefork` forked, which its server reaps, and that server's start)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    prefork = sys.modules.get("tests.prefork")  # runs forked by its server (not our children)
    forked = prefork.forked_cpu() if prefork is not None else 0.0
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime + forked


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With ``STORMOTEL_SUITE_TIMES=<dir>``, append each test's wall and CPU seconds (setup, call
    and teardown, so a module's fixtures count in its first and last test) to a JSON-lines file
    per worker there: the figures LONG_MODULES and docs/benchmarks.md ("The suite's own time")
    come from. CPU is the honest figure on a shared machine, wall is what a run waits."""
    out = os.environ.get("STORMOTEL_SUITE_TIMES")
    if not out:
        yield
        return
    wall0, (me0, kids0) = time.monotonic(), _cpu_seconds()
    yield
    wall, (me, kids) = time.monotonic() - wall0, _cpu_seconds()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    row = {"module": item.path.relative_to(_REPO).as_posix(), "test": item.nodeid,
           "worker": worker, "start": wall0, "wall": round(wall, 3),
           "cpu": round(me - me0, 3), "cpu_children": round(kids - kids0, 3)}
    Path(out).mkdir(parents=True, exist_ok=True)
    with open(Path(out) / f"{worker}.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: absent under -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` with :data:`SPLIT_MODULES` handed out test by test; the order is
    the collection's (longest first, :func:`_longest_first`)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SplitScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return nodeid if module in SPLIT_MODULES else super()._split_scope(nodeid)

    return SplitScheduling(config, log)


@pytest.fixture
def prometheus_server(tmp_path: Path) -> Iterator[servers.Server]:
    with servers.prometheus(tmp_path / "prometheus") as s:
        yield s


@pytest.fixture
def victoriametrics_server(tmp_path: Path) -> Iterator[servers.Server]:
    with servers.victoriametrics(tmp_path / "vm") as s:
        yield s


@pytest.fixture
def pushgateway_server(tmp_path: Path) -> Iterator[servers.Server]:
    with servers.pushgateway(tmp_path / "pushgateway") as s:
        yield s


class _InstalledNamesOnly(importlib.abc.MetaPathFinder):
    """The repository root is on ``sys.path`` in tests (pytest's rootdir, ``python -m tests…``),
    so ``import analyzers`` would work here and fail from a wheel, which installs only
    ``stormotel``: refuse the checkout's folder names, so such an import fails the tests."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname.partition(".")[0] in ("analyzers", "dashboards"):
            raise ModuleNotFoundError(f"import stormotel.{fullname}, not {fullname}: the wheel"
                                      " installs only the stormotel package", name=fullname)
        return None


sys.meta_path.insert(0, _InstalledNamesOnly())
