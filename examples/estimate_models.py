"""Model factories for ``stormotel estimate`` — small, real models you can copy the shape of.

Each factory returns ``(model, optimizer, batch)``; the estimator runs
``loss = model(batch)`` (summed when not a scalar), ``loss.backward()`` and ``optimizer.step()``.
Factories build everything themselves, so under fake mode nothing is allocated::

    stormotel estimate examples.estimate_models:mlp_adam --device-memory 80GiB
    stormotel estimate examples.estimate_models:transformer_adamw --format json

Sizes are taken from environment variables where a sweep is useful (batch size, width), so one
factory serves a "largest batch that fits" loop without editing code.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


class MLP(nn.Module):
    """Linear → BatchNorm → ReLU → Linear: parameters, buffers (running stats) and activations."""

    def __init__(self, d_in: int, d_hidden: int, d_out: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.norm = nn.BatchNorm1d(d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.norm(self.fc1(x))))


class TinyTransformerBlock(nn.Module):
    """Pre-norm self-attention + MLP block, the unit a transformer stacks."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        heads = [z.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2) for z in (q, k, v)]
        attn = F.scaled_dot_product_attention(*heads, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.ff2(F.gelu(self.ff1(self.norm2(x))))


def _mlp() -> tuple[MLP, torch.Tensor]:
    torch.manual_seed(0)
    model = MLP(_env_int("EST_D_IN", 64), _env_int("EST_HIDDEN", 256), _env_int("EST_D_OUT", 16))
    return model, torch.randn(_env_int("EST_BATCH", 32), _env_int("EST_D_IN", 64))


def mlp_sgd() -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor]:
    """MLP with plain SGD: no optimizer state at all."""
    model, batch = _mlp()
    return model, torch.optim.SGD(model.parameters(), lr=0.1), batch


def mlp_adam() -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor]:
    """MLP with Adam (foreach): two moments per parameter plus a scalar ``step`` each."""
    model, batch = _mlp()
    return model, torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True), batch


def transformer_adamw() -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor]:
    """One transformer block with AdamW on a (batch, sequence, d_model) input."""
    torch.manual_seed(0)
    d_model = _env_int("EST_D_MODEL", 64)
    model = TinyTransformerBlock(d_model, n_heads=4, d_ff=4 * d_model)
    batch = torch.randn(_env_int("EST_BATCH", 4), _env_int("EST_SEQ", 32), d_model)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True), batch


def fsdp_mlp_adam() -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor]:
    """The MLP sharded with FSDP2 (``fully_shard``) over ``EST_WORLD_SIZE`` (default 4) ranks.

    One process stands in for every rank with PyTorch's fake process group, so the estimate is
    the per-rank memory of a real multi-GPU job, computed on one CPU (the estimator picks
    ``FSDPMemTracker`` because the root is an FSDP module).
    """
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    world_size = _env_int("EST_WORLD_SIZE", 4)
    # The mesh is bookkeeping, not model memory, and DeviceMesh reads its tensor's values, which
    # fake tensors do not have: build it with real tensors.
    with unset_fake_temporarily():
        if not dist.is_initialized():
            dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
        mesh = init_device_mesh("cpu", (world_size,))
    model, batch = _mlp()
    for module in (model.fc1, model.fc2, model):
        fully_shard(module, mesh=mesh)
    return model, torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True), batch


def transformer_stack_adamw() -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor]:
    """``EST_LAYERS`` (default 2) blocks of ``EST_D_MODEL`` width with AdamW: scale it up to
    see fake mode estimate a model far larger than this machine's memory."""
    torch.manual_seed(0)
    d_model = _env_int("EST_D_MODEL", 64)
    model = nn.Sequential(*(TinyTransformerBlock(d_model, n_heads=max(1, d_model // 64),
                                                 d_ff=4 * d_model)
                            for _ in range(_env_int("EST_LAYERS", 2))))
    batch = torch.randn(_env_int("EST_BATCH", 4), _env_int("EST_SEQ", 32), d_model)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True), batch
