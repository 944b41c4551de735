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
# Issue 41: the archive's other read paths and its size, beside the above.
echo "== spans on disk: a 60 s simulated rank at 1 and 10 steps/s, load $(cut -d' ' -f1-3 /proc/loadavg)"
$PY benchmarks/bench_span_archive.py --duration 60 --steps-per-s 1 10
echo "== companion-less floor (4 rank-hours of the 1,024-rank archive), load $(cut -d' ' -f1-3 /proc/loadavg)"
JSON_ONLY=$(mktemp -d)
for f in benchmarks/out/archive-scale-v2-r1024-h1-hz10/scale-bench/rank-{0,1,2,3}.00000.metrics.jsonl.zst; do
  if [ -e "$f" ]; then ln -s "$(realpath "$f")" "$JSON_ONLY/"; fi
done
$PY benchmarks/bench_json_floor.py "$JSON_ONLY" --files 4 || true
rm -rf "$JSON_ONLY"
echo "== stormlog 0.4.3 vs stormotel, lean and full layouts in one run, load $(cut -d' ' -f1-3 /proc/loadavg)"
$PY benchmarks/bench_stormlog_compare.py --sizes 64x3600 --layout bare real
# Issue 41: the same job as the OTel Collector's file exporter writes it (zstd records behind
# 4-byte lengths, 68 ranks' resources per line, rotated at 100 MB), findings compared with the
# job's own archive.
echo "== collector file exporter, 1,024 ranks x 1 h, zstd, load $(cut -d' ' -f1-3 /proc/loadavg)"
$PY benchmarks/bench_collector_file.py --ranks 1024 --hours 1 --compression zstd
