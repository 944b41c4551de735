"""CUDA and NVML samplers on a real NVIDIA GPU; skipped with the reason when there is none."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from stormotel.samplers import SamplerUnavailable, make_sampler


def _cuda_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU: torch.cuda.is_available() is False"
    return None


def _nvml_reason() -> str | None:
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return f"no NVIDIA GPU: NVML init failed ({e})"
    pynvml.nvmlShutdown()
    return None


@pytest.mark.gpu
def test_cuda_sampler_sees_an_allocation() -> None:
    if (reason := _cuda_reason()) is not None:
        pytest.skip(reason)
    import torch

    sampler = make_sampler("cuda", "cuda:0")
    before = sampler.sample()
    block = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda:0")
    after = sampler.sample()
    assert after.allocated is not None and before.allocated is not None
    assert after.allocated - before.allocated >= 256 * 2**20
    assert after.reserved >= after.allocated
    assert 0 < after.device_used <= after.device_total
    assert after.device_free == after.device_total - after.device_used
    assert after.num_ooms == 0 and after.alloc_retries is not None
    assert sampler.gpu_uuid and sampler.gpu_uuid.startswith("GPU-")
    del block


def _nested_stats() -> dict[str, object]:
    """The shape ``torch._C._cuda_memoryStats`` returns: per stat, per pool, four counters."""
    pools = ("all", "small_pool", "large_pool")
    counters = ("current", "peak", "allocated", "freed")
    stats: dict[str, object] = {
        name: {pool: {c: (i + 1) * 2**20 + j * 7 + k for k, c in enumerate(counters)}
               for j, pool in enumerate(pools)}
        for i, name in enumerate(("allocated_bytes", "reserved_bytes", "active_bytes",
                                  "inactive_split_bytes", "requested_bytes", "segment"))}
    stats.update(num_alloc_retries=3, num_ooms=1, num_sync_all_streams=0,
                 max_split_size=-1, oversize_allocations={"current": 0, "peak": 0})
    return stats


def test_cuda_reading_equals_torch_memory_stats(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sampler reads the nested form; torch's own ``memory_stats`` flattens the same dict
    (its code, run here with the C call replaced): every field must agree."""
    import torch.cuda.memory

    from stormotel.samplers.cuda import sample_from_stats

    nested = _nested_stats()
    monkeypatch.setattr(torch.cuda.memory, "memory_stats_as_nested_dict",
                        lambda device=None: nested)
    flat = torch.cuda.memory.memory_stats(0)
    got = sample_from_stats(nested, free=5 * 2**30, total=16 * 2**30, timestamp_ns=1)
    assert (got.allocated, got.reserved, got.active, got.inactive_split) == (
        flat["allocated_bytes.all.current"], flat["reserved_bytes.all.current"],
        flat["active_bytes.all.current"], flat["inactive_split_bytes.all.current"])
    assert (got.alloc_retries, got.num_ooms) == (flat["num_alloc_retries"], flat["num_ooms"])
    assert (got.device_used, got.device_free, got.device_total) == (
        11 * 2**30, 5 * 2**30, 16 * 2**30)
    empty = sample_from_stats({}, free=1, total=2, timestamp_ns=1)  # allocator not initialised
    assert (empty.allocated, empty.reserved, empty.num_ooms) == (0, 0, 0)


@pytest.mark.gpu
def test_cuda_sampler_agrees_with_memory_stats_on_the_device() -> None:
    if (reason := _cuda_reason()) is not None:
        pytest.skip(reason)
    import torch

    sampler = make_sampler("cuda", "cuda:0")
    block = torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda:0")
    torch.cuda.synchronize()
    got, flat = sampler.sample(), torch.cuda.memory_stats(0)
    assert got.allocated == flat["allocated_bytes.all.current"]
    assert got.reserved == flat["reserved_bytes.all.current"]
    assert got.num_ooms == flat.get("num_ooms", 0)
    del block


@pytest.mark.gpu
def test_nvml_sampler_reads_the_device() -> None:
    if (reason := _nvml_reason()) is not None:
        pytest.skip(reason)
    sampler = make_sampler("nvml", 0)
    try:
        s = sampler.sample()
        assert s.device_total and 0 < s.device_used <= s.device_total
        assert s.device_free is not None and s.device_free <= s.device_total
        assert sampler.gpu_uuid and sampler.gpu_uuid.startswith("GPU-")
        assert sampler.gpu_name
        assert s.timestamp_ns <= time.time_ns()
    finally:
        sampler.close()


def test_missing_gpu_is_a_clear_sampler_error() -> None:
    if _cuda_reason() is None:
        pytest.skip("a CUDA GPU is present; the missing-GPU path cannot be exercised")
    with pytest.raises(SamplerUnavailable, match=r"no CUDA GPU|needs PyTorch"):
        make_sampler("cuda")


@pytest.mark.gpu
def test_tracker_on_a_real_gpu_writes_the_archive(tmp_path: Path) -> None:
    if (reason := _cuda_reason()) is not None:
        pytest.skip(reason)
    import torch

    from stormotel import schema
    from stormotel.tracker import MemoryTracker
    from tests.tracker.otlp_util import MetricsRequest, parse_lines, points

    tracker = MemoryTracker(device="cuda:0", sampler="cuda", sampling_interval=0.05,
                            job_id="gpu", archive_dir=tmp_path, env={})
    with tracker:
        for i in range(5):
            with tracker.step(i):
                x = torch.randn(4096, 4096, device="cuda:0")
                y = x @ x
                y.sum().item()
                time.sleep(0.12)  # x and y (64 MiB each) live across at least one sample
                del x, y
    reqs = parse_lines(tracker.archive_files[0], MetricsRequest)
    peak = max(p.as_int for _r, n, p in points(reqs) if n == schema.ALLOC_ALLOCATED_PEAK.name)
    assert peak >= 2 * 4096 * 4096 * 4
    assert tracker.identity.gpu_uuid and tracker.identity.gpu_uuid.startswith("GPU-")


@pytest.mark.gpu
def test_a_real_cuda_oom_is_counted_dumped_and_read_back(tmp_path: Path) -> None:
    """A real allocator OOM on the device: the allocator's own ``num_ooms`` counter moves, the
    ring dump and the OOM event are written before the error leaves ``capture_oom``, and the
    analyzer names the rank from the archive alone (the CPU suite plants simulated OOMs)."""
    if (reason := _cuda_reason()) is not None:
        pytest.skip(reason)
    import json
    import os
    import subprocess
    import sys

    import torch

    from stormotel.tracker import MemoryTracker

    sampler_before = make_sampler("cuda", "cuda:0").sample()
    tracker = MemoryTracker(device="cuda:0", sampler="cuda", sampling_interval=0.05,
                            job_id="gpu-oom", archive_dir=tmp_path / "archive",
                            oom_dump_dir=tmp_path / "oom", env={})
    total = torch.cuda.get_device_properties(0).total_memory
    with tracker:
        keep = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda:0")
        time.sleep(0.3)
        with pytest.raises(torch.OutOfMemoryError), tracker.capture_oom(context="planted"):
            torch.empty(2 * total, dtype=torch.uint8, device="cuda:0")
        del keep
    after = make_sampler("cuda", "cuda:0").sample()
    assert after.num_ooms == (sampler_before.num_ooms or 0) + 1
    dump = Path(tracker.last_oom_dump or "")
    assert dump.is_file()
    head, *rows = [json.loads(x) for x in dump.read_text().splitlines()]
    assert head["reason"] == "oom" and head["context"] == "planted"
    assert "out of memory" in head["error"].lower()
    assert rows and rows[-1]["num_ooms"] >= 1
    proc = subprocess.run([sys.executable, "-m", "stormotel", "analyze",
                           str(tmp_path / "archive"), "--format", "json"],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    forensics = json.loads(proc.stdout)["extra"].get("oom_forensics")
    assert forensics and [r["rank"] for r in forensics["ranks"]] == [0], proc.stdout[-2000:]
