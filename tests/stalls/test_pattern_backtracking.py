"""Every pattern of the stall grammar and the log readers runs in linear time on hostile lines.

The lines are built from each pattern's own structure (:mod:`tests.stalls.regex_adversary`),
every shape of every pattern. A search tries one match at each start of the line, in turn; it
is super-linear exactly when the attempts at a share of the starts grow with the rest of the
line. So the check times the attempts at the same few hundred starts from the middle of a 64 KiB
and of a 1 MiB line of the same shape (:func:`regex_adversary.starts_seconds`): the same work
for a linear pattern (1x), 16x for a quadratic one, more for worse — a ratio, never an absolute
time, so a busy machine cannot fail it by itself. The long line costs a linear pattern nothing
more (the same attempts), so it is 16 times the short one, not 4: a quadratic pattern whose
attempts also do some fixed work per start still shows 10x or more. With
``STORMOTEL_FUZZ=long`` the lines are 256 KiB and 4 MiB.

Until session 19 it timed whole searches of the two shapes costliest at 16 KiB from 64 to 256
KiB (4x linear, 16x quadratic): 47-56 s of CPU for the module, most of it ranking shapes of
the patterns whose bounded repeats make every start cost microseconds, and only two shapes per
pattern checked. Now every shape is checked, in about 3 s; the patterns that must fail still
fail (``test_the_check_fails_on_super_linear_patterns``).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re

import pytest
from stormotel.analyzers import stalls
from stormotel.analyzers.stalls import grammar as gr

from tests.stalls.regex_adversary import samples, shapes, starts_seconds

LONG = os.environ.get("STORMOTEL_FUZZ") == "long"
SMALL, BIG = (1 << 18, 1 << 22) if LONG else (1 << 16, 1 << 20)
#: starts timed per line: at least this many, and at least this many tiles of the shape's unit
#: (so every phase of the tiling is among them many times over)
STARTS, TILES = 256, 64
#: below this the attempts at the small size are too fast to be super-linear: a rescan of the
#: rest of the line (32 KiB past the middle of 64 KiB) at a ~ns a character, at one start in
#: each of the 64 tiles, costs 2 ms; a bounded pattern's attempts cost microseconds each
FAST_S = 0.0005
#: linear is 1x, quadratic 16x (10-14x seen with a start's fixed work); 4 leaves room for a
#: noisy machine
MAX_GROWTH = 4.0
#: measurements again after one over the bound (a quadratic pattern grows 16x every time, a
#: linear one disturbed by other work on the machine does not)
RETRIES = 3


def _module_patterns(value: object) -> list[re.Pattern[str]]:
    """A module-level pattern, or the patterns one level inside a module-level table (a
    tuple/list/dict of patterns or of rows holding them, as log_rankless keeps its rows)."""
    if isinstance(value, re.Pattern):
        return [value] if isinstance(value.pattern, str) else []
    if isinstance(value, dict):
        value = list(value.values())
    if not isinstance(value, (tuple, list)):
        return []
    inner = [x for v in value for x in (v if isinstance(v, (tuple, list)) else (v,))]
    inner += [getattr(v, f) for v in value for f in getattr(v, "__dataclass_fields__", ())]
    return [x for x in inner if isinstance(x, re.Pattern) and isinstance(x.pattern, str)]


def _patterns() -> list[tuple[str, re.Pattern[str]]]:
    """The grammar's catalogue, then every other pattern of every module of the stalls
    package, found by walking the package (a scanner added later is checked without being
    listed here); one entry per compiled pattern object. Not the inventory modules: they
    classify public corpora for scripts/stall_inventory.py, never a user's log."""
    found = [(p.id, p.regex) for p in gr.CATALOGUE]
    seen = {id(p) for _, p in found}
    for info in sorted(pkgutil.iter_modules(stalls.__path__), key=lambda m: m.name):
        if info.name.startswith("inventory"):
            continue
        mod = importlib.import_module(f"stormotel.analyzers.stalls.{info.name}")
        for key, value in sorted(vars(mod).items()):
            for i, pattern in enumerate(_module_patterns(value)):
                if id(pattern) not in seen:
                    seen.add(id(pattern))
                    found.append((f"{info.name}.{key}" + (f"[{i}]" if i else ""), pattern))
    return found


PATTERNS = _patterns()


def test_the_adversary_finds_a_known_quadratic_pattern() -> None:
    # the shape pg_status had before it was bounded: the check must be able to fail (at an
    # eighth of the size: whole searches of it took 15 s at 16 -> 64 KiB)
    old = re.compile(r"last_enqueued_collective\W+(?P<enq>-?\d+).*?last_completed_collective"
                     r"\W+(?P<done>-?\d+)", re.I)
    assert _worst_growth(old, 1 << 13, 1 << 17)[0] > MAX_GROWTH


@pytest.mark.parametrize("source", [
    r"x.*y",  # greedy run to the end, then back: quadratic
    r"(?P<key>\w+)=.*?;",  # lazy rescan from every start of a key: quadratic
    r"[\w.]+@[\w.]+\.com",  # an address: from every start of a long word, to its end
    r"(?:a|ab)*?c",  # an alternation inside a lazy repeat
])
def test_the_check_fails_on_super_linear_patterns(source: str) -> None:
    """Catastrophic shapes the grammar must never hold, each failing the check as a pattern of
    the grammar would (at small sizes: quadratic ones; a cubic one, \\d+\\d+x, is not timed
    here: its attempts at 256 starts of 1 KiB would take minutes, with this check or the old)."""
    assert _worst_growth(re.compile(source), 1 << 11, 1 << 15)[0] > MAX_GROWTH


def test_every_pattern_yields_samples() -> None:
    assert len(PATTERNS) > 200
    # found by walking the package: modules no list named (rows inside tables included)
    assert {"log_xla_coord", "log_hccl", "log_gpu_lost", "stacks", "fr_loader"} <= \
        {pid.split(".")[0] for pid, _ in PATTERNS}
    assert any(pid.startswith("log_rankless.") and "[" in pid for pid, _ in PATTERNS)
    assert all(samples(p) for _, p in PATTERNS)


@pytest.mark.slow
@pytest.mark.parametrize(("pid", "pattern"), PATTERNS, ids=[p for p, _ in PATTERNS])
def test_pattern_grows_linearly_on_its_own_adversarial_lines(pid: str,
                                                             pattern: re.Pattern[str]) -> None:
    growth, line = _worst_growth(pattern, SMALL, BIG)
    for _ in range(RETRIES):  # measured again: a quadratic pattern grows 16x every time, a
        if growth <= MAX_GROWTH:  # linear one disturbed by other work on the machine does not
            break
        growth = min(growth, _worst_growth(pattern, SMALL, BIG)[0])
    assert growth <= MAX_GROWTH, (f"{pid}: {growth:.1f}x from {SMALL >> 10} to {BIG >> 10} KiB"
                                  f" (attempts from the middle of) {line[:80]!r}…")


def _worst_growth(pattern: re.Pattern[str], small: int, big: int) -> tuple[float, str]:
    """The largest growth over every shape of the pattern, from ``small`` to ``big``, of the
    attempts at the same starts from the middle of each line; shapes too fast to matter at the
    small size are not grown."""
    worst = (0.0, "")
    for shape in shapes(pattern):
        tile = len(shape.unit) or 1
        small_line = shape.line(small)
        count = max(STARTS, TILES * tile)
        t_small = starts_seconds(pattern, small_line, _middle(small_line, count))
        if t_small < FAST_S * small / SMALL:  # the bound scales with the rest of the line
            continue
        big_line = shape.line(big)
        growth = starts_seconds(pattern, big_line, _middle(big_line, count)) / t_small
        worst = max(worst, (growth, small_line))
    return worst


def _middle(line: str, count: int) -> range:
    """``count`` starts from the middle of the line: past any head, every one alike but for
    the length of line left after it."""
    return range(len(line) // 2, len(line) // 2 + count)
