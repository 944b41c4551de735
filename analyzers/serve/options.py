"""``stormotel serve``'s flags and the typed options they become.

The TSDB source, the sinks and the HTTP settings are the analyzer's own flags
(:func:`~stormotel.analyzers.cli.job_flags.add_job_arguments`), parsed by the analyzer's own
:func:`~stormotel.analyzers.cli.args.job_options_from_args`: a receiver reads and writes
exactly as ``stormotel analyze --prometheus`` does. The window flags that choose *when* a run
looks (``--since``, ``--start``, ``--end``, ``--state-file``, ``--settle``) and those that pick
jobs (``--job-id``, ``--job-selector``, ``--shard``) are the alerts' business here and are
refused; ``--max-window`` bounds how far back a run reads. ``--dcgm`` works as for ``analyze``
(each alert's ``job_id`` names the run).
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from stormotel.analyzers.algorithms.settings import parse_overrides, settings_for
from stormotel.analyzers.alignments import ALIGN_WALL
from stormotel.analyzers.cli import flags
from stormotel.analyzers.cli import job_flags as job_options
from stormotel.analyzers.options import (
    AnalysisOptions,
    AnalyzeOptions,
    OutputOptions,
    SourceOptions,
    StallOptions,
)

from stormotel import units
from stormotel.errors import UsageError

PROG = "stormotel serve"

EPILOG = """\
example:
  stormotel serve --listen 0.0.0.0:9810 --prometheus http://prometheus:9090 \\
      --out /var/lib/stormotel --public-url https://stormotel.example.org \\
      --webhook-token-file /etc/stormotel/token --grafana-url http://grafana:3000

Alertmanager posts to <url>/alertmanager; each job's latest report is at <url>/jobs/<job_id>/.
exit codes: 0 stopped by SIGTERM/SIGINT after finishing, 2 usage error.
"""

#: Flags of the analyzer's job parser that a receiver does not take, with the reason.
REFUSED = {"job_id": "--job-id (the alerts name the jobs)",
           "job_selector": "--job-selector (the alerts name the jobs)",
           "shard": "--shard (the alerts name the jobs)",
           "since": "--since (a run reads from the job's first sample; see --max-window)",
           "start": "--start", "end": "--end (a run reads up to now)",
           "state_file": "--state-file", "dry_run": "--dry-run"}


@dataclass(frozen=True)
class ServeOptions:
    """Everything ``stormotel serve`` was asked to do."""

    host: str
    port: int
    out: Path
    public_url: str
    #: Each run's options (TSDB, sinks, analysis); the worker sets the job and window.
    base: AnalyzeOptions
    max_window_s: float
    min_interval_s: float
    workers: int
    max_queue: int
    max_body: int
    max_connections: int
    retention_s: float
    grace_s: float
    token_file: Path | None
    user: str | None
    password_file: Path | None
    protect_reports: bool
    tls_cert: Path | None
    tls_key: Path | None


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


def _size(text: str) -> int:
    try:
        return units.parse_bytes(text)
    except units.UnitError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="Receive Alertmanager's webhook, analyse the alerting job from the TSDB "
                    "(its window up to now, through every configured sink) and serve the "
                    "latest report per job.")
    g = p.add_argument_group("receiver")
    g.add_argument("--listen", type=_listen, default="0.0.0.0:9810", metavar="HOST:PORT",
                   help="address to listen on (default %(default)s)")
    g.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="where the queue and the reports live (a persistent volume: queued "
                        "work survives a restart)")
    g.add_argument("--public-url", default="", metavar="URL",
                   help="the receiver's URL as people reach it (links on the index page; the "
                        "rules' report_url uses the same base)")
    g.add_argument("--min-interval", type=job_options.positive_duration, default="2m",
                   metavar="DURATION",
                   help="a job that keeps firing or changes is re-analysed at most this often "
                        "(default %(default)s); a resolved group's final analysis runs at once")
    g.add_argument("--workers", type=int, default=2, metavar="N",
                   help="analyses running at once, never two of one job (default %(default)s)")
    g.add_argument("--max-queue", type=int, default=1000, metavar="N",
                   help="jobs queued at most; beyond it the webhook answers 503 and "
                        "Alertmanager retries (default %(default)s)")
    g.add_argument("--max-body", type=_size, default="1MiB", metavar="SIZE",
                   help="largest webhook body accepted (default %(default)s)")
    g.add_argument("--max-connections", type=int, default=64, metavar="N",
                   help="requests handled at once (default %(default)s)")
    g.add_argument("--retention", type=job_options.positive_duration, default="7d",
                   metavar="DURATION",
                   help="remove a job's report this long after its latest analysis "
                        "(default %(default)s)")
    g.add_argument("--grace", type=job_options.parse_duration, default="30s",
                   metavar="DURATION",
                   help="on SIGTERM, wait this long for analyses in flight (an unfinished one "
                        "stays queued for the next start; default %(default)s)")
    a = p.add_argument_group("webhook authentication and TLS")
    a.add_argument("--webhook-token-file", type=Path, metavar="FILE",
                   help="bearer token Alertmanager must send (http_config.authorization."
                        "credentials_file); else $STORMOTEL_SERVE_TOKEN")
    a.add_argument("--webhook-user", metavar="USER",
                   help="basic-auth user Alertmanager must send (http_config.basic_auth)")
    a.add_argument("--webhook-password-file", type=Path, metavar="FILE",
                   help="basic-auth password; else $STORMOTEL_SERVE_PASSWORD")
    a.add_argument("--protect-reports", action="store_true",
                   help="require the same credential to read / and /jobs/… (/healthz and "
                        "/metrics stay open for probes)")
    a.add_argument("--tls-cert-file", type=Path, metavar="PEM", help="serve HTTPS with this "
                   "certificate (and --tls-key-file)")
    a.add_argument("--tls-key-file", type=Path, metavar="PEM")
    flags.add_threshold_arguments(p.add_argument_group("analysis"))
    job_options.add_job_arguments(p)
    for action in p._actions:  # the analyzer's flags a receiver refuses: not offered in --help
        if action.dest in REFUSED or action.dest in ("settle", "scheduled"):
            action.help = argparse.SUPPRESS
    return p


def options_from_args(args: argparse.Namespace) -> ServeOptions:
    """The parsed flags, checked; raises a UsageError."""
    from stormotel.analyzers.cli.args import job_options_from_args

    for key, flag in REFUSED.items():
        if getattr(args, key, None):
            raise UsageError(f"stormotel serve does not take {flag}")
    if args.settle is not None:
        raise UsageError("stormotel serve does not take --settle (a run reads up to now)")
    if not args.prometheus:
        raise UsageError("--prometheus URL is required (the TSDB the alerts come from)")
    for flag, value in (("--workers", args.workers), ("--max-queue", args.max_queue),
                        ("--max-connections", args.max_connections), ("--max-body",
                                                                       args.max_body)):
        if value < 1:
            raise UsageError(f"{flag} must be at least 1")
    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        raise UsageError("--tls-cert-file and --tls-key-file go together")
    args.scheduled = True  # every run is a scheduled run: exit codes of a run, not of findings
    args.job_id = "-"  # checked as a run for one job (``--dcgm`` needs one); each alert's below
    job = dataclasses.replace(job_options_from_args(args, quiet=True), job_id=None)
    settings = settings_for(args.sensitivity, **parse_overrides(args.overrides))
    if job.tsdb.dcgm:  # as `stormotel analyze --dcgm`: no lead shorter than DCGM's own interval
        settings = dataclasses.replace(settings, clock_tolerance_s=max(
            settings.clock_tolerance_s, job.tsdb.dcgm_collect_interval_s))
    base = AnalyzeOptions(
        job=job, source=SourceOptions(paths=(), oom_dumps=()),
        analysis=AnalysisOptions(ranks=None, align=ALIGN_WALL, settings=settings),
        stalls=StallOptions(flight_recorder=None, logs=(), world_size=None),
        output=OutputOptions(format="json", output=None, html=None, quiet=True))
    host, port = args.listen
    return ServeOptions(
        host=host, port=port, out=args.out, public_url=args.public_url.rstrip("/"), base=base,
        max_window_s=args.max_window, min_interval_s=args.min_interval, workers=args.workers,
        max_queue=args.max_queue, max_body=args.max_body,
        max_connections=args.max_connections, retention_s=args.retention,
        grace_s=args.grace, token_file=args.webhook_token_file, user=args.webhook_user,
        password_file=args.webhook_password_file, protect_reports=args.protect_reports,
        tls_cert=args.tls_cert_file, tls_key=args.tls_key_file)
