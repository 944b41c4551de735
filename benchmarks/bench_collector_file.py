"""The same job as the OTel Collector's ``file`` exporter writes it, analysed end to end.

    .venv/bin/python benchmarks/bench_collector_file.py --ranks 128 --hours 1 --compression zstd
    .venv/bin/python benchmarks/bench_collector_file.py --ranks 16 --hours 0.1667 --compression none

**The job** is ``bench_archive_scale.py``'s simulated job (same ranks, samples and planted
faults; its cached archive is written first when missing), so the two inputs can be compared.
**The collector** is modelled on its source (opentelemetry-collector-contrib
``exporter/fileexporter`` and ``processor/batchprocessor``): every rank sends each batch its
tracker writes (one ``ExportMetricsServiceRequest`` per second of 10 Hz samples, the archive's
own lines, context instruments every 10th) to one collector; the batch processor moves whole
``ResourceMetrics`` of the requests it receives into one batch until it holds
``send_batch_size`` (8,192) data points, never merging two ranks' resources; the file exporter
marshals each batch with pdata's JSON marshaler (the protobuf JSON mapping: the tracker's lines
are already that text, so each ``ResourceMetrics`` is carried over byte for byte) and writes:

* ``--compression none``: one request per line (``exportMessageAsLine``);
* ``--compression zstd``: each request compressed alone into one zstd frame (level 3, the
  encoder's default), written as a 4-byte big-endian length and the frame
  (``exportMessageAsBuffer``) — what every released collector writes for ``compression: zstd``;
* ``--compression zstd-native``: the ``exporter.file.nativeCompression`` gate with rotation: a
  zstd frame per write, the message then its ``\\n`` (``compressingWriter`` in rotation mode).

Rotation as ``rotation: {max_megabytes: 100}`` does it (timberjack): before a write that would
take the file past the limit, the file is renamed ``<stem>-<2006-01-02T15-04-05.000>-size<ext>``
and a new one opened at ``path`` (``metrics.jsonl``, ``metrics.jsonl.zst`` for native zstd). The
backup's time is the data's time (the simulated clock), made unique per file.

**The run** is ``stormotel analyze FOLDER --format json`` as a subprocess, measured as
``bench_archive_scale.py`` measures (wall, the tree's CPU, the tree's peak summed RSS). The
report must name the planted ranks, and its findings must equal those of the same job's own
archive (``--compare``, the default: that analysis is run too, through its companion).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import struct
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import zstandard

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_archive_scale as scale  # noqa: E402

GEN_VERSION = 1
SEND_BATCH_SIZE = 8192  # the batch processor's default send_batch_size (data points)
ZSTD_LEVEL = 3  # klauspost/compress SpeedDefault ~ zstd level 3
_PREFIX = b'{"resourceMetrics":['
_SUFFIX = b"]}"


def rank_lines(files: list[Path]) -> Iterator[bytes]:
    """One rank's archive lines, in order, decompressed as a stream."""
    for path in files:
        with open(path, "rb") as fh:
            reader = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(
                fh, read_across_frames=True), 1 << 20)
            for line in reader:
                line = line.rstrip(b"\n")
                if line:
                    yield line


def resource_metrics(line: bytes) -> bytes:
    """The one ``ResourceMetrics`` of a tracker line, as its JSON text."""
    if not (line.startswith(_PREFIX) and line.endswith(_SUFFIX)):
        raise ValueError("not a one-resource ExportMetricsServiceRequest line")
    return line[len(_PREFIX):-len(_SUFFIX)]


def batches(archive: Path) -> Iterator[tuple[list[bytes], int]]:
    """The batch processor's output: (ResourceMetrics texts, the data time in ns) per batch.
    Requests arrive a second at a time from every rank still running (ranks in order)."""
    by_rank: dict[int, list[Path]] = {}
    for p in sorted(archive.glob("rank-*.metrics.jsonl.zst")):
        by_rank.setdefault(int(p.name.split(".")[0].split("-")[1]), []).append(p)
    streams = {r: rank_lines(fs) for r, fs in sorted(by_rank.items())}
    pending: list[bytes] = []
    points = 0
    last_t = 0
    while streams:
        for r in list(streams):
            line = next(streams[r], None)
            if line is None:
                del streams[r]
                continue
            rm = resource_metrics(line)
            pending.append(rm)
            points += rm.count(b'"timeUnixNano"')
            at = rm.find(b'"timeUnixNano":"')
            if at >= 0:
                last_t = max(last_t, int(rm[at + 16:at + 35]))
            if points >= SEND_BATCH_SIZE:
                yield pending, last_t
                pending, points = [], 0
    if pending:
        yield pending, last_t


class FileExporter:
    """``file`` exporter with rotation: JSON lines, or zstd records (legacy or native)."""

    def __init__(self, path: Path, compression: str, max_bytes: int) -> None:
        self.path, self.compression, self.max_bytes = path, compression, max_bytes
        self.cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        self.fh = open(path, "wb")  # noqa: SIM115 - rotated by hand below
        self.size = 0
        self.files = 1
        self.backups: set[str] = set()

    def _rotate(self, t_ns: int) -> None:
        self.fh.close()
        name = self.path.name
        stem, ext = (name.rsplit(".", 1)[0], "." + name.rsplit(".", 1)[1]) if "." in name \
            else (name, "")
        when = datetime.fromtimestamp(t_ns / 1e9, tz=UTC)
        while True:
            stamp = when.strftime("%Y-%m-%dT%H-%M-%S.") + f"{when.microsecond // 1000:03d}"
            backup = f"{stem}-{stamp}-size{ext}"
            if backup not in self.backups:
                break
            when = when.fromtimestamp(when.timestamp() + 0.001, tz=UTC)
        self.backups.add(backup)
        self.path.rename(self.path.with_name(backup))
        self.fh = open(self.path, "wb")  # noqa: SIM115
        self.size = 0
        self.files += 1

    def _write(self, data: bytes, t_ns: int) -> None:
        if self.size and self.size + len(data) > self.max_bytes:
            self._rotate(t_ns)
        self.fh.write(data)
        self.size += len(data)

    def export(self, message: bytes, t_ns: int) -> None:
        if self.compression == "none":
            self._write(message + b"\n", t_ns)  # one write of the line (the "\n" follows)
        elif self.compression == "zstd":
            frame = self.cctx.compress(message)
            self._write(struct.pack(">I", len(frame)) + frame, t_ns)
        else:  # native: a frame per Write call — the message, then its newline
            self._write(self.cctx.compress(message), t_ns)
            self._write(self.cctx.compress(b"\n"), t_ns)

    def close(self) -> None:
        self.fh.close()


def collector_output(ranks: int, hours: float, hz: float, compression: str, rotate_mb: int,
                     workers: int, rewrite: bool) -> Path:
    """The cached collector folder for these parameters, written first if needed."""
    key = f"collector-v{GEN_VERSION}-{compression}-rot{rotate_mb}-r{ranks}-h{hours:g}-hz{hz:g}"
    folder = REPO / "benchmarks" / "out" / key
    done = folder / "DONE.json"
    if done.exists() and not rewrite:
        return folder
    archive = scale.archive(ranks, hours, hz, workers, False) / scale.JOB_ID
    if folder.exists():
        shutil.rmtree(folder)
    data = folder / "otelcol"
    data.mkdir(parents=True)
    name = "metrics.jsonl.zst" if compression == "zstd-native" else "metrics.jsonl"
    exporter = FileExporter(data / name, compression, rotate_mb * 1024 * 1024)
    t0, c0 = time.perf_counter(), time.process_time()
    lines = resources = 0
    for rms, t_ns in batches(archive):
        exporter.export(_PREFIX + b",".join(rms) + _SUFFIX, t_ns)
        lines += 1
        resources += len(rms)
        if lines % 2000 == 0:
            print(f"  {lines:,} requests, {resources:,} resources, {exporter.files} files "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    exporter.close()
    done.write_text(json.dumps({
        "ranks": ranks, "hours": hours, "hz": hz, "compression": compression,
        "rotate_mb": rotate_mb, "requests": lines, "resources": resources,
        "resources_per_request": round(resources / max(1, lines), 1), "files": exporter.files,
        "bytes_on_disk": sum(p.stat().st_size for p in data.iterdir()),
        "write_wall_s": round(time.perf_counter() - t0, 1),
        "write_cpu_s": round(time.process_time() - c0, 1)}))
    return folder


def findings(report: Path) -> dict[str, object]:
    """What the report finds, in a form two inputs of one job can be compared on."""
    rep = json.loads(report.read_text())
    cr = rep.get("cross_rank", {})
    return {
        "participating_ranks": rep.get("participating_ranks"),
        "missing_ranks": rep.get("missing_ranks"),
        "cluster_onset_ns": cr.get("cluster_onset_ns"),
        "suspects": [(s["rank"], s["confidence"], s.get("first_spike_ns"))
                     for s in cr.get("first_cause_suspects", [])],
        "gap": sorted((f["rank"], f["classification"], f["severity"], f["confidence"])
                      for f in rep.get("gap_findings", [])),
        "collective": sorted((f["rank"], f["classification"], f["interval_start_ns"])
                             for f in rep.get("collective_attributions", [])),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--hours", type=float, default=1.0)
    p.add_argument("--hz", type=float, default=10.0)
    p.add_argument("--compression", choices=("none", "zstd", "zstd-native"), default="zstd")
    p.add_argument("--rotate-mb", type=int, default=100, help="rotation max_megabytes")
    p.add_argument("--write-workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--rewrite", action="store_true")
    p.add_argument("--write-only", action="store_true")
    p.add_argument("--no-compare", action="store_true", help="skip the analysis of the "
                   "tracker's own archive of the same job")
    p.add_argument("analyze_args", nargs="*", help="more `stormotel analyze` flags (after --)")
    a = p.parse_args()
    folder = collector_output(a.ranks, a.hours, a.hz, a.compression, a.rotate_mb,
                              a.write_workers, a.rewrite)
    shape = json.loads((folder / "DONE.json").read_text())
    print(f"collector output: {folder} — {json.dumps(shape)}", flush=True)
    if a.write_only:
        return
    runs = {"collector": folder / "otelcol"}
    if not a.no_compare:
        runs["archive"] = scale.archive(a.ranks, a.hours, a.hz, a.write_workers, False) / \
            scale.JOB_ID
    ok = True
    got: dict[str, dict[str, object]] = {}
    for label, data in runs.items():
        out = folder / f"report.{label}.json"
        out.unlink(missing_ok=True)
        load = os.getloadavg()
        m = scale.run_analyze(data, out, a.analyze_args)
        found = scale.check_report(out, a.ranks) if out.exists() else {}
        good = bool(m["rc"] in (0, 1, 2) and found.get("leak_found") and found.get("spike_found"))
        ok = ok and good
        got[label] = findings(out) if out.exists() else {}
        print(json.dumps({"label": label, "shape": shape, "run": m, "found": found,
                          "loadavg_before": load}))
        print(f"SUMMARY {label} ranks={a.ranks} hours={a.hours:g} hz={a.hz:g} "
              f"compression={a.compression} files={shape['files']} "
              f"disk={int(shape['bytes_on_disk']) / 1e9:.2f}GB wall={m['wall_s']:.1f}s "
              f"cpu={m['cpu_s']:.1f}s peak_tree_rss={m['peak_bytes'] / 1e9:.2f}GB "
              f"procs={m['peak_procs']} rc={m['rc']} planted_found={'yes' if good else 'NO'} "
              f"load1={load[0]:.1f}", flush=True)
    if "archive" in got:
        same = got["collector"] == got["archive"]
        print(f"findings collector/archive: {'identical' if same else 'DIFFERENT'}")
        if not same:
            for k in got["collector"]:
                if got["collector"][k] != got["archive"][k]:
                    print(f"  {k}: collector {str(got['collector'][k])[:300]} / archive "
                          f"{str(got['archive'][k])[:300]}")
        ok = ok and same
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
