"""stormotel's analyzer: telemetry read into one Timeline, judged, reported.

The public face, for code that uses the analyzer as a library (the command line is
``stormotel analyze``, :mod:`stormotel.analyzers.cli`):

* :func:`load_paths` — telemetry files (OTLP archives, Stormlog exports) into a ``Timeline``;
* :func:`analyze` — a ``Timeline`` judged into a ``Report`` (the analysis alone: no source, no
  sink);
* :func:`run_once` — one whole run (a source read, stall evidence joined, analysed, every sink
  written), as ``stormotel analyze`` and ``stormotel serve`` run it;
* :class:`Report` — what a run found (the versioned JSON contract);
* :class:`Finding` — each finding in one common shape (``Report.findings()``).

``analyze`` is also the name of the facade's module: the import system binds the package
attribute to that module whenever it is imported, so the module is callable as its function
(:class:`stormotel.analyzers.analyze._Facade`); ``stormotel.analyzers.analyze(timeline)`` and
``stormotel.analyzers.analyze.analyze(timeline)`` are the same call, whichever was imported
first.

Each name loads its module on first use: importing the package (which every submodule import
does) stays as light as ``stormotel analyze --help`` needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from stormotel.lazy_exports import lazy_getattr

if TYPE_CHECKING:
    from stormotel.analyzers.analyze import analyze
    from stormotel.analyzers.findings import Finding
    from stormotel.analyzers.report import Report
    from stormotel.analyzers.run import run_once
    from stormotel.analyzers.sources import load_paths

__all__ = ["Finding", "Report", "analyze", "load_paths", "run_once"]

#: public name → the module that defines it
_WHERE = {"Finding": "stormotel.analyzers.findings", "Report": "stormotel.analyzers.report",
          "run_once": "stormotel.analyzers.run", "load_paths": "stormotel.analyzers.sources"}


_lazy = lazy_getattr(globals(), __name__, _WHERE)


def __getattr__(name: str) -> Any:
    if name == "analyze":  # the callable facade module (the import system binds it here too)
        return importlib.import_module("stormotel.analyzers.analyze")
    return _lazy(name)
