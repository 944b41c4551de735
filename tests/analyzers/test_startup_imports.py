"""What a command imports before it does its work: the start-up every run pays.

A memory-only ``stormotel analyze`` has no stall evidence, so the log readers (about 240
compiled patterns, a quarter of its start-up CPU) stay unloaded; ``stormotel track --help``
builds a parser, so neither the OTel SDK nor numpy loads. Checked in a fresh interpreter (this
one has imported everything by now), through the command's own entry point.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.cli import REPO
from tests.hostile.corpus import healthy_folder

_PROBE = """
import io, json, sys
from stormotel.cli import STREAMED, main
# a command that takes its streams prints nothing here; the others print before the last line
streams = {"out": io.StringIO(), "err": io.StringIO()} if sys.argv[1] in STREAMED else {}
try:
    code = main(sys.argv[1:], **streams)
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _loaded(*args: str) -> tuple[int, list[str]]:
    run = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout.splitlines()[-1])
    return out["code"], out["modules"]


def test_a_memory_only_analysis_leaves_the_log_readers_unloaded(tmp_path: Path) -> None:
    folder = healthy_folder(tmp_path / "job")
    code, modules = _loaded("analyze", str(folder), "--format", "json", "-q")
    assert code == 0
    assert "stormotel.analyzers.timeline" in modules  # it did analyse
    readers = [m for m in modules if m.startswith("stormotel.analyzers.stalls.log")
               or m in ("stormotel.analyzers.stalls.grammar",
                        "stormotel.analyzers.stalls.cli_support")]
    assert readers == []


def test_track_help_loads_neither_the_otel_sdk_nor_numpy() -> None:
    code, modules = _loaded("track", "--help")
    assert code == 0
    assert "stormotel.track_cli" in modules
    assert not [m for m in modules if m == "numpy" or m.startswith("opentelemetry.sdk")]
