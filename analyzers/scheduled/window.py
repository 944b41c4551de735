"""Which half-open window ``[start, end)`` a scheduled run analyses
(:class:`~stormotel.analyzers.window.Window`): from where the previous run ended (state file, or
the end read back from the TSDB), ``--settle`` before now, at most ``--max-window``."""

from __future__ import annotations

import time

from stormotel.analyzers.options import ScheduleOptions
from stormotel.analyzers.scheduled.state import StateError, StateFile
from stormotel.analyzers.window import Window, iso_time

#: A window that continues the previous run's and is shorter than this holds at most one or two
#: scrapes (15-30 s intervals): too little to judge, and often none at all. The run exits 0
#: with "nothing new yet" and leaves the window to the next run, instead of failing (exit 3)
#: on a second run seconds after the first.
MIN_NEW_WINDOW_S = 30.0


def clock_ns(schedule: ScheduleOptions) -> int:
    """The run's now: ``--now`` where given (a replay or backfill as of a past cron tick, which
    the options keep from being later than the clock), else the clock."""
    return schedule.now if schedule.now is not None else time.time_ns()


def resolve_window(schedule: ScheduleOptions, now_ns: int, state: StateFile | None,
                   job_id: str, written_end_ns: int | None = None,
                   schedule_step: float | None = None) -> Window | None:
    """The half-open window ``[start, end)`` of this run; None when there is nothing new.

    ``written_end_ns`` is the previous run's end as read back from the TSDB, used when the state
    file does not know the job (a CronJob's emptyDir starts empty every run). A window that
    continues the previous run's but is shorter than ``MIN_NEW_WINDOW_S`` (or two ``--step``)
    comes back ``deferred``."""
    if schedule.start is not None:
        end = schedule.end if schedule.end is not None else now_ns
        if end <= schedule.start:
            raise StateError("--end must be after --start")
        return Window(schedule.start, end, tracked=False)
    end = now_ns - int(schedule.settle * 1e9)
    last = state.last_end_ns(job_id) if state else None
    if last is None:
        last = written_end_ns
    since = schedule.since if schedule.since is not None else 3600.0
    note = ""
    if last is not None and now_ns < last <= now_ns + int(max(60.0, schedule.timeout or 0) * 1e9):
        # Another run that started after this one (a shard, an unsharded run, the next cron
        # tick while this one ran) has already analysed past this run's "now": nothing new.
        return None
    if last is not None and last > now_ns:
        # We only ever store ends at or before "now": a future one is a clock jump or a
        # hand-edited file (or series), and trusting it would make every run "no new time".
        note = (f"the previous run's end {iso_time(last)} lies in the future; analysed the last "
                f"{since:g}s instead")
        last = None
    start = last if last is not None else end - int(since * 1e9)
    if end <= start:
        return None
    shortest = max(MIN_NEW_WINDOW_S, 2 * (schedule_step or 0.0))
    if last is not None and end - start < shortest * 1e9:
        return Window(start, end, tracked=True, deferred=True,
                      note=f"nothing new yet: {(end - start) / 1e9:.3g}s since the previous run "
                           f"is less than {shortest:g}s (too few scrapes to judge); the next "
                           "run covers it")
    max_ns = int(schedule.max_window * 1e9)
    if end - start > max_ns:
        end = start + max_ns
        note = f"catching up: analysed {schedule.max_window:g}s of a longer backlog"
    return Window(start, end, tracked=True, note=note)
