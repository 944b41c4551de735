"""TLS/auth/timeout flags of every endpoint the analyzer job talks to, declared without httpx
(so ``stormotel analyze --help`` stays light); :mod:`analyzers.http` acts on them."""

from __future__ import annotations

import argparse
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
                        "ask them for identity encoding, which saves CPU on one host)")
    g.add_argument("--http-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="timeout of one HTTP request (default 10)")
    g.add_argument("--http-retries", type=int, default=3, metavar="N",
                   help="retries of a request after a connection error, timeout or 5xx "
                        "(default 3, exponential backoff)")
