"""``stormotel serve``'s command line: listed in ``stormotel --help``, and a mistake is one
``error:`` line with exit 2, before anything listens (no traceback, no secret printed)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stormotel", "serve", *args],
                          capture_output=True, text=True, timeout=60, env=env)


def test_listed_in_help() -> None:
    out = subprocess.run([sys.executable, "-m", "stormotel", "--help"], capture_output=True,
                         text=True, timeout=60).stdout
    assert "serve" in out and "Alertmanager" in out


@pytest.mark.parametrize(("args", "message"), [
    ((), "--out"),
    (("--out", "{tmp}"), "--prometheus URL is required"),
    (("--out", "{tmp}", "--prometheus", "http://p:9090", "--job-id", "x"), "--job-id"),
    (("--out", "{tmp}", "--prometheus", "http://p:9090", "--since", "1h"), "--since"),
    (("--out", "{tmp}", "--prometheus", "http://p:9090", "--settle", "0s"), "--settle"),
    (("--out", "{tmp}", "--prometheus", "p:9090"), "not an http(s) URL"),
    (("--out", "{tmp}", "--prometheus", "http://p:9090", "--listen", "nowhere"), "HOST:PORT"),
    (("--out", "{tmp}", "--prometheus", "http://p:9090", "--workers", "0"), "--workers"),
    (("--out", "{tmp}", "--prometheus", "http://p:9090", "--tls-cert-file", "c.pem"),
     "go together"),
    (("--out", "{tmp}", "--prometheus", "http://p:9090", "--webhook-user", "am"),
     "--webhook-password-file"),
    (("--out", "{tmp}", "--prometheus", "http://p:9090", "--webhook-token-file",
      "{tmp}/missing"), "cannot read the webhook token file"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path: Path, args: tuple[str, ...],
                                           message: str) -> None:
    r = _serve(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr


def test_thresholds_are_analyzes_flags(tmp_path: Path) -> None:
    """``--sensitivity`` and ``--set`` are the analyzer's own flags (one declaration): the same
    help, and parsed into the runs' settings as ``stormotel analyze`` parses them."""
    from stormotel.analyzers.algorithms.settings import settings_for
    from stormotel.analyzers.cli.flags import build_parser as analyze_parser
    from stormotel.analyzers.serve.options import build_parser, options_from_args

    def helps(p: argparse.ArgumentParser) -> dict[str, tuple[object, ...]]:
        return {a.dest: (a.help, a.choices, a.default, a.metavar) for a in p._actions
                if a.dest in ("sensitivity", "overrides")}

    assert helps(build_parser()) == helps(analyze_parser())
    args = build_parser().parse_args(["--out", str(tmp_path), "--prometheus", "http://p:9090",
                                      "--sensitivity", "high", "--set", "spike_z=7"])
    got = options_from_args(args).base.analysis.settings
    assert got == settings_for("high", spike_z=7.0) != settings_for("high")
    r = _serve("--out", str(tmp_path), "--prometheus", "http://p:9090", "--set", "nope=1")
    assert r.returncode == 2 and "nope" in r.stderr and "Traceback" not in r.stderr, r.stderr
