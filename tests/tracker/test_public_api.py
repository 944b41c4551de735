"""The package's public names, and that importing it stays cheap (OTel SDK loaded lazily)."""

from __future__ import annotations

import subprocess
import sys

import stormotel


def test_public_names_resolve() -> None:
    for name in stormotel.__all__:
        assert getattr(stormotel, name) is not None
    assert stormotel.MemoryTracker.__module__ == "stormotel.tracker"


def test_import_does_not_load_the_sdk_or_torch() -> None:
    code = ("import sys, stormotel, stormotel.cli; "
            "print(sorted(m for m in ('opentelemetry.sdk', 'torch', 'pynvml') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[]"
