"""``stormotel rehearse``: set-up 2 on one machine, checked at the boundaries a user touches —
the command's output, the scrape configuration it writes (promtool), the ports it picks, and the
analysis it runs against the real Prometheus it started."""

from __future__ import annotations

import contextlib
import os
import random
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from stormotel import exitcodes
from stormotel.rehearse import choose_ports, faults_in_warmup, scrape_config
from tests import servers
from tests.cli import run_stormotel


def test_scrape_config_passes_promtool(tmp_path: Path) -> None:
    promtool = servers.require_binary("promtool")
    config = tmp_path / "prometheus.yml"
    config.write_text(scrape_config("stormotel", [9464, 9465], 15.0))
    out = subprocess.run([promtool, "check", "config", str(config)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "127.0.0.1:9465" in config.read_text() and "honor_labels: true" in config.read_text()


def test_a_named_port_in_use_is_refused_and_defaults_move_aside() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = int(s.getsockname()[1])
        with pytest.raises(Exception, match="in use"):
            choose_ports(2, busy, None, say=False)
        with pytest.raises(Exception, match="in use"):
            choose_ports(2, None, busy, say=False)
        ranks, prom = choose_ports(3, None, None, say=False)
        assert len(set(ranks)) == 3 and prom not in ranks and busy not in (*ranks, prom)


def test_bad_flags_exit_2_with_a_message(tmp_path: Path) -> None:
    out = run_stormotel("rehearse", "--ranks", "1", cwd=tmp_path)
    assert out.returncode == exitcodes.USAGE and "--ranks" in out.stderr
    out = run_stormotel("rehearse", "--fault", "rank=1:nonsense@t=1s", cwd=tmp_path)
    assert out.returncode == exitcodes.USAGE and "Traceback" not in out.stderr


def test_without_httpx_it_says_so_before_writing_anything(tmp_path: Path) -> None:
    """A tracker-only install (no httpx) with a ``prometheus`` on PATH: the command wrote
    ``DIR/prometheus.yml`` and only then said the analyzer extra was missing (first-hour
    audit, helper fa). The dependency is checked first: exit 2, the extra named, nothing
    written. httpx is hidden the way a missing install hides it (``import httpx`` raises
    ModuleNotFoundError); the ``prometheus`` on PATH is never run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "prometheus"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    out_dir = tmp_path / "r"
    code = ("import sys; sys.modules['httpx'] = None; from stormotel.cli import main; "
            f"raise SystemExit(main(['rehearse', '--ranks', '2', '--out', {str(out_dir)!r}]))")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == exitcodes.USAGE, done.stdout + done.stderr
    assert "'httpx'" in done.stderr and "pip install 'stormotel[" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not out_dir.exists(), sorted(p.name for p in out_dir.rglob("*"))


#: ``stormotel rehearse`` with one rank's tracker started late, as on a loaded host (imports
#: taking 12+ s): a launcher that sleeps before it execs the rank. The wrapper is put around
#: the command the rehearsal builds, so it delays the old code's ranks the same way.
LATE_RANK = """
import sys
from stormotel import rehearse

built = rehearse._track_argv

def late(rank, *rest):
    argv = built(rank, *rest)
    return ["sh", "-c", '{before}; exec "$@"', "sh", *argv] if rank == {rank} else argv

rehearse._track_argv = late
{patch}
raise SystemExit(rehearse.main(sys.argv[1:]))
"""


def _own_ports(ranks: int) -> list[str]:
    """``--port-base``/``--prometheus-port`` on a block of free ports of this test's own.

    Why: this module's tests run on several workers at once (``SPLIT_MODULES``), and the
    rehearsal's defaults (9464 + R, 9090) are checked free when it starts, bound only when each
    rank's tracker starts: a rehearsal begun while another's late rank was still importing took
    that rank's port (the fresh-clone run of session 22: "did not start within 4s" for both
    ranks, and the other rehearsal's Prometheus gone). A random block of the high range, each
    port checked free, keeps concurrent tests apart; the test of the defaults keeps them."""
    rng = random.Random()
    for _ in range(50):
        base = rng.randrange(20000, 40000)
        wanted = [*range(base, base + ranks), base + ranks + 1]
        if all(_free(port) for port in wanted):
            return ["--port-base", str(base), "--prometheus-port", str(wanted[-1])]
    raise AssertionError("no free block of ports in 20000-40000")


def _free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _rehearse(tmp_path: Path, *args: str, late_rank: int | None = None,
              before: str = "true", patch: str = "") -> subprocess.CompletedProcess[str]:
    """``stormotel rehearse ARGS`` on ports of this test's own (:func:`_own_ports`); with
    ``late_rank``, that rank's launcher runs the shell command ``before`` first (and ``patch``,
    Python, runs in the rehearsal's process)."""
    ranks = int(args[args.index("--ranks") + 1]) if "--ranks" in args else 2
    args = (*args, *_own_ports(ranks))
    if late_rank is None:
        return run_stormotel("rehearse", *args, cwd=tmp_path, timeout=240)
    code = LATE_RANK.format(before=before, rank=late_rank, patch=patch)
    return subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=240)


# About 45 s each: ranks, a Prometheus, the analysis. Late: rank 1's tracker starts 18 s
# after the others, more than its warm-up window (a quarter of its ~35 s); t=0 waited for it.
# When t=0 was a fixed instant 5 s after the launch, its planted rise at t=20s came ~5 s after
# its start, inside that window: "Top first-cause suspect: rank 0 (low)", rank 1's rise set
# aside as warm-up (helper fa's load-21 rehearsal, made deterministic).
@pytest.mark.slow
@pytest.mark.parametrize("late_s", [None, 18.0], ids=["on-time", "rank-1-late"])
def test_rehearsal_scrapes_every_rank_and_names_the_planted_one(tmp_path: Path,
                                                                late_s: float | None) -> None:
    servers.require_binary("prometheus")
    out = _rehearse(tmp_path, "--ranks", "3", "--duration", "30", "--out", str(tmp_path / "r"),
                    late_rank=None if late_s is None else 1, before=f"sleep {late_s}")
    assert out.returncode == exitcodes.OK, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout
    assert "first scrape landed: all 3 ranks" in text, text
    assert "Top first-cause suspect: rank 1 (high)" in text, text + out.stderr
    started = re.search(r"trackers started after launch: rank 0 (\S+)s, rank 1 (\S+)s", text)
    assert started, text
    if late_s is not None:  # it slept late_s before it started at all; rank 0's own start-up
        # time varies with the host's load (1.9 s beside two neighbours), so not a difference
        assert float(started[2]) >= late_s, started[0]
    assert "rank 1    persistent_drift" in text, text
    assert "(+3577" not in text
    # Every process it started is gone: nothing listens on the ports it printed.
    for line in text.splitlines():
        if "Prometheus at http://127.0.0.1:" in line:
            port = int(line.split("127.0.0.1:")[1].split()[0])
            with socket.socket() as s:
                assert s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize(("before", "patch", "said"), [
    ("exit 7", "", "rank 1 exited (status 7) before its tracker started"),
    ("exec sleep 60", "rehearse.START_WAIT_S = 4.0", "the tracker of rank(s) [1] did not start "
                                                "within 4s"),
], ids=["exited", "never-started"])
def test_a_rank_that_never_starts_is_named_and_nothing_is_left_running(
        tmp_path: Path, before: str, patch: str, said: str) -> None:
    """t=0 waits for every tracker, within a bound (120 s; 4 s here): a rank that exits first,
    or does not start in time, stops the rehearsal with its rank named (exit 3), no fault
    planted, and the other ranks stopped."""
    out = _rehearse(tmp_path, "--ranks", "2", "--duration", "30", "--no-prometheus", "--out",
                    str(tmp_path / "r"), late_rank=1, before=before, patch=patch)
    assert out.returncode == exitcodes.SOURCE_FAILURE, out.stdout[-3000:] + out.stderr[-3000:]
    assert said in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert not (tmp_path / "r" / "sim_epoch_ns").exists()
    ports = re.search(r"/metrics on 127\.0\.0\.1:(\S+);", out.stdout)
    assert ports, out.stdout
    first = int(re.split(r"\.\.|,", ports[1])[0])  # rank 0's, which had started
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", first)) != 0


@pytest.mark.slow  # about 40 s: two ranks for 5 + 30 s, no Prometheus
def test_a_fault_inside_the_ranks_warm_up_window_is_warned_about(tmp_path: Path) -> None:
    """A fault planted so early that it lands soon after a tracker's start, inside the
    analysis' warm-up window, is said before the ranks run on: here t=0s, which comes 5 s
    after the last tracker started (the window: a quarter of its ~35 s run). The starts are
    read from the ranks' own /metrics, so this holds without a Prometheus."""
    out = _rehearse(tmp_path, "--ranks", "2", "--duration", "30", "--no-prometheus",
                    "--fault", "rank=1:first_spike@t=0s,delta=1GiB,lead=2s",
                    "--out", str(tmp_path / "r"))
    assert out.returncode == exitcodes.OK, out.stdout[-3000:] + out.stderr[-3000:]
    line = next((ln for ln in out.stderr.splitlines() if "warm-up window" in ln), "")
    # The rank that started last meets the fault ~5 s after its start, inside its window
    # (8.75 s or more); a rank started earlier may be past its own. Which rank a given start
    # puts inside is faults_in_warmup's test, below.
    named = re.findall(r"rank (\d+): (\d+(?:\.\d+)?)s after its start, window "
                       r"(\d+(?:\.\d+)?)s", line)
    assert named, out.stderr
    assert all(r in ("0", "1") and 0 <= float(d) <= float(w) for r, d, w in named), line


def test_faults_in_warmup_names_the_ranks_whose_fault_lands_in_their_window() -> None:
    spec = "rank=1:first_spike@t=0s,delta=1GiB,lead=2s"  # rank 1 at t=0, the others 2 s later
    epoch, end = 1000.0, 1020.0  # the ranks stop at t=20s; window: a quarter of each run
    # started 4.4 s before t=0: a 24.4 s run, a 6.1 s window; rank 0's 6.4 s is past it
    assert faults_in_warmup({0: 995.6, 1: 995.6}, epoch, spec, end) == {
        1: pytest.approx(4.4)}
    # started 1.5 s before it: a 5.4 s window, both inside
    assert faults_in_warmup({0: 998.5, 1: 998.5}, epoch, spec, end) == {
        0: pytest.approx(3.5), 1: pytest.approx(1.5)}
    # each rank's own run: rank 0 started 3.5 s before t=0 (window 5.9 s, its fault 5.5 s
    # after: inside), rank 1 1.5 s after it (window 5.5 s, its fault 2 s after: inside)
    assert faults_in_warmup({0: 996.5, 1: 998.0}, epoch, spec, end) == {
        0: pytest.approx(5.5), 1: pytest.approx(2.0)}
    # a tracker that started after its fault saw it from its first sample: not a warm-up rise
    assert faults_in_warmup({0: 1003.0, 1: 1001.0}, epoch, spec, end) == {}
    # started long before: no warning
    assert faults_in_warmup({0: 980.0, 1: 980.0}, epoch, spec, end) == {}


@pytest.mark.slow  # two tracked ranks for 1 s (+ the 5 s start margin and their linger)
def test_ports_moved_aside_are_listed_not_drawn_as_a_range(tmp_path: Path) -> None:
    """With 9464 taken the ranks get free ports in no order; the start line said
    ``/metrics on 127.0.0.1:59653..51711``, a range that holds neither. It lists them now, the
    ports the scrape configuration holds (first-hour audit, helper fa)."""
    holder = socket.socket()
    with contextlib.suppress(OSError):  # taken already (by another test) serves as well
        holder.bind(("127.0.0.1", 9464))
        holder.listen(1)
    try:
        out = run_stormotel("rehearse", "--ranks", "2", "--duration", "1", "--no-prometheus",
                            "--out", str(tmp_path / "r"), cwd=tmp_path, timeout=240)
    finally:
        holder.close()
    assert out.returncode == exitcodes.OK, out.stdout[-3000:] + out.stderr[-3000:]
    shown = re.search(r"/metrics on 127\.0\.0\.1:(\S+);", out.stdout)
    assert shown, out.stdout
    ports = [int(p) for p in shown[1].split(",")]
    config = (tmp_path / "r" / "prometheus.yml").read_text()
    assert len(ports) == 2 and all(f"127.0.0.1:{p}" in config for p in ports), (shown[1], config)


def test_the_start_gauge_is_read_only_from_this_jobs_rank() -> None:
    """A port chosen free can be taken before the rank binds it (a second rehearsal on the
    same ports): the start gauge served there by another job's tracker, or another rank's,
    must not set this job's t=0 (the old read took any start gauge on the port)."""
    import http.server
    import threading

    from stormotel.rehearse import start_gauge

    body = ('stormotel_tracker_start_timestamp_seconds{gpu="1",job_id="other",rank="1",'
            'world_size="2"} 1.5e+09\n'
            'stormotel_tracker_start_timestamp_seconds{job_id="mine\\"x",rank="0"} 1.6e+09\n')

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        assert start_gauge(port, "mine", 1) is None  # another job's rank 1
        assert start_gauge(port, 'mine"x', 1) is None  # this job, another rank
        assert start_gauge(port, 'mine"x', 0) == 1.6e9  # its label value as exposed, escaped
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.slow  # about 15 s: two ranks started, then the rehearsal terminated
def test_sigterm_stops_the_ranks_it_started(tmp_path: Path) -> None:
    """``kill PID`` / a supervisor's SIGTERM to the rehearsal stops its ranks too (exit 143):
    Python's default for SIGTERM skipped the ``finally`` that stops them, and they ran on for
    their --duration holding their ports."""
    import signal
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "stormotel", "rehearse", "--ranks", "2", "--duration", "120",
         "--no-prometheus", "--out", str(tmp_path / "r"), *_own_ports(2)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ports: list[int] = []
        for line in proc.stdout:
            if shown := re.search(r"/metrics on 127\.0\.0\.1:(\S+);", line):
                lo, _, hi = shown[1].partition("..")
                ports = ([int(p) for p in lo.split(",")] if not hi
                         else list(range(int(lo), int(hi) + 1)))
            if "trackers started after launch" in line:  # every rank serves its /metrics
                break
        assert ports
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 128 + signal.SIGTERM
        assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
        end = time.monotonic() + 10  # the ranks' SIGTERM exit: flush, then unbind
        while any(_listening(p) for p in ports) and time.monotonic() < end:
            time.sleep(0.2)
        assert not [p for p in ports if _listening(p)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_stop_all_signals_every_process_before_it_waits_for_any(tmp_path: Path) -> None:
    """Three processes that ignore SIGTERM (as a rank lingering for a last scrape does for a
    while): every one has its SIGTERM by the time the first is killed at the end of the
    grace. One by one, each waited out its own grace before the next was signalled."""
    import threading

    from stormotel.rehearse import Started, stop_all

    log, ready = tmp_path / "terms", tmp_path / "ready"
    script = (f'trap "echo $$ >> {log}" TERM; echo $$ >> {ready}; '
              "while :; do sleep 0.05; done")
    started = [Started(f"p{i}", subprocess.Popen(["sh", "-c", script])) for i in range(3)]
    for _ in range(1000):  # every trap set (at most ~10 s)
        if len(ready.read_text().split() if ready.exists() else []) == 3:
            break
        threading.Event().wait(0.01)
    seen: list[str] = []

    def watch() -> None:  # the moment the first one stopped: who had been asked by then
        while started[-1].proc.poll() is None:  # stop_all stops the last started first
            threading.Event().wait(0.01)
        seen.extend(log.read_text().split() if log.exists() else [])

    watcher = threading.Thread(target=watch)
    watcher.start()
    stop_all(started, grace_s=1.0)
    watcher.join(10)
    assert all(s.proc.returncode == -9 for s in started)
    assert sorted(seen) == sorted(str(s.proc.pid) for s in started)
