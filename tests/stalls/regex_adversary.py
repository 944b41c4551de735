"""Adversarial lines built from a regex's own structure, to catch super-linear backtracking.

A pattern is parsed (``re._parser``, the tree ``re`` itself compiles) into one sample string per
alternative; each sample is then cut at a quarter, a half, three quarters and one short of its
end and tiled over a long line (the "almost matches, again and again" shape that makes lazy
``.*?`` and nested repeats rescan), or its head is followed by a long run of one of its own
characters (the shape that makes an unbounded repeat backtrack). No line is closed by a full
match, so the search must try every start (the grammar's cheap trigger filter is no defence: one
trigger word anywhere in the line lets the pattern run). Time is compared between two sizes of
the same shape — a ratio, not an absolute time, so a busy machine does not decide the outcome:
of whole searches (:func:`search_seconds`: linear work grows 4x from 256 KiB to 1 MiB,
quadratic 16x), or of the attempts at the same starts (:func:`starts_seconds`: the same for
linear work, 16x for quadratic from 64 KiB to 1 MiB).
"""

from __future__ import annotations

import re
import re._constants as c
import re._parser as sp
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: a character that each category matches (and one its negation matches)
_CAT = {c.CATEGORY_DIGIT: "1", c.CATEGORY_SPACE: " ", c.CATEGORY_WORD: "a",
        c.CATEGORY_NOT_WORD: " ", c.CATEGORY_NOT_SPACE: "x", c.CATEGORY_NOT_DIGIT: "x"}
_CAT_CHARS = {c.CATEGORY_DIGIT: "0123456789", c.CATEGORY_SPACE: " \t\n",
              c.CATEGORY_WORD: "abcdefghijklmnopqrstuvwxyz_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
_REPEATS = (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT)


def _one(items: Iterable[tuple[Any, Any]]) -> str:
    """The shortest-shaped string the parsed items match (first alternative of each branch)."""
    out = []
    for op, av in items:
        if op is c.LITERAL:
            out.append(chr(av))
        elif op is c.NOT_LITERAL:
            out.append("y" if chr(av) == "x" else "x")
        elif op is c.ANY:
            out.append("x")
        elif op is c.IN:
            out.append(_in(av))
        elif op in _REPEATS:
            lo, hi, sub = av
            out.append(_one(sub) * max(lo, 1 if hi else 0))
        elif op is c.SUBPATTERN:
            out.append(_one(av[-1]))
        elif op is c.BRANCH:
            out.append(_one(av[1][0]))
        elif op is c.ATOMIC_GROUP:
            out.append(_one(av))
    return "".join(out)


def _in(av: Sequence[tuple[Any, Any]]) -> str:
    if not any(op is c.NEGATE for op, _ in av):
        op, a = av[0]
        if op is c.LITERAL:
            return chr(a)
        if op is c.RANGE:
            return chr(a[0])
        return _CAT.get(a, "x") if op is c.CATEGORY else "x"
    bad: set[str] = set()
    for op, a in av:
        if op is c.LITERAL:
            bad.add(chr(a))
        elif op is c.RANGE:
            bad.update(chr(ch) for ch in range(a[0], min(a[1], a[0] + 200) + 1))
        elif op is c.CATEGORY:
            bad.update(_CAT_CHARS.get(a, ""))
    return next((ch for ch in "x#@ 1a" if ch not in bad), "~")


def samples(pattern: re.Pattern[str]) -> list[str]:
    """One matching-shaped string for the whole pattern and one per alternative of any branch."""
    tree = list(sp.parse(pattern.pattern, pattern.flags))
    out = {_one(tree)}
    stack = [tree]
    while stack:
        for op, av in stack.pop():
            if op is c.BRANCH:
                for alt in av[1]:
                    out.add(_one(alt))
                    stack.append(list(alt))
            elif op is c.SUBPATTERN:
                stack.append(list(av[-1]))
            elif op in _REPEATS:
                stack.append(list(av[2]))
    return sorted(s for s in out if s)


def adversarial(pattern: re.Pattern[str], size: int) -> list[str]:
    """Lines of about ``size`` characters shaped from the pattern's own samples."""
    return [shape.line(size) for shape in shapes(pattern)]


@dataclass(frozen=True)
class Shape:
    """One adversarial shape: ``unit`` tiled over the line, or ``head`` then ``fill``
    repeated."""
    unit: str = ""
    head: str = ""
    fill: str = ""

    def line(self, size: int) -> str:
        if self.unit:
            return (self.unit * (size // len(self.unit) + 1))[:size]
        return self.head + self.fill * size


def shapes(pattern: re.Pattern[str]) -> list[Shape]:
    """The shapes :func:`adversarial` draws at any size, in its order (so a caller can rank
    them at one size and build only the ones it grows at the others)."""
    out = []
    for s in samples(pattern):
        n = len(s)
        for k in sorted({max(1, n // 4), max(1, n // 2), max(1, 3 * n // 4), max(1, n - 1)}):
            out.append(Shape(unit=s[:k]))
        for ch in sorted(set(s)):
            out.append(Shape(head=s[: n // 2], fill=ch))
    return out


def search_seconds(pattern: re.Pattern[str], line: str, repeats: int = 3) -> float:
    """The best of a few timings of this thread's CPU (a search is pure CPU work in one thread:
    its CPU time leaves out the time the scheduler gave other work, which wall time counted — at
    load 8-10 a linear pattern measured 9.2x in wall time against the 9x bound; the best of a few
    removes what is left, cache and frequency)."""
    best = float("inf")
    for _ in range(repeats):
        started = time.thread_time()
        pattern.search(line)
        best = min(best, time.thread_time() - started)
    return best


def starts_seconds(pattern: re.Pattern[str], line: str, starts: range, repeats: int = 3) -> float:
    """The best of a few timings of this thread's CPU for one match attempt at each of
    ``starts`` — what ``pattern.search(line)`` does at every position of the line, one after
    the other (``re`` keeps nothing from one start to the next) — less the same calls each
    given an empty rest of the line (``endpos=pos``: the Python call, ~0.5 µs, twenty times
    what ``search`` spends at a start that fails at once, and the same at any length). A
    search is super-linear exactly when the attempts at a share of the starts grow with the
    rest of the line, so timing them at the same number of starts from the middle of a short
    and of a long line of one shape shows it (the same work for a linear pattern, 16x for a
    quadratic one at 16x the length), at the cost of a few hundred attempts instead of a whole
    search."""
    match = pattern.match
    best = empty = float("inf")
    for _ in range(repeats):
        started = time.thread_time()
        for pos in starts:
            match(line, pos)
        best = min(best, time.thread_time() - started)
        started = time.thread_time()
        for pos in starts:
            match(line, pos, pos)
        empty = min(empty, time.thread_time() - started)
    return max(0.0, best - empty)
