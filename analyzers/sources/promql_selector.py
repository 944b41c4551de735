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
