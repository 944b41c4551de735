"""The exception boundary and the wrong-answer classes at the CLI: internal errors exit 70
(never 1), thresholds are validated, untrusted text cannot forge output lines, a state file
from the future cannot freeze the job, and ``track`` reports Ctrl-C as 130."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from stormotel.analyzers.options import ScheduleOptions
from stormotel.analyzers.scheduled import job
from stormotel.analyzers.scheduled.state import STATE_SCHEMA, StateFile
from stormotel.analyzers.scheduled.window import resolve_window

from stormotel import exitcodes
from tests.hostile.corpus import events, healthy_folder, write
from tests.hostile.harness import ROOT, assert_clean, run_bounded
from tests.hostile.hostile_server import hostile_server

FOUND = (exitcodes.OK, exitcodes.FINDINGS)

_CRASH = """
import sys
import stormotel.analyzers.analyze as a
def boom(*args, **kw):
    raise RuntimeError("simulated bug\\nVerdict: healthy")
a.analyze = boom
from stormotel.cli import main
sys.exit(main(sys.argv[1:]))
"""


def faulted(folder: Path) -> Path:
    healthy_folder(folder)
    write(folder / "rank2.json", events(2, 200, grow_at=100))
    return folder


def test_an_internal_error_exits_70_in_one_line(tmp_path):
    folder = healthy_folder(tmp_path / "job")
    run = run_bounded(python=["-c", _CRASH, "analyze", str(folder)])
    assert_clean(run, exitcodes.INTERNAL, message="RuntimeError")
    assert "--debug" in run.stderr and exitcodes.INTERNAL != exitcodes.FINDINGS
    assert "\nVerdict" not in run.stderr  # the message's newline is escaped


def test_debug_shows_the_traceback(tmp_path):
    folder = healthy_folder(tmp_path / "job")
    run = run_bounded(python=["-c", _CRASH, "--debug", "analyze", str(folder)])
    assert run.code == exitcodes.INTERNAL and "Traceback" in run.stderr


def test_faulted_archive_is_found_with_default_thresholds(tmp_path):
    run = run_bounded("analyze", str(faulted(tmp_path / "job")), "--format", "json", "-q")
    assert_clean(run, exitcodes.FINDINGS)
    assert run.json()["cross_rank"]["first_cause_suspects"][0]["rank"] == 2


@pytest.mark.parametrize("override", ["rise_fraction=nan", "rise_fraction=inf",
                                      "spike_z=-inf", "rise_fraction=2", "min_samples=1e400",
                                      "spike_z=1e300", "spike_z=0", "drift_min_growth_bytes=0",
                                      "sync_window_s=1e18"])
def test_thresholds_that_would_silence_a_rule_are_usage_errors(tmp_path, override):
    run = run_bounded("analyze", str(faulted(tmp_path / "job")), "--set", override)
    assert_clean(run, exitcodes.USAGE, message=override.split("=")[0])


FORGED = "x\x1b[2J\x1b[1;1H\nVerdict: healthy \u202e"


def test_job_id_with_escapes_cannot_forge_summary_lines(tmp_path):
    folder = tmp_path / "job"
    for r in range(4):
        write(folder / f"rank{r}.json", events(r, 200, job_id=FORGED,
                                               grow_at=100 if r == 2 else None))
    run = run_bounded("analyze", str(folder), "-q")
    assert_clean(run, exitcodes.FINDINGS)
    assert "\x1b" not in run.stdout and "\u202e" not in run.stdout
    verdicts = [ln for ln in run.stdout.splitlines() if ln.startswith("Verdict")]
    assert len(verdicts) == 1 and "healthy" not in verdicts[0]
    assert "\\x1b[2J" in run.stdout


def test_logfmt_summary_line_cannot_be_forged():
    with hostile_server() as url:
        run = run_bounded("analyze", "--prometheus", f"{url}/garbage", "--job-id",
                          'j\nstormotel-analyze outcome=ok exit=0 "', "--since", "10m")
    assert "Traceback" not in run.stderr
    summary = [ln for ln in run.stderr.splitlines() if ln.startswith(job.SUMMARY_PREFIX)]
    assert len(summary) == 1, run.stderr
    assert summary[0].endswith(f"exit={run.code}")


def test_state_file_end_in_the_future_does_not_freeze_the_job(tmp_path):
    now = time.time_ns()
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"schema": STATE_SCHEMA, "jobs": {"j": {
        "last_end_ns": now + 10 * 365 * 86400 * 10**9, "runs": {}}}}))
    schedule = ScheduleOptions(since=600.0, start=None, end=None, state_file=None, settle=0.0,
                               max_window=3600.0, timeout=300.0, scheduled=False,
                               job_selector=None)
    window = resolve_window(schedule, now, StateFile(state).read(), "j")
    assert window is not None and window.end_ns - window.start_ns == 600 * 10**9
    assert "lies in the future" in window.note
    with hostile_server() as url:
        run = run_bounded("analyze", "--prometheus", f"{url}/garbage", "--job-id", "j",
                          "--state-file", str(state))
    assert "no new time" not in run.stderr and "Traceback" not in run.stderr


def test_track_exits_130_on_ctrl_c(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormotel", "track", "--sampler", "simulated", "--interval",
         "0.05", "--archive", str(tmp_path), "--job-id", "sig", "--quiet"],
        cwd=ROOT, stderr=subprocess.PIPE, text=True)
    # the first archive file (compact by default: rank-0.00000.metrics.jsonl.zst) says the
    # tracker runs; waiting for the lines format's name waited out the whole deadline
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list((tmp_path / "sig").glob("rank-0.*metrics*")):
        time.sleep(0.1)
    assert list((tmp_path / "sig").glob("rank-0.*metrics*")), "the tracker never started"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == exitcodes.INTERRUPTED, err
    assert "Traceback" not in err


def test_unknown_world_size_flag_values_are_bounded(tmp_path):
    folder = tmp_path / "fr"
    folder.mkdir()
    (folder / "nccl_trace_rank_0").write_bytes(b"\x80\x04N.")
    run = run_bounded("analyze", "--flight-recorder", str(folder), "--world-size",
                      str(10**12))
    assert_clean(run, exitcodes.USAGE, message="world-size")
