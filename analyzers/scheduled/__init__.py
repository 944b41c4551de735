"""The analyzer as a scheduled job that runs itself (the cron job, and nothing below it): one
job's run (:mod:`.job`: window, state file, summary line, exit codes around
:func:`stormotel.analyzers.run.run_once`), which window it analyses (:mod:`.window`), the state
file (:mod:`.state`), which discovered jobs a shard takes (:mod:`.shard`), and the TSDB run over
every discovered job (:mod:`.run`)."""
