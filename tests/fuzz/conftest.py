"""Hypothesis profiles for the fuzz set: small and fast in ``make test``, long in ``make fuzz``.

``STORMOTEL_FUZZ=long`` (what ``make fuzz`` sets) selects ``STORMOTEL_FUZZ_EXAMPLES`` (400)
examples per property, drawn at random each run; the default is derandomized (the same 25
examples per property every run, so ``make test`` never fails by chance) and keeps the whole
folder under a minute on two cores. No example database is written into the checkout
(``database=None``): a failure prints its ``@reproduce_failure`` blob.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {"database": None, "print_blob": True, "suppress_health_check": (HealthCheck.too_slow,
                                                         HealthCheck.data_too_large)}
settings.register_profile("default", max_examples=25, deadline=None, derandomize=True,
                          **_COMMON)
settings.register_profile("long", deadline=None, **_COMMON,
                          max_examples=int(os.environ.get("STORMOTEL_FUZZ_EXAMPLES", "400")))
settings.load_profile(os.environ.get("STORMOTEL_FUZZ", "default"))
