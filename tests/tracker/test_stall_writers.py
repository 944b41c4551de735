"""The stall watch's two writers, at the process boundary: the sampling thread writes the
snapshot with the GIL when it can (a rank spinning in pure Python must survive its snapshots:
faulthandler's C watchdog, reading frames without the GIL, crashed such a rank by SIGSEGV in
every one of 12 runs of this job on main's code); the C watchdog writes it when a thread holds
the GIL in C; and the analyzer reads both writers' text alike."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from stormotel.analyzers.stalls.stacks import parse_snapshot

from stormotel import schema, stall_watch
from tests.tracker import stall_spin_job

REPO = Path(__file__).resolve().parents[2]
#: runs of the spinning rank: main's code crashed in 12 of 12 (about one dump in five; 18
#: dumps a run), so one run passes on it with a chance of about 2 % (0.8 ** 18); a second run
#: (1e-4) cost another ~10 s of the suite's CPU, spinning by design
SPIN_RUNS = 1


def _job(archive: Path, mode: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.tracker.stall_spin_job", str(archive),
                           mode], cwd=REPO, text=True, capture_output=True, timeout=timeout)


def _header(path: Path) -> dict[str, object]:
    first = path.read_text(errors="replace").partition("\n")[0]
    return json.loads(first[len(schema.STACK_HEADER_PREFIX):])


def _stacks(archive: Path) -> Path:
    return archive / "j" / schema.STACKS_DIR


@pytest.mark.parametrize("run", range(SPIN_RUNS))
def test_a_rank_spinning_in_python_survives_its_snapshots(tmp_path: Path, run: int) -> None:
    proc = _job(tmp_path, "spin", timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    files = sorted(_stacks(tmp_path).glob("*" + schema.STACK_SUFFIX))
    # one snapshot per episode at least (three when the machine keeps the pace)
    assert len(files) >= stall_spin_job.EPISODES, proc.stdout
    assert not list(_stacks(tmp_path).glob("*" + schema.STACK_PENDING_SUFFIX))
    for f in files:
        assert _header(f)["writer"] == stall_watch.WRITER_PYTHON, f
        snap = parse_snapshot(f)
        assert snap is not None and not snap.pending
        # the spinning frame (deeper than 100 frames in the parse, the loop otherwise)
        names = [fr.function for fr in snap.main_frames]
        assert names and set(names) <= {"_parse", "spin_in_the_tokenizer", "main", "<module>",
                                        "_run_code", "_run_module_as_main"}, (f, names)
        assert names[0] in ("_parse", "spin_in_the_tokenizer"), (f, names)
        assert snap.progress["step"] is not None  # the trailer, as for a C dump


def test_a_rank_holding_the_gil_in_c_is_snapshotted_by_faulthandler(tmp_path: Path) -> None:
    """No Python thread runs: the sampling thread misses its moment and the C watchdog writes
    the snapshot ``grace_s`` later; the rank never gets the GIL back (killed), the
    ``.pending`` file holds it."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.tracker.stall_spin_job",
                             str(tmp_path), "regex"], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    snap = None
    try:
        give_up = time.monotonic() + 120
        while snap is None and time.monotonic() < give_up and proc.poll() is None:
            time.sleep(0.2)
            for f in _stacks(tmp_path).glob("*" + schema.STACK_PENDING_SUFFIX) \
                    if _stacks(tmp_path).exists() else []:
                s = parse_snapshot(f)
                if s is not None and any(fr.function == "catastrophic_match"
                                         for fr in s.main_frames):
                    snap, path = s, f
        time.sleep(0.5)  # the dump of the other threads ends
    finally:
        proc.kill()
        out, err = proc.communicate()
    assert snap is not None, (proc.returncode, out, err[-3000:])
    assert "in the regex" in out
    header = _header(path)
    assert header["writer"] == stall_watch.WRITER_C
    assert header["timeout_s"] == pytest.approx(2 * stall_spin_job.FLOOR_S
                                                + stall_watch.MIN_GRACE_S)
    assert path.read_text().splitlines()[1] == "Timeout (0:00:02.600000)!"
    assert not list(_stacks(tmp_path).glob("*" + schema.STACK_SUFFIX))  # no Python writer ran


def test_the_analyzer_reads_both_writers_alike(tmp_path: Path) -> None:
    """The same parked threads (more than 100; one deeper than 100 frames; names past 500
    characters and not ASCII) written by faulthandler and by the Python writer: the same
    text, so the same parsed frames for every thread."""
    proc = _job(tmp_path, "format", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    c_text = (tmp_path / "faulthandler.txt").read_text()
    py_text = (tmp_path / "python.txt").read_text()
    assert c_text.count("\n  ...\n") == 1 and c_text.endswith("\n...\n")  # both limits hit
    assert "\\xfcn\\xefcode_wait_xxx" in c_text and 'xxx...", line' in c_text
    parsed = []
    for name, text in (("c", c_text), ("py", py_text)):
        f = tmp_path / f"{name}{schema.STACK_SUFFIX}"
        head = {"rank": 0, "armed_unix_ns": time.time_ns(), "timeout_s": 1.0}
        f.write_text(schema.STACK_HEADER_PREFIX + json.dumps(head) + "\n" + text)
        snap = parse_snapshot(f)
        assert snap is not None
        parsed.append(snap.threads)
    assert len(parsed[0]) == stall_watch.MAX_DUMP_THREADS
    assert max(len(v) for v in parsed[0].values()) == stall_watch.MAX_DUMP_FRAMES
    assert parsed[0] == parsed[1]
    assert py_text == c_text


@pytest.mark.parametrize("seconds", [0.05, 0.3, 1.0])
def test_the_timeout_line_is_faulthandlers(tmp_path: Path, seconds: float) -> None:
    out = tmp_path / "t.txt"
    code = ("import faulthandler, sys, time\n"
            f"f = open({str(out)!r}, 'w')\n"
            f"faulthandler.dump_traceback_later({seconds!r}, file=f)\n"
            f"time.sleep({seconds!r} + 0.5)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert out.read_text().splitlines()[0] == stall_watch._timeout_line(seconds).rstrip("\n")
    assert stall_watch._timeout_line(3725.25) == "Timeout (1:02:05.250000)!\n"
