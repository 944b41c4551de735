#!/usr/bin/env python3
"""Run mypy over the package as a wheel installs it: ``stormotel`` with ``analyzers/`` and
``dashboards/`` inside it.

mypy resolves imports from folders, not from setuptools' ``package-dir`` mapping, so in the
checkout it would see ``stormotel.analyzers`` as missing and check every cross-module call
against ``Any``. This builds the installed layout from symlinks in a temporary folder and runs
mypy there with the repository's configuration (``[tool.mypy]`` in pyproject.toml). Error paths
read ``stormotel/analyzers/…`` for ``analyzers/…``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: sub-package name inside ``stormotel`` → folder at the repository's top level
MAPPED = {"analyzers": "analyzers", "dashboards": "dashboards"}


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="stormotel-typecheck-") as tmp:
        package = Path(tmp) / "stormotel"
        package.mkdir()
        for child in (REPO / "stormotel").iterdir():
            if child.name != "__pycache__":
                (package / child.name).symlink_to(child)
        for name, folder in MAPPED.items():
            (package / name).symlink_to(REPO / folder, target_is_directory=True)
        command = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
                   "--cache-dir", str(REPO / ".mypy_cache"), *argv, "stormotel"]
        return subprocess.run(command, cwd=tmp, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
