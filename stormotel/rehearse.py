"""``stormotel rehearse``: set-up 2 (Prometheus scrapes every rank) on one machine, in one command.

Rehearsing the scrape set-up used to take a shell loop of ``stormotel track`` processes, the
undocumented ``STORMOTEL_SIM_EPOCH_NS`` to line their planted faults up, a hand-written scrape
configuration, and guessing when Prometheus had data. This command does each of those steps the
way a user would by hand (the same ``stormotel track`` processes, the same scrape
configuration), so what it shows is what the real set-up does:

1. N ``stormotel track --sampler simulated`` ranks, each serving ``/metrics`` on
   ``port-base + rank``, with a planted fault;
2. ``DIR/prometheus.yml``, a ready scrape configuration for those endpoints;
3. with a ``prometheus`` binary on PATH, a local Prometheus on that configuration (storage in
   ``DIR/data``); it prints when the first scrape of every rank landed;
4. the faults' shared t=0, set once every rank's tracker has started (its start gauge, read
   from its own ``/metrics``) and, with the local Prometheus, been scraped: written to
   ``DIR/sim_epoch_ns``, the file the ranks' ``STORMOTEL_SIM_EPOCH_FILE`` names;
5. when the ranks finish, ``stormotel analyze --prometheus …`` over the job, as a user runs it.

Why t=0 waits for the trackers: it used to be a fixed instant, 5 s after the ranks were
launched. On a loaded host (helper fa's rehearsal at load 21) the trackers started 12+ s late,
rank 1's planted rise at t=20s fell inside its warm-up window — the analysis sets a rank's
first rise soon after its start aside — and the answer was "no rank led" instead of rank 1.

Every process it starts is stopped by its PID at the end (``--keep`` leaves Prometheus up).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from stormotel import environment, exitcodes, schema
from stormotel.atomic import write_atomic
from stormotel.samplers.faults import FaultSpecError, parse_faults
from stormotel.units import UnitError, parse_duration

#: Rank 1 rises 3 s before the others at t=20s, and leaks outside the allocator from t=8s:
#: both land after the first scrape and after the ranks' own warm-up (a rise in a rank's first
#: quarter is its warm-up), and 3 s is more than the default 2 s scrape interval. A 30 s
#: rehearsal shows both (t=40s and t=15s made the documented one take a minute).
DEFAULT_FAULTS = "rank=1:first_spike@t=20s,delta=2GiB,lead=3s;rank=1:leak@t=8s,rate=16MiB/s"
DEFAULT_PORT_BASE = 9464
DEFAULT_PROMETHEUS_PORT = 9090
#: t=0 of the simulated clock comes this long after every tracker has started (and, with the
#: local Prometheus, every rank has been scraped): a few samples of each rank before any fault.
START_MARGIN_S = 5.0
#: How long the ranks' trackers may take to start (their imports; 12+ s on a loaded host).
START_WAIT_S = 120.0
#: The file the ranks read t=0 from (``STORMOTEL_SIM_EPOCH_FILE``), in DIR.
EPOCH_FILE = "sim_epoch_ns"


def _duration(text: str) -> float:
    try:
        return parse_duration(text, bare_seconds=True)
    except UnitError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class RehearseError(Exception):
    """A problem the user can fix (a port in use, a bad flag); exit 2 with the message."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stormotel rehearse",
        description="Rehearse set-up 2 on one machine, no GPU: N simulated ranks with a planted "
                    "fault serve /metrics, a scrape configuration is written for them, a local "
                    "Prometheus scrapes them when one is installed (it says when the first "
                    "scrape landed), and the job is analyzed from Prometheus at the end.",
        epilog="Example: stormotel rehearse --ranks 4 --duration 90 (then open the printed "
               "Prometheus URL, or point your own Prometheus at DIR/prometheus.yml with "
               "--no-prometheus)")
    p.add_argument("--ranks", type=int, default=4, help="simulated ranks (2..64, default 4)")
    p.add_argument("--job-id", default="rehearsal", help="job id (default: %(default)s)")
    p.add_argument("--duration", type=_duration, default=75.0, metavar="DURATION",
                   help="how long the ranks run, e.g. 90 or 2m (default: 75s)")
    p.add_argument("--scrape-interval", type=_duration, default=2.0,
                   metavar="DURATION",
                   help="scrape interval written into the configuration (default: 2s; the "
                        "real set-up's 15s works too with a longer --duration)")
    p.add_argument("--fault", default=DEFAULT_FAULTS, metavar="SPEC",
                   help="faults planted on the simulated devices, times on the shared clock "
                        f"whose t=0 comes {START_MARGIN_S:g}s after every rank's tracker has "
                        "started (default: %(default)s)")
    p.add_argument("--port-base", type=int, default=None, metavar="PORT",
                   help=f"rank R serves /metrics on PORT + R (default: {DEFAULT_PORT_BASE}, or "
                        "free ports when those are taken)")
    p.add_argument("--prometheus-port", type=int, default=None, metavar="PORT",
                   help=f"the local Prometheus' port (default: {DEFAULT_PROMETHEUS_PORT}, or a "
                        "free port when it is taken)")
    p.add_argument("--out", type=Path, default=Path("rehearsal"), metavar="DIR",
                   help="scrape configuration and Prometheus storage (default: %(default)s)")
    p.add_argument("--no-prometheus", action="store_true",
                   help="only the ranks and DIR/prometheus.yml: scrape them with your own "
                        "Prometheus")
    p.add_argument("--no-analyze", action="store_true", help="skip the analysis at the end")
    p.add_argument("--keep", action="store_true",
                   help="leave the local Prometheus running at the end (until Ctrl-C)")
    return p


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _port_list(ports: list[int]) -> str:
    """``9464..9467`` for consecutive ports; the free ones taken when those were in use are
    in no order, and ``59653..51711`` read as a range, so they are listed one by one."""
    if ports == list(range(ports[0], ports[0] + len(ports))):
        return f"{ports[0]}..{ports[-1]}"
    return ",".join(map(str, ports))


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports (the kernel's choice)."""
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(int(s.getsockname()[1]))
    finally:
        for s in socks:
            s.close()
    return ports


def choose_ports(ranks: int, port_base: int | None, prometheus_port: int | None,
                 say: bool = True) -> tuple[list[int], int]:
    """The ranks' ports and Prometheus' port: the defaults when free, else free ones (said);
    a port the user named must be free (``RehearseError`` otherwise)."""
    if port_base is not None:
        rank_ports = [port_base + r for r in range(ranks)]
        busy = [p for p in rank_ports if not _port_free(p)]
        if busy:
            raise RehearseError(f"port(s) {busy} are in use: pick another --port-base")
    else:
        rank_ports = [DEFAULT_PORT_BASE + r for r in range(ranks)]
        if not all(_port_free(p) for p in rank_ports):
            rank_ports = _free_ports(ranks)
            if say:
                print(f"stormotel rehearse: ports {DEFAULT_PORT_BASE}.. are in use; the ranks "
                      f"serve on {rank_ports} instead", file=sys.stderr)
    if prometheus_port is not None:
        if not _port_free(prometheus_port):
            raise RehearseError(f"port {prometheus_port} is in use: pick another "
                                "--prometheus-port")
        return rank_ports, prometheus_port
    if _port_free(DEFAULT_PROMETHEUS_PORT) and DEFAULT_PROMETHEUS_PORT not in rank_ports:
        return rank_ports, DEFAULT_PROMETHEUS_PORT
    port = next(p for p in _free_ports(ranks + 1) if p not in rank_ports)
    return rank_ports, port


def scrape_config(job_name: str, rank_ports: list[int], interval_s: float) -> str:
    """The Prometheus configuration for the ranks: what a static set-up 2 writes by hand.
    ``honor_labels`` keeps the trackers' own ``job_id``/``rank`` labels (docs/tracker.md)."""
    targets = ", ".join(f'"127.0.0.1:{p}"' for p in rank_ports)
    interval = f"{interval_s:g}s"
    return (f"# Written by stormotel rehearse: scrape {len(rank_ports)} simulated ranks.\n"
            "global:\n"
            f"  scrape_interval: {interval}\n"
            f"  evaluation_interval: {interval}\n"
            "scrape_configs:\n"
            f"  - job_name: {job_name}\n"
            "    honor_labels: true\n"
            f"    static_configs: [{{targets: [{targets}]}}]\n")


@dataclass
class Started:
    name: str
    proc: subprocess.Popen[bytes]


def _track_argv(rank: int, world: int, port: int, job_id: str, duration: float, fault: str,
                linger_s: float) -> list[str]:
    return [sys.executable, "-m", "stormotel", "track", "--sampler", "simulated",
            "--job-id", job_id, "--rank", str(rank), "--local-rank", str(rank),
            "--world-size", str(world), "--prometheus-port", str(port),
            "--prometheus-addr", "127.0.0.1", "--duration", f"{duration:g}",
            "--prometheus-linger", f"{linger_s:g}", "--fault", fault, "-q"]


def _query(url: str, promql: str) -> list[dict[str, object]]:
    import httpx

    try:
        r = httpx.get(f"{url}/api/v1/query", params={"query": promql}, timeout=3.0)
        body = r.json()
    except (httpx.HTTPError, ValueError):
        return []
    result = body.get("data", {}).get("result", []) if isinstance(body, dict) else []
    return result if isinstance(result, list) else []


def _ready(url: str, deadline_s: float) -> bool:
    import httpx

    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/-/ready", timeout=2.0).status_code == 200:
                return True
        time.sleep(0.3)
    return False


def first_scrape(url: str, job_name: str, job_id: str, ranks: int,
                 deadline_s: float) -> tuple[float | None, int]:
    """Seconds until every rank had a sample in Prometheus (None: not within the deadline) and
    how many had one by then."""
    started = time.monotonic()
    seen = 0
    promql = f'count(up{{job="{job_name}"}} == 1) and on() ' \
             f'count({schema.RANK_INFO.prom}{{job_id="{job_id}"}})'
    while time.monotonic() - started < deadline_s:
        result = _query(url, promql)
        if result:
            value = result[0].get("value")
            if isinstance(value, list) and len(value) == 2:
                seen = int(float(str(value[1])))
                if seen >= ranks:
                    return time.monotonic() - started, seen
        time.sleep(0.25)
    return None, seen


@contextlib.contextmanager
def _all_stopped(started: list[Started], grace_s: float = 10.0) -> Iterator[None]:
    try:
        yield
    finally:
        stop_all(started, grace_s)


def stop_all(started: list[Started], grace_s: float) -> None:
    """SIGTERM to every process still running, then ONE grace for them all before SIGKILL (by
    PID). Stopped one after the other, each rank stopped early (an error, Ctrl-C, SIGTERM)
    lingers for a last scrape that no Prometheus gives (``--linger-s``, 20 s) and took the
    whole grace: 64 ranks took over ten minutes to stop."""
    live = [s for s in reversed(started) if s.proc.poll() is None]
    for s in live:
        s.proc.send_signal(signal.SIGTERM)
    end = time.monotonic() + grace_s
    for s in live:
        try:
            s.proc.wait(max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            s.proc.kill()
            s.proc.wait(5)


@contextlib.contextmanager
def _terminated_as_exit() -> Iterator[None]:
    """SIGTERM (a supervisor, ``timeout``, ``kill PID``) as ``SystemExit(143)``, so that
    :func:`_all_stopped` stops the ranks: Python's default ends the process at once, and the
    ranks it launched kept running for their --duration (now counted from a t=0 that waits for
    every tracker, up to 120 s later), holding their ports."""
    def leave(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    try:
        old = signal.signal(signal.SIGTERM, leave)
    except ValueError:  # not the main thread: signals are not ours to take
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def warmup_window_s(run_s: float) -> float:
    """The analyzer's warm-up window for a rank observed ``run_s``: ``warmup_s`` or a quarter
    of the run, whichever is shorter; a rise there is taken for the rank's warm-up."""
    from stormotel.analyzers.algorithms.first_cause import WARMUP_SHARE
    from stormotel.analyzers.algorithms.settings import Settings

    return min(Settings().warmup_s, WARMUP_SHARE * run_s)


def faults_in_warmup(starts: dict[int, float], epoch_s: float, fault_spec: str,
                     end_s: float) -> dict[int, float]:
    """Ranks a planted fault reaches inside the analyzer's warm-up window after the rank's
    tracker started (``starts``: rank → its start gauge, s since the Unix epoch), each with the
    fault's delay after that start; each rank observes from its start to ``end_s`` (when the
    ranks stop). t=0 (``epoch_s``) comes a few seconds after the last tracker started, so
    only a fault planted early on the shared clock (``t=0s``) lands there; when t=0 was a fixed
    instant after the launch, a tracker that started late (a loaded host) met the default
    t=20s rise there (helper fa's rehearsal at load 21: "no rank led — warm-up of ranks
    [0, 1]")."""
    out: dict[int, float] = {}
    for fault in parse_faults(fault_spec):
        for rank, began in starts.items():
            window_s = warmup_window_s(end_s - began)
            if fault.kind != "first_spike" and not fault.owned_by(rank):
                continue
            at = epoch_s + fault.start_s + (0.0 if fault.kind != "first_spike"
                                            or fault.owned_by(rank) else fault.param("lead"))
            if 0.0 <= at - began <= window_s:
                out[rank] = min(out.get(rank, math.inf), at - began)
    return out


def start_gauge(port: int, job_id: str, rank: int) -> float | None:
    """A rank's tracker start (its start gauge, s since the Unix epoch) read from its own
    ``/metrics``; None while nothing answers there or the gauge is not served yet. Only the
    gauge of THIS job's rank counts: the port was free when chosen, but another process may
    take it before the rank binds (a second rehearsal with the same ports), and its start
    would set t=0 while our rank has not started (it then fails to bind)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2.0) as r:
            text = r.read(4_000_000).decode("utf-8", "replace")
    except (OSError, ValueError):  # refused, reset, timed out (URLError is an OSError)
        return None
    from prometheus_client.parser import text_string_to_metric_families

    want = {schema.prom_label(schema.ATTR_JOB_ID): job_id,
            schema.prom_label(schema.ATTR_RANK): str(rank)}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == schema.TRACKER_START.prom and all(
                        sample.labels.get(k) == v for k, v in want.items()):
                    return float(sample.value)
    except ValueError:  # not the text exposition: another server holds the port
        return None
    return None


def tracker_starts(ranks: list[Started], ports: list[int], job_id: str, wait_s: float
                   ) -> dict[int, float]:
    """Each rank's tracker start, once every one has started (polled; a rank's start is read
    from the rank, so it holds with or without the local Prometheus). ``RehearseError`` naming
    the rank when one exits first, or when some have not started within ``wait_s``."""
    starts: dict[int, float] = {}
    end = time.monotonic() + wait_s
    while True:
        for rank, (proc, port) in enumerate(zip(ranks, ports, strict=True)):
            if rank in starts:
                continue
            if proc.proc.poll() is not None:
                raise RehearseError(f"rank {rank} exited (status {proc.proc.returncode}) "
                                    "before its tracker started: its error is above")
            began = start_gauge(port, job_id, rank)
            if began is not None:
                starts[rank] = began
        if len(starts) == len(ranks):
            return starts
        if time.monotonic() >= end:
            missing = [r for r in range(len(ranks)) if r not in starts]
            raise RehearseError(
                f"the tracker of rank(s) {missing} did not start within {wait_s:g}s: nothing "
                f"served a start gauge on 127.0.0.1:{_port_list([ports[r] for r in missing])}"
                "/metrics (its port taken since, or a very loaded machine?); no fault was "
                "planted")
        time.sleep(0.25)


def _warn_late_starts(starts: dict[int, float], args: argparse.Namespace, epoch_s: float
                      ) -> None:
    end_s = epoch_s + args.duration
    late = faults_in_warmup(starts, epoch_s, args.fault, end_s)
    if late:
        said = "; ".join(f"rank {r}: {d:.1f}s after its start, window "
                         f"{warmup_window_s(end_s - starts[r]):.1f}s"
                         for r, d in sorted(late.items()))
        print(f"stormotel rehearse: warning: a planted fault comes inside the analysis' warm-up "
              f"window after a rank's tracker started ({said}) and may be taken for warm-up: "
              "plant it later (a larger t=) or use a longer --duration",
              file=sys.stderr, flush=True)


def _start_prometheus(args: argparse.Namespace, prometheus: str, config: Path, prom_port: int,
                      started: list[Started]) -> bool:
    """Start Prometheus on ``config`` (added to ``started``); False when it never became
    ready."""
    out: Path = args.out
    url = f"http://127.0.0.1:{prom_port}"
    log = (out / "prometheus.log").open("wb")
    started.append(Started("prometheus", subprocess.Popen(
        [prometheus, f"--config.file={config}",
         f"--storage.tsdb.path={out / 'data'}",
         f"--web.listen-address=127.0.0.1:{prom_port}"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)))
    if not _ready(url, 60.0):
        return False
    print(f"stormotel rehearse: Prometheus at {url} scrapes every "
          f"{args.scrape_interval:g}s", flush=True)
    return True


def _wait_first_scrape(args: argparse.Namespace, url: str, job_name: str,
                       since: float) -> None:
    """Wait for the first scrape of every rank (a warning when it does not come): the faults
    start after it, so each rank has samples before them."""
    wait_s = 4 * args.scrape_interval + 30
    took, seen = first_scrape(url, job_name, args.job_id, args.ranks, wait_s)
    if took is None:
        print(f"stormotel rehearse: warning: after {wait_s:.0f}s only {seen} of "
              f"{args.ranks} ranks have been scraped (see {url}/targets)",
              file=sys.stderr, flush=True)
    else:
        print(f"stormotel rehearse: first scrape landed: all {seen} ranks in Prometheus "
              f"{time.monotonic() - since:.1f}s after it started "
              f"({time.strftime('%H:%M:%S')})", flush=True)


def _launch_ranks(args: argparse.Namespace, rank_ports: list[int], epoch_file: Path,
                  started: list[Started]) -> list[Started]:
    """Start the ranks (added to ``started``), their faults waiting for t=0 in
    ``epoch_file``."""
    env = {**os.environ, environment.SIM_EPOCH_FILE: str(epoch_file.resolve())}
    env.pop(environment.SIM_EPOCH_NS, None)
    linger = 2 * args.scrape_interval + 1
    print(f"stormotel rehearse: {args.ranks} simulated ranks of job {args.job_id!r} for "
          f"{args.duration:g}s, /metrics on 127.0.0.1:{_port_list(rank_ports)}; "
          f"faults (t=0 {START_MARGIN_S:g}s after every tracker has started): {args.fault}",
          flush=True)
    for rank, port in enumerate(rank_ports):
        argv = _track_argv(rank, args.ranks, port, args.job_id, args.duration, args.fault,
                           linger)
        started.append(Started(f"rank {rank}", subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL)))
    return list(started)


def _plant(args: argparse.Namespace, ranks: list[Started], rank_ports: list[int],
           url: str | None, job_name: str, epoch_file: Path, launched_s: float) -> None:
    """The faults' t=0, once every rank's tracker has started and (``url``: the local
    Prometheus) every rank has been scraped; ``RehearseError`` when a rank does not start,
    ``OSError`` when t=0 cannot be written."""
    since = time.monotonic()
    starts = tracker_starts(ranks, rank_ports, args.job_id, START_WAIT_S)
    if url is not None:
        _wait_first_scrape(args, url, job_name, since)
    epoch_s = _set_epoch(epoch_file, starts, launched_s)
    _warn_late_starts(starts, args, epoch_s)


def _set_epoch(epoch_file: Path, starts: dict[int, float], launched_s: float) -> float:
    """Write t=0 (now + the margin) for the ranks to read; said with each tracker's start."""
    epoch_ns = time.time_ns() + int(START_MARGIN_S * 1e9)
    write_atomic(epoch_file, f"{epoch_ns}\n")
    delays = ", ".join(f"rank {r} {began - launched_s:.1f}s" for r, began in sorted(starts.items()))
    print(f"stormotel rehearse: trackers started after launch: {delays}; the faults' t=0 in "
          f"{START_MARGIN_S:g}s ({time.strftime('%H:%M:%S', time.localtime(epoch_ns / 1e9))}, "
          f"{epoch_file})", flush=True)
    return epoch_ns / 1e9


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)

    def error(msg: str, code: int = exitcodes.USAGE) -> int:
        print(f"stormotel rehearse: error: {msg}", file=sys.stderr)
        return code

    if not 2 <= args.ranks <= 64:
        return error("--ranks must be between 2 and 64")
    if args.duration <= 0 or args.scrape_interval <= 0:
        return error("--duration and --scrape-interval must be > 0")
    try:
        parse_faults(args.fault)
        rank_ports, prom_port = choose_ports(args.ranks, args.port_base, args.prometheus_port)
    except (FaultSpecError, RehearseError) as e:
        return error(str(e))
    out: Path = args.out
    prometheus = None if args.no_prometheus else shutil.which("prometheus")
    if prometheus is not None:
        # Watching Prometheus and the analysis need httpx (the analyzer extra): without it the
        # command fails here, before it writes DIR/prometheus.yml or starts a rank (it once
        # wrote the configuration, then said the extra was missing).
        import httpx  # noqa: F401
    job_name = "stormotel"
    try:
        out.mkdir(parents=True, exist_ok=True)
        config = out / "prometheus.yml"
        config.write_text(scrape_config(job_name, rank_ports, args.scrape_interval))
    except OSError as e:
        return error(f"cannot write {out}: {e.strerror or e}", exitcodes.SINK_FAILURE)
    epoch_file = out / EPOCH_FILE
    try:
        epoch_file.unlink(missing_ok=True)  # an earlier rehearsal's t=0 would start the faults
    except OSError as e:
        return error(f"cannot write {out}: {e.strerror or e}", exitcodes.SINK_FAILURE)
    started: list[Started] = []
    launched_s = time.time()
    with _terminated_as_exit(), _all_stopped(started):
        ranks = _launch_ranks(args, rank_ports, epoch_file, started)
        print(f"stormotel rehearse: scrape configuration: {config}", flush=True)
        url = f"http://127.0.0.1:{prom_port}"
        if prometheus is None:
            why = "--no-prometheus" if args.no_prometheus else "no `prometheus` on PATH"
            print(f"stormotel rehearse: {why}: start yours with --config.file={config}, then "
                  f"`stormotel analyze --prometheus URL --job-id {args.job_id} --since 10m`",
                  flush=True)
        elif not _start_prometheus(args, prometheus, config, prom_port, started):
            return error(f"Prometheus did not become ready at {url} (log: "
                         f"{out / 'prometheus.log'})", exitcodes.SOURCE_FAILURE)
        try:
            _plant(args, ranks, rank_ports, url if prometheus is not None else None, job_name,
                   epoch_file, launched_s)
        except RehearseError as e:
            return error(str(e), exitcodes.SOURCE_FAILURE)
        except OSError as e:
            return error(f"cannot write {epoch_file}: {e.strerror or e}",
                         exitcodes.SINK_FAILURE)
        for s in ranks:
            s.proc.wait()
        failed = [s.name for s in ranks if s.proc.returncode not in (0,)]
        if failed:
            print(f"stormotel rehearse: warning: {', '.join(failed)} exited non-zero",
                  file=sys.stderr)
        code = exitcodes.OK
        if prometheus is not None and not args.no_analyze:
            since = f"{int(time.time() - launched_s + 60)}s"
            cmd = ["analyze", "--prometheus", url, "--job-id", args.job_id, "--since", since]
            print(f"\n$ stormotel {shlex.join(cmd)}", flush=True)
            from stormotel.analyzers.cli import main as analyze_main

            code = analyze_main(cmd[1:])
        if args.keep and prometheus is not None:
            print(f"stormotel rehearse: Prometheus stays at {url} until Ctrl-C", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                started[-1].proc.wait()
        return exitcodes.OK if code in (exitcodes.OK, exitcodes.FINDINGS) else code
