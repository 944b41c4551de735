"""The analyzer as a scheduled job that runs itself: which training jobs a run looks at
(:mod:`.discovery`), where a run starts when the CronJob kept no state (:mod:`.tsdb_state`), and
the run over every discovered job (:mod:`.run`). The single-job run (window, state file, sinks,
exit codes) is :mod:`analyzers.job`."""
