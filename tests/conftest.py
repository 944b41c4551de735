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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
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
