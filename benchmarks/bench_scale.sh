#!/usr/bin/env bash
# Issue 29's (and 41's) scale benchmarks side by side, in one go, on one machine: the archive on disk
# (1,024 ranks x 1 h at 10 Hz, with and without the columnar companion), then a real
# VictoriaMetrics at 10,000 ranks x 1 h and 1,024 ranks x 6 h, each with gzip and identity
# answers. Inputs are cached in benchmarks/out/ (written on first use; see each script).
# The SUMMARY / JSON lines are what docs/benchmarks.md ("Scale, side by side") records.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
echo "== $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
$PY benchmarks/bench_archive_scale.py --ranks 1024 --hours 1 --hz 10 --json-only
for shape in "10000 1" "1024 6"; do
  set -- $shape
  for enc in gzip identity; do
    echo "== tsdb ${1} ranks x ${2} h, ${enc}, load $(cut -d' ' -f1-3 /proc/loadavg)"
    $PY benchmarks/bench_tsdb_scale.py --ranks "$1" --hours "$2" --encoding "$enc"
  done
  # Issue 41: a real Prometheus read through remote read (streamed XOR chunks); the baseline
  # is the query API's own answers for the same job (the VictoriaMetrics runs above read
  # through its export API and keep the same baseline).
  echo "== prometheus ${1} ranks x ${2} h, gzip, load $(cut -d' ' -f1-3 /proc/loadavg)"
  $PY benchmarks/bench_tsdb_scale.py --tsdb prometheus --ranks "$1" --hours "$2" --encoding gzip
done
