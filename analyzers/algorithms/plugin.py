"""What an algorithm with findings of its own is given, and gives back.

Such an algorithm is a function ``AlgorithmInput -> Section | None`` in
:data:`stormotel.analyzers.analyze.SECTION_ALGORITHMS` (its one registration line): it gets the
selected, aligned Timeline, the thresholds and the run's inputs, and returns its typed
:class:`~stormotel.analyzers.report.Section` of the report (None: nothing to say), which
carries its findings and their words to every reader. Estimate vs actual is the first one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stormotel.analyzers.algorithms.settings import Settings
    from stormotel.analyzers.report import Section
    from stormotel.analyzers.timeline import Timeline

#: Pre-run estimates given to the analysis: bytes for every rank, or rank → bytes.
Estimates = Mapping[int, float] | float | int | None


@dataclass(frozen=True)
class AlgorithmInput:
    """Everything an algorithm may read: the Timeline as analysed, its thresholds, and what the
    run was given beside the data."""

    timeline: Timeline
    settings: Settings
    #: ``analyze(estimates=…)``: overrides the estimates the sources read.
    estimates: Estimates = None


SectionAlgorithm = Callable[[AlgorithmInput], "Section | None"]
