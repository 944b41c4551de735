#!/usr/bin/env python3
"""Rewrite imports of the top-level folders ``analyzers/`` and ``dashboards/`` to the names the
wheel installs them under, ``stormotel.analyzers`` and ``stormotel.dashboards``.

The folders stay at the top of the repository (pyproject's ``package-dir`` maps them into the
``stormotel`` package), so code that still says ``from analyzers…`` works only from a checkout's
root. This script is idempotent: re-run it after merging a branch that still uses the old names.

    python scripts/rename_imports.py            # rewrite in place, list the files changed
    python scripts/rename_imports.py --check    # exit 1 naming files that still use old names
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("stormotel", "analyzers", "dashboards", "tests", "benchmarks", "examples", "scripts")
OLD = r"(analyzers|dashboards)"
#: First components under the two folders (modules and sub-packages), so a string such as
#: "dashboards.json" is never mistaken for a module path.
CHILDREN = "|".join(sorted({p.stem for folder in ("analyzers", "dashboards")
                            for p in (REPO / folder).iterdir()
                            if p.suffix == ".py" or (p / "__init__.py").is_file()}))

RULES: list[tuple[re.Pattern[str], str]] = [
    # from analyzers.x import y  /  from dashboards import z
    (re.compile(rf"^(\s*)from {OLD}((?:\.\w+)*) import ", re.M),
     r"\1from stormotel.\2\3 import "),
    # import analyzers.x as y
    (re.compile(rf"^(\s*)import {OLD}((?:\.\w+)*) as ", re.M), r"\1import stormotel.\2\3 as "),
    # a string that is exactly a module path: "analyzers.cli", 'dashboards.build'
    (re.compile(rf"([\"']){OLD}(\.(?:{CHILDREN})(?:\.\w+)*)\1"),
     r"\1stormotel.\2\3\1"),
]
#: ``import analyzers.x`` without ``as`` would need its uses rewritten too: refuse it.
BARE_IMPORT = re.compile(rf"^\s*import {OLD}\b(?!.* as )", re.M)


#: Markdown whose code examples import the package: only import lines are rewritten there.
DOCS = ("README.md", "docs")


def rewrite(text: str, rules: list[tuple[re.Pattern[str], str]] = RULES) -> str:
    for pattern, replacement in rules:
        text = pattern.sub(replacement, text)
    return text


def _files() -> list[tuple[Path, list[tuple[re.Pattern[str], str]]]]:
    out = [(path, RULES) for root in ROOTS for path in sorted((REPO / root).rglob("*.py"))
           if not any(part in (".venv", "__pycache__", "build") for part in path.parts)
           and path != Path(__file__).resolve()]
    for doc in DOCS:
        paths = [REPO / doc] if doc.endswith(".md") else sorted((REPO / doc).rglob("*.md"))
        out += [(path, RULES[:2]) for path in paths if path.is_file()]
    return out


def main(argv: list[str]) -> int:
    check = "--check" in argv
    changed, bare = [], []
    for path, rules in _files():
        text = path.read_text(encoding="utf-8")
        new = rewrite(text, rules)
        if BARE_IMPORT.search(new):
            bare.append(path)
        if new != text:
            changed.append(path)
            if not check:
                path.write_text(new, encoding="utf-8")
    for path in bare:
        print(f"{path.relative_to(REPO)}: bare 'import analyzers…'/'import dashboards…';"
              " rewrite it by hand as 'from stormotel… import …'", file=sys.stderr)
    for path in changed:
        print(("stale: " if check else "rewrote: ") + str(path.relative_to(REPO)))
    return 1 if bare or (check and changed) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
