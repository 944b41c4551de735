"""OOM forensics across ranks, from the dumps real trackers write in ``capture_oom``.

Three ranks run real ``MemoryTracker`` s (archive on disk, OOM dumps in ``<job>/oom/``) on a
device whose readings are planted the way the three kinds of OOM look on an 80 GiB GPU:

- rank 1 runs out first with the allocator holding 78 GiB for 30 GiB of tensors (fragmentation);
- rank 0 half a second later with 19.5 GiB outside the allocator (NCCL-style buffers);
- rank 2 last, its tensors filling the device (a genuine peak).

``stormotel analyze <job folder>`` must name rank 1 first, say why for each rank with the dump
paths, and carry it into the text summary and the HTML report.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from stormotel.analyzers.algorithms.oom_forensics import classify, oom_forensics
from stormotel.analyzers.sources.oom_dumps import OomDump, attach_oom_dumps
from stormotel.analyzers.timeline import Timeline

from stormotel.samplers.base import Sample
from stormotel.tracker import MemoryTracker

GIB = 1 << 30
TOTAL = 80 * GIB
ROOT = Path(__file__).resolve().parents[2]
JOB = "oom-job"


@dataclass
class PlantedDevice:
    """A device reading fixed memory until it 'runs out' at ``oom_after_s``."""

    allocated: int
    reserved: int
    used: int
    oom_after_s: float
    device_index: int = 0
    name: str = "planted"
    gpu_uuid: str | None = None
    gpu_name: str | None = None

    def __post_init__(self) -> None:
        self.started = time.monotonic()

    def sample(self) -> Sample:
        return Sample(time.time_ns(), allocated=self.allocated, reserved=self.reserved,
                      active=self.allocated, device_used=self.used, device_total=TOTAL,
                      device_free=TOTAL - self.used)

    def close(self) -> None:
        pass

    def allocate(self) -> None:
        if time.monotonic() - self.started >= self.oom_after_s:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                               "total capacity of 80.00 GiB of which 512.00 MiB is free.")


DEVICES = {
    1: PlantedDevice(allocated=30 * GIB, reserved=78 * GIB, used=int(79.5 * GIB), oom_after_s=1.0),
    0: PlantedDevice(allocated=58 * GIB, reserved=60 * GIB, used=int(79.5 * GIB), oom_after_s=1.5),
    2: PlantedDevice(allocated=77 * GIB, reserved=int(78.5 * GIB), used=int(79.5 * GIB),
                     oom_after_s=2.0),
}


def run_rank(rank: int, out: Path) -> str | None:
    device = DEVICES[rank]
    device.device_index = rank
    tracker = MemoryTracker(sampler=device, sampling_interval=0.05, job_id=JOB, rank=rank,
                            local_rank=rank, world_size=3, host="node-a", archive_dir=out,
                            env={}).start_tracking()
    try:
        while True:
            time.sleep(0.01)
            try:
                with tracker.capture_oom("forward"):
                    device.allocate()
            except RuntimeError:
                return tracker.last_oom_dump
    finally:
        tracker.stop_tracking()


def test_forensics_names_the_first_oom_and_its_cause_through_the_cli(tmp_path: Path) -> None:
    for d in DEVICES.values():
        d.started = time.monotonic()
    dumps: dict[int, str | None] = {}
    threads = [threading.Thread(target=lambda r=r: dumps.__setitem__(r, run_rank(r, tmp_path)))
               for r in DEVICES]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert all(dumps.get(r) and Path(dumps[r]).is_file() for r in DEVICES), dumps  # type: ignore[arg-type]
    job_dir = tmp_path / JOB
    report, html = tmp_path / "r.json", tmp_path / "r.html"
    p = subprocess.run([sys.executable, "-m", "stormotel", "analyze", str(job_dir), "--format",
                        "json", "-o", str(report), "--html", str(html), "-q"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "Traceback" not in p.stderr, p.stderr
    doc = json.loads(report.read_text())
    f = doc["extra"]["oom_forensics"]
    assert f["first_rank"] == 1 and not f["tie"], f
    by_rank = {r["rank"]: r for r in f["ranks"]}
    assert [r["rank"] for r in f["ranks"]] == [1, 0, 2]
    assert by_rank[1]["cause"] == "fragmentation"
    assert by_rank[0]["cause"] == "outside_allocator"
    assert by_rank[2]["cause"] == "genuine_peak"
    for r in DEVICES:
        assert Path(by_rank[r]["dump_path"]) == Path(dumps[r]).resolve()  # type: ignore[arg-type]
        assert by_rank[r]["source"] == "dump"
    assert "rank 1 ran out of memory first" in f["summary"] and "fragmentation" in f["summary"]
    page = html.read_text()
    assert "Out-of-memory forensics" in page and "rank 1 ran out of memory first" in page
    text = subprocess.run([sys.executable, "-m", "stormotel", "analyze", str(job_dir), "-q"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT).stdout
    assert "Out of memory: rank 1 ran out of memory first" in text


def test_ooms_within_one_sampling_interval_are_a_tie() -> None:
    last = {"allocated": 77.0 * GIB, "reserved": 78.0 * GIB, "device_used": 79.0 * GIB,
            "device_total": float(TOTAL)}
    dumps = [OomDump("/a", 0, 1_000_000_000, 0.1, last),
             OomDump("/b", 1, 1_050_000_000, 0.1, last)]
    f = oom_forensics(Timeline(ranks={}), dumps)
    assert f is not None and f.tie and f.first_rank is None
    assert "undecided" in f.summary


def test_classify_needs_the_fields_to_decide() -> None:
    assert classify({"device_used": 79.0 * GIB, "device_total": float(TOTAL)})[0] == "undecided"
    assert oom_forensics(Timeline(ranks={}), []) is None


def test_a_broken_dump_is_a_counted_skip(tmp_path: Path) -> None:
    bad = tmp_path / "rank-0-oom-1.ring.jsonl"
    bad.write_text('{"schema": "something-else"}\n')
    tl = attach_oom_dumps(Timeline(ranks={}), [str(tmp_path)])
    assert tl.skipped["bad_oom_dump"] == 1
    assert any("not a stormotel ring dump" in n for n in tl.notes)
