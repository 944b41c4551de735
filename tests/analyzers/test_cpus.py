"""The decode pool follows the cores a pod may use (cgroup quota, affinity), not the node's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from stormotel.analyzers.cpus import cgroup_quota, usable_cpus


def _v2(root: Path, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cpu.max").write_text(text + "\n")
    return root


def test_a_v2_quota_of_two_cores_caps_the_count(tmp_path: Path) -> None:
    root = _v2(tmp_path / "cg", "200000 100000")
    assert cgroup_quota(root) == 2.0
    assert usable_cpus(root) == min(2, len(os.sched_getaffinity(0)))


def test_a_fractional_quota_rounds_up_and_never_reaches_zero(tmp_path: Path) -> None:
    assert usable_cpus(_v2(tmp_path / "a", "150000 100000")) == min(2, len(os.sched_getaffinity(0)))
    assert usable_cpus(_v2(tmp_path / "b", "1000 100000")) == 1


def test_no_quota_means_the_affinity_mask(tmp_path: Path) -> None:
    assert cgroup_quota(_v2(tmp_path / "cg", "max 100000")) is None
    assert usable_cpus(tmp_path / "cg") == len(os.sched_getaffinity(0))
    assert usable_cpus(tmp_path / "absent") == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("text", ["", "garbage", "-5 100000", "100000 0", "a b"])
def test_an_unreadable_quota_is_ignored(tmp_path: Path, text: str) -> None:
    assert cgroup_quota(_v2(tmp_path / "cg", text)) is None


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    (cpu / "cpu.cfs_quota_us").write_text("300000\n")
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_quota(tmp_path) == 3.0
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_quota(tmp_path) is None


def test_the_load_pool_uses_the_usable_count(monkeypatch: pytest.MonkeyPatch) -> None:
    from stormotel.analyzers.sources import loader

    monkeypatch.delenv("STORMOTEL_LOAD_WORKERS", raising=False)
    monkeypatch.setattr("stormotel.analyzers.cpus.usable_cpus", lambda *a, **k: 3)
    files = [(Path(f"f{i}"), False) for i in range(20)]
    assert loader._workers(files, loader.PARALLEL_MIN_BYTES * 10) == 3
