"""Stuck-job diagnosis: which rank, which collective, and why.

Two evidence sources feed ``Report.stall_findings``:

- Flight Recorder dumps (:mod:`.fr_loader` → :mod:`.fr_groups` → :mod:`.fr_analysis`, plus
  :mod:`.markers` for the Timeline), read with a restricted unpickler (:mod:`.safe_unpickle`);
- worker logs with ProcessGroupNCCL watchdog lines (:mod:`.logs_parser` → :mod:`.log_analysis`).

:mod:`.cli_support` reads both for ``stormotel analyze`` (``--flight-recorder``, ``--logs``),
which calls it and joins the result with telemetry itself.

The Flight Recorder modules load on first use of these names, so a run that only renders a
report (:mod:`stormotel.analyzers.summary` imports :mod:`.render`) does not import them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stormotel.analyzers.stalls.fr_analysis import FrAnalysis, analyze_dumps
    from stormotel.analyzers.stalls.fr_loader import DumpError, load_dump_dir, load_dump_file
    from stormotel.analyzers.stalls.fr_markers import markers_from_dumps

__all__ = ["DumpError", "FrAnalysis", "analyze_dumps", "load_dump_dir", "load_dump_file",
           "markers_from_dumps"]

_LAZY = {"FrAnalysis": "fr_analysis", "analyze_dumps": "fr_analysis", "DumpError": "fr_loader",
         "load_dump_dir": "fr_loader", "load_dump_file": "fr_loader",
         "markers_from_dumps": "fr_markers"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
