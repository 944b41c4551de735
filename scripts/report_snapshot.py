"""Every report ``stormotel analyze`` writes over the repository's test inputs, hashed, for two
checkouts at once: the proof that a refactoring changed no byte of any report.

    .venv/bin/python scripts/report_snapshot.py --out /tmp/snap \\
        base=/tmp/base/.venv/bin/python branch=.venv/bin/python [--demo-archive DIR]

Each ``LABEL=PYTHON`` interpreter runs the same command lines (``python -m stormotel analyze``)
over the same inputs: the archives under ``tests/`` (and a synthetic planted-fault archive and a
simulated job over its estimate, written once), the stall corpus (``tests/stalls/data``: every
case's logs, text and JSON), the stall evidence joined with telemetry, the HTML report, the
Perfetto trace, the incident dashboard, ``--dry-run`` plans of the series sinks, usage errors,
and — when ``prometheus`` is installed — TSDB runs against ONE real Prometheus both labels read
(one job, the scheduled run over two discovered jobs with per-job paths, a job without data).
stdout, stderr, the exit code and every file written are hashed per case; the script prints the
cases whose hashes differ between the labels and exits 1 when any does.

What varies run to run is masked before hashing (and only that): the report's
``analysis_seconds``, the summary line's ``duration_s``, the run series' value of
``stormotel_analyzer_duration_seconds`` and the run series' sample times (``now``) in dry-run
plans, how long before now a fixed window ended ("ending 870s before now" in a no-telemetry
error), the state file's ``updated``/``finished`` times, and each label's own output folder in
paths. The scheduled cases pass ``--start``/``--end`` so their windows do not follow the clock.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DATA = REPO / "tests"
STALLS = DATA / "stalls" / "data"
S = 1_000_000_000

_MASKS = [
    (re.compile(r'("analysis_seconds": )[0-9.e-]+'), r"\g<1>0"),
    (re.compile(r"(duration_s=)[0-9.]+"), r"\g<1>0"),
    (re.compile(r"(stormotel_analyzer_duration_seconds\{[^}]*\} )\S+"), r"\g<1>X"),
    (re.compile(r"^(stormotel_analyzer_\w+\{[^}]*\} \S+) \d{13}$", re.M), r"\g<1> T"),
    # "no telemetry … (480s, ending 870s before now)": how long ago the fixed window ended
    (re.compile(r"(ending )\d+(s before now)"), r"\g<1>N\g<2>"),
]


def _mask(text: str, out_dir: Path) -> str:
    text = text.replace(str(out_dir), "<OUT>")
    for pattern, repl in _MASKS:
        text = pattern.sub(repl, text)
    return text


def _inputs(work: Path, demo: Path | None) -> dict[str, Path]:
    """The telemetry inputs; the synthetic archive is written once, for every label."""
    from tests.analyzers import otlp_fixtures, synth

    seed = otlp_fixtures.write_archive(work / "seed_archive", synth.seed_example())
    drift = synth.healthy(4, 300, seed=3)
    synth.plant_gap_drift(drift[1], 2 * synth.GIB)
    synth.plant_gap_spike(drift[3], 100, 20, 1 * synth.GIB)
    gaps = otlp_fixtures.write_archive(work / "gap_archive", drift)
    found = {"warmup": DATA / "analyzers/data/demo_warmup_steps", "seed": seed, "gaps": gaps,
             "estimate": _estimate_archive(work)}
    if demo is not None:
        found["demo"] = demo
    return found


def _estimate_archive(work: Path) -> Path:
    """Two simulated ranks tracked with a 1 MiB pre-run estimate (thousands of times over it:
    the estimate family's findings, text and sinks), written once by this interpreter."""
    root = work / "estimate_archive"
    for rank in (0, 1):
        subprocess.run([sys.executable, "-m", "stormotel", "track", "--sampler", "simulated",
                        "--duration", "1.5", "--interval", "0.05", "--archive", str(root),
                        "--job-id", "est", "--rank", str(rank), "--world-size", "2",
                        "--estimate", "1MiB", "-q"], check=True, cwd=REPO)
    return root / "est"


def _file_cases(inputs: dict[str, Path]) -> Iterator[tuple[str, list[str]]]:
    """(case name, analyze arguments); ``{out}`` is the case's output folder."""
    stormlog = DATA / "analyzers/data"
    events = [str(p) for p in sorted(stormlog.glob("stormlog_events_rank*.json"))]
    ooms = [str(p) for p in sorted(stormlog.glob("stormlog_oom_rank*"))]
    for name, path in [*inputs.items(), ("stormlog_events", None), ("stormlog_oom", None)]:
        paths = [str(path)] if path else (events if name == "stormlog_events" else ooms)
        yield f"{name}.json", [*paths, "--format", "json"]
        yield f"{name}.text", [*paths]
        yield f"{name}.files", [*paths, "--quiet", "-o", "{out}/report.json", "--format", "json",
                                "--html", "{out}/report.html", "--perfetto", "{out}/trace.json",
                                "--incident-dashboard", "{out}/board.json"]
        yield f"{name}.dry", [*paths, "--quiet", "--dry-run", "--remote-write",
                              "http://127.0.0.1:9/api/v1/write", "--pushgateway",
                              "http://127.0.0.1:9", "--grafana-url", "http://127.0.0.1:9",
                              "--grafana-dashboard"]
        yield f"{name}.high_markers", [*paths, "--format", "json", "--sensitivity", "high",
                                       "--align", "markers"]
        yield f"{name}.ranks02", [*paths, "--ranks", "0,2"]
        yield f"{name}.noevidence", [*paths, "--ranks", "77"]
    warm = str(inputs["warmup"])
    for case in sorted((STALLS / "cases").iterdir()):
        if (case / "logs").is_dir():
            yield f"case.{case.name}.json", ["--logs", str(case / "logs"), "--format", "json"]
            yield f"case.{case.name}.text", ["--logs", str(case / "logs")]
    for case in sorted((STALLS / "real").iterdir()):
        logs = case / "logs" if (case / "logs").is_dir() else case
        yield f"real.{case.name}.json", ["--logs", str(logs), "--format", "json"]
        yield f"real.{case.name}.text", ["--logs", str(logs)]
    for log in sorted((STALLS / "logs").iterdir()):
        yield f"logs.{log.name}.json", ["--logs", str(log), "--format", "json"]
        yield f"logs.{log.name}.text", ["--logs", str(log)]
        # stall evidence joined with telemetry (the merge), with every file sink
        yield f"joined.{log.name}", [warm, "--logs", str(log), "--format", "json", "--html",
                                     "{out}/r.html", "--perfetto", "{out}/t.json"]
    yield "err.missing", ["/nonexistent/telemetry"]
    yield "err.badflag", [warm, "--sensitivity", "extreme"]
    yield "err.output_dir", [warm, "-o", "/proc/none/report.json"]


@contextlib.contextmanager
def _tsdb(work: Path) -> Iterator[tuple[str, list[tuple[str, list[str]]]] | None]:
    """One real Prometheus with two planted jobs (and one job's steps and an OOM); None
    without the binary."""
    import shutil

    if not shutil.which("prometheus"):
        yield None
        return
    from tests import servers
    from tests.job import planted

    with servers.prometheus(work / "prom") as prom:
        now_ms = int(time.time() * 1000)
        p, data = planted.make(job_id="snap-a", minutes=8, now_ms=now_ms)
        planted.write(prom.url + "/api/v1/write", "snap-a", data)
        t = data[(0, "reserved")][0]
        planted.write_markers(prom.url + "/api/v1/write", "snap-a", t,
                              oom_at_ms=int(t[int(len(t) * 0.7)]))
        _, other = planted.make(job_id="snap-b", minutes=8, now_ms=now_ms, fault_rank=1)
        planted.write(prom.url + "/api/v1/write", "snap-b", other)
        planted.wait_visible(prom.url, "snap-a", 16)
        planted.wait_visible(prom.url, "snap-b", 16)
        win = ["--start", str(p.start_ns // S), "--end", str(p.end_ns // S + 1)]
        u = prom.url
        cases = [
            ("tsdb.json", ["--prometheus", u, "--job-id", "snap-a", *win, "--format", "json"]),
            ("tsdb.text", ["--prometheus", u, "--job-id", "snap-a", *win]),
            ("tsdb.files", ["--prometheus", u, "--job-id", "snap-a", *win, "--format", "json",
                            "-o", "{out}/r.json", "--html", "{out}/r.html", "--perfetto",
                            "{out}/t.json", "--incident-dashboard", "{out}/b.json"]),
            ("tsdb.dry", ["--prometheus", u, "--job-id", "snap-a", *win, "--dry-run",
                          "--remote-write", u + "/api/v1/write", "--pushgateway",
                          "http://127.0.0.1:9", "--quiet"]),
            ("tsdb.scheduled", ["--prometheus", u, "--scheduled", *win, "--quiet",
                                "--format", "json", "-o", "{out}/{job}.json", "--html",
                                "{out}/r.html", "--perfetto", "{out}/t.json"]),
            ("tsdb.scheduled_state", ["--prometheus", u, "--scheduled", *win,
                                      "--state-file", "{out}/state.json", "--format", "json",
                                      "-o", "{out}/r.json"]),
            ("tsdb.joined", ["--prometheus", u, "--job-id", "snap-a", *win, "--format", "json",
                             "--logs", str(STALLS / "logs" / "straggler_v25"), "--html",
                             "{out}/r.html"]),
            ("tsdb.ghost", ["--prometheus", u, "--job-id", "ghost", *win, "--remote-write",
                            "http://127.0.0.1:9/api/v1/write"]),
            ("tsdb.ghost_dry", ["--prometheus", u, "--job-id", "ghost", *win, "--dry-run",
                                "--remote-write", u + "/api/v1/write"]),
        ]
        yield u, cases


def _run_case(python: str, args: list[str], out: Path, cwd: Path) -> str:
    """The case's hash input: exit code, stdout, stderr and every file written (masked)."""
    out.mkdir(parents=True, exist_ok=True)
    argv = [a.replace("{out}", str(out)) for a in args]
    proc = subprocess.run([python, "-m", "stormotel", "analyze", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=600)
    parts = [f"exit={proc.returncode}", _mask(proc.stdout, out), _mask(proc.stderr, out)]
    for f in sorted(p for p in out.rglob("*") if p.is_file() and not p.name.endswith(".lock")):
        text = f.read_bytes().decode("utf-8", "replace")
        if f.name == "state.json":  # the state file records when it was written
            text = re.sub(r'"(updated|finished)": "[^"]*"', r'"\1": "X"', text)
        parts.append(f"--- {f.relative_to(out)}\n{_mask(text, out)}")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--demo-archive", type=Path, help="a `stormotel demo --out` job folder")
    ap.add_argument("--only", help="run only cases whose name contains this (several: "
                                   "comma-separated, any of them)")
    ap.add_argument("labels", nargs="+", help="LABEL=PYTHON (each checkout's interpreter)")
    a = ap.parse_args(argv)
    pythons = dict(x.split("=", 1) for x in a.labels)
    a.out.mkdir(parents=True, exist_ok=True)
    inputs = _inputs(a.out / "inputs", a.demo_archive)
    cases = list(_file_cases(inputs))
    hashes: dict[str, dict[str, str]] = {label: {} for label in pythons}
    with _tsdb(a.out / "tsdb") as tsdb:
        if tsdb is not None:
            cases += tsdb[1]
        else:
            print("no prometheus binary: TSDB cases skipped", file=sys.stderr)
        for name, args in cases:
            if a.only and not any(part in name for part in a.only.split(",")):
                continue
            for label, python in pythons.items():
                text = _run_case(python, args, a.out / label / name, Path(python).parents[2])
                (a.out / label / name / "_case.txt").write_text(text)
                hashes[label][name] = hashlib.sha256(text.encode()).hexdigest()
    (a.out / "hashes.json").write_text(json.dumps(hashes, indent=1, sort_keys=True))
    labels = list(pythons)
    differ = [n for n in hashes[labels[0]]
              if len({hashes[lb].get(n) for lb in labels}) > 1]
    print(f"{len(hashes[labels[0]])} cases, {len(differ)} differ between {', '.join(labels)}")
    for n in differ:
        print(f"DIFFERS: {n}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
