"""The floor under reading a compact archive without its companion (issue 41 item 2).

    .venv/bin/python benchmarks/bench_json_floor.py FOLDER [--files 4]

For the first ``--files`` ``*.metrics.jsonl.zst`` files in FOLDER (e.g. the JSON files of
``bench_archive_scale.py``'s archive, linked into a folder of their own so no companion is
beside them), prints CPU seconds per file (a rank-hour there) of:

- ``decompress``: zstd alone;
- ``typed_floor``: zstd + msgspec decoding every line into structs that declare only what a
  reader needs (timestamps and values of every data point, metric names, the resource);
- ``loader``: ``load_paths`` on the same files (the analyzer's companion-less path, in process).

Each is the best of ``--repeats`` runs (CPU time, so a busy machine inflates it less).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import msgspec
import zstandard


class _Point(msgspec.Struct):
    timeUnixNano: str = ""
    asInt: str | None = None
    asDouble: float | None = None


class _Points(msgspec.Struct):
    dataPoints: list[_Point] = []


class _Metric(msgspec.Struct):
    name: str = ""
    gauge: _Points | None = None
    sum: _Points | None = None


class _Scope(msgspec.Struct):
    metrics: list[_Metric] = []


class _Resource(msgspec.Struct):
    resource: dict[str, object] = {}
    scopeMetrics: list[_Scope] = []


class _Request(msgspec.Struct):
    resourceMetrics: list[_Resource] = []


def _inflate(path: Path) -> bytes:
    return zstandard.ZstdDecompressor().decompressobj(read_across_frames=True).decompress(
        path.read_bytes())


def _best(fn: object, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.process_time()
        fn()  # type: ignore[operator]
        best = min(best, time.process_time() - t)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    files = sorted(args.folder.glob("*.metrics.jsonl.zst"))[:args.files]
    if not files:
        raise SystemExit(f"{args.folder}: no *.metrics.jsonl.zst files")
    dec = msgspec.json.Decoder(_Request)

    def decompress() -> None:
        for f in files:
            _inflate(f)

    def typed() -> None:
        for f in files:
            for line in _inflate(f).splitlines():
                dec.decode(line)

    from stormotel.analyzers.sources import load_paths

    def loader() -> None:
        load_paths([str(f) for f in files])

    json_mb = sum(len(_inflate(f)) for f in files) / 1e6 / len(files)
    out = {"files": len(files), "json_mb_per_file": round(json_mb, 1)}
    for name, fn in (("decompress", decompress), ("typed_floor", typed), ("loader", loader)):
        out[f"{name}_cpu_s_per_file"] = round(_best(fn, args.repeats) / len(files), 3)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
