"""The scheduled run (CronJob) against a server and a state file it must not trust: every value
read back is decoded by a typed decoder; a wrong shape is a counted skip or exit 2, never an
internal error (exit 70) on every run."""

from __future__ import annotations

import json

import pytest

from stormotel import exitcodes
from tests.hostile.harness import assert_clean, run_bounded
from tests.hostile.hostile_server import hostile_server


@pytest.fixture(scope="module")
def server():
    with hostile_server() as url:
        yield url


def scheduled(url: str, *extra: str):
    return run_bounded("analyze", "--prometheus", url, "--scheduled", "--since", "10m",
                       "--settle", "0s", "--http-retries", "0", *extra)


def test_discovery_entries_of_the_wrong_shape_are_skipped_and_counted(server, tmp_path):
    run = scheduled(f"{server}/sched", "--state-file", str(tmp_path / "state.json"))
    assert_clean(run, (exitcodes.OK, exitcodes.FINDINGS))
    assert "skipped 2 answer entries" in run.stderr
    assert "job_id=j" in run.stderr


def test_window_read_back_of_nan_inf_or_no_value_falls_back(server, tmp_path):
    # --scheduled with remote write and no state file: the window end is read back from the TSDB
    run = scheduled(f"{server}/sched", "--job-id", "j",
                    "--remote-write", f"{server}/sched/api/v1/write")
    assert_clean(run, (exitcodes.OK, exitcodes.FINDINGS))


@pytest.mark.parametrize("doc", [
    {"schema": "stormotel.analyzer-state/v1", "jobs": {"j": {"runs": [1, 2]}}},
    {"schema": "stormotel.analyzer-state/v1", "jobs": {"j": {"runs": {"ok": "3"}}}},
    {"schema": "stormotel.analyzer-state/v1", "jobs": {"j": {"last_end_ns": "17"}}},
    {"schema": "stormotel.analyzer-state/v1", "jobs": {"j": {"last_end_ns": 2**70}}},
    {"schema": "stormotel.analyzer-state/v1", "jobs": ["j"]},
], ids=["runs-list", "counter-string", "end-string", "end-2^70", "jobs-list"])
def test_state_file_of_the_wrong_shape_is_a_usage_error(server, tmp_path, doc):
    state = tmp_path / "state.json"
    state.write_text(json.dumps(doc))
    run = scheduled(f"{server}/sched", "--job-id", "j", "--state-file", str(state))
    assert_clean(run, exitcodes.USAGE, message="state file")
