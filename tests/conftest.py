"""Shared fixtures. Real servers come from tests/servers.py and are stopped by PID."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import servers


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
