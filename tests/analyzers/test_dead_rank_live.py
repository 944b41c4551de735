"""Dead rank or clean stop, at the user's boundary: real ``stormotel track`` processes (the
simulated sampler) write their archives, one rank of each job ends while its peers go on, and
``stormotel analyze`` reads the directory.

* job ``early``: rank 3 ends at the end of its ``--duration`` (the tracker's ``stop_tracking``)
  and rank 4 by SIGTERM, while ranks 0-2 sample and step on: both wrote their tracker's stop
  timestamp and the job went on working without them, so no rank is named dead, the run exits
  0 and a note says who stopped cleanly;
* job ``killed``: rank 3 dies of SIGKILL (no stop timestamp can be written) while ranks 0-2
  sample on: it is still named, at medium, exit 1. The test sends the SIGKILL once rank 3's
  archive holds ``KILLED_SAMPLES`` samples: a ``--fault crash@t=4s`` (the same SIGKILL, sent by
  the rank to itself at a fixed time; ``tests/tracker/test_track_cli.py`` tests that flag) landed
  before the rank's first batch was written when the host was loaded, leaving no sample at all
  — a missing rank, not the dead one this test is about.

Job ``lines`` (the ``lines`` archive format: one SDK request per sample, its last line the
final sample's) has rank 2 end at its ``--duration`` while ranks 0-1 go on: no dead rank either.

The same archives re-batched as an OTel Collector's ``file`` exporter writes them (many ranks'
resources per request; JSON lines, and protobuf in length-prefixed zstd records:
``benchmarks/bench_collector_file.py``; the spans beside them) give the same verdicts.

The peers end by SIGTERM some seconds after every early rank is gone (never by a duration, so a
slow start on a loaded host cannot shorten the silence that is tested)."""

from __future__ import annotations

import json
import signal
import struct
import time
from pathlib import Path
from typing import Any

import pytest
import zstandard

from stormotel import exitcodes
from tests.bench_modules import load_benchmark
from tests.cli import run_stormotel_here
from tests.tracker_forks import Forks, Rank

#: Peers go on this long after the last early rank ended: past the 5 s silence floor.
PEERS_GO_ON_S = 8.0
#: Samples the killed rank's archive holds before the SIGKILL (a second of them at 0.2 s): more
#: than the two its own sampling interval needs.
KILLED_SAMPLES = 5


def _track(forks: Forks, out: Path, job: str, rank: int, world: int, *extra: str) -> Rank:
    """``stormotel track`` for one rank, forked from the module's pre-imported interpreter
    (tests/tracker_forks.py: a process of its own, signalled by pid as before)."""
    return forks.track(["--sampler", "simulated", "--interval", "0.2", "--archive", str(out),
                        "--job-id", job, "--rank", str(rank), "--world-size", str(world), "-q",
                        *extra])


def _wait_for(path_glob: tuple[Path, str], timeout: float = 60) -> None:
    folder, pattern = path_glob
    deadline = time.monotonic() + timeout
    while not list(folder.glob(pattern)):
        assert time.monotonic() < deadline, f"no {pattern} in {folder}"
        time.sleep(0.2)


def _samples(folder: Path, rank: int) -> int:
    """Samples ``rank``'s archive in ``folder`` holds so far (what a reader gets of a running
    tracker's archive: every batch but the one being written)."""
    from stormotel.analyzers.sources.loader import load_paths

    files = [str(p) for p in folder.glob(f"rank-{rank}.*metrics*") if p.stat().st_size]
    if not files:
        return 0
    series = load_paths(files).ranks.get(rank)
    return 0 if series is None else len(series)


def _wait_for_samples(folder: Path, rank: int, n: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while _samples(folder, rank) < n:
        assert time.monotonic() < deadline, f"rank {rank} wrote under {n} samples in {folder}"
        time.sleep(0.5)


def _analyze(where: Path | list[Path], out: Path) -> tuple[int, dict[str, Any]]:
    paths = [str(p) for p in (where if isinstance(where, list) else [where])]
    r = run_stormotel_here("analyze", *paths, "--format", "json", "--output", str(out))
    assert r.returncode in (exitcodes.OK, exitcodes.FINDINGS), r.stderr
    return r.returncode, json.loads(out.read_text())


def _dead(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report["stall_findings"]
            if f["evidence"].get("category") == "stopped_reporting"]


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two jobs' archives, written by real tracker processes (see the module's text)."""
    out = tmp_path_factory.mktemp("dead-rank-live") / "archive"
    lines = ("--archive-format", "lines")
    with Forks() as forks:
        _run_jobs(forks, out, lines)
    return out


def _run_jobs(forks: Forks, out: Path, lines: tuple[str, str]) -> None:
    peers = [_track(forks, out, job, r, world) for job, world in (("early", 5), ("killed", 4))
             for r in range(3)] + [_track(forks, out, "lines", r, 3, *lines) for r in range(2)]
    done_early = _track(forks, out, "early", 3, 5, "--duration", "4")
    termed = _track(forks, out, "early", 4, 5)
    killed = _track(forks, out, "killed", 3, 4)
    lines_early = _track(forks, out, "lines", 2, 3, *lines, "--duration", "4")
    procs = [*peers, done_early, termed, killed, lines_early]
    try:
        _wait_for_samples(out / "killed", 3, KILLED_SAMPLES)
        killed.send_signal(signal.SIGKILL)  # no atexit, no flush: what a killed rank leaves
        _wait_for((out / "early", "rank-4.*metrics*"))
        time.sleep(4)  # samples from rank 4 before its stop
        termed.send_signal(signal.SIGTERM)
        assert termed.wait(timeout=60) == exitcodes.OK
        assert done_early.wait(timeout=60) == exitcodes.OK
        assert lines_early.wait(timeout=60) == exitcodes.OK
        assert killed.wait(timeout=60) == -signal.SIGKILL
        time.sleep(PEERS_GO_ON_S)
        for p in peers:
            assert p.poll() is None, "a peer ended before it was asked to"
            p.send_signal(signal.SIGTERM)
        for p in peers:
            assert p.wait(timeout=60) == exitcodes.OK
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)



def _collector(job: Path, out: Path, form: str) -> list[Path]:
    """``job``'s archive as a collector's ``file`` exporters write it: its metrics (``json``
    lines, or ``proto`` in length-prefixed zstd records) and its spans (JSON lines, where the
    steps are), given to ``analyze`` by path as a user names the exporters' output."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )

    bench = load_benchmark("bench_collector_file")
    out.mkdir(parents=True)
    traces = out / "traces.jsonl"
    traces.write_bytes(b"".join(line + b"\n" for line in bench.rank_lines(
        sorted(job.glob("rank-*.traces.jsonl.zst")))))
    lines = [bench._PREFIX + b",".join(rms) + bench._SUFFIX for rms, _ in bench.batches(job)]
    if form == "json":
        path = out / "metrics.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        return [path, traces]
    cctx = zstandard.ZstdCompressor()
    frames = [cctx.compress(json_format.Parse(line, ExportMetricsServiceRequest())
                            .SerializeToString()) for line in lines]
    path = out / "metrics.data"
    path.write_bytes(b"".join(struct.pack(">I", len(f)) + f for f in frames))
    return [path, traces]


def _verdicts(early: Path | list[Path], killed: Path | list[Path], tmp_path: Path) -> None:
    code, report = _analyze(early, tmp_path / "early.json")
    assert report["participating_ranks"] == [0, 1, 2, 3, 4]
    assert not _dead(report), report["stall_findings"]
    assert code == exitcodes.OK, (report["stall_findings"], report["gap_findings"],
                                  report["notes"])
    [note] = [n for n in report["notes"] if "stopped cleanly" in n]
    assert "2 rank(s)" in note and "rank 3 at" in note and "4 at" in note, note

    code, report = _analyze(killed, tmp_path / "killed.json")
    assert code == exitcodes.FINDINGS
    [f] = _dead(report)
    assert f["ranks"] == [3] and f["confidence"] == "medium" and f["consequence_of"] is None
    assert f["evidence"]["peers_reporting_after"] == 3
    assert not [n for n in report["notes"] if "stopped cleanly" in n]
    assert f["evidence"]["stop_edge"] == "unknown", "an archive alone does not promise a stop"


def test_a_clean_early_stop_is_no_dead_rank_and_a_sigkill_is(archive: Path,
                                                             tmp_path: Path) -> None:
    _verdicts(archive / "early", archive / "killed", tmp_path)


@pytest.mark.parametrize("form", ["json", "proto"])
def test_the_same_through_a_collectors_file_exporter(archive: Path, tmp_path: Path,
                                                     form: str) -> None:
    _verdicts(_collector(archive / "early", tmp_path / "early", form),
              _collector(archive / "killed", tmp_path / "killed", form), tmp_path)


def test_the_lines_format_carries_the_clean_stop_too(archive: Path, tmp_path: Path) -> None:
    code, report = _analyze(archive / "lines", tmp_path / "lines.json")
    assert report["participating_ranks"] == [0, 1, 2]
    assert not _dead(report), report["stall_findings"]
    assert code == exitcodes.OK, (report["stall_findings"], report["notes"])
    assert [n for n in report["notes"] if "stopped cleanly" in n and "rank 2 at" in n]
