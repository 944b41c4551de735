"""Log parsing stays linear on the shapes that made it quadratic (issue 39, item 1).

    .venv/bin/python benchmarks/bench_log_parse.py --mb 10

Writes, in a temp dir, (a) ``--mb`` MB of tqdm progress-bar output after one ProcessGroupNCCL
watchdog line (every bar line >= 60 characters and not ending in ".", the shape the wrapped-line
joiner used to glue onto the record one copy at a time), once as separate lines and once as one
``\\r``-separated line per 200 updates; (b) one line of ``--mb`` MB repeating a launcher-rank
prefix; (c) the same log at a quarter of the size, so the growth ratio (linear: 4x) is printed
next to the times. Each shape prints one JSON line: seconds to parse, MB/s, and the growth.
Results are recorded in docs/benchmarks.md ("Log parsing, linear time").
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormotel.analyzers.stalls import logs_parser as lp

WATCHDOG = ("[rank0]:[E1121 05:28:12.415871201 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID "
            "0(default_pg) Rank 0] Watchdog caught collective operation timeout: WorkNCCL("
            "SeqNum=5, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for "
            "600010 milliseconds before timing out")


def _bar(i: int) -> str:
    return (f"Epoch 0:  {i % 100:2d}%|████▌     | {i}/100000 [00:10<00:20, 45.00it/s, "
            f"loss=0.{i % 997}, v_num=NCCL]")


def progress_lines(size: int) -> str:
    out, n, i = [WATCHDOG], 0, 0
    while n < size:
        out.append(_bar(i))
        n += len(out[-1]) + 1
        i += 1
    return "\n".join(out) + "\n"


def progress_cr(size: int) -> str:
    out, n, i = [WATCHDOG], 0, 0
    while n < size:
        out.append("\r".join(_bar(i + k) for k in range(200)))
        n += len(out[-1]) + 1
        i += 200
    return "\n".join(out) + "\n"


def launcher_line(size: int) -> str:
    unit = "(Worker[rank=3] pid=12) [default1]: rank=2 pid=5 [1,3]<stderr>: "
    return WATCHDOG + "\n" + unit * (size // len(unit)) + "\n"


def _time(make: Callable[[int], str], size: int, folder: Path) -> float:
    log = folder / "rank0.log"
    log.write_text(make(size), encoding="utf-8")
    started = time.perf_counter()
    lp.parse_logs([str(log)])
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=float, default=10.0)
    args = ap.parse_args()
    size = int(args.mb * 1_000_000)
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in (("progress_lines", progress_lines), ("progress_cr", progress_cr),
                           ("launcher_line", launcher_line)):
            quarter = _time(make, size // 4, Path(tmp))
            full = _time(make, size, Path(tmp))
            print(json.dumps({"shape": name, "mb": args.mb, "seconds": round(full, 2),
                              "mb_per_s": round(args.mb / full, 1),
                              "growth_from_quarter": round(full / max(quarter, 1e-6), 1)}),
                  flush=True)


if __name__ == "__main__":
    main()
