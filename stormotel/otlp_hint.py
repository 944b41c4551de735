"""The likely cause of a failing OTLP destination, said in the warning a user reads.

First whether anything answered at all: "connection refused" (nothing listens there) and a
host name that does not resolve are said as such, before any guess about the protocol.

The most common first-hour mistake is a protocol/port mismatch: the OTel default protocol is
``http/protobuf`` (port 4318), while many examples point at a collector's gRPC port 4317. The
HTTP exporter then POSTs HTTP/1.1 to an HTTP/2-only server, every export fails with an opaque
``BadStatusLine('\\x00\\x00...')`` (the server's HTTP/2 SETTINGS frame), and nothing else says
why. This module turns the configuration and the exporter's last log line into one sentence.
"""

from __future__ import annotations

from urllib.parse import urlparse

__all__ = ["GRPC_PORT", "HTTP_PORT", "likely_cause"]

GRPC_PORT = 4317  #: the OTLP/gRPC port of the OTel Collector's otlp receiver
HTTP_PORT = 4318  #: the OTLP/HTTP port

#: How an HTTP/1.1 client renders an HTTP/2 server's first frame (a SETTINGS frame).
_HTTP2_REPLY_MARKERS = ("BadStatusLine('\\x00\\x00", 'BadStatusLine("\\x00\\x00',
                        "BadStatusLine('\x00\x00")


def _port(endpoint: str | None) -> int | None:
    if not endpoint:
        return None
    try:
        return urlparse(endpoint if "://" in endpoint else f"http://{endpoint}").port
    except ValueError:
        return None


#: How the HTTP (urllib3/requests) and gRPC exporters report that nothing listens there.
_REFUSED_MARKERS = ("Connection refused", "[Errno 111]", "ECONNREFUSED",
                    "failed to connect to all addresses")
#: ... and that the host name does not resolve.
_NO_HOST_MARKERS = ("Name or service not known", "nodename nor servname",
                    "Temporary failure in name resolution", "DNS resolution failed",
                    "getaddrinfo failed")


def _unreachable(last_log: str, endpoint: str | None) -> str:
    """The cause when the exporter never reached a server: a wrong port/protocol is only a
    guess once something answers, so "connection refused" is said first."""
    where = endpoint or "the OTLP endpoint"
    if any(m in last_log for m in _REFUSED_MARKERS):
        return (f"likely cause: nothing is listening at {where} (connection refused): start "
                "the collector there, or point OTEL_EXPORTER_OTLP_ENDPOINT (--otlp-endpoint) "
                "at one that runs")
    if any(m in last_log for m in _NO_HOST_MARKERS):
        return (f"likely cause: the host name of {where} does not resolve: check the "
                "endpoint's host (a Kubernetes service needs its namespace outside it)")
    return ""


def likely_cause(protocol: str, endpoint: str | None, last_log: str = "") -> str:
    """One sentence naming the likely cause, or "" when nothing points at one.

    ``protocol`` is ``grpc`` or ``http/protobuf``; ``last_log`` is the exporter's latest log
    line (it carries the HTTP/2 reply a gRPC server sends to an HTTP/1.1 request)."""
    port = _port(endpoint)
    unreachable = _unreachable(last_log, endpoint)
    if unreachable:
        return unreachable
    if protocol != "grpc":
        http2_reply = any(m in last_log for m in _HTTP2_REPLY_MARKERS)
        if port == GRPC_PORT or http2_reply:
            why = ("the endpoint answered in HTTP/2 frames, so it is a gRPC port"
                   if http2_reply else f"port {GRPC_PORT} is the OTLP/gRPC port")
            return (f"likely cause: {why}, but the protocol is http/protobuf (the OTel "
                    f"default); send to port {HTTP_PORT} (e.g. http://collector:{HTTP_PORT}) "
                    "or set OTEL_EXPORTER_OTLP_PROTOCOL=grpc (--otlp-protocol grpc)")
        return ""
    if port == HTTP_PORT:
        return (f"likely cause: port {HTTP_PORT} is the OTLP/HTTP port, but the protocol is "
                f"grpc; send to port {GRPC_PORT} or use OTEL_EXPORTER_OTLP_PROTOCOL="
                "http/protobuf")
    return ""
