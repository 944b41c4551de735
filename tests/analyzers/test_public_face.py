"""The analyzer's public face (``stormotel.analyzers``): each name in ``__all__`` is the object
its module defines, and importing the package loads none of them (nor numpy) until asked."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_every_public_name_is_its_modules_object() -> None:
    import stormotel.analyzers as face
    from stormotel.analyzers.findings import Finding
    from stormotel.analyzers.report import Report
    from stormotel.analyzers.run import run_once
    from stormotel.analyzers.sources import load_paths

    want = {"Finding": Finding, "Report": Report, "run_once": run_once, "load_paths": load_paths}
    assert sorted(face.__all__) == sorted(want)
    assert {name: getattr(face, name) for name in face.__all__} == want
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        face.nothing  # noqa: B018


def test_importing_the_package_loads_nothing_heavy() -> None:
    code = ("import sys\nimport stormotel.analyzers as a\n"
            "print(sorted(m for m in ('numpy', 'httpx', 'stormotel.analyzers.run', "
            "'stormotel.analyzers.sources') if m in sys.modules))\n"
            "a.run_once\nprint('stormotel.analyzers.run' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.split("\n")
    assert out[:2] == ["[]", "True"]
