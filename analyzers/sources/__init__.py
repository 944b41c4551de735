"""Telemetry sources: each turns what it reads into one ``Timeline``.

One module per source, behind :mod:`.protocol`'s ``read(window, deadline, progress)``: the file
loader (:mod:`.loader`: archives, Stormlog exports, folders, globs, wrapped for a run by
:mod:`.files`), the TSDB sources (:mod:`.tsdb` lists them: :mod:`.prometheus_tsdb`,
:mod:`.dcgm_tsdb`) and the readers they share. This package holds no machinery of its own: it
re-exports the loader's public names, loaded on first use, so importing a sibling (the TSDB
source table that ``stormotel analyze --help`` reads its flags from, the protocol types the run
names) loads no parser and no numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stormotel.analyzers.sources.loader import (
        OOM_DUMP_SUFFIX,
        LoadContext,
        expand_paths,
        load_paths,
    )

__all__ = ["OOM_DUMP_SUFFIX", "LoadContext", "expand_paths", "load_paths"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("stormotel.analyzers.sources.loader"), name)
    globals()[name] = value
    return value
