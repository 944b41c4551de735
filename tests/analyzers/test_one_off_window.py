"""A one-off TSDB run reads up to now; only runs with a next run (a state file, ``--scheduled``)
leave the latest minute for it. 54 s into a job, a one-off ``--since 10m`` run whose window
ended 60 s before now found nothing and said only "no telemetry"."""

from __future__ import annotations

import time

from stormotel.analyzers.cli.args import options_from_args
from stormotel.analyzers.cli.flags import build_parser
from stormotel.analyzers.cli.job_flags import SCHEDULED_SETTLE_S
from stormotel.analyzers.scheduled.window import resolve_window
from stormotel.analyzers.sources.protocol import describe_window
from stormotel.analyzers.window import Window

BASE = ["--prometheus", "http://127.0.0.1:1", "--job-id", "run-7", "--since", "10m"]


def _schedule(*extra: str):  # type: ignore[no-untyped-def]
    return options_from_args(build_parser().parse_args([*BASE, *extra])).job.schedule


def test_one_off_run_reads_up_to_now() -> None:
    schedule = _schedule()
    assert schedule.settle == 0.0
    now = time.time_ns()
    window = resolve_window(schedule, now, None, "run-7")
    assert window is not None and window.end_ns == now
    assert window.end_ns - window.start_ns == 600 * 10**9


def test_runs_with_a_next_run_settle(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert _schedule("--state-file", str(tmp_path / "s.json")).settle == SCHEDULED_SETTLE_S
    assert _schedule("--scheduled").settle == SCHEDULED_SETTLE_S
    assert _schedule("--settle", "15s").settle == 15.0  # said explicitly: always honoured


def test_the_window_read_is_said_with_its_length_and_end() -> None:
    now = time.time_ns()
    text = describe_window(Window(now - 600 * 10**9, now - 60 * 10**9, tracked=True))
    assert "(540s, ending 60s before now)" in text and "Z/" in text
    assert "ending now" in describe_window(Window(now - 10**9, now, tracked=False))
