"""Where every rank is at a hang: real 4-rank gloo jobs with the tracker, one rank hanging
outside communication (tests/stalls/stack_jobs.py), analysed from the archive alone."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from stormotel import schema
from tests.cpu_lock import cpu_heavy
from tests.stalls import stack_jobs
from tests.stalls.helpers import run_job_group, run_json

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stack_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("stack_jobs")
    started = time.monotonic()
    with cpu_heavy(tmp_path_factory, exclusive=True):
        proc = run_job_group("tests.stalls.stack_jobs", root, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    print(f"stack jobs ran in {time.monotonic() - started:.1f} s")
    return root


def _analyze(path: Path) -> tuple[int, dict]:
    return _analyze_args(str(path))


def _analyze_args(*args: str) -> tuple[int, dict]:
    """The JSON report through the command's entry point in this process (the analysis of the
    archive is under test here, not an interpreter's start: ~0.45 s of CPU each, seven times)."""
    return run_json(*args)


def _snapshots(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.name.endswith(
        (schema.STACK_SUFFIX, schema.STACK_PENDING_SUFFIX)))


@pytest.mark.parametrize("scenario", ["regex", "dataloader", "checkpoint", "callback"])
def test_the_hanging_rank_and_its_frame_come_from_the_archive(stack_runs: Path,
                                                               scenario: str) -> None:
    code, report = _analyze(stack_runs / scenario / "archive")
    assert code == 1
    stacks = [f for f in report["stall_findings"] if f["source"] == "stacks"]
    assert stacks, report["stall_findings"]
    finding = stacks[0]
    assert finding["kind"] == "straggler"
    assert finding["ranks"] == [stack_jobs.CULPRIT]
    assert finding["confidence"] in ("medium", "low")
    frames = finding["evidence"]["frames"][str(stack_jobs.CULPRIT)]
    assert any(stack_jobs.USER_FRAMES[scenario] in f for f in frames), frames
    # the peers are grouped in the collective they wait in
    groups = finding["evidence"]["stack_groups"]
    peers = sorted(r for g in groups if g["collective"] for r in g["ranks"])
    assert peers == [r for r in range(stack_jobs.WORLD) if r != stack_jobs.CULPRIT]
    assert stack_jobs.USER_FRAMES[scenario] in finding["evidence"]["reason"]


def test_the_flight_recorder_dump_at_a_stall_is_written_mid_hang(stack_runs: Path) -> None:
    """The recorder is on in these jobs: every rank asks for a dump at its snapshot. Without
    the recorder's stack traces (stormotel/fr_dump.py says why) the gloo dump is written while
    the job still hangs, the dumps alone name the straggler, and the waiting peers go on
    sampling until the launcher's SIGTERM."""
    from stormotel.analyzers.sources import load_paths

    root = stack_runs / "callback"
    killed = int((root / "sigterm_ns").read_text())
    dumps = root / "archive" / "callback" / schema.FR_DUMPS_DIR
    written = {p.name: p.stat().st_mtime_ns for p in dumps.glob("nccl_trace_rank_*")}
    peers = [r for r in range(stack_jobs.WORLD) if r != stack_jobs.CULPRIT]
    assert {f"nccl_trace_rank_{r}" for r in peers} <= set(written), sorted(written)
    assert all(t < killed for t in written.values()), "a dump came only after SIGTERM"
    _, alone = _analyze(root / "archive")  # not read unasked: the report says where they are
    assert not [f for f in alone["stall_findings"] if f["source"] == "flight_recorder"]
    assert any(f"--flight-recorder {dumps}" in n for n in alone["notes"]), alone["notes"]
    code, report = _analyze_args("--flight-recorder", str(dumps))
    assert code == 1
    fr = [f for f in report["stall_findings"] if f["source"] == "flight_recorder"]
    assert fr and fr[0]["ranks"] == [stack_jobs.CULPRIT], report["stall_findings"]
    assert fr[0]["confidence"] != "high"  # the dumps cannot see why rank 2 never came

    timeline = load_paths([str(root / "archive")])
    peer = timeline.ranks[0]
    first_snapshot = min(int(json.loads(p.read_text().partition("\n")[0][
        len(schema.STACK_HEADER_PREFIX):])["armed_unix_ns"]) for p in _snapshots(root)
        if p.name.startswith("rank-0-"))
    assert int(peer.t_ns[-1]) > first_snapshot + 5e9, "rank 0 stopped sampling at its stall"
    assert int(peer.t_ns[-1]) > killed - 3e9


def test_a_rank_holding_the_gil_still_leaves_a_snapshot(stack_runs: Path) -> None:
    root = stack_runs / "regex"
    culprit = stack_jobs.CULPRIT
    mine = [p for p in _snapshots(root) if p.name.startswith(f"rank-{culprit}-")]
    assert mine, "no snapshot from the rank that held the GIL"
    text = mine[0].read_text()
    assert "filter_records" in text and "Thread 0x" in text
    header = json.loads(text.partition("\n")[0][len(schema.STACK_HEADER_PREFIX):])
    fired = header["armed_unix_ns"] + header["timeout_s"] * 1e9
    # the GIL was held: a Python heartbeat thread stopped beating from the hang until the
    # launcher's SIGTERM, and the C watchdog wrote the snapshot in between
    hang = int((root / "hang_started").read_text())
    killed = int((root / "sigterm_ns").read_text())
    beats = [int(x) for x in (root / f"heartbeat{culprit}").read_text().split()]
    assert any(b < hang for b in beats), "the heartbeat thread never ran"
    during = [b for b in beats if hang + 1e9 < b < killed]
    assert during == [], "the heartbeat thread ran during the regex: the GIL was free"
    assert hang < fired < killed
    _, report = _analyze(root / "archive")
    finding = next(f for f in report["stall_findings"] if f["source"] == "stacks")
    assert finding["evidence"]["category"] == "gil_held"
    assert finding["evidence"]["gil_held"][0]["rank"] == culprit


def test_a_healthy_job_leaves_no_snapshot(stack_runs: Path) -> None:
    root = stack_runs / "healthy"
    assert all((root / f"done{r}").exists() for r in range(stack_jobs.WORLD))
    assert _snapshots(root) == []
    _, report = _analyze(root / "archive")
    assert not [f for f in report["stall_findings"] if f["source"] == "stacks"]
