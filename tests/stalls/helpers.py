"""Small helpers shared by the stall tests: run the CLI, rebuild a gloo dump's pg_config."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.cli import run_stormotel_here

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``stormotel analyze ARGS`` as text, exit code and stderr, through the command's entry
    point in this process (tests.cli.run_stormotel_here): what these suites check is the
    command's answer at its boundary (exit code, the one error line, the text report), not an
    interpreter's start (~0.45 s of CPU each), which tests/analyzers/test_cli.py and the
    hostile suites test."""
    return run_stormotel_here("analyze", *args)


def run_json(*args: str) -> tuple[int, dict[str, Any]]:
    """The JSON report of ``stormotel analyze ARGS``, through the command's entry point in this
    process (tests.cli.run_stormotel_here): the stall suites read a few hundred reports, and a
    fresh interpreter each cost ~0.45 s of CPU. :func:`run_cli` gives the text and exit code."""
    proc = run_stormotel_here("analyze", *args, "--format", "json", "--quiet")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def analyze_log_text(tmp_path: Path, name: str, text: str) -> tuple[int, dict[str, Any]]:
    """``stormotel analyze --logs`` on one log file holding ``text``: any exit code, its report."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / name).write_text(text)
    out = tmp_path / "report.json"
    proc = run_stormotel_here("analyze", "--logs", str(logs), "--format", "json", "--output",
                              str(out))
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(out.read_text())


def root_findings(tmp_path: Path, text: str, *args: str,
                  name: str = "job.log") -> tuple[int, list[dict[str, Any]]]:
    """``stormotel analyze --logs`` on one file holding ``text`` (exit 0 or 1), and the stall
    findings that are no other finding's consequence: what a rule named, or did not."""
    log = tmp_path / name
    log.write_text(text)
    code, report = run_json("--logs", str(log), *args)
    return code, [f for f in report["stall_findings"] if f["consequence_of"] is None]


def repair_pg_config(src: Path, dst: Path) -> None:
    """Write copies of OUR OWN test dumps whose pg_config names every group with its ranks.

    torch's analyzer trusts pg_config, which gloo leaves keyed by "" — the repaired copies let it
    run on the same collectives so its verdicts can be compared with ours. (Plain pickle is fine
    here: these files were just produced by the test's own gloo job.)
    """
    dst.mkdir(parents=True, exist_ok=True)
    dumps = {f.name: pickle.loads(f.read_bytes()) for f in sorted(src.iterdir())}
    rank_of = {name: int(name.rsplit("_", 1)[1]) for name in dumps}
    world = max(rank_of.values()) + 1
    members: dict[tuple[str, str], set[int]] = {}
    for name, d in dumps.items():
        for e in d["entries"]:
            members.setdefault(tuple(e["process_group"]), set()).add(rank_of[name])
    for name, d in dumps.items():
        r = rank_of[name]
        d["pg_config"] = {
            key[0]: {"name": key[0], "desc": key[1],
                     "ranks": json.dumps(sorted(range(world) if key[1] == "default_pg" else v))}
            for key, v in members.items() if r in v}
        (dst / name).write_bytes(pickle.dumps(d))


_RUN_MANY = """
import sys, traceback
from torch.distributed.flight_recorder.fr_trace import main
for folder in sys.argv[1:]:
    print("=== " + folder, file=sys.stderr, flush=True)
    try:
        main([folder])
        print("=== exit 0", file=sys.stderr, flush=True)
    except BaseException:
        traceback.print_exc()
        print("=== exit 1", file=sys.stderr, flush=True)
"""


def torch_fr_trace(folders: list[Path]) -> dict[Path, tuple[bool, str]]:
    """Run torch's own analyzer (``torch.distributed.flight_recorder.fr_trace``) on each folder.

    One interpreter for all folders (torch imports once); returns folder -> (ran cleanly, what
    it logged). Its logger writes to stderr.
    """
    proc = subprocess.run([sys.executable, "-c", _RUN_MANY, *map(str, folders)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    out: dict[Path, tuple[bool, str]] = {}
    folder: Path | None = None
    body: list[str] = []
    for line in proc.stderr.splitlines():
        if line.startswith("=== exit ") and folder is not None:
            out[folder] = (line == "=== exit 0", "\n".join(body))
            folder, body = None, []
        elif line.startswith("=== "):
            folder, body = Path(line[4:]), []
        else:
            body.append(line)
    return out


def run_job_group(module: str, root: Path, timeout: float, *args: str
                  ) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ROOT ARGS`` (a generator of real torch jobs) in a session of its own, its
    output captured; past ``timeout`` the whole process group is killed, not only the
    generator: ``subprocess.run``'s timeout killed the generator alone, and the ranks it had
    forked ran on for an hour after the test (seen at load 15, one of them at full CPU)."""
    proc = subprocess.Popen([sys.executable, "-m", module, str(root), *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    finally:
        with contextlib.suppress(ProcessLookupError):  # ranks a generator left behind
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def newcomer_jobs(factory: Any, names: list[str], module: str) -> Path:
    """A newcomer-hang round's real jobs (``module``'s ``names``) run once for a test module by
    the benchmark's own runner, exclusive of other CPU-heavy fixtures; their folder."""
    import pytest

    from tests.bench_modules import load_benchmark
    from tests.cpu_lock import cpu_heavy

    pytest.importorskip("torch")
    root = Path(factory.mktemp(module.rsplit(".", 1)[-1]))
    with cpu_heavy(factory, exclusive=True):
        ran_s = load_benchmark("eval_newcomer_hangs").run_jobs(root, names, timeout_s=400,
                                                               module=module)
    print(f"{module}: {names} ran in {ran_s:.1f} s")
    return root


def json_report(tmp_path: Path, *args: str, codes: tuple[int, ...] | None = None
                ) -> tuple[int, dict[str, Any]]:
    """``stormotel analyze ARGS --format json`` at the boundary (tests.fuzz.boundary: exit
    code and output checked for what no run may print): its code and report."""
    import time

    from tests.fuzz.boundary import analyze, check

    out = tmp_path / f"r{time.monotonic_ns()}.json"
    result = analyze(*args, "--format", "json", "-o", str(out), "-q")
    if codes is None:
        check(result, out)
    else:
        check(result, out, codes=codes)
    return result.code, json.loads(out.read_text()) if out.exists() else {}
