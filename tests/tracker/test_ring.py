"""The flight-recorder ring buffer: bounded, atomic, readable dumps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stormotel import schema
from stormotel.ring import RingBuffer
from stormotel.samplers.base import Sample


def _fill(ring: RingBuffer, n: int) -> None:
    for i in range(n):
        ring.push(Sample(timestamp_ns=i, allocated=i * 10, reserved=i * 20,
                         device_used=None if i % 2 else i * 30, device_total=1000))


def test_ring_keeps_the_newest_capacity_samples() -> None:
    ring = RingBuffer(5)
    _fill(ring, 12)
    snap = ring.snapshot()
    assert len(ring) == 5 and snap["timestamp_ns"].tolist() == [7, 8, 9, 10, 11]


def test_dump_is_atomic_and_readable(tmp_path: Path) -> None:
    ring = RingBuffer(100)
    _fill(ring, 10)
    path = ring.dump(tmp_path / "d" / "rank-0.ring.jsonl", {"reason": "oom", "rank": "0"})
    lines = path.read_text().splitlines()
    head = json.loads(lines[0])
    assert head["schema"] == schema.RING_DUMP_SCHEMA and head["reason"] == "oom"
    assert head["samples"] == 10 and head["dropped_for_size"] == 0
    rows = [json.loads(x) for x in lines[1:]]
    assert rows[3] == {"timestamp_ns": 3, "allocated": 30, "reserved": 60, "active": None,
                       "inactive_split": None, "device_used": None, "device_total": 1000,
                       "device_free": None, "process_used": None, "alloc_retries": None,
                       "num_ooms": None}
    assert rows[4]["device_used"] == 120
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left behind


def test_dump_is_bounded_in_lines_and_bytes(tmp_path: Path) -> None:
    ring = RingBuffer(1000)
    _fill(ring, 1000)
    by_lines = ring.dump(tmp_path / "a.jsonl", max_lines=50)
    assert len(by_lines.read_text().splitlines()) == 51
    by_bytes = ring.dump(tmp_path / "b.jsonl", max_bytes=8000)
    text = by_bytes.read_text()
    assert len(text.encode()) <= 8000
    head, *rows = text.splitlines()
    assert json.loads(head)["dropped_for_size"] == 1000 - len(rows)
    assert json.loads(rows[-1])["timestamp_ns"] == 999  # the newest survive


def test_failed_dump_leaves_the_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    ring = RingBuffer(10)
    _fill(ring, 3)
    target = ring.dump(tmp_path / "x.jsonl")
    before = target.read_text()

    def boom(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.fsync", boom)
    _fill(ring, 5)
    with pytest.raises(OSError):
        ring.dump(target)
    assert target.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.jsonl"]
