"""PEP 562 lazy exports: a package's public names load their modules on first use.

Both public faces use it — ``stormotel`` (so ``stormotel --help`` and the analyzer never pay
for the OTel SDK) and ``stormotel.analyzers`` (so importing the package, which every submodule
import does, stays as light as ``stormotel analyze --help`` needs). A leaf: it imports nothing
of the tracker, so the analyzer may import it (the one-way rule's allow-list names it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(namespace: dict[str, Any], package: str,
                 where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` (its ``globals()`` as ``namespace``): a name of
    ``where`` (public name → defining module) is imported from its module and bound in the
    namespace, so the next look-up never comes here; any other name is an AttributeError."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
