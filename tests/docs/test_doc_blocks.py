"""Every shell and Python block of README.md and docs/ is checked, and the marked ones are run
(see :mod:`tests.docs.doc_blocks` for the markers). A renamed flag, a removed command, a
Python keyword the tracker no longer takes, or HTTP sent to the gRPC port fails here."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from stormotel import MemoryTracker
from stormotel.cli import COMMANDS
from stormotel.config import LEGACY_KEYWORDS, PARAMETER_OF
from stormotel.stormlog_api import IGNORED_ARGUMENTS
from tests.docs.doc_blocks import (
    REPO,
    Block,
    all_blocks,
    doc_files,
    python_calls,
    shell_source,
    stormotel_invocations,
)


def _parsers() -> dict[str, Callable[[], argparse.ArgumentParser]]:
    from stormotel.analyzers.cli import flags as cli_flags
    from stormotel.analyzers.serve import options as serve_options
    from stormotel.dashboards import build

    from stormotel import demo, rehearse, track_cli
    from stormotel.estimate import cli as estimate_cli
    return {"track": track_cli.build_parser, "analyze": cli_flags.build_parser,
            "estimate": estimate_cli.build_parser, "dashboards": build._parser,
            "demo": demo.build_parser, "rehearse": rehearse.build_parser,
            "serve": serve_options.build_parser}


def _options(command: str) -> set[str]:
    return set(_parsers()[command]()._option_string_actions)


STORMLOG_OPTIONS = IGNORED_ARGUMENTS | {"oom_buffer_size", "oom_max_total_mb", "collector"}
BLOCKS = all_blocks()
CODE = [b for b in BLOCKS if b.kind in ("shell", "python")
        or (b.kind == "text" and "stormotel " in b.text)]


def flag_problems(block: Block) -> list[str]:
    """Unknown commands and flags in a block's ``stormotel`` invocations, and OTLP ports that
    contradict the protocol."""
    problems = []
    source = shell_source(block.text) if block.kind != "python" else ""
    for command, args in stormotel_invocations(source):
        if command not in COMMANDS:
            problems.append(f"unknown command `stormotel {command}`")
            continue
        known = _options(command)
        for arg in args:
            if arg.startswith("-") and arg != "-" and not arg.lstrip("-")[:1].isdigit():
                flag = arg.split("=", 1)[0]
                if flag not in known:
                    problems.append(f"`stormotel {command} {flag}`: no such flag")
    # Comments say what else one could do ("or :4317 with grpc"): only live text counts.
    text = re.sub(r"(^|\s)#.*", "", block.text) if block.kind in ("shell", "python") \
        else block.text
    if ":4317" in text and "grpc" not in text.lower():
        problems.append("port 4317 is OTLP/gRPC, but nothing in the block sets grpc (the "
                        "default protocol is http/protobuf on 4318)")
    if ":4318" in text and "protocol grpc" in text.lower():
        problems.append("port 4318 is OTLP/HTTP, but the block sets grpc")
    return problems


def python_problems(block: Block) -> list[str]:
    try:
        compile(block.text, block.where, "exec")
    except SyntaxError as e:
        return [f"syntax error: {e}"]
    known = set(inspect.signature(MemoryTracker.__init__).parameters) - {"self", "options"}
    known |= STORMLOG_OPTIONS  # Stormlog's extra constructor arguments, accepted as they are
    problems = []
    for kws in python_calls(block.text, "MemoryTracker"):
        for kw in sorted(kws - known):
            if kw in LEGACY_KEYWORDS:  # works for one release; the docs show the new form
                kind, attr = LEGACY_KEYWORDS[kw]
                problems.append(f"MemoryTracker({kw}=...) is deprecated: "
                                f"{PARAMETER_OF[kind]}={kind.__name__}({attr}=...)")
            else:
                problems.append(f"MemoryTracker({kw}=...): no such argument")
    for kind in PARAMETER_OF:
        fields = {f.name for f in dataclasses.fields(kind)}
        problems += [f"{kind.__name__}({kw}=...): no such field"
                     for kws in python_calls(block.text, kind.__name__)
                     for kw in sorted(kws - fields)]
    return problems


@pytest.mark.parametrize("block", CODE, ids=lambda b: b.where)
def test_block_is_valid(block: Block) -> None:
    if block.mode == "skip":
        pytest.skip("marked doc-test: skip")
    problems = flag_problems(block)
    if block.kind == "shell":
        syntax = subprocess.run(["bash", "-n"], input=shell_source(block.text),
                                capture_output=True, text=True, timeout=30)
        if syntax.returncode != 0:
            problems.append(f"bash -n: {syntax.stderr.strip()}")
    elif block.kind == "python":
        problems += python_problems(block)
    assert not problems, f"{block.where}: " + "; ".join(problems)


RUN = [b for b in CODE if b.mode == "run"]


@pytest.fixture(scope="module")
def demo_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short demo job's archive, the one the docs' examples analyze (``demo-out/demo``)."""
    root = tmp_path_factory.mktemp("docs-run")
    return root


#: Inputs the docs' examples name, made by :func:`_with_inputs` when a block mentions one.
INPUT_NAMES = ("demo-out", "artifacts/", "archive/")


def _with_inputs(root: Path) -> None:
    """What the docs' examples read, made in seconds: ``demo-out/demo`` (what ``make demo``
    leaves: two simulated ranks of job ``demo``, rank 1 leaking, instead of the demo's torch
    job), ``archive/`` (a copy of it) and ``artifacts/events_rank*.json`` (Stormlog v4 exports,
    written by the tracker's Stormlog-compatible ``export_events``)."""
    if (root / "demo-out").is_dir():
        return
    ranks = [subprocess.Popen(  # both ranks at once, as a job's ranks run
        [sys.executable, "-m", "stormotel", "track", "--sampler", "simulated", "--duration",
         "2", "--archive", str(root / "demo-out"), "--job-id", "demo", "--rank", str(rank),
         "--world-size", "2", "--fault", "rank=1:leak@t=0.5s,rate=256MiB/s", "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root) for rank in (0, 1)]
    for proc in ranks:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    shutil.copytree(root / "demo-out" / "demo", root / "archive")
    (root / "artifacts").mkdir()
    script = ("import sys, time\nfrom stormotel import MemoryTracker\n"
              "for r in (0, 1):\n"
              "    t = MemoryTracker(sampler='simulated', sampling_interval=0.05, job_id='sl',"
              " rank=r, world_size=2, archive_dir=sys.argv[1])\n"
              "    t.start_tracking(); time.sleep(0.6); t.stop_tracking()\n"
              "    t.export_events(f'artifacts/events_rank{r}.json', format='json')\n")
    out = subprocess.run([sys.executable, "-c", script, str(root / "sl-archive")], cwd=root,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def _checkout_shell(work: Path) -> dict[str, str]:
    """A fresh clone after ``make demo``, as a reader's shell sees it: ``work`` holds the
    checkout's ``examples/`` and ``.venv/bin/activate`` (which puts this venv's ``bin`` first on
    ``PATH``, as the venv's own script does); nothing else makes ``stormotel`` reachable — the
    venv's ``bin`` is taken off the inherited ``PATH``, and neither ``$REPO`` nor ``PYTHONPATH``
    is set, so a block that needs either fails here as it would for a reader."""
    bindir = Path(sys.executable).parent
    (work / "examples").symlink_to(REPO / "examples")
    venv_bin = work / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    # Shims, not symlinks: a venv's interpreter finds its site-packages from the path it was
    # started by, and a console script with another venv's interpreter in its shebang (a moved
    # venv) would run that venv's code; the reader's fresh venv has its own.
    for tool, run in (("python", ""), ("python3", ""), ("stormotel", " -m stormotel"),
                      ("torchrun", " -m torch.distributed.run")):
        shim = venv_bin / tool
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}"{run} "$@"\n')
        shim.chmod(0o755)
    (venv_bin / "activate").write_text(
        f'VIRTUAL_ENV="{work / ".venv"}"\nexport VIRTUAL_ENV\n'
        'PATH="$VIRTUAL_ENV/bin:$PATH"\nexport PATH\nhash -r 2>/dev/null || true\n')
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and Path(d).resolve() != bindir.resolve()
            and not (Path(d) / "stormotel").exists()]
    env = {k: v for k, v in os.environ.items()
           if k not in ("REPO", "PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(path)
    return env


@pytest.mark.slow  # runs commands: a short demo job, then each marked block
@pytest.mark.parametrize("block", RUN, ids=lambda b: b.where)
def test_marked_block_runs(block: Block, demo_archive: Path, tmp_path: Path) -> None:
    if any(name in block.text for name in INPUT_NAMES):
        _with_inputs(demo_archive)
    work = tmp_path / "work"
    shutil.copytree(demo_archive, work)
    env = _checkout_shell(work)
    if block.kind == "shell":
        # The README's one instruction before any `stormotel` line: activate the venv.
        script = ". .venv/bin/activate\n" + shell_source(block.text)
        cmd = ["bash", "-euo", "pipefail", "-c", script]
    else:
        cmd = [str(work / ".venv" / "bin" / "python"), "-c", block.text]
    out = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True,
                         timeout=block.timeout)
    assert out.returncode in block.exit_codes, (
        f"{block.where} exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")


def test_unrun_blocks_are_counted_with_a_reason() -> None:
    """Every shell block is either run or says why it cannot be (``cluster (a GPU)``,
    ``check (your dumps)``): a block left unmarked is run-able text nobody runs. The count is
    printed so the share of documentation that is executed stays visible."""
    shell = [b for b in BLOCKS if b.kind == "shell"]
    unrun = [b for b in shell if b.mode != "run"]
    bare = [b.where for b in unrun if not b.reason]
    print(f"\ndoc shell blocks: {len(shell)}, run: {len(shell) - len(unrun)}, "
          f"not run: {len(unrun)}")
    for b in unrun:
        print(f"  {b.where}: {b.mode} ({b.reason})")
    assert not bare, "shell blocks neither run nor saying why: " + ", ".join(bare)


_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _slugs(md: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file (lowercase, punctuation dropped, spaces to
    hyphens), outside code blocks."""
    out, inside = set(), False
    for line in md.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = not inside
        elif not inside and (m := re.match(r"#{1,6}\s+(.*)", line)):
            out.add(re.sub(r"[^\w\- ]", "", m[1].strip().lower()).replace(" ", "-"))
    return out


def relative_links(md: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", md.read_text(encoding="utf-8"), flags=re.S)
    return [t for t in _LINK.findall(text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("md", doc_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(md: Path) -> None:
    """A moved file or a renamed heading breaks the reader's next click: every relative link
    and its #anchor must exist."""
    bad = []
    for target in relative_links(md):
        path, _, anchor = target.partition("#")
        dest = (md.parent / path).resolve() if path else md
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _slugs(dest):
            bad.append(f"{target}: no heading with that anchor in {dest.name}")
    assert not bad, f"{md.relative_to(REPO)}: " + "; ".join(bad)
