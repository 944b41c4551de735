"""Shared fixtures, and the marks that keep ``make test-fast`` under a minute.

Real servers come from tests/servers.py and are stopped by PID. A test that uses a server
fixture is marked ``servers``; one that uses a fixture generating real multi-process torch
output is marked ``slow``; so a new test gets the right mark by using the fixture, without
remembering to add it. ``make test`` runs everything; ``make test-fast`` deselects both.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import servers

_REPO = Path(__file__).resolve().parents[1]
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


#: Seconds each long module took in a ``make test`` run (``pytest --durations=200`` on the
#: 2-core machine while other work ran, summed per module, rounded). ``make test`` passes
#: ``--no-loadscope-reorder``, so pytest-xdist hands out modules in the order collected here:
#: longest first, then the rest by test count (xdist's own default order). With xdist's order
#: alone (by test count) the one-test 2048-rank rules module came last and ran alone for five
#: minutes at the end of the run. Refresh the table when a module's time changes a lot.
LONG_MODULES: dict[str, int] = {
    "tests/dashboards/test_rules_live.py": 300,
    "tests/dashboards/test_rules.py": 160,
    "tests/production/test_production.py": 138,
    "tests/stalls/test_stack_snapshots.py": 127,
    "tests/dashboards/test_build.py": 106,
    "tests/dashboards/test_name_translation.py": 100,  # estimated: one promtool suite + a live run
    "tests/hostile/test_round_three.py": 105,
    "tests/docs/test_doc_blocks.py": 97,
    "tests/job/test_state_modes.py": 85,
    "tests/stalls/test_fr_scale.py": 80,
    "tests/serve/test_serve.py": 78,
    "tests/job/test_tracker_scraped.py": 77,
    "tests/serve/test_report_url_rules.py": 74,
    "tests/test_rehearse.py": 61,
    "tests/stalls/test_fr_real.py": 57,
    "tests/tracker/test_prometheus_scrape.py": 54,
    "tests/tracker/test_demo.py": 52,
    "tests/stalls/test_pattern_backtracking.py": 50,
    "tests/job/test_shards.py": 44,
    "tests/analyzers/test_oom_counter.py": 34,
    "tests/serve/test_serve_live.py": 33,
    "tests/estimate/test_cli.py": 32,
    "tests/stalls/test_user_hangs.py": 31,
    "tests/tracker/test_linger_live.py": 29,
    "tests/tracker/test_launchers.py": 28,
    "tests/job/test_sinks.py": 27,
}


def _longest_first(items: list[pytest.Item]) -> None:
    """Modules in ``LONG_MODULES`` order, then the others by test count; each module's own
    tests keep their order (fixtures scoped to a module are built once either way)."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.path.relative_to(_REPO).as_posix(), []).append(item)
    order = sorted(modules, key=lambda m: (-LONG_MODULES.get(m, 0), -len(modules[m])))
    items[:] = [item for m in order for item in modules[m]]


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
