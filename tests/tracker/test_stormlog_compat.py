"""Code written for Stormlog's MemoryTracker runs on stormotel's, and its exports are Stormlog v4.

The script is Stormlog's documented per-rank pattern (thresholds by Stormlog's names, an alert
callback, ``export_events(format="json"|"csv")``); the files it writes are read back by the
analyzer's Stormlog source — the same reader that parses files written by stormlog 0.4.3 itself
(tests/analyzers/data) — and compared field by field with a real Stormlog export.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from stormotel.analyzers.sources import load_paths

from stormotel import schema
from stormotel.tracker import MemoryTracker

ROOT = Path(__file__).resolve().parents[2]
REAL_STORMLOG = ROOT / "tests" / "analyzers" / "data" / "stormlog_events_rank0.json"
REAL_STORMLOG_CSV = ROOT / "tests" / "analyzers" / "data" / "stormlog_events_rank1.csv"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("stormlog")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for rank in range(2):
        proc = subprocess.run([sys.executable, "-m", "tests.tracker.stormlog_style_script",
                               str(out), str(rank), "2"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        (out / f"stdout-{rank}.txt").write_text(proc.stdout)
    return out


def test_script_runs_and_alert_callbacks_fire(exported: Path) -> None:
    line = (exported / "stdout-0.txt").read_text().strip().splitlines()[-1]
    _, kinds, count = line.split()
    assert "warning" in kinds.split(",") and int(count) >= 1  # 20 % line crossed (~28 % used)


def test_exports_have_stormlog_v4_layout(exported: Path) -> None:
    ours = json.loads((exported / "artifacts" / "events_rank0.json").read_text())
    real = json.loads(REAL_STORMLOG.read_text())
    assert set(ours[0]) == set(real[0])  # the same record keys as stormlog 0.4.3 writes
    assert {e["schema_version"] for e in ours} == {4}
    assert ours[0]["event_type"] == "start" and ours[-1]["event_type"] == "stop"
    times = [e["timestamp_ns"] for e in ours]
    assert times == sorted(times) and times[0] > 1_600_000_000 * 10**9
    assert {"sample", "peak", "warning"} <= {e["event_type"] for e in ours}
    assert {e["job_id"] for e in ours} == {"distributed-run-001"}
    with (exported / "artifacts" / "events_rank1.csv").open() as fh:
        header = next(csv.reader(fh))
    with REAL_STORMLOG_CSV.open() as fh:
        assert header == next(csv.reader(fh))


def test_analyzer_reads_the_exports_as_stormlog(exported: Path) -> None:
    for suffix in ("json", "csv"):
        tl = load_paths([str(exported / "artifacts" / f"events_rank{r}.{suffix}")
                         for r in range(2)])
        assert tl.rank_ids == [0, 1] and tl.job_id == "distributed-run-001"
        assert tl.world_size == 2
        used = tl.ranks[0].values["device_used"]
        assert len(used) >= 5 and (used > 2**30).all()


def test_threshold_names_and_errors(make_tracker: object) -> None:
    tracker = make_tracker()  # type: ignore[operator]
    tracker.set_threshold("memory_leak_threshold", 50 * 2**20)
    assert tracker.stormlog.thresholds[schema.STORMLOG_THRESHOLD_LEAK] == 50 * 2**20
    with pytest.raises(ValueError, match="unknown threshold"):
        tracker.set_threshold("memory_typo_percent", 10)
    with pytest.raises(ValueError, match="memory_warning_percent=96 must be below "
                                         "memory_critical_percent=95"):
        tracker.set_threshold(schema.THRESHOLD_WARNING, 96)
    assert tracker.thresholds.thresholds[schema.THRESHOLD_WARNING] == 80.0  # unchanged
    with pytest.raises(ValueError, match="must be below"):
        MemoryTracker(sampler="simulated", env={}, archive_dir="unused",
                      thresholds={schema.THRESHOLD_WARNING: 90, schema.THRESHOLD_CRITICAL: 85})
    with pytest.raises(ValueError, match="Unsupported format: xml"):
        tracker.export_events("x.xml", format="xml")


def test_stats_are_json_serialisable(make_tracker: object) -> None:
    tracker = make_tracker()  # type: ignore[operator]
    with tracker:
        pass
    stats = json.loads(json.dumps(tracker.stats))
    assert stats["samples"] >= 1 and f"{schema.DEST_ARCHIVE}/export_failed" in \
        stats["export_failures"]
