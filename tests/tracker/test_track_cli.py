"""``stormotel track`` at its user boundary: a subprocess, its files, its exit codes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stormotel import environment, exitcodes, schema
from stormotel.track_cli import build_parser
from tests.cli import HANG_GUARD_S, run_stormotel, run_stormotel_forked
from tests.tracker.otlp_util import (
    TraceRequest,
    archive_lines,
    metrics_files,
    metrics_requests,
    parse_lines,
    points,
    samples_archived,
    spans,
)

CMD = [sys.executable, "-m", "stormotel", "track"]


def run(args: list[str], timeout: float = HANG_GUARD_S) -> subprocess.CompletedProcess[str]:
    return run_stormotel("track", *args, timeout=timeout, cwd=None)


def test_track_simulated_for_a_duration(tmp_path: Path) -> None:
    out = run(["--sampler", "simulated", "--duration", "1", "--interval", "0.05",
               "--archive", str(tmp_path), "--job-id", "cli", "--rank", "1", "--world-size", "2",
               "--fault", "rank=1:spike@t=0.2s,delta=1GiB", "--warning-percent", "20",
               "--estimate", "12GiB"])
    assert out.returncode == 0, out.stderr
    assert "job cli rank 1/2 simulated" in out.stderr and "flushed" in out.stderr
    metrics = metrics_requests(tmp_path / "cli", 1)  # the compact default: every sample kept
    assert samples_archived(metrics) >= 10
    estimates = {p.as_int for _r, name, p in points(metrics) if name == schema.ESTIMATE.name}
    assert estimates == {12 * 2**30}
    names = {s.name for _r, s in spans(parse_lines(tmp_path / "cli" / "rank-1.traces.jsonl.zst",
                                                   TraceRequest))}
    assert {"stormotel.session", "stormotel.edge"} <= names


@pytest.mark.parametrize("fmt", [schema.ARCHIVE_FORMAT_LINES, schema.ARCHIVE_FORMAT_COMPACT])
def test_archive_interval_writes_fewer_lines(tmp_path: Path, fmt: str) -> None:
    """``lines`` thins to one line per interval; ``compact`` batches per interval and still
    keeps every sample."""
    out = run(["--sampler", "simulated", "--duration", "2", "--interval", "0.05",
               "--archive-interval", "0.25", "--archive", str(tmp_path), "--job-id", "thin",
               "--archive-format", fmt])
    assert out.returncode == 0, out.stderr
    files = metrics_files(tmp_path / "thin", 0)
    lines = [line for f in files for line in archive_lines(f)]
    # 2 s in 0.25 s windows: ~8 lines (+ the final partial window); at least 3 even when a
    # starved writer merges windows (1 s runs left 2 at load 20), never one per sample
    assert 3 <= len(lines) <= 10
    archived = samples_archived(metrics_requests(tmp_path / "thin", 0))
    taken = [int(n) for n in re.findall(r"flushed (\d+) samples", out.stderr)]
    assert taken and taken[-1] > len(lines), out.stderr
    if fmt == schema.ARCHIVE_FORMAT_COMPACT:
        assert archived == taken[-1]  # every sample the rank took, however many a load allowed
    else:
        assert archived == len(lines)


def test_ctrl_c_flushes_and_exits_cleanly(tmp_path: Path) -> None:
    proc = subprocess.Popen([*CMD, "--sampler", "simulated", "--interval", "0.05", "--archive",
                             str(tmp_path), "--job-id", "sig"], stderr=subprocess.PIPE,
                            text=True)
    # A wait for an event: its deadline only stops a hang (it was 30 s: a fresh interpreter
    # alone took 20-30 s to start on a busy two-core machine, before any batch).
    # The rank has no --duration: killed if the test fails before its Ctrl-C (a failed wait
    # left one running for 40 minutes).
    try:
        deadline = time.monotonic() + HANG_GUARD_S
        while time.monotonic() < deadline and not (
                (files := metrics_files(tmp_path / "sig", 0))[0].exists()
                and len(archive_lines(files[0])) >= 2):  # two 1 s batches written
            time.sleep(0.1)
        assert time.monotonic() < deadline, "no archive batches appeared"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == exitcodes.INTERRUPTED, err
    assert "interrupted, flushed" in err and "Traceback" not in err
    traces = parse_lines(tmp_path / "sig" / "rank-0.traces.jsonl.zst", TraceRequest)
    assert any(s.name == "stormotel.session" for _r, s in spans(traces))  # ended and exported


def test_duration_and_faults_count_from_an_epoch_file_written_after_the_start(
        tmp_path: Path) -> None:
    """``STORMOTEL_SIM_EPOCH_FILE``: the rank waits for t=0, which ``stormotel rehearse``
    writes once every rank has started. Its ``--duration`` (1 s) counts from that t=0 — past
    it on its own clock, the rank still runs — and the planted leak (t=0.5s) starts on it."""
    epoch_file = tmp_path / "sim_epoch_ns"
    proc = subprocess.Popen([*CMD, "--sampler", "simulated", "--interval", "0.05",
                             "--duration", "1", "--archive", str(tmp_path), "--job-id", "ep",
                             "--fault", "rank=0:leak@t=0.5s,rate=1GiB/s"],
                            env={**os.environ, environment.SIM_EPOCH_FILE: str(epoch_file)},
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + HANG_GUARD_S
        while time.monotonic() < deadline and not (
                (files := metrics_files(tmp_path / "ep", 0))[0].exists()
                and len(archive_lines(files[0])) >= 2):  # two 1 s batches: past --duration
            time.sleep(0.1)
        assert time.monotonic() < deadline, "no archive batches appeared"
        assert proc.poll() is None, "the rank ended before its t=0 was written"
        epoch_ns = time.time_ns()
        epoch_file.write_text(f"{epoch_ns}\n")
        _, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == exitcodes.OK, err
    used = sorted((p.time_unix_nano, p.as_int) for _r, name, p in
                  points(metrics_requests(tmp_path / "ep", 0)) if name == schema.DEVICE_USED.name)
    before = max(v for t, v in used if t < epoch_ns + 0.4e9)
    assert used[-1][0] >= epoch_ns + 0.9e9  # it ran until t=1s of the file's clock
    assert max(v for t, v in used if t >= epoch_ns + 0.9e9) - before >= 0.3 * 2**30


@pytest.mark.parametrize(("args", "message"), [
    (["--sampler", "simulated", "--rank", "4", "--world-size", "4"],
     "rank=4 must satisfy 0 <= rank < world_size (world_size=4)"),
    (["--sampler", "simulated", "--fault", "rank=1:melt@t=1s"], "unknown kind 'melt'"),
    (["--sampler", "cuda", "--fault", "rank=1:leak"], "--fault needs --sampler simulated"),
    (["--sampler", "cuda"], "no CUDA GPU is visible to PyTorch"),
    (["--sampler", "simulated", "--interval", "-1"], "argument --interval: '-1' must be > 0"),
    (["--sampler", "simulated", "--archive-interval", "0"],
     "argument --archive-interval: '0' must be > 0"),
    (["--sampler", "simulated", "--prometheus-port", "70000"], "must be in 0..65535"),
    (["--sampler", "simulated", "--device", "gpu-zero"], "device 'gpu-zero' is not a device"),
    (["--sampler", "simulated", "--estimate", "/nonexistent/estimate.json"],
     "cannot read the estimate JSON"),
    (["--sampler", "simulated", "--warning-percent", "96"],
     "memory_warning_percent=96 must be below memory_critical_percent=95"),
    (["--sampler", "simulated", "--otlp-endpoint", "collector 4318"],
     "otlp_endpoint='collector 4318' is not an OTLP endpoint URL"),
    (["--sampler", "simulated", "--job-id", ".."], "job_id='..' must be non-empty, not '.'"),
    (["--sampler", "simulated", "--rank", "0", "--local-rank", "2", "--world-size", "2"],
     "local_rank=2 must be < world_size"),
    (["--sampler", "simulated", "--device-memory", "4GiB"], "must be at least 8GiB"),
    (["--sampler", "simulated", "--device-memory", "lots"], "is not a byte quantity"),
    (["--sampler", "nvml", "--gpu-uuid", "GPU-x"], "--gpu-uuid needs --sampler simulated"),
    (["--sampler", "nvml", "--device-memory", "80GiB"],
     "--device-memory needs --sampler simulated"),
    (["--sampler", "simulated", "--prometheus-linger", "-1"], "must be >= 0"),
    (["--sampler", "simulated", "--fault", "rank=1:crash@t=1s,rate=2"], "crash has no parameter"),
])
def test_bad_input_is_one_clear_line(args: list[str], message: str) -> None:
    # forked (tests.prefork): a process of its own without ~0.6 s of imports; the first case
    # and test_launcher_env_error_names_the_variable are the exit-2 runs of fresh interpreters
    first = args == ["--sampler", "simulated", "--rank", "4", "--world-size", "4"]
    out = run(args) if first else run_stormotel_forked("track", *args, cwd=None)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("stormotel track: error:")


def test_launcher_env_error_names_the_variable(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "RANK": "x", "WORLD_SIZE": "2"}
    out = subprocess.run([*CMD, "--sampler", "simulated"], capture_output=True, text=True,
                         env=env, timeout=60, cwd=tmp_path)
    assert out.returncode == 2 and "RANK='x' is not an integer" in out.stderr


def test_help_explains_every_flag() -> None:
    text = build_parser().format_help()
    for action in build_parser()._actions:
        for flag in action.option_strings:
            assert flag in text
        assert action.help, f"{action.option_strings} has no help"
    out = run(["--help"])
    assert out.returncode == 0 and "--otlp-endpoint" in out.stdout


def _scrape(port: int) -> dict[str, float]:
    """One scrape of a local endpoint: series name → value (the one rank it serves)."""
    from tests.servers import loopback_client  # polled every 0.3 s: no TLS context per call

    out: dict[str, float] = {}
    for line in loopback_client().get(f"http://127.0.0.1:{port}/metrics",
                                      timeout=5).text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name.split("{", 1)[0]] = float(value)
    return out


def test_simulated_failures_play_as_a_training_job_would(tmp_path: Path) -> None:
    """The failures alerts must catch, played by ``stormotel track``: a stall (the step stops,
    samples go on), a crash (SIGKILL: no clean stop), and a chosen GPU UUID and device size."""
    import httpx

    from tests import servers

    port = servers.free_port()
    stall = subprocess.Popen([*CMD, "--sampler", "simulated", "--duration", "60", "-q",
                              "--interval", "0.1", "--prometheus-port", str(port),
                              "--prometheus-addr", "127.0.0.1", "--device-memory", "24GiB",
                              "--gpu-uuid", "GPU-rehearsal", "--fault", "stall@t=8s",
                              # neither last-scrape wait: after the clean stop, nor after the
                              # SIGTERM that ends this test (no scraper is left to wait for)
                              "--prometheus-linger", "0", "--linger-s", "0"],
                             stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 45  # a loaded machine may take long to import
        first: dict[str, float] = {}
        while time.monotonic() < deadline and schema.STEP.prom not in first:
            time.sleep(0.3)
            try:
                first = _scrape(port)
            except httpx.HTTPError:
                continue
        assert first[schema.DEVICE_LIMIT.prom] == 24 * 2**30
        # the stall starts 8 s into the simulated clock, which starts when the sampler is built
        # (at 3 s, a starved start-up had passed it before the first step: no step series)
        while _scrape(port)[schema.SAMPLES.prom] < 90:  # 9 s of samples: past the stall
            time.sleep(0.3)
        stalled = _scrape(port)
        time.sleep(2.5)
        later = _scrape(port)
        assert later[schema.STEP.prom] == stalled[schema.STEP.prom] >= 1, "the step must stop"
        assert later[schema.SAMPLES.prom] > stalled[schema.SAMPLES.prom], "samples go on"
        assert later[schema.TRACKER_START.prom] > 0
        assert schema.TRACKER_STOP.prom not in later
        assert 'gpu_uuid="GPU-rehearsal"' in httpx_text(port)
        stall.send_signal(signal.SIGTERM)
        assert stall.wait(timeout=20) == exitcodes.OK
    finally:
        if stall.poll() is None:
            stall.kill()
            stall.wait(timeout=20)

    crash = run(["--sampler", "simulated", "--duration", "20", "--archive", str(tmp_path),
                 "--job-id", "crash", "--fault", "crash@t=1s"])
    assert crash.returncode == -signal.SIGKILL


def httpx_text(port: int) -> str:
    from tests.servers import loopback_client

    return loopback_client().get(f"http://127.0.0.1:{port}/metrics", timeout=5).text


def test_a_sigterm_while_the_rank_leaves_keeps_its_own_exit_status(tmp_path: Path) -> None:
    """A rank that ran out of memory decides its status (FINDINGS); the launcher, seeing another
    rank end, sends SIGTERM to every rank left — one arrives while this one finalizes, when
    Python has put the default disposition back. The status must stay FINDINGS, not -15 (main
    lost this race every time before: CI run of 88e3565, tests/tracker/test_linger_live.py)."""
    proc = subprocess.Popen(
        [*CMD, "--sampler", "simulated", "--job-id", "leaving", "--rank", "0", "--world-size",
         "1", "--interval", "0.05", "-q", "--linger-s", "0", "--fault",
         "rank=0:oom@t=0.3s,exit=0.1s"], stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert proc.stderr is not None
        lines = []
        for line in proc.stderr:  # SIGTERMs start once the rank says it is leaving
            lines.append(line)
            if "ran out of memory and ended" in line:
                break
        while proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.002)
        assert proc.wait(timeout=30) == exitcodes.FINDINGS, lines
        assert lines and "ran out of memory and ended" in lines[-1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=20)
