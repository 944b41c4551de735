"""Live stall sources at the boundaries users touch: ``stormotel analyze --nccl-ras`` against a
loopback stand-in of NCCL's RAS thread (tests/stalls/ras_standin.py), and ``--fr-pipe`` against
a real 2-rank gloo job whose ranks stand in for ProcessGroupNCCL's dump pipe
(tests/stalls/fr_pipe_standin.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from stormotel.analyzers.stalls import fr_trigger
from stormotel.analyzers.stalls.nccl_ras import (
    RasQueryError,
    evidence_from_answers,
    parse_endpoint,
    query,
)

from tests.cli import run_stormotel_here
from tests.stalls.ras_standin import RasStandIn, json_report, text_report_missing

REPO = Path(__file__).resolve().parents[2]


def _analyze(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``stormotel analyze`` through its entry point in this process (run_stormotel_here): the
    live readers' answers are under test here, not an interpreter's start."""
    return run_stormotel_here("analyze", *args, env=env)


# --- the RAS reader --------------------------------------------------------------------------
def test_the_reader_speaks_the_protocol_of_the_source_and_gets_json() -> None:
    server = RasStandIn("json", json_report({0: 10, 1: 10, 3: 10}, [2]))
    with server as port:
        answer = query(f"127.0.0.1:{port}")
    assert server.commands == ["CLIENT PROTOCOL 2", "TIMEOUT 5", "SET FORMAT json",
                               "VERBOSE STATUS"]
    assert answer.format == "json" and answer.server_protocol == "2"
    ev = evidence_from_answers([answer], 4)
    assert [(f.kind, f.ranks) for f in ev.findings] == [("straggler", [2])]
    assert ev.findings[0].evidence["pattern"] == "nccl.ras.missing"
    assert ev.findings[0].evidence["read_from"] == "live NCCL RAS query"


def test_a_server_before_2_28_7_is_read_as_text() -> None:
    server = RasStandIn("text", text_report_missing(3, 4))
    with server as port:
        answer = query(f"127.0.0.1:{port}")
    assert answer.format == "text"
    assert any("no JSON before NCCL 2.28.7" in n for n in answer.notes)
    ev = evidence_from_answers([answer], 4)
    assert [(f.kind, f.ranks, f.confidence) for f in ev.findings] == [
        ("straggler", [3], "medium")]


def test_a_rank_behind_in_collective_counts_is_named_and_agreeing_counts_name_nobody() -> None:
    with RasStandIn("json", json_report({0: 101, 1: 101, 2: 100, 3: 101}, [])) as port:
        split = query(f"127.0.0.1:{port}")
    with RasStandIn("json", json_report({0: 7, 1: 7, 2: 7, 3: 7}, [])) as port:
        calm = query(f"127.0.0.1:{port}")
    named = evidence_from_answers([split], 4).findings
    assert [(f.kind, f.ranks) for f in named] == [("straggler", [2])]
    assert named[0].evidence["behind"] == [2]
    quiet = evidence_from_answers([calm], 4)
    assert quiet.findings == [] and quiet.communicators == 1
    assert any("RAS sees no stall" in n for n in quiet.notes)


@pytest.mark.parametrize(("mode", "words"), [
    ("hang", "no answer in time"), ("close", "closed the connection"),
    ("garbage", "not an NCCL RAS line"), ("notras", "not 'SERVER PROTOCOL n'")])
def test_a_broken_server_is_a_bounded_one_line_error(mode: str, words: str) -> None:
    start = time.monotonic()
    with RasStandIn(mode) as port, pytest.raises(RasQueryError) as err:
        query(f"127.0.0.1:{port}", timeout_s=1.5)
    assert time.monotonic() - start < 10
    assert words in str(err.value) and "\n" not in str(err.value)


def test_endpoints_parse_with_the_default_port() -> None:
    assert parse_endpoint("node7") == ("node7", 28028)
    assert parse_endpoint("10.0.0.1:29000") == ("10.0.0.1", 29000)
    assert parse_endpoint("[::1]:28028") == ("::1", 28028)
    for bad in ("", "host:0", "host:99999", ":5"):
        with pytest.raises(ValueError):
            parse_endpoint(bad)


# --- stormotel analyze --nccl-ras --------------------------------------------------------------
def test_analyze_names_the_rank_ras_reports_missing() -> None:
    with RasStandIn("json", json_report({0: 10, 1: 10, 3: 10}, [2])) as port:
        text = _analyze("--nccl-ras", f"127.0.0.1:{port}", "--world-size", "4", "--quiet")
        js = _analyze("--nccl-ras", f"127.0.0.1:{port}", "--format", "json", "--quiet")
    assert text.returncode == 1, text.stderr
    assert "straggler: ranks 2" in text.stdout and "NCCL RAS" in text.stdout
    report = json.loads(js.stdout)
    assert [(f["kind"], f["ranks"]) for f in report["stall_findings"]] == [("straggler", [2])]
    assert report["extra"]["stalls"]["nccl_ras"]["answers"][0]["format"] == "json"


def test_a_bad_address_or_timeout_is_a_usage_error() -> None:
    for args, words in ((("--nccl-ras", "host:99999"), "not a HOST[:PORT]"),
                        (("--nccl-ras", "127.0.0.1", "--live-timeout", "-1"), "--live-timeout")):
        proc = _analyze(*args, "--quiet")
        assert proc.returncode == 2 and words in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr


def test_analyze_against_a_dead_or_hung_ras_port_exits_2_with_one_line() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead_port = s.getsockname()[1]
    s.close()  # nothing listens there now
    dead = _analyze("--nccl-ras", f"127.0.0.1:{dead_port}", "--quiet")
    with RasStandIn("hang") as port:
        hung = _analyze("--nccl-ras", f"127.0.0.1:{port}", "--live-timeout", "1", "--quiet")
    for proc, words in ((dead, "cannot connect"), (hung, "no answer in time")):
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr and words in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert proc.stdout == ""


# --- --fr-pipe ---------------------------------------------------------------------------------
@pytest.fixture
def gloo_job_with_pipes(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """Two real gloo ranks, each a stand-in for ProcessGroupNCCL's dump pipe; rank 1 skips
    the third all_reduce. Stopped by PID."""
    pytest.importorskip("torch")
    env = {**os.environ, "TORCH_FR_BUFFER_SIZE": "100",
           "TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "dump_"), "TMPDIR": str(tmp_path)}
    env.pop("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", None)
    procs = [subprocess.Popen(
        [sys.executable, str(REPO / "tests/stalls/fr_pipe_standin.py"), str(r), "2",
         str(tmp_path / "init"), str(tmp_path / "pipe_")], env=env, cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    try:
        for p in procs:
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "ready", "stand-in rank did not start"
        yield tmp_path, {k: env[k] for k in ("TORCH_FR_DUMP_TEMP_FILE", "TMPDIR")}
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=30)


def test_fr_pipe_pokes_every_rank_and_reads_the_fresh_dumps(
        gloo_job_with_pipes: tuple[Path, dict[str, str]]) -> None:
    tmp, env = gloo_job_with_pipes
    proc = _analyze("--fr-pipe", str(tmp / "pipe_"), "--live-timeout", "60", "--format",
                    "json", "--quiet", env=env)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    live = report["extra"]["stalls"]["fr_pipe"]
    assert live["dumped"] == [0, 1] and live["no_dump"] == [] and live["not_listening"] == []
    assert report["extra"]["stalls"]["flight_recorder"]["seen_ranks"] == [0, 1]
    roots = [f for f in report["stall_findings"] if f.get("consequence_of") is None]
    assert roots and roots[0]["ranks"] == [1] and roots[0]["source"] == "flight_recorder"


def test_fr_pipe_with_no_pipe_is_a_clear_input_error(tmp_path: Path) -> None:
    proc = _analyze("--fr-pipe", str(tmp_path / "nothing_"), "--quiet")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no pipe" in proc.stderr and "TORCH_NCCL_DEBUG_INFO_PIPE_FILE" in proc.stderr


def test_the_dump_file_prefix_reads_the_new_name_before_the_old(tmp_path: Path) -> None:
    assert fr_trigger.dump_prefix({}) == "/tmp/nccl_trace_rank_"
    assert fr_trigger.dump_prefix({"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/a/"}) == "/a/"
    assert fr_trigger.dump_prefix({"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/a/",
                                   "TORCH_FR_DUMP_TEMP_FILE": "/b/"}) == "/b/"
    os.mkfifo(tmp_path / "p_3.pipe")
    (tmp_path / "p_4.pipe").write_text("")  # not a FIFO
    assert fr_trigger.find_pipes(str(tmp_path / "p_")) == {3: tmp_path / "p_3.pipe"}
    res = fr_trigger.trigger(str(tmp_path / "p_"), env={}, timeout_s=0.5)
    assert res.not_listening == [3] and res.folder is None  # nobody reads that pipe
