"""The code blocks of README.md, docs/*.md and examples/*/README.md, and what a reader's
copy-paste of each needs.

A block's fate is set by an HTML comment on the line just before its fence (invisible on
GitHub):

- ``<!-- doc-test: run -->`` — executed: shell blocks with bash in a scratch folder (the venv's
  ``bin`` first on ``PATH`` and as ``.venv/bin``, ``$REPO`` the checkout, the demo archive
  at ``demo-out/demo`` there: a small two-rank archive of job ``demo``, with ``archive/`` and
  Stormlog exports ``artifacts/events_rank*.json``), Python blocks with the venv's
  interpreter. ``run exit=0,1`` allows those exit codes (1 = findings); ``timeout=N`` in
  seconds (default 120).
- ``<!-- doc-test: cluster -->`` — needs what a test cannot start (a GPU, a cluster, a
  Grafana); ``<!-- doc-test: check -->`` — needs the reader's own files or code (``loader``,
  ``mypkg.train``). Both, and blocks with no marker, are checked: syntax (``bash -n``,
  ``compile``), every ``stormotel <cmd>`` flag against that command's own argparse parser,
  ``MemoryTracker(...)`` keywords against its signature, and OTLP ports against the protocol.
- ``<!-- doc-test: skip -->`` — output samples and other text that is not a command.
- ``<!-- doc-test: promtool-config -->`` / ``<!-- doc-test: amtool-config -->`` — a YAML
  Prometheus / Alertmanager configuration, checked by ``promtool check config`` / ``amtool
  check-config`` (``tests/docs/test_doc_configs.py``).

Relative links and their ``#anchors`` are checked too (``test_relative_links_resolve``).
Blocks in other languages (yaml, json, text, promql...) are not code a reader runs and are left
alone; new blocks written by anyone are checked by default, so a renamed flag or a wrong port
fails ``make test`` wherever it appears.
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHELL_LANGS = {"bash", "sh", "shell", "console", "zsh"}
PYTHON_LANGS = {"python", "py", "python3"}
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
_MARKER = re.compile(r"<!--\s*doc-test:\s*"
                     r"(?P<mode>run|cluster|check|skip|promtool-config|amtool-config)"
                     r"(?P<opts>[^>]*)-->")


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    mode: str = "check"  # run | cluster | skip | check (no marker: checked like cluster)
    exit_codes: tuple[int, ...] = (0,)
    timeout: float = 120.0
    reason: str = ""  # the marker's words after its options: why a block is not run
    notes: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    @property
    def kind(self) -> str:
        if self.lang in SHELL_LANGS:
            return "shell"
        if self.lang in PYTHON_LANGS:
            return "python"
        return "text" if self.lang in ("", "text", "console-output") else "other"


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
            *sorted((REPO / "examples").glob("*/README.md"))]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of one Markdown file, with the marker on the line before it."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent = m["fence"], len(m["indent"])
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        block = Block(path, i + 1, m["lang"].lower(), "\n".join(body) + "\n")
        prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        marker = _MARKER.search(prev)
        if marker:
            block.mode = marker["mode"]
            opts = dict(o.split("=", 1) for o in marker["opts"].split() if "=" in o)
            if "exit" in opts:
                block.exit_codes = tuple(int(c) for c in opts["exit"].split(","))
            if "timeout" in opts:
                block.timeout = float(opts["timeout"])
            block.reason = " ".join(o for o in marker["opts"].split() if "=" not in o).strip("()")
        out.append(block)
        i = j + 1
    return out


def all_blocks() -> list[Block]:
    return [b for path in doc_files() for b in blocks(path)]


def shell_source(text: str) -> str:
    """The commands of a shell block: ``$ `` prompts removed (a console transcript's output
    lines, those without a prompt, are dropped when any line has one)."""
    lines = text.splitlines()
    if any(line.startswith("$ ") for line in lines):
        kept, cont = [], False
        for line in lines:
            if line.startswith("$ ") or cont:
                kept.append(line[2:] if line.startswith("$ ") else line)
                cont = line.rstrip().endswith("\\")
        lines = kept
    return "\n".join(lines) + "\n"


_OPERATORS = {"|", "||", "&&", ";", "&", "(", ")", ";;", "|&", "\n", "then", "do", "else"}
#: Words after which the next word is again a command.
_PREFIX_WORDS = {"exec", "time", "nohup", "env", "sudo", "srun", "mpirun", "xargs", "command"}


def stormotel_invocations(source: str) -> list[tuple[str, list[str]]]:
    """(command, its arguments) for every ``stormotel CMD ...`` / ``python -m stormotel CMD``
    in a shell source (continuation lines joined, comments dropped)."""
    joined = re.sub(r"\\\n", " ", source)
    out: list[tuple[str, list[str]]] = []
    for raw_line in joined.splitlines():
        try:
            lex = shlex.shlex(raw_line, posix=True, punctuation_chars=True)
            lex.commenters = "#"
            lex.whitespace_split = True
            tokens = list(lex)
        except ValueError:  # an unbalanced quote: bash -n reports it
            continue
        k = 0
        position = True  # a command word may come next (not an argument: `helm install
        while k < len(tokens):  # stormotel ./chart` names a release)
            tok = tokens[k]
            is_cli = position and tok.rsplit("/", 1)[-1] == "stormotel"
            is_module = tok == "-m" and k + 1 < len(tokens) and tokens[k + 1] == "stormotel"
            if not (is_cli or is_module):
                position = (tok in _OPERATORS or tok in _PREFIX_WORDS
                            or (position and re.fullmatch(r"\w+=\S*", tok) is not None))
                k += 1
                continue
            k += 2 if is_module else 1
            args: list[str] = []
            while k < len(tokens) and tokens[k] not in _OPERATORS:
                args.append(tokens[k])
                k += 1
            args = [a for a in args if a != "--debug"]
            if args and not args[0].startswith("-") and not args[0].endswith(":"):  # not output
                out.append((args[0], args[1:]))
    return out


def python_calls(source: str, callee: str) -> list[set[str]]:
    """The keyword names of every call to ``callee`` (a bare name) in a Python block."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else (
                node.func.attr if isinstance(node.func, ast.Attribute) else "")
            if name == callee:
                found.append({kw.arg for kw in node.keywords if kw.arg})
    return found
