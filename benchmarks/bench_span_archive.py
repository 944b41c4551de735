"""The default archive of a simulated rank, spans included, in MB per rank-hour (issue 41 item 4).

Runs ``stormotel track --sampler simulated`` (the default compact archive, 10 Hz sampling) for
``--duration`` seconds at each step rate asked for, in parallel (the runs mostly sleep), and
prints the bytes each kind of file took, scaled to a rank-hour. The step rate is the simulated
sampler's ``step_period_s`` (the command line keeps its default of one step a second; 10 steps
a second is set here in the child process). Each run's spans are also read back: every
decompressed line parses as an ``ExportTraceServiceRequest`` (the official protobuf class) and
the analyzer loads the folder.

    .venv/bin/python benchmarks/bench_span_archive.py --duration 60 --steps-per-s 1 10
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import functools, sys
from stormotel.samplers import simulated
from stormotel import track_cli
init = simulated.SimulatedSampler.__init__
simulated.SimulatedSampler.__init__ = functools.partialmethod(init, step_period_s={period})
sys.exit(track_cli.main({argv!r}))
"""


def _kind(name: str) -> str:
    if name.endswith(".metrics.cols.zst"):
        return "companion"
    if ".metrics." in name:
        return "metrics"
    if ".traces." in name:
        return "spans"
    return "other"


def _check_spans(folder: Path) -> int:
    import zstandard
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    n = 0
    for f in folder.glob("rank-*.traces.jsonl*"):
        data = f.read_bytes()
        if f.name.endswith(".zst"):
            data = zstandard.ZstdDecompressor().decompressobj(
                read_across_frames=True).decompress(data)
        for line in data.splitlines():
            json_format.Parse(line, ExportTraceServiceRequest())
            n += 1
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--steps-per-s", type=float, nargs="+", default=[1.0, 10.0])
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_spans_"))
    procs = []
    for rate in args.steps_per_s:
        out = tmp / f"r{rate:g}"
        argv = ["--sampler", "simulated", "--duration", str(args.duration), "--archive",
                str(out), "--job-id", "bench", "--rank", "0", "--world-size", "1", "-q"]
        code = CHILD.format(period=1.0 / rate, argv=argv)
        procs.append((rate, out, subprocess.Popen([sys.executable, "-c", code])))
    rc = 0
    for rate, out, p in procs:
        rc |= p.wait()
        sizes: dict[str, int] = {}
        for f in (out / "bench").iterdir():
            if f.is_file():
                sizes[_kind(f.name)] = sizes.get(_kind(f.name), 0) + f.stat().st_size
        per_hour = {k: round(v * 3600 / args.duration / 1e6, 2) for k, v in sizes.items()}
        lines = _check_spans(out / "bench")
        analyzed = subprocess.run([sys.executable, "-m", "stormotel", "analyze",
                                   str(out / "bench"), "--format", "json"],
                                  capture_output=True, text=True)
        print(json.dumps({"steps_per_s": rate, "duration_s": args.duration,
                          "mb_per_rank_hour": per_hour,
                          "total_mb_per_rank_hour": round(sum(per_hour.values()), 2),
                          "span_lines_parsed": lines, "analyze_rc": analyzed.returncode}))
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
