"""TLS/auth/timeout flags of every endpoint the analyzer job talks to, and the settings they
become, without httpx (so ``stormotel analyze --help`` and the option parsing stay light);
:mod:`stormotel.analyzers.http` acts on the settings."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

ENV_BEARER_TOKEN = "STORMOTEL_BEARER_TOKEN"
ENV_BASIC_AUTH_PASSWORD = "STORMOTEL_BASIC_AUTH_PASSWORD"


def parse_header(text: str) -> tuple[str, str]:
    """``"Name: value"`` → (name, value), for ``--http-header``."""
    name, sep, value = text.partition(":")
    if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a header (use 'Name: value')")
    return name.strip(), value.strip()


def add_http_arguments(parser: argparse.ArgumentParser) -> None:
    """TLS/auth/timeout flags shared by every endpoint of the job."""
    g = parser.add_argument_group(
        "TLS and authentication (apply to every TSDB/Pushgateway/Grafana endpoint)")
    g.add_argument("--ca-file", type=Path, metavar="PEM",
                   help="CA bundle to verify servers with (TLS verification is on by default)")
    g.add_argument("--client-cert", type=Path, metavar="PEM", help="client certificate for mTLS")
    g.add_argument("--client-key", type=Path, metavar="PEM", help="client key for mTLS")
    g.add_argument("--insecure-skip-verify", action="store_true",
                   help="do NOT verify server certificates (testing only)")
    g.add_argument("--bearer-token-file", type=Path, metavar="FILE",
                   help=f"bearer token for the TSDB endpoints (else ${ENV_BEARER_TOKEN})")
    g.add_argument("--basic-auth-user", metavar="USER", help="basic-auth user for the TSDB")
    g.add_argument("--basic-auth-password-file", type=Path, metavar="FILE",
                   help=f"basic-auth password (else ${ENV_BASIC_AUTH_PASSWORD})")
    g.add_argument("--http-header", type=parse_header, action="append", default=[],
                   metavar="'NAME: VALUE'",
                   help="extra header on every request, e.g. 'X-Scope-OrgID: team-a' for a "
                        "multi-tenant Mimir/Cortex (repeatable)")
    g.add_argument("--http-compress-loopback", action="store_true",
                   help="accept compressed responses from loopback endpoints too (default: "
                        "ask them for identity encoding, which saves CPU on one host; "
                        "VictoriaMetrics' native export is always read uncompressed: its "
                        "blocks are compressed already)")
    defaults = HttpSettings()  # one place for the defaults of the flags and of the API
    g.add_argument("--http-timeout", type=float, default=defaults.timeout_s, metavar="SECONDS",
                   help="timeout of one HTTP request (default %(default)g)")
    g.add_argument("--http-retries", type=int, default=defaults.retries, metavar="N",
                   help="retries of a request after a connection error, timeout or 5xx "
                        "(default %(default)d, exponential backoff)")


@dataclass(frozen=True)
class HttpSettings:
    """TLS, auth, timeout and retry policy for one family of endpoints."""

    timeout_s: float = 10.0
    retries: int = 3
    backoff_s: float = 0.5
    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    insecure_skip_verify: bool = False
    bearer_token_file: Path | None = None
    basic_auth_user: str | None = None
    basic_auth_password_file: Path | None = None
    #: Extra request headers, e.g. Mimir/Cortex's ``X-Scope-OrgID`` tenant.
    headers: tuple[tuple[str, str], ...] = ()
    #: Ask loopback servers for uncompressed bodies (``Accept-Encoding: identity``): on one host
    #: compression only costs CPU on both ends (about half of a Prometheus read-back's time).
    identity_on_loopback: bool = True


def settings_from_args(args: argparse.Namespace) -> HttpSettings:
    """The settings the flags of :func:`add_http_arguments` ask for."""
    return HttpSettings(timeout_s=args.http_timeout, retries=args.http_retries,
                        ca_file=args.ca_file, client_cert=args.client_cert,
                        client_key=args.client_key,
                        insecure_skip_verify=args.insecure_skip_verify,
                        bearer_token_file=args.bearer_token_file,
                        basic_auth_user=args.basic_auth_user,
                        basic_auth_password_file=args.basic_auth_password_file,
                        headers=tuple(args.http_header),
                        identity_on_loopback=not args.http_compress_loopback)
