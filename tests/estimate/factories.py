"""Factories that go wrong in the ways users' factories do, for the CLI's error paths."""

from __future__ import annotations

import torch
from torch import nn


def wrong_shape() -> tuple[nn.Module, torch.optim.Optimizer]:
    model = nn.Linear(4, 4)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def not_an_optimizer() -> tuple[nn.Module, str, torch.Tensor]:
    return nn.Linear(4, 4), "sgd", torch.randn(2, 4)


def raises() -> None:
    raise ValueError("dataset path /data/missing does not exist")


class DataDependent(nn.Module):
    """Python control flow on a tensor's value: fine for real tensors, impossible for fake ones."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        return y * 2 if y.sum() > 0 else y


def data_dependent() -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor]:
    model = DataDependent()
    return model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(4, 8)


NOT_CALLABLE = 42


def converted_after_build() -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor]:
    """``module.to(dtype)`` after building: fake parameters cannot be swapped."""
    model = nn.Linear(8, 8).to(torch.bfloat16)
    return model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(4, 8).bfloat16()


def deep_copied_layers() -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor]:
    """nn.TransformerEncoder deep-copies its layer, giving the copies another fake mode."""
    layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    return model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(2, 4, 16)
