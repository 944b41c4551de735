"""Loading the user's ``package.module:function`` model factory and checking what it returns.

The factory is the estimator's only input, so every way it can be wrong — a typo in the path, a
module that fails to import, a function that raises, a result of the wrong shape — becomes a
:class:`FactoryError` with one line that names the factory and what was wrong. The CLI turns that
into exit code 2 (usage) without a traceback: these are mistakes the user fixes, not crashes.
"""

from __future__ import annotations

import importlib
import os
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

import stormotel
from stormotel.estimate.factory_spec import FactoryError, not_found, split_spec


@dataclass
class Workload:
    """What one training step needs: the model, its optimizer and one batch of inputs.

    ``batch`` is passed to the model as ``model(batch)`` for a tensor, ``model(*batch)`` for a
    tuple or list and ``model(**batch)`` for a mapping.
    """

    model: nn.Module
    optimizer: torch.optim.Optimizer
    batch: Any

    def batch_tensors(self) -> list[torch.Tensor]:
        """Every tensor in the batch (nested tuples, lists and dicts included)."""
        leaves, _ = tree_flatten(self.batch)
        return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def load_factory(spec: str) -> Callable[[], Any]:
    """Resolve ``package.module:function`` to a callable.

    The current directory is put on ``sys.path`` (as ``python -m`` would), so a factory in a
    local file works without installing it.
    """
    module_name, attr = split_spec(spec)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise not_found(spec, exc.name) from None
        raise FactoryError(f"factory {spec!r}: importing {module_name!r} failed: "
                           f"{describe_exception(exc)}") from None
    except Exception as exc:  # the user's module raised while importing
        raise FactoryError(f"factory {spec!r}: importing {module_name!r} failed: "
                           f"{describe_exception(exc)}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise FactoryError(f"factory {spec!r}: module {module_name!r} has no attribute "
                               f"{attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise FactoryError(f"factory {spec!r}: {attr!r} is a {type(obj).__name__}, "
                           "not a function")
    return obj


def call_factory(factory: Callable[[], Any], spec: str) -> Workload:
    """Call the factory and validate that it returned ``(model, optimizer, batch)``."""
    try:
        result = factory()
    except Exception as exc:
        raise FactoryError(f"factory {spec!r} raised {describe_exception(exc)}") from exc
    return validate(result, spec)


def validate(result: Any, spec: str) -> Workload:
    """Check the factory's return value; say exactly which element is wrong."""
    if not isinstance(result, tuple | list) or len(result) != 3:
        got = (f"a {type(result).__name__} of length {len(result)}"
               if isinstance(result, tuple | list) else f"a {type(result).__name__}")
        raise FactoryError(f"factory {spec!r} must return (model, optimizer, batch); got {got}")
    model, optimizer, batch = result
    if not isinstance(model, nn.Module):
        raise FactoryError(f"factory {spec!r}: element 0 (model) must be a torch.nn.Module, "
                           f"got {type(model).__name__}")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise FactoryError(f"factory {spec!r}: element 1 (optimizer) must be a "
                           f"torch.optim.Optimizer, got {type(optimizer).__name__}")
    if not isinstance(batch, torch.Tensor | tuple | list | Mapping):
        raise FactoryError(f"factory {spec!r}: element 2 (batch) must be a tensor, a tuple/list "
                           f"of arguments or a dict of keyword arguments, got "
                           f"{type(batch).__name__}")
    workload = Workload(model, optimizer, batch)
    if not workload.batch_tensors():
        raise FactoryError(f"factory {spec!r}: element 2 (batch) contains no tensor")
    return workload


#: Frames inside these packages are never "where" a user's error happened.
_LIBRARY_DIRS = tuple(os.path.dirname(m.__file__ or "") + os.sep for m in (torch, stormotel))


def describe_exception(exc: BaseException) -> str:
    """``ValueError: boom (at models.py:12)`` — type, message and the innermost frame of the
    user's code (not torch's or stormotel's), which is the line they can do something about."""
    where = ""
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if not f.filename.startswith(_LIBRARY_DIRS)]
    if user or frames:
        last = (user or frames)[-1]
        where = f" (at {os.path.basename(last.filename)}:{last.lineno})"
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}{where}" if message else f"{type(exc).__name__}{where}"
