"""CUDA and NVML samplers on a real NVIDIA GPU; skipped with the reason when there is none."""

from __future__ import annotations

import time

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
