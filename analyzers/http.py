"""One way to talk HTTP for every source and sink of the analyzer job.

Prometheus, VictoriaMetrics, Pushgateway and Grafana are usually behind TLS, auth and flaky
networks. Centralising the client means every endpoint gets the same rules: TLS verification on
by default (custom CA, mTLS), credentials read from a file or an environment variable and never
logged, a timeout on every request that also respects the run's overall deadline, and retries
with exponential backoff for failures that are worth retrying (connection errors, timeouts, 5xx,
429) and for nothing else.
"""

from __future__ import annotations

import base64
import functools
import ipaddress
import os
import ssl
import time
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from stormotel.analyzers.http_flags import ENV_BASIC_AUTH_PASSWORD as ENV_BASIC_AUTH_PASSWORD
from stormotel.analyzers.http_flags import ENV_BEARER_TOKEN as ENV_BEARER_TOKEN
from stormotel.analyzers.http_flags import HttpSettings as HttpSettings
from stormotel.analyzers.http_flags import add_http_arguments as add_http_arguments
from stormotel.analyzers.http_flags import parse_header as parse_header
from stormotel.analyzers.http_flags import settings_from_args as settings_from_args

from stormotel import textsafe
from stormotel.errors import StormotelError, UsageError

#: Environment variables read when no file is given (files win).

#: Largest response body read from any endpoint (decoded); a bigger one fails the request
#: instead of exhausting memory. ``STORMOTEL_MAX_BODY_BYTES`` overrides.
MAX_BODY_BYTES = 256 * 1024 * 1024
ENV_MAX_BODY_BYTES = "STORMOTEL_MAX_BODY_BYTES"
#: How much of an error body is shown (after redaction and escaping).
ERROR_BODY_CHARS = 200
#: How much of an error body is kept (secrets stripped) for callers that parse it.
ERROR_BODY_KEPT = 4000


class ConfigError(UsageError):
    """A setting the user can fix (missing secret file, unreadable CA, ...). Maps to USAGE."""


class EndpointError(StormotelError):
    """A request that failed for good (after retries). The message names the endpoint.

    Whose failure it is depends on the caller (a source's query is a source failure, a sink's
    write a sink failure), so callers re-raise it as one of those; escaping uncaught it is a bug
    and exits INTERNAL like any unmapped error."""

    def __init__(self, endpoint: str, message: str, *, status: int | None = None,
                 body: str = "") -> None:
        super().__init__(f"{redact_url(endpoint)}: {message}")
        self.endpoint = redact_url(endpoint)
        self.status = status
        self.body = body


def redact_url(url: str) -> str:
    """Drop ``user:password@`` (and ``?token=`` values) from a URL so it can be logged."""
    return textsafe.redact_url(url)


def max_body_bytes() -> int:
    env = os.environ.get(ENV_MAX_BODY_BYTES, "").strip()
    return int(env) if env.isdigit() and int(env) > 0 else MAX_BODY_BYTES


def strip_secrets(body: str, secrets: tuple[str, ...] = ()) -> str:
    """``body`` without the request's own secrets (a server may echo the request headers
    back) and with auth-looking values redacted."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            body = body.replace(secret, "<redacted>")
    return textsafe.redact(body)


def sanitise_body(body: str, secrets: tuple[str, ...] = ()) -> str:
    """An error body safe to print on one line: secrets stripped, control characters
    escaped, cut to :data:`ERROR_BODY_CHARS`."""
    return textsafe.one_line(strip_secrets(body.strip(), secrets), ERROR_BODY_CHARS)


#: httpx's own default headers: nothing secret, and too common to scrub from bodies.
_PLAIN_HEADERS = frozenset({"user-agent", "accept", "accept-encoding", "connection"})


class BoundedResponse(httpx.Response):
    """A response read within the body limit whose ``json()`` raises ValueError for JSON nested
    too deeply (the standard library raises RecursionError), like for any other bad JSON."""

    def json(self, **kwargs: Any) -> Any:
        try:
            return super().json(**kwargs)
        except RecursionError:
            raise ValueError("JSON nested too deeply") from None

    @property
    def wire_encoding(self) -> str | None:
        """The ``Content-Encoding`` the body travelled in (the body here is already decoded)."""
        return self.extensions.get("wire_encoding")


class _BodyTooLarge(Exception):
    pass


class _RequestDeadline(Exception):
    pass


def _read_bounded(resp: httpx.Response, limit: int, end: float) -> bytes:
    """The decoded body, refusing more than ``limit`` bytes or reading past ``end`` (monotonic):
    a server trickling one byte per second must not outlive the request's timeout."""
    chunks: list[bytes] = []
    size = 0
    for chunk in resp.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise _BodyTooLarge(f"response body larger than {limit} bytes")
        chunks.append(chunk)
        if time.monotonic() > end:
            raise _RequestDeadline
    return b"".join(chunks)


def url_secrets(url: object) -> list[str]:
    """What a URL's ``user:password@`` becomes on the wire and a server could echo back: the
    password (as typed and percent-decoded), ``user:password`` and its base64 (the Basic
    ``Authorization`` value httpx sends for it)."""
    try:
        parsed = httpx.URL(str(url))
        user, password = parsed.username, parsed.password
        raw = parsed.userinfo.decode("ascii", "replace")
    except (httpx.InvalidURL, TypeError, ValueError):
        return []
    if not (user or password):
        return []
    pair = f"{user}:{password}"
    out = [raw, pair, base64.b64encode(pair.encode()).decode()]
    if password:
        out += [password, raw.split(":", 1)[-1]]
    return [v for v in dict.fromkeys(out) if v]


def _secrets_of(client: httpx.Client, headers: Mapping[str, str] | None,
                url: object = None) -> tuple[str, ...]:
    """Values a hostile server could echo back: auth and custom header values, basic-auth,
    the credentials of the URL asked (and of the client's base URL)."""
    values = [v for k, v in client.headers.items() if k.lower() not in _PLAIN_HEADERS]
    values += [v for k, v in (headers or {}).items() if k.lower() not in _PLAIN_HEADERS]
    values += url_secrets(url) + url_secrets(client.base_url)
    auth = getattr(client, "_auth", None)
    header = getattr(auth, "_header", None) or getattr(auth, "_auth_header", None)
    if isinstance(header, str):
        values += [header, header.split(" ", 1)[-1]]
    return tuple(v for v in values if isinstance(v, str))


class Deadline:
    """The wall-clock budget of one run; every request's timeout is clipped to what is left."""

    def __init__(self, seconds: float | None) -> None:
        self._end = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float | None:
        return None if self._end is None else max(0.0, self._end - time.monotonic())

    def expired(self) -> bool:
        r = self.remaining()
        return r is not None and r <= 0.0

    def clip(self, timeout: float) -> float:
        r = self.remaining()
        return timeout if r is None else max(0.001, min(timeout, r))


def read_secret(path: Path | None, env: str | None, what: str) -> str | None:
    """A secret from a file (first) or an environment variable; the message never shows it."""
    if path is not None:
        try:
            value = Path(path).read_text().strip()
        except OSError as e:
            raise ConfigError(f"cannot read {what} file {path}: {e.strerror or e}") from None
        if not value:
            raise ConfigError(f"{what} file {path} is empty")
        return value
    if env:
        value = os.environ.get(env, "").strip()
        return value or None
    return None


class BearerAuth(httpx.Auth):
    """``Authorization: Bearer …`` whose repr does not reveal the token."""

    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self._header
        yield request

    def __repr__(self) -> str:
        return "BearerAuth(<redacted>)"


def auth_from_settings(settings: HttpSettings) -> httpx.Auth | None:
    token = read_secret(settings.bearer_token_file, ENV_BEARER_TOKEN, "bearer token")
    password = None
    if settings.basic_auth_user:
        password = read_secret(settings.basic_auth_password_file, ENV_BASIC_AUTH_PASSWORD,
                               "basic-auth password")
        if password is None:
            raise ConfigError("--basic-auth-user needs --basic-auth-password-file or "
                              f"${ENV_BASIC_AUTH_PASSWORD}")
    if token and settings.basic_auth_user:
        raise ConfigError("give either a bearer token or basic auth, not both")
    if token:
        return BearerAuth(token)
    if settings.basic_auth_user and password is not None:
        return httpx.BasicAuth(settings.basic_auth_user, password)
    return None


def make_client(settings: HttpSettings, auth: httpx.Auth | bool | None = True) -> httpx.Client:
    """An ``httpx.Client`` honouring the TLS settings; ``auth=True`` derives auth from them.

    Pass another ``httpx.Auth`` (e.g. Grafana's token) or ``None`` to override.
    """
    resolved = auth_from_settings(settings) if auth is True else (auth or None)
    return httpx.Client(verify=ssl_context(settings), auth=resolved,
                        timeout=httpx.Timeout(settings.timeout_s),
                        headers={"User-Agent": "stormotel-analyzer", **dict(settings.headers)})


def ssl_context(settings: HttpSettings) -> ssl.SSLContext:
    """Verification on (system CAs, or ``ca_file``), plus the client certificate for mTLS.

    One context per set of TLS files and their contents' stamps (:func:`_tls_stamps`): loading
    the system CA bundle costs ~0.1 s of CPU, and a scheduled run over 200 jobs made two clients
    per job. A rotated certificate or CA bundle (a new mtime, size or inode) loads afresh, so a
    long-lived ``stormotel serve`` picks rotations up as before."""
    for what, p in (("CA file", settings.ca_file), ("client certificate", settings.client_cert),
                    ("client key", settings.client_key)):
        if p is not None and not Path(p).is_file():
            raise ConfigError(f"{what} {p} does not exist")
    if settings.client_key is not None and settings.client_cert is None:
        raise ConfigError("--client-key needs --client-cert")
    files = tuple(str(p) if p is not None else None
                  for p in (settings.ca_file, settings.client_cert, settings.client_key))
    return _context(files, settings.insecure_skip_verify, _tls_stamps(files))


def _tls_stamps(files: tuple[str | None, ...]) -> tuple[tuple[int, int, int] | None, ...]:
    """(mtime, size, inode) of every file the context reads: the given ones and the system's
    default CA file and directory (a CA bundle update changes them)."""
    defaults = ssl.get_default_verify_paths()

    def stamp(path: str | None) -> tuple[int, int, int] | None:
        try:
            st = os.stat(path) if path else None
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino) if st else None

    return tuple(stamp(p) for p in (*files, defaults.cafile, defaults.capath))


@functools.lru_cache(maxsize=16)
def _context(files: tuple[str | None, ...], insecure: bool,
             stamps: tuple[tuple[int, int, int] | None, ...]) -> ssl.SSLContext:
    """The context for these files; ``stamps`` only keys the cache (a failure is not cached:
    the next call tries again)."""
    del stamps
    ca_file, client_cert, client_key = files
    try:
        ctx = ssl.create_default_context(cafile=ca_file)
        if insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if client_cert is not None:
            ctx.load_cert_chain(client_cert, client_key)
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"cannot load TLS files: {e}") from None
    return ctx


@functools.lru_cache(maxsize=64)
def is_loopback_url(url: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1); no DNS lookup."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _with_encoding(url: str, settings: HttpSettings, headers: Mapping[str, str] | None
                   ) -> Mapping[str, str] | None:
    if not settings.identity_on_loopback or not is_loopback_url(url):
        return headers
    if headers and any(k.lower() == "accept-encoding" for k in headers):
        return headers
    return {**(headers or {}), "Accept-Encoding": "identity"}


def _retryable_status(status: int) -> bool:
    return status == 429 or 500 <= status < 600


def request(client: httpx.Client, method: str, url: str, *, settings: HttpSettings,
            deadline: Deadline | None = None, params: Mapping[str, Any] | None = None,
            data: Mapping[str, Any] | None = None, json: Any = None,
            content: bytes | None = None, headers: Mapping[str, str] | None = None,
            ok_statuses: tuple[int, ...] = (200, 201, 202, 204)) -> httpx.Response:
    """Send with retries on transient failures; raise :class:`EndpointError` when it gives up.

    A non-retryable status (4xx other than 429) fails at once: retrying a bad query is useless.
    """
    deadline = deadline or Deadline(None)
    headers = _with_encoding(url, settings, headers)
    attempts = max(1, settings.retries + 1)
    limit = max_body_bytes()
    secrets = _secrets_of(client, headers, url)
    last = "no attempt made"
    for attempt in range(attempts):
        if deadline.expired():
            raise EndpointError(url, f"run deadline reached ({last})")
        timeout = deadline.clip(settings.timeout_s)
        try:
            req = client.build_request(method, url, params=params, data=data, json=json,
                                       content=content, headers=headers, timeout=timeout)
            raw = client.send(req, stream=True)
            try:
                body_bytes = _read_bounded(raw, limit, time.monotonic() + timeout)
            finally:
                raw.close()
            resp = BoundedResponse(raw.status_code, headers=[
                (k, v) for k, v in raw.headers.multi_items()
                if k.lower() not in ("content-encoding", "content-length",
                                     "transfer-encoding")],
                content=body_bytes, request=req,
                extensions={"wire_encoding": raw.headers.get("content-encoding")})
        except _BodyTooLarge as e:
            raise EndpointError(url, f"{e} (limit: ${ENV_MAX_BODY_BYTES})") from None
        except (httpx.TimeoutException, _RequestDeadline):
            last = f"timed out after {timeout:.1f}s"
        except httpx.TransportError as e:
            last = f"connection failed ({type(e).__name__}: {textsafe.one_line(e, 200)})"
        else:
            if resp.status_code in ok_statuses:
                return resp
            body = strip_secrets(resp.text[:ERROR_BODY_KEPT], secrets)
            last = f"HTTP {resp.status_code}: {sanitise_body(body)}"
            if not _retryable_status(resp.status_code):
                raise EndpointError(url, last, status=resp.status_code, body=body)
        if attempt + 1 < attempts:
            pause = deadline.clip(settings.backoff_s * (2 ** attempt))
            time.sleep(pause)
    raise EndpointError(url, f"gave up after {attempts} attempt(s): {last}")
