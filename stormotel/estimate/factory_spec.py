"""The factory's ``package.module:function`` spec and its module's existence, without torch.

``stormotel estimate`` checks these before it imports torch and PyTorch's memory trackers (about
4 s of CPU), so a typo in the spec — the commonest mistake — is reported in a fraction of a
second instead of after that import. Anything this cannot decide (the module exists but fails
to import, the function is missing) is left to :func:`stormotel.estimate.factory.load_factory`,
which imports the module for real.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from stormotel.errors import UsageError


class FactoryError(UsageError):
    """The factory cannot be loaded or called, or returned something unusable."""


def split_spec(spec: str) -> tuple[str, str]:
    """``package.module:function`` → (module name, attribute path); FactoryError if malformed.

    Puts the current directory on ``sys.path`` (as ``python -m`` would), so a factory in a local
    file is found without installing it.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise FactoryError(f"factory {spec!r} must look like package.module:function")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    return module_name, attr


def not_found(spec: str, missing: str) -> FactoryError:
    """The one message for a factory module that is not there (``missing``: the first absent
    package or module of the spec's dotted name)."""
    return FactoryError(f"factory {spec!r}: no module named {missing!r} "
                        f"(searched the current directory and sys.path)")


def check_module_exists(spec: str) -> None:
    """Raise FactoryError when the spec is malformed or its module is certainly absent.

    Finding a submodule imports its parent packages (as the real import would); when one of
    them fails for another reason, nothing is decided here.
    """
    module_name, _attr = split_spec(spec)
    try:
        found = importlib.util.find_spec(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise not_found(spec, exc.name) from None
        return
    except Exception:  # a parent package that fails to import: load_factory says how
        return
    if found is None:
        raise not_found(spec, module_name)
