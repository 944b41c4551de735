"""The analyzer as a scheduled job that runs itself: one job's run (:mod:`.job`: window, state
file, summary line, exit codes around :func:`stormotel.analyzers.run.run_once`), which training
jobs a run looks at (:mod:`.discovery`), where a run starts when the CronJob kept no state
(:mod:`.tsdb_state`), and the TSDB run over every discovered job (:mod:`.run`)."""
