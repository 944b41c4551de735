"""Two ``stormotel analyze`` runs at once in one process each keep their own output.

``stormotel serve --workers 2`` and the suites that run the command in-process
(:func:`tests.cli.run_stormotel_here`) run analyses in threads. The helper used to capture a
run by swapping ``sys.stdout``/``sys.stderr`` (``contextlib.redirect_*``): a swap is
process-wide, so while two runs were in flight both wrote to whichever capture was installed
last — one run's report in the other's output, its own empty — and the one that ended first put
back the other's buffer as the process's streams. Now every line of a run goes to the streams
its entry point was handed (:mod:`stormotel.streams`), and the helper hands them.

The runs are held in flight together without timing: each reads its telemetry from a named pipe
(a path named on the command line may be one: ``<(zcat …)``), and neither pipe is given its
data until both runs have opened theirs.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.cli import run_stormotel_here
from tests.hostile.corpus import events

JOBS = {"alpha": 2, "bravo": 3}  # job id -> world size: each report is told apart by both


class Feeder:
    """Writes ``data`` into the pipe at ``path`` once a reader has opened it (``opened``: the
    run holding it is in flight) and ``gate`` is set. Once: the analyzer reads a named pipe
    once (tests/hostile/test_files.py), and another open would find nothing."""

    def __init__(self, path: Path, data: bytes, gate: threading.Event) -> None:
        self.path, self.data, self.gate = path, data, gate
        self.opened, self._stop = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._feed, daemon=True)
        self.thread.start()

    def _feed(self) -> None:
        while not self._stop.is_set():
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:  # ENXIO: no reader has the pipe open yet
                if e.errno != errno.ENXIO:
                    raise
                time.sleep(0.005)
                continue
            self.opened.set()
            self.gate.wait(60)
            os.set_blocking(fd, True)
            try:
                os.write(fd, self.data)
            except BrokenPipeError:  # the run gave up on it: its result says why
                pass
            finally:
                os.close(fd)
            return

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(10)


def _telemetry(job: str, world: int) -> bytes:
    """A Stormlog export of ``world`` flat ranks of ``job``."""
    return json.dumps([e for rank in range(world)
                       for e in events(rank, n=120, job_id=job, world_size=world)]).encode()


def _pipe(folder: Path, job: str, world: int) -> tuple[Path, bytes]:
    path = folder / f"{job}.json"
    os.mkfifo(path)
    return path, _telemetry(job, world)


def test_two_runs_at_once_through_the_helper_keep_their_own_output(tmp_path: Path) -> None:
    gate = threading.Event()
    feeders, results, threads = {}, {}, []
    before = sys.stdout, sys.stderr
    for job, world in JOBS.items():
        path, data = _pipe(tmp_path, job, world)
        feeders[job] = Feeder(path, data, gate)

        def run(job: str = job, path: Path = path) -> None:
            results[job] = run_stormotel_here("analyze", str(path), "--html",
                                              str(tmp_path / f"{job}.html"))

        threads.append(threading.Thread(target=run, daemon=True))
    try:
        for t in threads:
            t.start()
        for job, f in feeders.items():  # both runs are reading their pipe: both in flight
            assert f.opened.wait(60), f"the {job} run never opened its pipe"
        gate.set()
        for t in threads:
            t.join(120)
    finally:
        gate.set()
        for f in feeders.values():
            f.stop()
        swapped = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = before  # the old helper left another run's buffer here
    assert set(results) == set(JOBS), results
    for job, world in JOBS.items():
        other = next(j for j in JOBS if j != job)
        r = results[job]
        assert r.returncode == 0, r.stderr
        assert f"job {job}, world size {world}" in r.stdout, (job, r.stdout, r.stderr)
        assert other not in r.stdout and other not in r.stderr, (job, r.stdout, r.stderr)
        assert f"wrote {tmp_path / job}.html" in r.stderr, (job, r.stderr)
        assert r.stdout.count("stormotel analysis — job") == 1, r.stdout
    assert swapped == before, "a run left the process's stdout/stderr swapped"


def test_each_run_prints_what_the_command_alone_prints(tmp_path: Path) -> None:
    """The in-process run's output is the command's: the same report on stdout as a fresh
    interpreter prints for the same data (the streams moved, not the text)."""
    data = tmp_path / "alpha.json"
    data.write_bytes(_telemetry("alpha", 2))
    alone = subprocess.run([sys.executable, "-m", "stormotel", "analyze", str(data)],
                           capture_output=True, text=True, timeout=120)
    here = run_stormotel_here("analyze", str(data))
    assert (here.returncode, here.stdout, here.stderr) == \
        (alone.returncode, alone.stdout, alone.stderr)
    assert "job alpha, world size 2" in here.stdout
    usage = run_stormotel_here("analyze", "--align", "nope")
    usage_alone = subprocess.run([sys.executable, "-m", "stormotel", "analyze", "--align",
                                  "nope"], capture_output=True, text=True, timeout=120)
    assert (usage.returncode, usage.stdout, usage.stderr) == \
        (usage_alone.returncode, usage_alone.stdout, usage_alone.stderr) != (2, "", "")
    assert usage.returncode == 2 and "invalid choice" in usage.stderr


def test_a_runs_environment_is_its_own_and_put_back_after(tmp_path: Path) -> None:
    """``env`` reaches the run it is given to (a 100-byte ``STORMOTEL_MAX_FILE_BYTES``: the
    telemetry file is refused) and no further: not the process's environment after it, nor a
    run after it, nor a run in flight beside it (the env run waits for that one to end before
    it sets anything)."""
    data = tmp_path / "bravo.json"
    data.write_bytes(_telemetry("bravo", 3))
    small = {"STORMOTEL_MAX_FILE_BYTES": "100"}
    before = dict(os.environ)
    refused = run_stormotel_here("analyze", str(data), env=small)
    assert dict(os.environ) == before  # OPENBLAS_NUM_THREADS the command sets included
    plain = run_stormotel_here("analyze", str(data))
    assert refused.returncode not in (0, 1) and "job bravo" not in refused.stdout, refused
    assert plain.returncode == 0 and "job bravo, world size 3" in plain.stdout, plain

    gate, results = threading.Event(), {}
    path, piped = _pipe(tmp_path, "alpha", 2)
    feeder = Feeder(path, piped, gate)
    first = threading.Thread(target=lambda: results.update(
        plain=run_stormotel_here("analyze", str(path))), daemon=True)
    second = threading.Thread(target=lambda: results.update(
        refused=run_stormotel_here("analyze", str(data), env=small)), daemon=True)
    try:
        first.start()
        assert feeder.opened.wait(60), "the first run never opened its pipe"
        second.start()
        second.join(1.0)  # unheld, it would have set the variable and finished by now
        assert second.is_alive() and "STORMOTEL_MAX_FILE_BYTES" not in os.environ
    finally:
        gate.set()
        first.join(120)
        second.join(120)
        feeder.stop()
    assert results["plain"].returncode == 0, results["plain"].stderr  # read all, not refused
    assert "job alpha, world size 2" in results["plain"].stdout, results["plain"]
    assert (results["refused"].returncode, results["refused"].stdout) == \
        (refused.returncode, refused.stdout)
    assert dict(os.environ) == before
