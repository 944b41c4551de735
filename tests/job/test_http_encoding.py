"""Loopback endpoints are asked for uncompressed bodies; remote ones keep httpx's default.

Checked against a real Prometheus: it gzips query responses whenever the client accepts gzip,
which on one host only burns CPU on both ends.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from stormotel.analyzers.http import (
    EndpointError,
    HttpSettings,
    add_http_arguments,
    is_loopback_url,
    make_client,
    request,
    settings_from_args,
)

from tests.servers import prometheus


@pytest.mark.parametrize(("url", "loopback"), [
    ("http://127.0.0.1:9090/api/v1/query", True), ("http://localhost:9090", True),
    ("http://[::1]:9090/", True), ("http://127.8.0.3/", True),
    ("http://10.0.0.1:9090", False), ("https://prometheus.example.com", False),
    ("http://user:pw@127.0.0.1:9090", True),
])
def test_loopback_detection(url: str, loopback: bool) -> None:
    assert is_loopback_url(url) is loopback


def test_real_prometheus_answers_uncompressed_on_loopback_unless_asked(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_http_arguments(parser)
    assert settings_from_args(parser.parse_args([])).identity_on_loopback is True
    compress = settings_from_args(parser.parse_args(["--http-compress-loopback"]))
    assert compress.identity_on_loopback is False
    with prometheus(tmp_path / "prom") as server:
        url = f"{server.url}/api/v1/query"
        for settings, encoding in ((HttpSettings(retries=0), None), (compress, "gzip")):
            with make_client(settings) as client:
                resp = request(client, "GET", url, settings=settings, params={"query": "up"})
            assert resp.wire_encoding == encoding
            assert resp.json()["status"] == "success"


def test_the_encoding_asked_for_is_not_taken_for_a_secret(tmp_path: Path) -> None:
    """Request headers' values are scrubbed from error bodies (a server may echo them), but not
    ``Accept-Encoding: identity`` (asked of loopback endpoints and of every native export
    read): the error must still say what the server said about the word."""
    settings = HttpSettings(retries=0)
    with prometheus(tmp_path / "prom") as server, make_client(settings) as client, \
            pytest.raises(EndpointError) as err:
        request(client, "GET", f"{server.url}/api/v1/query", settings=settings,
                params={"query": "identity identity"},
                headers={"Accept-Encoding": "identity"})
    said = str(err.value).split("unexpected identifier", 1)[-1]
    assert "identity" in said and "<redacted>" not in said, err.value
