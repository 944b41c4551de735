"""The analyzer's algorithms: pure, vectorised functions ``Timeline -> findings``.

One module per algorithm (first cause, gap, collective), sharing thresholds (:mod:`.settings`)
and small statistics (:mod:`.robust`). :func:`analyzers.analyze.analyze` runs them together.
"""

from analyzers.algorithms.collective import analyze_collectives
from analyzers.algorithms.first_cause import analyze_first_cause
from analyzers.algorithms.gap import analyze_gaps
from analyzers.algorithms.settings import SENSITIVITIES, Settings, SettingsError, settings_for

__all__ = ["SENSITIVITIES", "Settings", "SettingsError", "analyze_collectives",
           "analyze_first_cause", "analyze_gaps", "settings_for"]
