"""Session fixtures: REAL Flight Recorder dumps from 4-rank gloo jobs, generated once."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.cpu_lock import cpu_heavy
from tests.stalls.helpers import run_job_group

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session", autouse=True)
def _one_reach_run_per_test_run(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Under pytest-xdist, the fresh sets' shared ``eval_stalls --reach`` run is computed by one
    worker and read by the others (tests/stalls/fresh_checks.py, ``_reach``)."""
    fresh_checks = sys.modules.get("tests.stalls.fresh_checks")  # imported by collection
    if fresh_checks is not None and os.environ.get("PYTEST_XDIST_WORKER"):
        fresh_checks.SHARED_DIR = tmp_path_factory.getbasetemp().parent


@pytest.fixture(scope="session")
def fr_dumps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``<root>/<scenario>/{pickle,json}/`` for every scenario of :mod:`tests.stalls.fr_jobs`.

    One subprocess imports torch (and what the first dump imports, tests/stalls/fork_parent.py)
    once and forks all 4-rank jobs concurrently (the hanging scenarios cost one gloo timeout):
    about 5 s of CPU, 10 s of wall on a busy 2-core machine.
    """
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("fr_dumps")
    started = time.monotonic()
    with cpu_heavy(tmp_path_factory):
        proc = run_job_group("tests.stalls.fr_jobs", root, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    print(f"generated Flight Recorder dumps in {time.monotonic() - started:.1f} s")
    return root
