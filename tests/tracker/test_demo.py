"""The demo job: 4 real gloo ranks, rank 2 planted with first_spike + leak, archive per rank."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stormotel import schema
from stormotel.demo import run_job
from tests.tracker.otlp_util import (
    TraceRequest,
    attrs,
    metrics_requests,
    parse_lines,
    samples_archived,
    spans,
)


@pytest.mark.slow
def test_demo_job_plants_a_first_cause_on_rank_2(tmp_path: Path) -> None:
    stale = tmp_path / "demo" / "rank-0.00007.metrics.jsonl.zst"  # a previous run's batch
    stale.parent.mkdir()
    stale.write_bytes(b"not this run")
    job_dir = run_job(tmp_path, world_size=4, duration_s=6.0, quiet=True)
    assert not stale.exists()  # a re-run starts the archive afresh, compact files included
    assert job_dir == tmp_path / "demo"
    first_rise: dict[int, int] = {}
    for rank in range(4):
        archived = samples_archived(metrics_requests(job_dir, rank))
        assert archived >= 20, archived  # ~60 at 10 Hz; fewer on an overloaded host
        traces = parse_lines(job_dir / f"rank-{rank}.traces.jsonl", TraceRequest)
        names = [s.name for _r, s in spans(traces)]
        assert names.count(schema.SPAN_STEP) == 24 and names.count("nccl:all_reduce") == 24
        for res, span in spans(traces):
            assert res[schema.ATTR_RANK] == str(rank)
            for event in span.events:
                if event.name == schema.EVENT_FIRST_RISE:
                    first_rise[rank] = event.time_unix_nano
                    assert attrs(event.attributes)[schema.EVENT_ATTR_DELTA] >= 2**30
    assert sorted(first_rise) == [0, 1, 2, 3], first_rise
    leads = {r: (t - first_rise[2]) / 1e9 for r, t in first_rise.items() if r != 2}
    # Planted lead 500 ms; a sample lands up to one interval (100 ms) after a rise, more when
    # the host starves the sampling thread (seen at load ~18 on 2 cores): allow two intervals
    # on rank 2's side and no upper bound on the followers'.
    assert min(leads.values()) > 0.2, leads


def test_demo_rejects_bad_arguments(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "stormotel", "demo", "--out", str(tmp_path),
                          "--fault", "rank=2:nope"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "unknown kind 'nope'" in out.stderr
    assert "Traceback" not in out.stderr
