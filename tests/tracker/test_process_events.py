"""Process events real launchers produce: forked children and SIGTERM, in real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from stormotel import schema
from tests.tracker.otlp_util import TraceRequest, parse_lines, spans

ROOT = Path(__file__).resolve().parents[2]


def _start(mode: str, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "tests.tracker.process_scenarios", mode,
                             str(out)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_forked_children_exit_with_the_prometheus_endpoint_on(tmp_path: Path) -> None:
    proc = _start("fork", tmp_path)
    try:
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0 and stdout.strip().endswith("OK"), (stdout, stderr[-2000:])
    # The children never tried to stop the parent's server (the bounded stop would hide a hang).
    assert "did not finish" not in stderr and "Traceback" not in stderr, stderr[-2000:]


def _span_names(out: Path) -> Counter[str]:
    traces = out / "archive" / "proc" / f"rank-0{schema.ARCHIVE_COMPACT_TRACES_SUFFIX}"
    return Counter(s.name for _r, s in spans(parse_lines(traces, TraceRequest)))


@pytest.mark.parametrize("mode", ["sigterm", "sigterm-chained"])
def test_sigterm_flushes_then_does_what_it_did_before(mode: str, tmp_path: Path) -> None:
    proc = _start(mode, tmp_path)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        proc.send_signal(signal.SIGTERM)
        _out, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    if mode == "sigterm":  # default disposition: the process dies of the signal, as before
        assert proc.returncode == -signal.SIGTERM, stderr[-2000:]
    else:  # the handler installed before the tracker ran after the flush
        assert proc.returncode == 7, stderr[-2000:]
        assert (tmp_path / "previous-handler-ran").read_text() == str(int(signal.SIGTERM))
    names = _span_names(tmp_path)
    # The session span (open until the signal) and the last steps/marks reached the archive.
    assert names[schema.SPAN_SESSION] == 1
    assert names[schema.SPAN_STEP] == 3 and names["phase:forward"] == 3
