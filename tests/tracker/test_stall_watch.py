"""The stall detector in the tracker: it arms from the rank's own rhythm, writes every thread's
traceback (the sampling thread with the GIL; faulthandler's C watchdog as the fallback:
tests/tracker/test_stall_writers.py), and stays silent for jobs that make progress or never
call step()/mark()."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from stormotel.analyzers.stalls.stacks import (
    analyze_stacks,
    find_snapshot_files,
    parse_snapshot,
    read_snapshots,
)

from stormotel import ExportConfig, MemoryTracker, StallConfig, environment, schema, stall_watch

#: Multiple 1: the floor is the deadline whatever rhythm a busy machine gives the 10 ms steps.
#: With the default 20 x the median step interval, steps stretched to 24 ms made the deadline
#: 0.48 s, and at 40 ms the 1.6 s timer outlasts the 1.5 s stall these tests plant (no snapshot:
#: failed under load with two CPU hogs). The rhythm's rule itself:
#: test_the_deadline_is_the_multiple_of_the_median_interval (planted intervals).
STALL_MULTIPLE = 1.0


def _tracker(tmp_path: Path, **kw: object) -> MemoryTracker:
    kw = {"stall_floor_s": 0.3, "stall_multiple": STALL_MULTIPLE, **kw}
    return MemoryTracker(sampler="simulated", archive_dir=tmp_path, job_id="j", rank=1,
                         world_size=2, sampling_interval=0.05, **kw)


def _files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "j" / schema.STACKS_DIR).glob("*")) \
        if (tmp_path / "j" / schema.STACKS_DIR).exists() else []


def _steps(t: MemoryTracker, n: int, every: float = 0.01) -> None:
    for _ in range(n):
        with t.step():
            time.sleep(every)


def wait_for_a_batch() -> None:
    time.sleep(1.5)


def test_a_stall_leaves_a_snapshot_an_event_and_a_count(tmp_path: Path) -> None:
    with _tracker(tmp_path) as t:
        _steps(t, 5)
        with t.step():
            wait_for_a_batch()  # no progress for 1.5 s: deadline 0.3 s, timer 0.6 s
        assert t.state.stall_snapshots >= 1
        assert t.state.edges[schema.EDGE_STALL].timestamp_ns > 0
        _steps(t, 2)
        assert not t.state.stalled  # progress again
    every = _files(tmp_path)
    files = [f for f in every if f.name.endswith(schema.STACK_SUFFIX)]
    # the rank got over its stall: the header armed after it stays, and says so
    assert [f for f in every if f not in files] and all(
        f.name.endswith(schema.STACK_PROGRESS_SUFFIX) for f in every if f not in files), every
    sa = analyze_stacks(find_snapshot_files([tmp_path]), world_size=2)
    assert sa.findings == [] and sa.skipped["snapshot_stall_got_over"] == 1, sa.notes
    # the trailer: the step and the marks the rank had entered when the dump was seen
    tail = parse_snapshot(files[0])
    assert tail is not None and tail.progress["step"] == 6 and tail.progress["marks"] == []
    snap = parse_snapshot(files[0])
    assert snap is not None and snap.rank == 1 and not snap.pending
    assert any(f.function == "wait_for_a_batch" for f in snap.main_frames)
    assert snap.user_frame() is not None
    header = json.loads(files[0].read_text().partition("\n")[0]
                        [len(schema.STACK_HEADER_PREFIX):])
    assert header["deadline_s"] == pytest.approx(0.3) and header["job_id"] == "j"


def test_steady_progress_and_a_clean_stop_leave_nothing(tmp_path: Path) -> None:
    # A floor no gap between two 10 ms steps reaches, even on a busy machine: with 0.3 s (the
    # timer at 0.6 s) a loaded host put a longer gap between two steps, and the snapshot that
    # followed was right. What is under test is that steady steps never arm a dump.
    gaps: list[float] = []
    with _tracker(tmp_path, stall_floor_s=STEADY_FLOOR_S) as t:
        last = time.monotonic()
        for _ in range(60):  # 0.6 s of steps
            _steps(t, 1)
            gaps.append(time.monotonic() - last)
            last = time.monotonic()
    assert t.state.stall_snapshots == 0, f"largest gap between steps: {max(gaps):.2f} s"
    assert _files(tmp_path) == []  # the armed pending file is removed at stop


#: The steady test's floor (its timer fires at twice it): far above the 0.6 s a loaded machine
#: exceeded, so only a watch that arms on steady steps leaves a snapshot.
STEADY_FLOOR_S = 5.0


def test_a_job_without_steps_never_arms(tmp_path: Path) -> None:
    with _tracker(tmp_path) as t:
        time.sleep(1.0)  # model loading, NCCL init: no rhythm yet, no snapshot
    assert t.state.stall_snapshots == 0 and _files(tmp_path) == []


def test_switched_off_by_the_environment(tmp_path: Path) -> None:
    t = MemoryTracker(sampler="simulated", archive_dir=tmp_path, job_id="j", rank=0,
                      world_size=1, stall_floor_s=0.2,
                      env={environment.STALL_SNAPSHOTS: "0"})
    with t:
        _steps(t, 5)
        time.sleep(0.8)
    assert _files(tmp_path) == []


@pytest.mark.parametrize(("var", "raw"), [
    (environment.STALL_FLOOR_S, "soon"), (environment.STALL_FLOOR_S, "1e10"),
    (environment.STALL_FLOOR_S, "nan"), (environment.STALL_FLOOR_S, "-3"),
    (environment.STALL_MULTIPLE, "1e12"), (environment.STALL_MULTIPLE, "inf"),
    (environment.STALL_MULTIPLE, "0")])
def test_a_bad_variable_is_a_warning_and_the_default(
        tmp_path: Path, var: str, raw: str, caplog: pytest.LogCaptureFixture) -> None:
    """A deployment's bad value never stops the training and never raises inside step()
    (1e10 s used to overflow faulthandler's timer there)."""
    with caplog.at_level(logging.WARNING, logger="stormotel"):
        t = MemoryTracker(sampler="simulated", archive_dir=tmp_path, rank=0, world_size=1,
                          env={var: raw})
    assert f"{var}={raw!r} is not a number" in caplog.text
    assert (t.stall_config.floor_s, t.stall_config.multiple) == (
        stall_watch.DEFAULT_FLOOR_S, stall_watch.DEFAULT_MULTIPLE)
    with t:
        _steps(t, 6)  # arms the C timer with the default deadline


def test_a_bad_argument_in_code_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="STORMOTEL_STALL_FLOOR_S"):
        MemoryTracker(sampler="simulated", rank=0, world_size=1,
                      export=ExportConfig(archive_dir=tmp_path), stall=StallConfig(floor_s=1e10))


def test_the_deadline_is_the_multiple_of_the_median_interval(tmp_path: Path) -> None:
    """Intervals planted (a loaded machine cannot stretch them): 20 x the median 0.05 s."""
    watch = stall_watch.StallWatch(tmp_path, {"rank": 0}, multiple=stall_watch.DEFAULT_MULTIPLE,
                                   floor_s=0.3)
    watch._intervals.extend([0.04, 0.05, 0.05, 0.9])  # one slow step does not move the median
    watch._last = time.monotonic()
    try:
        watch.progress()
        assert watch.deadline_s == pytest.approx(stall_watch.DEFAULT_MULTIPLE * 0.05)
    finally:
        watch.close()


def test_a_long_rhythm_times_a_large_multiple_never_overflows_the_timer(tmp_path: Path) -> None:
    watch = stall_watch.StallWatch(tmp_path, {"rank": 0}, multiple=stall_watch.MAX_MULTIPLE,
                                   floor_s=stall_watch.MAX_DEADLINE_S)
    watch._intervals.extend([1e9] * 4)  # hours-long steps: 1e13 s before the clamp
    watch._last = time.monotonic()
    try:
        watch.progress()
        assert watch.deadline_s == stall_watch.MAX_DEADLINE_S
    finally:
        watch.close()


def _snapshot(path: Path, rank: int, frames: list[tuple[str, int, str]], *,
              fired: bool = True, armed: int = 10**18, progress: int = 0) -> Path:
    head = {"rank": rank, "training_thread": 1, "armed_unix_ns": armed, "timeout_s": 4.0,
            "last_progress_unix_ns": progress}
    text = schema.STACK_HEADER_PREFIX + json.dumps(head) + "\n"
    if fired:
        text += "Timeout (0:00:04)!\nThread 0x0000000000000001 (most recent call first):\n"
        text += "".join(f'  File "{f}", line {n} in {fn}\n' for f, n, fn in frames)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


WAITING = [("/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 3252,
            "all_reduce"), ("/home/u/train.py", 212, "train")]


def test_pending_and_renamed_snapshots_are_grouped(tmp_path: Path) -> None:
    for r in (0, 1, 3):
        _snapshot(tmp_path / f"rank-{r}-1-1{schema.STACK_SUFFIX}", r, WAITING)
    _snapshot(tmp_path / f"rank-2-1-1{schema.STACK_PENDING_SUFFIX}", 2,
              [("/usr/lib/python3.11/re/__init__.py", 166, "match"),
               ("/home/u/data/filter.py", 88, "keep")])
    _snapshot(tmp_path / f"rank-2-1-2{schema.STACK_PENDING_SUFFIX}", 2, [], fired=False)
    files = find_snapshot_files([tmp_path])
    assert len(files) == 5
    sa = analyze_stacks(files, world_size=4)
    assert sa.skipped["unfired_stack_snapshot"] == 1
    # the counted skip is said in words a reader can act on, not only as its key
    assert any(n.startswith("1 stack snapshot(s) armed but never fired") for n in sa.notes)
    (finding,) = sa.findings
    assert finding.ranks == [2] and finding.source == "stacks"
    assert finding.confidence == "medium"
    assert "3 ranks in all_reduce at u/train.py:212" in finding.evidence["reason"]
    assert "rank 2 in keep at data/filter.py:88" in finding.evidence["reason"]
    assert finding.evidence["pattern"] == "stormotel.stacks.odd_group"


def test_no_odd_rank_from_symmetric_or_partial_snapshots(tmp_path: Path) -> None:
    for r in range(3):
        _snapshot(tmp_path / f"rank-{r}-1-1{schema.STACK_SUFFIX}", r, WAITING)
    sa = analyze_stacks(find_snapshot_files([tmp_path]), world_size=3)
    # a hung job is never healthy: every rank at the same place is undecided, with the place
    (same,) = sa.findings
    assert same.kind == "undecided" and same.ranks == [] and same.confidence == "low"
    assert "3 ranks in all_reduce at u/train.py:212" in same.evidence["reason"]
    # one rank outside, but ranks 4..7 never wrote a snapshot: low, and they are named unseen
    _snapshot(tmp_path / f"rank-3-1-1{schema.STACK_SUFFIX}", 3,
              [("/home/u/ckpt.py", 9, "save")])
    (finding,) = analyze_stacks(find_snapshot_files([tmp_path]), world_size=8).findings
    assert finding.ranks == [3] and finding.confidence == "low"
    assert finding.evidence["unseen_ranks"] == [4, 5, 6, 7]


@pytest.mark.parametrize("text", ["not a snapshot\n", schema.STACK_HEADER_PREFIX + "{bad\n",
                                  schema.STACK_HEADER_PREFIX + '{"rank": 10000000}\n',
                                  schema.STACK_HEADER_PREFIX + "[" * 100000 + "\n"])
def test_bad_snapshot_files_are_counted_skips(tmp_path: Path, text: str) -> None:
    bad = tmp_path / f"rank-0-1-1{schema.STACK_SUFFIX}"
    bad.write_text(text)
    sa = analyze_stacks([bad])
    assert sa.skipped["bad_stack_snapshot"] == 1 and sa.findings == []
    assert "skipped" in sa.notes[0]


def test_the_first_snapshot_of_the_last_stall_describes_the_hang(tmp_path: Path) -> None:
    """A peer's later snapshot of the same stall may show it tearing down after the culprit
    died; an earlier stall (another last progress) is another moment: neither is compared."""
    teardown = [("/usr/lib/python3.11/threading.py", 1590, "_shutdown")]
    for r in (0, 1, 3):
        _snapshot(tmp_path / f"rank-{r}-1-1{schema.STACK_SUFFIX}", r, WAITING,
                  armed=10**18, progress=10**18 - 5 * 10**9)
        _snapshot(tmp_path / f"rank-{r}-1-2{schema.STACK_SUFFIX}", r, teardown,
                  armed=10**18 + 8 * 10**9, progress=10**18 - 5 * 10**9)
        # an earlier, shorter stall (a slow checkpoint), long before
        _snapshot(tmp_path / f"rank-{r}-1-0{schema.STACK_SUFFIX}", r,
                  [("/home/u/ckpt.py", 9, "save")], armed=10**18 - 600 * 10**9,
                  progress=10**18 - 610 * 10**9)
    _snapshot(tmp_path / f"rank-2-1-1{schema.STACK_SUFFIX}", 2,
              [("/home/u/data/filter.py", 88, "keep")], progress=10**18 - 5 * 10**9)
    (finding,) = analyze_stacks(find_snapshot_files([tmp_path]), world_size=4).findings
    assert finding.ranks == [2]


def test_an_exception_leaving_a_step_is_not_a_hang(tmp_path: Path) -> None:
    """A peer whose collective failed (its culprit died) unwinds and tears down: the timer is
    cancelled, so that teardown leaves no snapshot."""
    with _tracker(tmp_path) as t:
        _steps(t, 5)
        with pytest.raises(RuntimeError), t.step():
            raise RuntimeError("Connection closed by peer")
        time.sleep(1.0)  # tearing down, no step
        assert t.state.stall_snapshots == 0
    assert _files(tmp_path) == []


def test_the_snapshot_fired_after_the_last_progress_is_used_and_never_another_thread(
        tmp_path: Path) -> None:
    """A CI run named a waiting peer (rank 1) as the odd rank: its second snapshot (armed after
    the first fired, its header's last progress older than that first firing) held no frame of
    the training thread, only a helper thread, which was taken for it. The first snapshot fired
    after the rank's last progress is the hang; a snapshot without the training thread is
    never read as another thread's."""
    p0 = 10**18
    for r in (0, 3):
        _snapshot(tmp_path / f"rank-{r}-1-1{schema.STACK_SUFFIX}", r, WAITING, armed=p0,
                  progress=p0)
    _snapshot(tmp_path / f"rank-2-1-1{schema.STACK_SUFFIX}", 2,
              [("/home/u/cb.py", 94, "run_callbacks")], armed=p0, progress=p0)
    _snapshot(tmp_path / f"rank-1-1-1{schema.STACK_SUFFIX}", 1, WAITING, armed=p0,
              progress=p0)
    second = tmp_path / f"rank-1-1-2{schema.STACK_SUFFIX}"
    _snapshot(second, 1, [("/v/lib/python3.11/site-packages/torch/__init__.py", 2954,
                           "__getattr__"), ("/v/stormotel/fr_dump.py", 53,
                                            "dump_flight_recorder")],
              armed=p0 + 5 * 10**9, progress=p0 + 10**9)
    second.write_text(second.read_text().replace("0x0000000000000001", "0x0000000000000002"))
    (finding,) = analyze_stacks(find_snapshot_files([tmp_path]), world_size=4).findings
    assert finding.ranks == [2]


def test_ranks_in_different_collectives_name_the_one_ahead_or_say_undecided(
        tmp_path: Path) -> None:
    """No majority at two ranks: rank 1 waits at a later line of the same function (no marks)
    — named, at low; with no way to order them — undecided, both places said; the same
    collective at the same user line with different internals — one place, undecided."""
    barrier = [("/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 5356,
                "barrier"), ("/home/u/train.py", 214, "train")]
    _snapshot(tmp_path / "a" / f"rank-0-1-1{schema.STACK_SUFFIX}", 0, WAITING)
    _snapshot(tmp_path / "a" / f"rank-1-1-1{schema.STACK_SUFFIX}", 1, barrier)
    (f,) = analyze_stacks(find_snapshot_files([tmp_path / "a"]), world_size=2).findings
    assert (f.kind, f.ranks, f.confidence) == ("op_type_mismatch", [1], "low")
    assert f.evidence["pattern"] == "stormotel.stacks.later_line"
    other = [("/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 5356,
              "barrier"), ("/home/u/eval.py", 9, "evaluate")]
    _snapshot(tmp_path / "b" / f"rank-0-1-1{schema.STACK_SUFFIX}", 0, WAITING)
    _snapshot(tmp_path / "b" / f"rank-1-1-1{schema.STACK_SUFFIX}", 1, other)
    (f,) = analyze_stacks(find_snapshot_files([tmp_path / "b"]), world_size=2).findings
    assert f.kind == "undecided" and f.ranks == [] and f.evidence["suspects"] == [0, 1]
    assert "all_reduce" in f.evidence["reason"] and "barrier" in f.evidence["reason"]
    inner = [("/v/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", 81,
              "wrapper"), *WAITING]
    _snapshot(tmp_path / "c" / f"rank-0-1-1{schema.STACK_SUFFIX}", 0, WAITING)
    _snapshot(tmp_path / "c" / f"rank-1-1-1{schema.STACK_SUFFIX}", 1, inner)
    (f,) = analyze_stacks(find_snapshot_files([tmp_path / "c"]), world_size=2).findings
    assert f.kind == "undecided" and f.evidence["pattern"] == "stormotel.stacks.all_waiting"


def test_a_stall_in_the_last_step_then_a_deliberate_stop_is_one_the_rank_got_over(
        tmp_path: Path) -> None:
    """Round two of the user hangs (helper uh): rank 1 of a healthy job waited in its last
    step's barrier while rank 0 ran a 5 s evaluation; no step followed, so nothing said it got
    over that wait, and the job read as hung. Its stop from the training thread says it."""
    with _tracker(tmp_path) as t:
        _steps(t, 5)
        with t.step():
            wait_for_a_batch()
        assert t.state.stall_snapshots >= 1
    every = _files(tmp_path)
    assert any(f.name.endswith(schema.STACK_PROGRESS_SUFFIX) for f in every), every
    sa = analyze_stacks(find_snapshot_files([tmp_path]), world_size=2)
    assert sa.findings == [] and sa.skipped["snapshot_stall_got_over"] == 1, sa.notes


def test_a_stop_on_sigterm_after_a_stall_leaves_the_hang(tmp_path: Path) -> None:
    """SIGTERM (and the exit handler after an exception) stop with ``linger=True``: the
    launcher ending a hung rank is no progress of it."""
    t = _tracker(tmp_path)
    t.start_tracking()
    _steps(t, 5)
    with t.step():
        wait_for_a_batch()
    t.stop_tracking(linger=True)
    sa = analyze_stacks(find_snapshot_files([tmp_path]), world_size=2)
    assert sa.findings and sa.findings[0].source == "stacks", sa.notes
    assert not any(f.name.endswith(schema.STACK_PROGRESS_SUFFIX) for f in _files(tmp_path))


def test_an_armed_timer_of_a_live_rank_is_no_ended_rank(tmp_path: Path) -> None:
    """The armed file of a rank still running (its timer not yet due) says nothing; the same
    file read after its timer was long due, never fired nor removed, is a process that ended
    without its tracker's stop."""
    t = _tracker(tmp_path)
    t.start_tracking()
    try:
        _steps(t, 5)
        files = find_snapshot_files([tmp_path])
        assert [f.name.endswith(schema.STACK_PENDING_SUFFIX) for f in files] == [True]
        sa = analyze_stacks(files, world_size=2)
        assert sa.findings == [], sa.notes
        assert read_snapshots(files, now_ns=time.time_ns() + 60 * 10**9)[3] == [1]
    finally:
        t.stop_tracking()
