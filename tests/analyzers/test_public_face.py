"""The analyzer's public face (``stormotel.analyzers``): each name in ``__all__`` is the object
its module defines (``analyze``: its module, callable as the function), and importing the package
loads none of them (nor numpy) until asked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def test_every_public_name_is_its_modules_object() -> None:
    import stormotel.analyzers as face
    from stormotel.analyzers.findings import Finding
    from stormotel.analyzers.report import Report
    from stormotel.analyzers.run import run_once
    from stormotel.analyzers.sources import load_paths

    want = {"Finding": Finding, "Report": Report, "run_once": run_once, "load_paths": load_paths}
    assert sorted(face.__all__) == sorted([*want, "analyze"])  # analyze: below
    assert {name: getattr(face, name) for name in want} == want
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


ARCHIVE = Path(__file__).parent / "data" / "demo_warmup_steps"

#: Every spelling of the facade, run in a fresh interpreter after ``FIRST`` (the import that
#: binds the package attribute first): each prints the report's JSON, which must all agree.
SPELLINGS = f"""
import json, sys
FIRST
from stormotel.analyzers import load_paths
tl = load_paths([{str(ARCHIVE)!r}])
from stormotel.analyzers import analyze as face
import stormotel.analyzers.analyze as module
from stormotel.analyzers.analyze import analyze as function
import stormotel.analyzers as pkg
assert face is module is pkg.analyze and callable(face) and module.analyze is function
assert module.SECTION_ALGORITHMS, "the module keeps its names"
def judged(f):
    report = f(tl).to_dict()
    report["extra"].pop("analysis_seconds")  # wall time of the call
    return json.dumps(report, sort_keys=True, default=str)
out = [judged(f) for f in (face, module.analyze, function, pkg.analyze)]
assert len(set(out)) == 1 and '"gap_findings"' in out[0], out[0][:200]
# Replacing the module's function (as tests/hostile/test_boundary.py does) is what the face runs.
module.analyze = lambda timeline, **kw: "patched"
assert face(tl) == "patched" and pkg.analyze(tl, sensitivity="high") == "patched"
print("ok")
"""


@pytest.mark.parametrize("first", [
    "import stormotel.analyzers.analyze",  # the module first: the import binds it to the package
    "from stormotel.analyzers import analyze",  # the face first: its lazy __getattr__
    "import stormotel.analyzers.run",  # loaded by a run, as the command line does
])
def test_analyze_is_the_facade_in_every_spelling(first: str) -> None:
    out = subprocess.run([sys.executable, "-c", SPELLINGS.replace("FIRST", first)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
