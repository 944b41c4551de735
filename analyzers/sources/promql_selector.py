"""A PromQL series selector (``{a="x",b=~"y|z"}``, optionally ``name{…}``) as label matchers.

The analyzer builds its selectors as text (:func:`~stormotel.analyzers.sources.prometheus_api.
label_selector`, plus the user's ``extra_matchers``); Prometheus' remote read takes the same
matchers as structured ``LabelMatcher`` messages. This turns one into the other. Anything it
does not understand is a ValueError, and the caller then reads with the query API instead —
never a guessed matcher.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

#: ``=``, ``!=``, ``=~``, ``!~`` in the order remote read numbers them.
OPS = {"=": 0, "!=": 1, "=~": 2, "!~": 3}
_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*")
_OP = re.compile(r"(=~|!~|!=|=)\s*")
_DQ = re.compile(r'"((?:[^"\\]|\\.)*)"\s*', re.DOTALL)
_SQ = re.compile(r"'((?:[^'\\]|\\.)*)'\s*", re.DOTALL)
_BQ = re.compile(r"`([^`]*)`\s*")
_ESCAPED = re.compile(r"\\(.)", re.DOTALL)
_JSON_ESCAPES = set('\\"/bfnrtu')


def parse_selector(selector: str) -> list[tuple[int, str, str]]:
    """``(op, label, value)`` for each matcher, ``op`` as :data:`OPS` numbers them."""
    text = selector.strip()
    out: list[tuple[int, str, str]] = []
    head = _NAME.match(text)
    if head and not text.startswith("{"):
        out.append((0, "__name__", head.group(1)))
        text = text[head.end():]
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(f"not a series selector: {selector[:80]!r}")
    body, at = text[1:-1], 0
    while True:
        at = _skip_space(body, at)
        if at >= len(body):
            return out
        name = _NAME.match(body, at)
        if not name:
            raise ValueError(f"no label name at {body[at:at + 20]!r}")
        op = _OP.match(body, name.end())
        if not op:
            raise ValueError(f"no matcher operator after {name.group(1)!r}")
        value, at = _string(body, op.end())
        out.append((OPS[op.group(1)], name.group(1), value))
        at = _skip_space(body, at)
        if at < len(body):
            if body[at] != ",":
                raise ValueError(f"expected ',' at {body[at:at + 20]!r}")
            at += 1


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _string(text: str, at: int) -> tuple[str, int]:
    """A PromQL string literal at ``at``: its value and where it ends."""
    for pattern, quote in ((_DQ, '"'), (_SQ, "'"), (_BQ, "`")):
        m = pattern.match(text, at)
        if not m:
            continue
        raw = m.group(1)
        if quote == "`":
            return raw, m.end()
        if quote == "'":
            raw = raw.replace("\\'", "'").replace('"', '\\"')
        if any(c not in _JSON_ESCAPES for c in _ESCAPED.findall(raw)):  # \x, \a, octal
            raise ValueError(f"unsupported escape in {raw[:40]!r}")
        try:
            return json.loads(f'"{raw}"'), m.end()
        except ValueError:
            raise ValueError(f"bad string literal {raw[:40]!r}") from None
    raise ValueError(f"no string literal at {text[at:at + 20]!r}")


def unselected(selector: str, labels_seen: Iterable[dict[str, str] | None]) -> str | None:
    """The first label set of ``labels_seen`` that ``selector`` does not select, as text (None
    when each is selected, or when the selector cannot be checked here: a syntax this parser
    or Python's ``re`` does not take is never a reason to refuse an answer).

    A server answers only series its selector selects; VictoriaMetrics' native blocks and its
    JSON export carry no checksum, so a series outside it is an answer damaged on the way (a
    flipped byte in a metric name or a rank label), not data: read as data, its samples would
    be dropped unseen or given to another rank."""
    try:
        checks = [(op, name, value, re.compile(value, re.DOTALL) if op >= 2 else None)
                  for op, name, value in parse_selector(selector)
                  if op < 2 or not _RE2_ONLY.search(value)]
    except (ValueError, re.error, RecursionError, OverflowError):
        return None
    for labels in labels_seen:
        if labels is None:
            continue
        for op, name, want, rx in checks:
            got = labels.get(name, "")
            ok = (got == want if rx is None and op == 0 else got != want if rx is None
                  else bool(rx.fullmatch(got)) == (op == 2))
            if not ok:
                return (f"{name}={got[:60]!r} is not selected by "
                        f"{name}{_OP_TEXT[op]}{want[:60]!r}")
    return None


_OP_TEXT = {v: k for k, v in OPS.items()}
#: RE2 syntax that Python's ``re`` reads otherwise or not at all (POSIX classes, Unicode
#: classes, quoting): such a matcher is not checked rather than checked wrongly.
_RE2_ONLY = re.compile(r"\[:|\\[pPQECz]")
