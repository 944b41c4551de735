"""``stormotel serve``: an Alertmanager webhook receiver that analyses the alerting job.

A page names a job; the receiver turns it into one :func:`stormotel.analyzers.run.run_once`
over that job's TSDB window (through the scheduled job's
:func:`~stormotel.analyzers.scheduled.job.run_job`, the same run ``stormotel analyze
--prometheus`` makes) and serves the latest report per job. It is a thin transport around the
run, one module per idea:

* :mod:`.webhook` — Alertmanager's payload (version 4) → which jobs, and a delivery key;
* :mod:`.queue` — the durable per-job queue under ``--out`` (write, fsync, rename) that makes a
  2xx mean "queued", coalesces notifications per job and survives SIGKILL;
* :mod:`.store` — the reports on disk: safe job paths, atomic publication, retention;
* :mod:`.worker` — the analysis threads (one run in flight per job, bounded concurrency);
* :mod:`.auth`, :mod:`.http`, :mod:`.pages`, :mod:`.metrics` — the HTTP side;
* :mod:`.options`, :mod:`.cli` — the flags and the command.
"""
