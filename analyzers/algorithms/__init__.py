"""The analyzer's algorithms: pure, vectorised functions ``Timeline -> findings``.

One module per algorithm (first cause, gap, collective), sharing thresholds (:mod:`.settings`)
and small statistics (:mod:`.robust`). :func:`stormotel.analyzers.analyze.analyze` runs them
together.

The algorithm modules (numpy) load on first use, so importing :mod:`.settings` to declare the
CLI's ``--sensitivity`` flag stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from stormotel.analyzers.algorithms.settings import (
    SENSITIVITIES,
    Settings,
    SettingsError,
    settings_for,
)

if TYPE_CHECKING:
    from stormotel.analyzers.algorithms.collective import analyze_collectives
    from stormotel.analyzers.algorithms.first_cause import analyze_first_cause
    from stormotel.analyzers.algorithms.gap import analyze_gaps

__all__ = ["SENSITIVITIES", "Settings", "SettingsError", "analyze_collectives",
           "analyze_first_cause", "analyze_gaps", "settings_for"]

_LAZY = {"analyze_collectives": "collective", "analyze_first_cause": "first_cause",
         "analyze_gaps": "gap"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
