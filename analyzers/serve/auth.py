"""Who may post alerts (and, with ``--protect-reports``, read reports): what Alertmanager's
``http_config`` sends — ``authorization: {credentials_file: …}`` (a bearer token) or
``basic_auth: {username: …, password_file: …}``.

Secrets come from files or the environment, are compared in constant time, and never appear in
a log line, a page, a report or a metric: a failed check says only which kind was expected.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
from dataclasses import dataclass, field
from pathlib import Path

from stormotel.errors import UsageError

ENV_TOKEN = "STORMOTEL_SERVE_TOKEN"
ENV_PASSWORD = "STORMOTEL_SERVE_PASSWORD"


@dataclass(frozen=True)
class Auth:
    """The accepted credentials; none at all means every request is accepted."""

    token: bytes | None = field(default=None, repr=False)
    user: str | None = None
    password: bytes | None = field(default=None, repr=False)

    @property
    def required(self) -> bool:
        return self.token is not None or self.user is not None

    @property
    def challenge(self) -> str:
        """The ``WWW-Authenticate`` header of a 401."""
        return 'Basic realm="stormotel"' if self.user is not None else 'Bearer realm="stormotel"'

    def allows(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header carries an accepted credential."""
        if not self.required:
            return True
        if not header:
            return False
        scheme, _, value = header.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer" and self.token is not None:
            return hmac.compare_digest(value.encode(), self.token)
        if scheme.lower() == "basic" and self.user is not None and self.password is not None:
            try:
                user, sep, password = base64.b64decode(value, validate=True).partition(b":")
            except (binascii.Error, ValueError):
                return False
            return bool(sep) and hmac.compare_digest(user, self.user.encode()) \
                and hmac.compare_digest(password, self.password)
        return False


def _secret(path: Path | None, env: str, what: str) -> bytes | None:
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"cannot read the {what} file {str(path)!r}: "
                             f"{type(e).__name__}") from None
        if not text:
            raise UsageError(f"the {what} file {str(path)!r} is empty")
        return text.encode()
    value = os.environ.get(env, "").strip()
    return value.encode() if value else None


def load_auth(token_file: Path | None, user: str | None, password_file: Path | None) -> Auth:
    """The credentials the flags (or ``$STORMOTEL_SERVE_TOKEN`` /
    ``$STORMOTEL_SERVE_PASSWORD``) give; raises a UsageError for a half-given pair."""
    token = _secret(token_file, ENV_TOKEN, "webhook token")
    password = _secret(password_file, ENV_PASSWORD, "webhook password") if user else None
    if password_file is not None and user is None:
        raise UsageError("--webhook-password-file needs --webhook-user")
    if user is not None and password is None:
        raise UsageError(f"--webhook-user needs --webhook-password-file (or ${ENV_PASSWORD})")
    return Auth(token=token, user=user, password=password)
