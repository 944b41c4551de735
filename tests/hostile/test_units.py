"""The small pieces the boundary relies on: every error class carries its documented code,
credentials are redacted, control characters escaped, logfmt values cannot end the line."""

from __future__ import annotations

import shlex

import pytest
from stormotel.analyzers import http
from stormotel.analyzers.algorithms.settings import SettingsError
from stormotel.analyzers.align import AlignmentError
from stormotel.analyzers.rankspec import RankSpecError
from stormotel.analyzers.scheduled import job
from stormotel.analyzers.scheduled.state import StateError
from stormotel.analyzers.stalls.cli_support import StallInputError
from stormotel.analyzers.timeline import MixedJobsError

from stormotel import exitcodes
from stormotel.errors import NoTelemetryError, SourceFailureError, SourceInputError, exit_code_of
from stormotel.textsafe import one_line, printable, redact, redact_url


@pytest.mark.parametrize(("exc", "code"), [
    (SettingsError("x"), exitcodes.USAGE), (RankSpecError("x"), exitcodes.USAGE),
    (AlignmentError("x"), exitcodes.USAGE), (StallInputError("x"), exitcodes.USAGE),
    (http.ConfigError("x"), exitcodes.USAGE), (StateError("x"), exitcodes.USAGE),
    (MixedJobsError("x"), exitcodes.USAGE), (SourceInputError("x"), exitcodes.USAGE),
    (NoTelemetryError("x"), exitcodes.SOURCE_FAILURE),
    (SourceFailureError("x"), exitcodes.SOURCE_FAILURE), (RuntimeError("x"), exitcodes.INTERNAL),
    (RecursionError(), exitcodes.INTERNAL),
])
def test_every_error_class_carries_its_documented_exit_code(exc, code):
    assert exit_code_of(exc) == code


def test_internal_is_distinct_from_every_other_code():
    others = {exitcodes.OK, exitcodes.FINDINGS, exitcodes.USAGE, exitcodes.SOURCE_FAILURE,
              exitcodes.SINK_FAILURE, exitcodes.INTERRUPTED}
    assert exitcodes.INTERNAL not in others


@pytest.mark.parametrize(("text", "secret"), [
    ("http://alice:pw123@prom:9090/api", "pw123"),
    ("https://g.example/api?token=abc123&x=1", "abc123"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload", "eyJhbGciOiJIUzI1NiJ9"),
    ('{"headers": {"Authorization": "Basic dXNlcjpwYXNz"}}', "dXNlcjpwYXNz"),
    ("Cookie: grafana_session=deadbeefcafe", "deadbeefcafe"),
])
def test_redact_removes_credentials(text, secret):
    assert secret not in redact(text) and "<redacted>" in redact(text)


def test_redact_url_keeps_the_endpoint():
    assert redact_url("http://u:p@h:1/x?api_key=k&y=2") == "http://h:1/x?api_key=<redacted>&y=2"


def test_printable_escapes_terminal_and_line_controls():
    out = printable("a\x1b[2J\nVerdict: healthy\r\u202e\u2028b")
    assert out == "a\\x1b[2J\\nVerdict: healthy\\r\\u202e\\u2028b"
    assert "\n" not in one_line("x\n" * 1000) and len(one_line("x" * 10_000)) < 600


def test_server_body_echo_of_request_secrets_is_stripped():
    body = "you sent X-Scope-OrgID: tenant-7 and Authorization: Bearer tok-123456789"
    out = http.sanitise_body(body, ("tenant-7", "Bearer tok-123456789"))
    assert "tenant-7" not in out and "tok-123456789" not in out


def test_logfmt_values_cannot_add_lines_or_fields():
    line = job.logfmt({"job_id": 'a\nb" exit=0 \\', "exit": 1})
    assert "\n" not in line
    assert shlex.split(line) == ['job_id=a\\nb" exit=0 \\', "exit=1"]
