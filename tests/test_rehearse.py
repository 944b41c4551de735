"""``stormotel rehearse``: set-up 2 on one machine, checked at the boundaries a user touches —
the command's output, the scrape configuration it writes (promtool), the ports it picks, and the
analysis it runs against the real Prometheus it started."""

from __future__ import annotations

import contextlib
import os
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


@pytest.mark.slow  # about 45 s: ranks, a Prometheus, the analysis
def test_rehearsal_scrapes_every_rank_and_names_the_planted_one(tmp_path: Path) -> None:
    servers.require_binary("prometheus")
    out = run_stormotel("rehearse", "--ranks", "3", "--duration", "30", "--out",
                        str(tmp_path / "r"), cwd=tmp_path, timeout=240)
    assert out.returncode == exitcodes.OK, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout
    assert "first scrape landed: all 3 ranks" in text, text
    # On a loaded host the trackers may start so late that the planted rise falls inside
    # their warm-up window; the command then warns (stderr), and this line cannot hold.
    assert "Top first-cause suspect: rank 1 (high)" in text, text + out.stderr
    assert "rank 1    persistent_drift" in text, text
    assert "(+3577" not in text
    # Every process it started is gone: nothing listens on the ports it printed.
    for line in text.splitlines():
        if "Prometheus at http://127.0.0.1:" in line:
            port = int(line.split("127.0.0.1:")[1].split()[0])
            with socket.socket() as s:
                assert s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.slow  # about 30 s: two ranks for 20 s, a Prometheus, no analysis
def test_a_fault_inside_the_ranks_warm_up_window_is_warned_about(tmp_path: Path) -> None:
    """A fault that lands soon after the trackers' start — what late starts on a loaded host
    do to the default t=20s (helper fa: "no rank led — warm-up of ranks [0, 1]") — is said
    before the analysis, from the ranks' start gauges as Prometheus scraped them. Here the
    fault is planted at t=0s, ~4 s after the trackers start (the window: a quarter of 25 s)."""
    servers.require_binary("prometheus")
    out = run_stormotel("rehearse", "--ranks", "2", "--duration", "20", "--no-analyze",
                        "--fault", "rank=1:first_spike@t=0s,delta=1GiB,lead=2s",
                        "--out", str(tmp_path / "r"), cwd=tmp_path, timeout=240)
    assert out.returncode == exitcodes.OK, out.stdout[-3000:] + out.stderr[-3000:]
    line = next((ln for ln in out.stderr.splitlines() if "started late" in ln), "")
    # Which ranks it names depends on how long after launch their trackers started (rank 1's
    # fault ~4.4 s after its start on an idle host, rank 0's 2 s later, just past the 6.25 s
    # window; both inside on a loaded one): at least one, each with a delay inside the window.
    # Which rank a given start puts inside is faults_in_warmup's test, below.
    named = re.findall(r"rank (\d+) (\d+(?:\.\d+)?)s", line)
    assert named and "warm-up" in line, out.stderr
    assert all(r in ("0", "1") and 0 <= float(d) <= 0.25 * 25 for r, d in named), line


def test_faults_in_warmup_names_the_ranks_whose_fault_lands_in_their_window() -> None:
    spec = "rank=1:first_spike@t=0s,delta=1GiB,lead=2s"  # rank 1 at t=0, the others 2 s later
    epoch, run_s = 1000.0, 25.0  # window: a quarter of 25 s = 6.25 s after each start
    # idle host: trackers 4.4 s before the shared clock's start: rank 0's 6.4 s is past it
    assert faults_in_warmup({0: 995.6, 1: 995.6}, epoch, spec, run_s) == {
        1: pytest.approx(4.4)}
    # loaded host: started 1.5 s before it: both inside
    assert faults_in_warmup({0: 998.5, 1: 998.5}, epoch, spec, run_s) == {
        0: pytest.approx(3.5), 1: pytest.approx(1.5)}
    # a tracker that started after its fault saw it from its first sample: not a warm-up rise
    assert faults_in_warmup({0: 1003.0, 1: 1001.0}, epoch, spec, run_s) == {}
    # started long before: no warning
    assert faults_in_warmup({0: 980.0, 1: 980.0}, epoch, spec, run_s) == {}


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
