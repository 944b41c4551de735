"""``stormotel analyze`` at its user boundary: a subprocess, real files, exit codes, stderr.

One run per exit code (0, 1, 2, 3) starts a fresh interpreter, as a user's does; the others are
processes forked from one that imported the command once (:func:`tests.cli.run_stormotel_forked`:
their own exit status, fds 1 and 2, environment and working directory, ~0.5 s of CPU less each),
since what they check is the command's answer to their input, not its start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stormotel import exitcodes
from tests.analyzers.otlp_fixtures import write_archive
from tests.analyzers.synth import healthy, plant_gap_drift, seed_example
from tests.cli import run_stormotel, run_stormotel_forked

DATA = Path(__file__).parent / "data"


def run(*args: str, fresh: bool = False) -> subprocess.CompletedProcess[str]:
    """``stormotel analyze ARGS``: forked, or in a fresh interpreter with ``fresh``."""
    if fresh:
        return run_stormotel("analyze", *args, timeout=120)
    return run_stormotel_forked("analyze", *args, timeout=120)


def _no_traceback(p: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout


@pytest.fixture(scope="module")
def faulty_archive(tmp_path_factory) -> Path:
    data = seed_example()
    return write_archive(tmp_path_factory.mktemp("a") / "job-otlp", data)


def test_text_summary_names_rank_and_exits_findings(faulty_archive):
    p = run(str(faulty_archive), fresh=True)
    _no_traceback(p)
    assert p.returncode == exitcodes.FINDINGS
    assert "Top first-cause suspect: rank 2 (high)" in p.stdout
    assert "Participating ranks: 0-3" in p.stdout and "Missing ranks: none" in p.stdout
    assert "clock alignment wall" in p.stdout


def test_json_report_to_file(faulty_archive, tmp_path):
    out = tmp_path / "r" / "report.json"
    p = run(str(faulty_archive), "--format", "json", "--output", str(out), "--align",
            "first-sample", "--sensitivity", "high", "--set", "spike_z=5")
    _no_traceback(p)
    assert p.returncode == exitcodes.FINDINGS and p.stdout == ""
    rep = json.loads(out.read_text())
    assert rep["schema"] == "stormotel.report/v1"
    assert rep["cross_rank"]["first_cause_suspects"][0]["rank"] == 2
    assert rep["cross_rank"]["alignment"] == "first-sample"
    assert rep["settings"]["sensitivity"] == "high" and rep["settings"]["spike_z"] == 5.0


def test_healthy_archive_exits_zero(tmp_path):
    write_archive(tmp_path / "ok", healthy(4, 300, seed=2))
    p = run(str(tmp_path / "ok"), fresh=True)
    _no_traceback(p)
    assert p.returncode == exitcodes.OK, p.stdout
    assert "Verdict: healthy" in p.stdout


def test_rank_filter_and_missing_ranks(tmp_path):
    data = healthy(4, 1200, seed=3)
    plant_gap_drift(data[1], 4 * 2**30)
    write_archive(tmp_path / "d", data)
    p = run(str(tmp_path / "d"), "--ranks", "0,1,6-7", "--format", "json")
    _no_traceback(p)
    rep = json.loads(p.stdout)
    assert rep["participating_ranks"] == [0, 1] and rep["missing_ranks"] == [6, 7]
    assert [(f["rank"], f["classification"]) for f in rep["gap_findings"]] == \
        [(1, "persistent_drift")]


def test_stormlog_exports_through_the_cli():
    p = run(*sorted(str(x) for x in DATA.glob("stormlog_events_rank*.json")))
    _no_traceback(p)
    assert p.returncode == exitcodes.FINDINGS
    assert "rank 2 (high)" in p.stdout


@pytest.mark.parametrize("args,code,message", [
    (["--ranks", "0,x"], exitcodes.USAGE, "'x' is not a rank"),
    (["--ranks", "5-2"], exitcodes.USAGE, "reversed"),
    (["--set", "nonsense=1"], exitcodes.USAGE, "unknown threshold 'nonsense'"),
    (["--set", "spike_z"], exitcodes.USAGE, "expected NAME=VALUE"),
    (["--sensitivity", "extreme"], exitcodes.USAGE, "invalid choice"),
])
def test_bad_flags(faulty_archive, args, code, message):
    p = run(str(faulty_archive), *args)
    _no_traceback(p)
    assert p.returncode == code and message in p.stderr


def test_bad_inputs(tmp_path):
    missing = run(str(tmp_path / "nope"), fresh=True)
    assert missing.returncode == exitcodes.USAGE and "no such file" in missing.stderr
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    p = run(str(empty_dir), fresh=True)
    assert p.returncode == exitcodes.SOURCE_FAILURE and "no telemetry files" in p.stderr
    (empty_dir / "rank-0.metrics.jsonl").write_text("")
    p = run(str(empty_dir))
    assert p.returncode == exitcodes.SOURCE_FAILURE and "empty_file=1" in p.stderr
    junk = tmp_path / "notes.csv"
    junk.write_text("a,b\n1,2\n")
    p = run(str(junk))
    assert p.returncode == exitcodes.USAGE and "notes.csv: CSV without Stormlog" in p.stderr
    cut = tmp_path / "cut.jsonl"
    cut.write_text('{"resourceMetrics": [')
    p = run(str(cut))
    assert p.returncode == exitcodes.SOURCE_FAILURE and "truncated_line=1" in p.stderr
    for q in (missing, p):
        _no_traceback(q)
    nothing = run()
    assert nothing.returncode == exitcodes.USAGE and "no telemetry given" in nothing.stderr


def test_truncated_line_is_a_counted_skip_in_the_report(faulty_archive, tmp_path):
    import shutil

    d = tmp_path / "copy"
    shutil.copytree(faulty_archive, d)
    f = d / "rank-0.metrics.jsonl"
    f.write_bytes(f.read_bytes()[:-100])
    p = run(str(d), "--format", "json")
    _no_traceback(p)
    rep = json.loads(p.stdout)
    assert rep["skipped"]["truncated_line"] == 1
    assert any("rank-0.metrics.jsonl:6" in n for n in rep["notes"])
    assert rep["cross_rank"]["first_cause_suspects"][0]["rank"] == 2


def test_help_lists_every_flag():
    p = run("--help")
    assert p.returncode == 0
    for flag in ("--ranks", "--align", "--sensitivity", "--set", "--format", "--output",
                 "--job-id", "exit codes"):
        assert flag in p.stdout


#: The file loader (sources/loader.py; the sources package itself only re-exports it, and its
#: TSDB source table, which --help reads the sources' own flags from, imports no reader), the
#: Timeline, the Prometheus reader and a server sink.
_HEAVY = ("numpy", "httpx", "stormotel.analyzers.scheduled.job", "prometheus_client",
          "stormotel.analyzers.sources.loader", "stormotel.analyzers.timeline",
          "stormotel.analyzers.sources.prometheus", "stormotel.analyzers.sinks.grafana_sink")


def _heavy_modules_after(code: str) -> list[str]:
    probe = (f"import sys\n{code}\n"
             f"print(','.join(m for m in {_HEAVY!r} if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return [m for m in p.stdout.strip().split(",") if m]


def test_declaring_flags_imports_nothing_heavy():
    """--help (every flag, the scheduled job's, the stall flags and the flags plug-ins declare in
    the sink and TSDB source tables included) loads no numpy, httpx, sink or source reader: the
    CLI's fixed cost stays at interpreter start-up."""
    code = ("from analyzers.cli import build_parser\n"
            "text = build_parser().format_help()\n"
            "assert '--prometheus' in text and '--flight-recorder' in text, text")
    assert _heavy_modules_after(code) == []


def test_a_run_over_files_never_imports_the_scheduled_job(tmp_path):
    """Analysing files needs numpy and the sources, not httpx or the TSDB job."""
    write_archive(tmp_path, healthy())
    code = (f"from analyzers.cli import main\n"
            f"assert main([{str(tmp_path)!r}, '-q', '-o', {str(tmp_path / 'r.txt')!r}]) == 0")
    assert _heavy_modules_after(code) == ["numpy", "stormotel.analyzers.sources.loader",
                                          "stormotel.analyzers.timeline"]


#: What ``stormotel analyze FILES`` must never import: servers' clients, the TSDB job and its
#: sinks, the Flight Recorder reader, the tracker's SDKs, and the traceback machinery (only
#: ``--debug`` prints one). Each is start-up time a run over files does not use. The sink
#: plumbing every run writes its report through (the package, its interface, the dispatch table,
#: the report sink, per-job paths) imports no server sink and is allowed.
_SINK_PLUMBING = {"stormotel.analyzers.sinks." + m
                  for m in ("base", "dispatch", "report_sink", "outputs")}
_NOT_FOR_FILES = ("httpx", "prometheus_client", "opentelemetry", "google.protobuf", "torch",
                  "scipy", "pandas", "stormotel.analyzers.scheduled.job",
                  "stormotel.analyzers.sinks.", "stormotel.analyzers.scheduled.run",
                  "stormotel.analyzers.stalls.fr_analysis",
                  "stormotel.analyzers.stalls.fr_loader", "stormotel.tracker", "traceback")


def test_a_files_run_imports_only_what_it_reads():
    """The command a user types, over the real Stormlog exports, as its own interpreter: the
    modules it loaded are listed when it exits."""
    files = [str(DATA / "stormlog_events_rank0.json"), str(DATA / "stormlog_events_rank1.json")]
    probe = ("import atexit, runpy, sys\n"
             "atexit.register(lambda: print('LOADED', ','.join(sorted(sys.modules)), "
             "file=sys.stderr))\n"
             f"sys.argv = ['stormotel', 'analyze', *{files!r}, '-q']\n"
             "runpy.run_module('stormotel', run_name='__main__')")
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert p.returncode == exitcodes.FINDINGS, p.stderr
    loaded = set(p.stderr.rsplit("LOADED ", 1)[1].strip().split(","))
    assert {"numpy", "stormotel.analyzers.sources.stormlog", "stormotel.analyzers.summary"} \
        <= loaded
    assert sorted(m for m in loaded
                  if m.startswith(_NOT_FOR_FILES) and m not in _SINK_PLUMBING) == []


def test_skewed_clocks_and_collective_markers_through_files(tmp_path):
    """Rank 0's clock is 500 ms behind: wall clock blames it, --align markers finds rank 2.
    Every rank also has a synchronised gap spike inside an all_gather span."""
    from tests.analyzers.synth import INTERVAL, MIB, plant_gap_spike

    data = seed_example()
    for d in data:
        t0 = int(d.t_ns[0])
        d.markers = [(t0 + k * 10 * INTERVAL, t0 + k * 10 * INTERVAL + 5_000_000,
                      "nccl:all_reduce", "collective") for k in range(6)]
        plant_gap_spike(d, 40, 2, 512 * MIB)
        d.markers.append((t0 + 40 * INTERVAL, t0 + 42 * INTERVAL, "nccl:all_gather",
                          "collective"))
    skew = -500_000_000
    data[0].t_ns = data[0].t_ns + skew
    data[0].markers = [(s + skew, e + skew, n, k) for s, e, n, k in data[0].markers]
    arch = write_archive(tmp_path / "skewed", data)
    wall = run(str(arch))
    assert "Top first-cause suspect: rank 0" in wall.stdout
    assert "wall clocks look skewed" in wall.stdout and "--align markers" in wall.stdout
    fixed = run(str(arch), "--align", "markers", "--format", "json")
    _no_traceback(fixed)
    rep = json.loads(fixed.stdout)
    top = rep["cross_rank"]["first_cause_suspects"][0]
    assert (top["rank"], top["confidence"]) == (2, "high")
    assert rep["cross_rank"]["alignment"] == "markers"
    attrs = rep["collective_attributions"]
    assert {a["rank"] for a in attrs} == {0, 1, 2, 3}
    assert all(a["classification"] == "collective_confident" for a in attrs)
    text = run(str(arch), "--align", "markers")
    assert "collective_confident" in text.stdout and "ranks 0-3" in text.stdout


@pytest.mark.parametrize(("env", "threads"), [(None, "1"), ("2", "2")])
def test_analyze_starts_numpy_with_one_blas_thread_unless_told(env, threads):
    """OpenBLAS's thread pool busy-waits at numpy's import (CPU the analyzer never uses); the
    analyze command starts numpy with one thread, and a user's own setting wins."""
    code = ("import os, sys\n"
            "from stormotel.analyzers.cli import command as cli\n"
            "cli._one_blas_thread()\n"
            "import numpy\n"
            "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))\n")
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if env is not None:
        environ["OPENBLAS_NUM_THREADS"] = env
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                         text=True, check=True).stdout.split()
    # OpenBLAS starts at most one thread per core.
    assert out == [threads, str(min(int(threads), os.cpu_count() or 1))]
