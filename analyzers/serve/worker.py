"""The analysis threads: take a job from the queue, run it, publish it, tell the queue.

Each run is the scheduled job's single-job run
(:func:`~stormotel.analyzers.scheduled.job.run_job`, i.e. :func:`~stormotel.analyzers.run.
run_once` around the TSDB source and every configured sink) with the window this receiver
needs: from the job's first sample (:mod:`.window`, at most ``--max-window`` back) **up to
now, with no settle** — ``analyze``'s one-minute settle would cut off the very fault that paged.
The report and the HTML page are written into a staging folder and moved into place together
(:meth:`~stormotel.analyzers.serve.store.Store.publish`); the queue forgets the job only then.

At most ``workers`` runs at once, and never two of one job (:meth:`WorkQueue.take`).
"""

from __future__ import annotations

import dataclasses
import io
import threading
import time
from pathlib import Path
from typing import TextIO

from stormotel.analyzers.headline import headline
from stormotel.analyzers.options import AnalyzeOptions, OutputOptions
from stormotel.analyzers.serve.metrics import ServeMetrics
from stormotel.analyzers.serve.queue import Pending, WorkQueue
from stormotel.analyzers.serve.store import REPORT_HTML, REPORT_JSON, Store
from stormotel.analyzers.serve.window import window_start_ns

from stormotel import exitcodes
from stormotel.textsafe import one_line

OUTCOMES = {exitcodes.OK: "ok", exitcodes.FINDINGS: "findings",
            exitcodes.SOURCE_FAILURE: "source_failure", exitcodes.SINK_FAILURE: "sink_failure",
            exitcodes.USAGE: "usage_error"}


def run_options(base: AnalyzeOptions, job_id: str, staging: str, now_ns: int,
                start_ns: int) -> AnalyzeOptions:
    """``base`` (every TSDB and sink flag of the command) for one job's run over
    ``[start_ns, now_ns)``."""
    schedule = dataclasses.replace(
        base.job.schedule, start=start_ns, end=now_ns, since=None,
        state_file=None, settle=0.0, scheduled=True, job_selector=None, shard=None)
    job = dataclasses.replace(base.job, job_id=job_id, schedule=schedule, quiet=True)
    output = OutputOptions(format="json", output=f"{staging}/{REPORT_JSON}",
                           html=_path(f"{staging}/{REPORT_HTML}"), quiet=True)
    return dataclasses.replace(base, job=job, output=output)


def _path(text: str) -> Path:
    return Path(text)


class Analyst:
    """Runs one job's analysis and publishes it; the threads of :class:`Workers` call it."""

    def __init__(self, base: AnalyzeOptions, store: Store, metrics: ServeMetrics,
                 max_window_s: float, log: TextIO) -> None:
        self.base, self.store, self.metrics = base, store, metrics
        self.max_window_s, self.log = max_window_s, log
        self._log_lock = threading.Lock()

    def say(self, msg: str) -> None:
        with self._log_lock:
            print(f"stormotel serve: {one_line(msg, 2000)}", file=self.log, flush=True)

    def analyse(self, p: Pending) -> int:
        """One run of ``p``'s job; returns the run's exit code (never raises for the run's
        own failures: they are counted, logged, and the job stays servable as it was)."""
        from stormotel.analyzers.scheduled.job import run_job

        now_ns = time.time_ns()
        staging = self.store.staging(p.job_id)
        start_ns = window_start_ns(self.base.job, p.job_id, now_ns, self.max_window_s)
        opts = run_options(self.base, p.job_id, str(staging), now_ns, start_ns)
        runlog = io.StringIO()
        started = time.monotonic()
        try:
            result = run_job(opts, err=runlog, out=io.StringIO(), now_ns=now_ns)
            code, report = result.code, result.report
        except Exception as e:  # a bug in one run must not stop the receiver
            code, report = exitcodes.INTERNAL, None
            runlog.write(f"internal error: {type(e).__name__}: {one_line(e, 300)}\n")
        duration = time.monotonic() - started
        outcome = OUTCOMES.get(code, "internal_error")
        self.metrics.analyses.labels(outcome).inc()
        self.metrics.duration.observe(duration)
        for line in runlog.getvalue().splitlines()[-20:]:
            self.say(line)
        if report is None or not (staging / REPORT_JSON).exists():
            self.say(f"job {p.job_id!r}: no report ({outcome}); the previous one, if any, stays")
            lines = [line for line in runlog.getvalue().splitlines() if line.strip()]
            # the run's own error line; the cron summary line after it only repeats the outcome
            reason = next((line for line in reversed(lines) if "error:" in line),
                          lines[-1] if lines else "")
            self.store.record_failure(p.job_id, {
                "job_id": p.job_id, "analysed_at_ns": now_ns, "outcome": outcome, "exit": code,
                "reason": one_line(reason, 500)})
            return code
        lead = headline(report)
        final = not p.firing
        self.store.publish(p.job_id, {
            "job_id": p.job_id, "analysed_at_ns": now_ns, "duration_s": round(duration, 3),
            "trigger": p.alertnames, "ranks_paged": p.ranks,
            "status": "resolved" if final else "firing", "final": final,
            "outcome": outcome, "exit": code, "headline": lead.text, "top_rank": lead.rank,
            "lead_kind": lead.kind, "window_start_ns": report.window_start_ns,
            "window_end_ns": report.window_end_ns, "keys": p.keys, "generation": p.generation})
        self.say(f"job {p.job_id!r}: {outcome}{' (final: resolved)' if final else ''} in "
                 f"{duration:.2f} s — {lead.text}")
        return code


class Workers:
    """``count`` threads draining the queue until :meth:`stop`."""

    def __init__(self, queue: WorkQueue, analyst: Analyst, count: int) -> None:
        self.queue, self.analyst = queue, analyst
        self.threads = [threading.Thread(target=self._loop, name=f"stormotel-serve-{i}",
                                         daemon=True) for i in range(count)]
        self._stopping = threading.Event()

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _loop(self) -> None:
        while not self._stopping.is_set():
            taken = self.queue.take(timeout=1.0)
            if taken is None:
                continue
            started_ns = time.time_ns()
            self.analyst.metrics.inflight.inc()
            try:
                self.analyst.analyse(taken)
            finally:
                self.analyst.metrics.inflight.dec()
                self.queue.done(taken, started_ns)

    def stop(self, timeout: float) -> bool:
        """No new runs; wait up to ``timeout`` s for the runs in flight (True when they all
        finished; an unfinished one stays queued on disk for the next start)."""
        self._stopping.set()
        self.queue.close()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self.threads)
