"""Every stall-log pattern and scanner under hostile logs, through ``stormotel analyze --logs``.

The lines are drawn generically, so a scanner added later is fuzzed without being listed here:
every message of the rank-bearing inventory (``docs/data/stall_inventory.json``, filled into a
concrete line with its emitter's prefix by :func:`inventory.concrete`, as the inventory table
judges it) and a matching-shaped sample of every pattern of the stalls package (the grammar's
catalogue and every module-level pattern, found by walking the package as the backtracking
check does; :func:`regex_adversary.samples`). Each line is then broken the way a hostile or
damaged log is: its numbers replaced (ranks of 10^25, negative, a world size of 0 or 1, a rank
at or past the world size), cut mid-way, repeated 10^4 times, glued to a line of another
emitter, with non-UTF-8 bytes, CRLF or NUL, padded to a 1 MiB line, written under file names
that name another rank, or spread over many files.

The properties: a documented exit code (never 70), no traceback, nothing raw on the screen
(:func:`boundary.check`), no memory that grows with a rank's value (a rank of 10^25 must not
allocate per rank: the traced peak stays under a bound far below what a per-rank table of
even 10^8 ranks takes) and — for an inventory message the parser handles, unmutated — never
exit 0: a log that shows a failure is never "healthy".
"""

from __future__ import annotations

import functools
import json
import os
import re
import tempfile
import tracemalloc
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from stormotel.analyzers.stalls import inventory as inv
from stormotel.analyzers.stalls.inventory_families import family_of

from stormotel import exitcodes
from tests.fuzz.boundary import analyze, check
from tests.stalls.regex_adversary import samples
from tests.stalls.test_pattern_backtracking import PATTERNS

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "stall_inventory.json"
#: a whole run's traced peak: a per-rank list of 10^8 ranks alone would be ~800 MiB
PEAK_BYTES = 192 << 20
#: numbers a hostile log puts where a rank, a world size, a count or a pid stands
HOSTILE_NUMBERS = ("10000000000000000000000000", "-1", "-5", "0", "1", "8", "9", "4096",
                   "18446744073709551616", "999999999999999999", "1048576", "2147483648",
                   "00000003", "1e9", "３")
#: prefixes a line's emitter or launcher may carry in front of it
PREFIXES = ("", "[rank3]:", "[default3]:", "3: ", "[1,3]<stderr>:", "rank3: ")


@functools.cache
def _inventory_lines() -> tuple[tuple[str, bool], ...]:
    """Each inventory message as its emitter prints it, and whether the parser handles it (the
    data file's ``expected`` mark, which tests/stalls/test_inventory.py keeps true)."""
    entries = json.loads(DATA.read_text())["entries"]
    out = []
    for e in entries:
        family = family_of(str(e["emitter"]), str(e["level"]), str(e["template"]))
        line, _ = inv.concrete(e, family)
        out.append((line, e.get("expected") == "handled"))
    return tuple(out)


@functools.cache
def _pattern_lines() -> tuple[str, ...]:
    """A matching-shaped sample of every alternative of every pattern of the stalls package."""
    return tuple(sorted({s for _, p in PATTERNS for s in samples(p) if s.strip()}))


@functools.cache
def _all_lines() -> tuple[str, ...]:
    return tuple(line for line, _ in _inventory_lines()) + _pattern_lines()


_NUMBER = re.compile(r"\d+")
LONG = os.environ.get("STORMOTEL_FUZZ") == "long"


def _few(n: int) -> settings:
    """``n`` examples in ``make test`` (the suite's CPU budget: each example is a whole CLI
    run, some of a 1 MiB line or 10^4 lines, traced); the long profile's count in ``make
    fuzz``."""
    return settings() if LONG else settings(max_examples=n)


def _renumber(line: str, data: st.DataObject) -> str:
    """``line`` with some of its numbers (or all) replaced by hostile ones."""
    spots = list(_NUMBER.finditer(line))
    if not spots:
        return line
    every = data.draw(st.booleans(), label="every number")
    value = data.draw(st.sampled_from(HOSTILE_NUMBERS), label="number")
    out, pos = [], 0
    for m in spots:
        if every or data.draw(st.booleans(), label="this one"):
            out += [line[pos:m.start()], value]
            pos = m.end()
    return "".join(out) + line[pos:]


def _damage(line: str, data: st.DataObject) -> bytes:
    """The line as a damaged log carries it (bytes: some damage is not text)."""
    kind = data.draw(st.sampled_from(["none", "cut", "repeat", "glue", "bytes", "crlf", "nul",
                                      "huge"]), label="damage")
    if kind == "cut":
        line = line[:data.draw(st.integers(0, max(0, len(line) - 1)), label="cut at")]
    elif kind == "glue":
        other = data.draw(st.sampled_from(_all_lines()), label="glued")
        line = line + other if data.draw(st.booleans(), label="order") else other + line
    raw = line.encode("utf-8", "surrogatepass")
    if kind == "repeat":
        return (raw + b"\n") * 10_000
    if kind == "bytes":
        at = data.draw(st.integers(0, len(raw)), label="at")
        return raw[:at] + data.draw(st.sampled_from([b"\xff\xfe", b"\xc3", b"\xed\xa0\x80",
                                                     b"\x80\x80\x80"]), label="b") + raw[at:]
    if kind == "crlf":
        return raw.replace(b"\n", b"\r\n") + b"\r\n"
    if kind == "nul":
        at = data.draw(st.integers(0, len(raw)), label="at")
        return raw[:at] + b"\x00" + raw[at:] + b"\n"
    if kind == "huge":
        at = data.draw(st.integers(0, len(raw)), label="at")
        return raw[:at] + b"x" * (1 << 20) + raw[at:] + b"\n"
    return raw + b"\n"


def _run(folder: Path, trace: bool = True) -> tuple[int, int]:
    """The CLI's exit code and the run's traced peak of allocated bytes (0 untraced: tracing
    makes a run of 10^4 lines six times slower, and what the peak guards against — a table
    per rank of a rank's value — comes from the numbers, not from the log's length)."""
    if not trace:
        result = analyze("--logs", str(folder), "--format", "json", "-q")
        check(result)
        return result.code, 0
    tracemalloc.start()
    try:
        result = analyze("--logs", str(folder), "--format", "json", "-q")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    check(result)
    return result.code, peak


@_few(12)
@given(st.data(), st.sampled_from(PREFIXES))
def test_every_pattern_line_mutated(data, prefix):
    """One catalogue line (an inventory message or a pattern's sample) with hostile numbers and
    damage, alone or beside an intact line of another emitter, in a file named like a rank."""
    line = data.draw(st.sampled_from(_all_lines()), label="line")
    if data.draw(st.booleans(), label="renumber"):
        line = _renumber(line, data)
    body = _damage(prefix + line, data)
    if data.draw(st.booleans(), label="with another line"):
        body = data.draw(st.sampled_from(_all_lines()), label="other").encode() + b"\n" + body
    folder = Path(tempfile.mkdtemp(prefix="stormotel-fuzz-logs-"))
    name = data.draw(st.sampled_from(["job.log", "rank0.log", "rank-7.log", "worker_12.log",
                                      "rank10000000000000000000000000.log", "-1.log"]),
                     label="file")
    (folder / name).write_bytes(body)
    code, peak = _run(folder, trace=len(body) < 1 << 16)
    assert peak < PEAK_BYTES, f"{peak >> 20} MiB traced for a {len(body)} byte log"
    del code


@_few(8)
@given(st.data())
def test_many_files_named_like_ranks_that_contradict_them(data):
    """Several catalogue lines, each in a file whose name names another rank than its line,
    some of them with hostile numbers."""
    folder = Path(tempfile.mkdtemp(prefix="stormotel-fuzz-logs-"))
    n = data.draw(st.integers(2, 40), label="files")
    lines = data.draw(st.lists(st.sampled_from(_all_lines()), min_size=1, max_size=4),
                      label="lines")
    for i in range(n):
        line = lines[i % len(lines)]
        if data.draw(st.booleans(), label="renumber"):
            line = _renumber(line, data)
        r = data.draw(st.sampled_from([i, n - 1 - i, 10**25, 0]), label="file rank")
        (folder / f"rank{r}.{i}.log").write_text(f"[rank{i}]:{line}\n", encoding="utf-8",
                                                   errors="surrogatepass")
    code, peak = _run(folder)
    assert peak < PEAK_BYTES, f"{peak >> 20} MiB traced for {n} files"
    del code


@given(st.sampled_from(range(1 << 12)))
def test_a_handled_failure_line_is_never_healthy(i):
    """An inventory message the parser handles, as its emitter prints it, is a finding or at
    worst undecided — never exit 0 (the draw's index wraps over the handled messages)."""
    handled = [line for line, ok in _inventory_lines() if ok]
    line = handled[i % len(handled)]
    folder = Path(tempfile.mkdtemp(prefix="stormotel-fuzz-logs-"))
    (folder / "job.log").write_text(line + "\n")
    result = analyze("--logs", str(folder), "--format", "json", "-q")
    check(result)
    assert result.code != exitcodes.OK, f"healthy on a failure line: {line!r}"


# --- regressions: each failed on the code before the fix -------------------------------------
def test_a_failure_log_ending_in_nul_blocks_is_read_not_refused(tmp_path: Path) -> None:
    """A short log whose last blocks a crash left unwritten (NUL bytes after the last line)
    was refused as binary: the dying rank's failure line was lost and the run said 'no
    evidence' (exit 3) in a folder, 'binary file' (exit 2) for the file named. Found by the
    sweep of every handled inventory line with a 3,000-byte NUL tail."""
    line = next(x for x, ok in _inventory_lines() if ok and "Watchdog caught" in x)
    (tmp_path / "rank3.log").write_bytes(line.encode() + b"\n" + b"\x00" * 3000)
    for target in (tmp_path, tmp_path / "rank3.log"):
        out = tmp_path / "report.json"
        result = analyze("--logs", str(target), "--format", "json", "-o", str(out), "-q")
        check(result, out, codes=(exitcodes.FINDINGS,))
        rep = json.loads(out.read_text())
        assert rep["stall_findings"], rep
        assert any("NUL bytes" in n for n in rep["notes"]), rep["notes"]
    # a NUL inside the text is still a binary file, and a file of NUL blocks alone is empty
    (tmp_path / "rank3.log").write_bytes(line.encode()[:20] + b"\x00" + line.encode()[20:])
    check(analyze("--logs", str(tmp_path / "rank3.log"), "-q"), codes=(exitcodes.USAGE,))
    (tmp_path / "rank3.log").write_bytes(b"\x00" * 4096)
    result = analyze("--logs", str(tmp_path / "rank3.log"), "-q")
    check(result, codes=(exitcodes.USAGE,))
    assert "empty file" in result.stderr


def test_a_rank_of_non_ascii_digits_is_no_rank() -> None:
    """``parse_rank`` (the one bound on a parsed rank) took ``str.isdigit()`` for 'int() can
    read it': '²' and '①' are digits to isdigit and a ValueError to int — raised out of
    whichever reader captured such a token (found reading the shared bound with the fuzz's
    hostile numbers)."""
    from stormotel.analyzers.stalls import grammar as gr

    assert [gr.parse_rank(t) for t in ("²", "①", "1²", "３", " 7 ")] == [None] * 4 + [7]
    assert gr.parse_rank_list("3, ², 5") == [3, 5]
