"""The TSDB sources a run can read, in the order they are asked whether the flags select them;
the first that says yes reads every window. Adding one: a module with a
:class:`~stormotel.analyzers.sources.protocol.TsdbSource` subclass, and its line here (the
command line declares the class's ``flags`` and fills ``TsdbOptions.extra`` from them, so this
table and the modules it imports stay light: ``stormotel analyze --help`` reads it)."""

from __future__ import annotations

from stormotel.analyzers.options import JobOptions, PluginFlag
from stormotel.analyzers.sources.dcgm_tsdb import DcgmSource
from stormotel.analyzers.sources.prometheus_tsdb import PrometheusSource
from stormotel.analyzers.sources.protocol import TsdbSource

TSDB_SOURCES: tuple[type[TsdbSource], ...] = (
    DcgmSource,
    PrometheusSource,
)


def source_flags() -> tuple[PluginFlag, ...]:
    """Every flag the TSDB sources declare, in table order (the command line adds them)."""
    return tuple(flag for cls in TSDB_SOURCES for flag in cls.flags)


def tsdb_source(job: JobOptions, job_id: str) -> TsdbSource:
    """The source the flags select, for ``job_id``."""
    for cls in TSDB_SOURCES:
        if cls.selected(job):
            return cls(job, job_id)
    raise ValueError("no TSDB source matches the flags")  # PrometheusSource takes the rest
