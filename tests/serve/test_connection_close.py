"""A response after which the receiver closes the connection says so (``Connection: close``).

Found beside two CPU-bound neighbours (session 21's busy run): the webhook's 401 (and 411, 413)
leave the body unread and close the connection, but the HTTP/1.1 response did not say so, so
the client kept the connection for its next request; on a busy host the close reached the
client after that request was sent, and Alertmanager's next delivery on it failed with "Server
disconnected without sending a response". Through ``stormotel serve`` as users run it."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.serve import receiver as rx


def test_responses_that_end_the_connection_say_so(tmp_path: Path) -> None:
    body = rx.payload([rx.alert("conn-job")])
    with rx.running(tmp_path / "out", rx.refused_url(), "--max-body", "1KiB",
                    env={"STORMOTEL_SERVE_TOKEN": "tok-conn-1"}) as recv, \
            httpx.Client(timeout=10) as client:
        url = recv.url + "/alertmanager"
        json_type = {"Content-Type": "application/json"}
        for headers, content, status in (
                ({**json_type}, body, 401),  # no credential: the body is left unread
                ({**json_type, "Authorization": "Bearer nope"}, body, 401),
                ({**json_type, "Authorization": "Bearer tok-conn-1"}, b"x" * 4096, 413)):
            r = client.post(url, content=content, headers=headers)
            assert r.status_code == status, r.text
            assert r.headers.get("connection", "").lower() == "close", (status, r.headers)
        # a request it answers whole keeps the connection open (nothing said)
        ok = client.get(recv.url + "/healthz")
        assert ok.status_code == 200 and "connection" not in ok.headers, ok.headers
        # and the same client's next webhook, on a new connection, is taken
        r = client.post(url, content=body,
                        headers={**json_type, "Authorization": "Bearer tok-conn-1"})
        assert r.status_code == 200, r.text
