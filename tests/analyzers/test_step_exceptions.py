"""A rank whose last step ended in an exception (analyzers/algorithms/step_exceptions.py), read
through the CLI from a real tracker's archive: raised in the rank's own code with no step
after it, the rank is named (medium); caught and gone on from, or an exception that ends work on
purpose (StopIteration), it is no failure. The multi-rank cases (a peer failing inside its
collective because of it) run as real gloo jobs: tests/stalls/test_newcomer_hangs.py."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from stormotel import MemoryTracker, exitcodes
from tests.fuzz.boundary import analyze, check


def load_batch() -> None:
    raise ValueError("corrupt sample in shard 0")


def _archive(tmp_path: Path, exc: type[BaseException], go_on: bool, world_size: int = 1,
             raiser: Callable[[], None] | None = None) -> Path:
    """Rank 0's archive: five steps, a sixth that raises ``exc`` (through ``raiser`` when
    given, else ``load_batch`` for ValueError), caught, then more steps if ``go_on``."""
    t = MemoryTracker(sampler="simulated", archive_dir=tmp_path / "archive", job_id="j",
                      rank=0, world_size=world_size, sampling_interval=0.05,
                      stall_snapshots=False)
    t.start_tracking()
    for i in range(5):
        with t.step(i):
            time.sleep(0.01)
    try:
        with t.step(5):
            if raiser is not None:
                raiser()
            if exc is ValueError:
                load_batch()
            raise exc()
    except exc:
        pass
    for i in range(6, 9 if go_on else 6):
        with t.step(i):
            time.sleep(0.01)
    t.stop_tracking()
    return tmp_path / "archive"


def _run(tmp_path: Path, archive: Path) -> tuple[int, dict]:
    out = tmp_path / "r.json"
    result = analyze(str(archive), "--format", "json", "-o", str(out), "-q")
    check(result, out)
    return result.code, json.loads(out.read_text())


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_rank_whose_last_step_raised_in_its_own_code_is_named(tmp_path: Path) -> None:
    code, report = _run(tmp_path, _archive(tmp_path, ValueError, go_on=False))
    assert code == exitcodes.FINDINGS
    lead = report["stall_findings"][0]
    assert (lead["kind"], lead["ranks"], lead["confidence"]) == ("rank_failure", [0], "medium")
    assert lead["evidence"]["pattern"] == "stormotel.telemetry.exception_own_code"
    assert "load_batch" in lead["evidence"]["exceptions"]["0"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(("exc", "go_on"), [(ValueError, True), (StopIteration, False)])
def test_an_exception_gone_on_from_or_ending_work_on_purpose_is_no_failure(
        tmp_path: Path, exc: type[BaseException], go_on: bool) -> None:
    code, report = _run(tmp_path, _archive(tmp_path, exc, go_on))
    assert code == exitcodes.OK, report["stall_findings"]
    assert report["stall_findings"] == []


def sync_loss() -> None:
    """The rank's own code where NCCL reports a peer's loss (its next synchronising call)."""
    raise RuntimeError("NCCL communicator was aborted on rank 0. Original reason for failure "
                       "was: [Rank 0] Watchdog caught collective operation timeout")


def _all_reduce_failed() -> None:
    """What gloo raises in a rank whose peer died (torch 2.13's message, its words only)."""
    raise RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed "
                       "by peer [127.0.0.1]:48313. This is typically caused by a remote worker "
                       "crashing.")


def rethrow_plain() -> None:
    """The newcomer's handler: a plain error of its own while handling the collective's."""
    try:
        _all_reduce_failed()
    except RuntimeError:
        raise RuntimeError("training failed at step 5")  # noqa: B904


def rethrow_from() -> None:
    try:
        _all_reduce_failed()
    except RuntimeError as e:
        raise RuntimeError("training failed at step 5") from e


def rethrow_own() -> None:
    """A chain whose first exception is the rank's own (a bad sample): still its own failure."""
    try:
        load_batch()
    except ValueError:
        raise RuntimeError("training failed at step 5")  # noqa: B904


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("raiser", [sync_loss, rethrow_plain, rethrow_from])
def test_a_communication_failure_surfacing_in_the_rank_s_own_code_names_no_rank(
        tmp_path: Path, raiser: Callable[[], None]) -> None:
    """NCCL raises a peer's loss at the next synchronising call, in the rank's own frames
    (``loss.item()``): by its words a consequence, never that rank's own failure. So is a plain
    error the rank's code raises while handling (or from) a collective's failure (round three,
    helper nh, ``victim_rethrow3``: such victims were named at medium while the rank whose
    death broke the collective, SIGKILLed, recorded nothing): the span's traceback holds the
    chain."""
    archive = _archive(tmp_path, RuntimeError, go_on=False, world_size=2, raiser=raiser)
    code, report = _run(tmp_path, archive)
    assert code == exitcodes.FINDINGS, report["stall_findings"]
    assert all(f["kind"] != "rank_failure" for f in report["stall_findings"]), \
        report["stall_findings"]
    lead = report["stall_findings"][0]
    assert (lead["kind"], lead["confidence"]) == ("undecided", "low")
    assert lead["evidence"]["pattern"] == "stormotel.telemetry.exception_in_collective"
    assert lead["evidence"]["suspects"] == [1]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_chain_that_starts_in_the_rank_s_own_code_is_still_its_own_failure(
        tmp_path: Path) -> None:
    code, report = _run(tmp_path, _archive(tmp_path, RuntimeError, go_on=False, world_size=2,
                                           raiser=rethrow_own))
    assert code == exitcodes.FINDINGS
    lead = report["stall_findings"][0]
    assert (lead["kind"], lead["ranks"]) == ("rank_failure", [0]), lead
    assert lead["evidence"]["pattern"] == "stormotel.telemetry.exception_own_code"
