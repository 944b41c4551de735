"""Read a folder of per-rank Flight Recorder dumps (pickle or JSON form, format 2.x).

File names carry the rank: a common prefix plus the rank (``nccl_trace_rank_3``, torch's
default ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``), or a launcher's name with host and rank
(``fr_node-7_rank3.json``). The form is sniffed from the content, not the name:
``_dump_fr_trace`` writes a pickle, ``_dump_fr_trace_json`` writes JSON without stack frames,
with some numbers stringified and 0 for unset times. Pickles go through
:mod:`stormotel.analyzers.stalls.safe_unpickle` only — dumps are untrusted input.
"""

from __future__ import annotations

import json
import os
import pickle
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from itertools import chain, repeat
from operator import attrgetter, itemgetter, methodcaller
from pathlib import Path
from typing import Any, overload

import msgspec
import numpy as np
from stormotel.analyzers.gcpause import gc_paused
from stormotel.analyzers.stalls.fr_types import DumpSet, FrEntry, PgStatus, RankDump
from stormotel.analyzers.stalls.safe_unpickle import MAX_DUMP_BYTES, loads_plain

from stormotel.errors import UsageError

SUPPORTED_MAJOR = 2
#: No job has this many ranks; file names and ``pg_config`` lists beyond it are not ranks.
MAX_WORLD_SIZE = 1_000_000
_RANK_TAG = re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE)
_TRAILING_DIGITS = re.compile(r"^(.*?)(\d+)((?:\.[A-Za-z]+)*)$")


class DumpError(UsageError, ValueError):
    """A dump file (or folder) that cannot be read; the message names the file and the reason."""


#: How a rank-numbered file that is no readable dump is recorded in ``skipped_files``.
UNREADABLE = "unreadable, its rank counted missing: "


def rank_from_name(name: str) -> int | None:
    """The rank a file name carries (``..rank_3``, ``..rank3.json``, ``prefix3``), else None;
    also None for a number no job could have as a rank (at least :data:`MAX_WORLD_SIZE`)."""
    tags = _RANK_TAG.findall(name)
    m = None if tags else _TRAILING_DIGITS.match(name)
    digits = tags[-1] if tags else (m.group(2) if m and m.group(1) else None)
    if digits is None or len(digits) > 7:
        return None
    rank = int(digits)
    return rank if rank < MAX_WORLD_SIZE else None


def load_dump_file(path: Path, rank: int | None = None) -> RankDump:
    """Parse one rank's dump; ``rank`` defaults to the one in the file name."""
    if rank is None:
        rank = rank_from_name(path.name)
        if rank is None:
            raise DumpError(f"{path}: no rank number in the file name")
    try:
        size = path.stat().st_size
        if size > MAX_DUMP_BYTES:
            raise DumpError(f"{path}: {size} bytes is too large for a Flight Recorder dump")
        data = path.read_bytes()
    except OSError as exc:
        raise DumpError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    with gc_paused():  # hundreds of thousands of entries, all kept: nothing for GC to find
        raw, form = _decode(path, data)
        return _normalise(path, rank, raw, form)


def load_dump_dir(path: Path, *, world_size: int | None = None) -> DumpSet:
    """Read every rank-numbered dump under ``path`` (a folder, or one file)."""
    if not path.exists():
        raise DumpError(f"{path}: no such file or folder")
    if world_size is not None and not 0 < world_size <= MAX_WORLD_SIZE:
        raise DumpError(f"world size {world_size} is not between 1 and {MAX_WORLD_SIZE}")
    files = [path] if path.is_file() else sorted(
        Path(root) / f for root, _, names in os.walk(path) for f in names
        if not f.startswith("."))
    dumps: dict[int, RankDump] = {}
    skipped: dict[str, str] = {}
    with gc_paused():  # every rank's entries stay alive: a collection between files finds none
        _read_files(path, files, dumps, skipped)
    if not dumps:
        unreadable = [f"{f}: {why.removeprefix(UNREADABLE)}" for f, why in skipped.items()
                      if why.startswith(UNREADABLE)]
        if unreadable:  # every dump damaged: say how the first one is
            raise DumpError(unreadable[0] + (f" (and {len(unreadable) - 1} other dump(s) "
                                             "unreadable)" if len(unreadable) > 1 else ""))
        raise DumpError(f"{path}: no Flight Recorder dumps (expected files named like "
                        "nccl_trace_rank_0 or <host>_rank0.json)")
    if all(d.form == "empty" for d in dumps.values()):
        first = min(dumps.values(), key=lambda d: d.rank)
        raise DumpError(f"{first.path}: empty file (and every other dump is empty too): "
                        "nothing to analyse")
    notes: list[str] = []
    hinted = _ranks_hinted_by_pg_config(dumps.values())
    hinted |= {r for f, why in skipped.items() if why.startswith(UNREADABLE)
               if (r := rank_from_name(Path(f).name)) is not None}  # it existed: it dumped
    known = max([*dumps, *hinted]) + 1
    if world_size is not None and world_size < known:
        notes.append(f"--world-size {world_size} is smaller than the ranks seen ({known}); "
                     f"using {known}")
    ws = max(known, world_size or 0)
    missing = [r for r in range(ws) if r not in dumps]
    versions = sorted({d.version for d in dumps.values() if d.version})
    if len(versions) > 1:
        notes.append(f"dumps mix format versions {versions}")
    if missing:
        notes.append(f"no dump from rank(s) {missing} of world size {ws}: their side of every "
                     "collective is unseen; findings use the ranks present")
    empty = sorted(r for r, d in dumps.items() if not d.entries)
    if empty:
        notes.append(f"rank(s) {empty} left a dump with no entries (empty file or nothing "
                     "recorded): stuck (e.g. holding the GIL) or killed while dumping")
    if skipped:
        special = sum(why == "not a regular file" for why in skipped.values())
        damaged = {f: why for f, why in skipped.items() if why.startswith(UNREADABLE)}
        for f, why in damaged.items():
            notes.append(f"skipped {f}: {why}")
        if len(skipped) > special + len(damaged):
            notes.append(f"skipped {len(skipped) - special - len(damaged)} file(s) without a "
                         "rank number")
        if special:
            notes.append(f"skipped {special} file(s) that are not regular files (pipes, "
                         "devices)")
    bad = sum(d.skipped_entries for d in dumps.values())
    if bad:
        notes.append(f"skipped {bad} malformed entr{'y' if bad == 1 else 'ies'}")
    return DumpSet(dumps=dumps, world_size=ws, missing_ranks=missing, notes=notes,
                   skipped_files=skipped, empty_ranks=empty)


def _read_files(path: Path, files: list[Path], dumps: dict[int, RankDump],
                skipped: dict[str, str]) -> None:
    """Each rank-numbered file's dump into ``dumps``; other files into ``skipped`` with why."""
    for f in files:
        if f is not path and not f.is_file():  # a named pipe would block, /dev/zero never ends
            skipped[str(f)] = "not a regular file"
            continue
        rank = rank_from_name(f.name)
        if rank is None:
            skipped[str(f)] = "no rank number in the file name"
            continue
        if rank in dumps:
            raise DumpError(f"{f}: rank {rank} already read from {dumps[rank].path}")
        try:
            dumps[rank] = _empty_dump(f, rank) if _is_empty(f) else load_dump_file(f, rank)
        except DumpError as exc:
            if f is path:  # the one file the user named
                raise
            # One rank's dump cut short or damaged: that rank is unseen (absence proves
            # nothing), not every other rank's evidence refused with it.
            skipped[str(f)] = f"{UNREADABLE}{str(exc).removeprefix(f'{f}: ')}"


def _is_empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except OSError:
        return False


def _empty_dump(path: Path, rank: int) -> RankDump:
    """A zero-byte dump file: the rank existed and tried to dump, but wrote nothing."""
    return RankDump(rank=rank, path=str(path), form="empty", version="", entries=[])


def _decode(path: Path, data: bytes) -> tuple[Mapping[str, Any], str]:
    if not data.strip():
        raise DumpError(f"{path}: empty file")
    head = data.lstrip()[:1]
    if head in (b"{", b"["):
        try:
            raw = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DumpError(f"{path}: not valid JSON ({exc})") from exc
        except RecursionError:
            raise DumpError(f"{path}: JSON nested too deeply") from None
        form = "json"
    elif data[:1] == b"\x80":
        try:
            # Entries are read by _entry, which takes only scalars and flat size lists from
            # each and skips anything else, so their nesting needs no walk.
            raw = loads_plain(data, opaque_keys=("entries",))
        except pickle.UnpicklingError as exc:
            raise DumpError(f"{path}: {exc}") from exc
        form = "pickle"
    else:
        raise DumpError(f"{path}: not a Flight Recorder dump (neither a pickle nor JSON)")
    if isinstance(raw, dict) and form == "json" and "version" in raw and "entries" not in raw \
            and "pg_config" in raw:
        raw = {**raw, "entries": []}  # dump_json leaves the key out when nothing was recorded
    if not isinstance(raw, dict) or "entries" not in raw or "version" not in raw:
        raise DumpError(f"{path}: not a Flight Recorder dump (no 'version' and 'entries')")
    return raw, form


def _normalise(path: Path, rank: int, raw: Mapping[str, Any], form: str) -> RankDump:
    version = str(raw.get("version"))
    major = version.split(".", 1)[0]
    if major != str(SUPPORTED_MAJOR):
        raise DumpError(f"{path}: format version {version!r} is not supported "
                        f"(this reader knows {SUPPORTED_MAJOR}.x)")
    entries_raw = raw.get("entries")
    if not isinstance(entries_raw, list):
        raise DumpError(f"{path}: 'entries' is {type(entries_raw).__name__}, expected a list")
    bad = 0
    columns = entries_by_column(rank, entries_raw)
    if columns is not None:
        entries = columns
    else:
        entries = []
        cells_left = SIZE_CELLS_PER_ENTRY_AVERAGE * len(entries_raw) + MAX_SIZE_CELLS_PER_ENTRY
        for e in entries_raw:
            entry = _entry(rank, e) if cells_left > 0 else None  # the dump's size budget
            if entry is None:
                bad += 1
            else:
                cells_left -= sum(map(len, entry.input_sizes)) + sum(map(len, entry.output_sizes))
                entries.append(entry)
    entries.sort(key=_RECORD_ID)
    status: dict[int, PgStatus] = {}
    pg_status = raw.get("pg_status")
    for pg_id, st in (pg_status.items() if isinstance(pg_status, dict) else ()):
        try:
            status[int(pg_id)] = PgStatus(_int(st.get("last_enqueued_collective"), -1),
                                          _int(st.get("last_started_collective"), -1),
                                          _int(st.get("last_completed_collective"), -1))
        except (TypeError, ValueError, AttributeError, OverflowError):
            bad += 1
    pg_config = _pg_config(raw.get("pg_config"))
    return RankDump(rank=rank, path=str(path), form=form, version=version, entries=entries,
                    pg_status=status, pg_config=pg_config, skipped_entries=bad)


def _pg_config(raw: object) -> dict[str, dict[str, object]]:
    """``pg_config`` by group name; an entry that is not a mapping becomes an empty one (every
    reader skips those), so its name still counts."""
    if not isinstance(raw, dict):
        return {}
    return {str(name): (cfg if isinstance(cfg, dict) else {}) for name, cfg in raw.items()}


@overload
def _int(v: Any, default: int) -> int: ...


@overload
def _int(v: Any, default: None = None) -> int | None: ...


def _int(v: Any, default: int | None = None) -> int | None:
    """Numbers may be stringified in the JSON form; 0/None mean unset for times. Every integer
    read from a dump is int64 (a sequence id of 10**20 or a time of 2**70 skips its entry)."""
    if v is None or v == "":
        return default
    i = v if type(v) is int else int(v)
    if not _INT64_MIN <= i <= _INT64_MAX:
        raise ValueError(f"{i} does not fit in 64 bits")
    return i


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: Size entries (ints in ``input_sizes``/``output_sizes``) one entry may hold, and a dump on
#: average per entry: a pickle can reference one large list 100,000 times from one entry
#: (a few bytes each), which normalising would copy into 10**9 ints.
MAX_SIZE_CELLS_PER_ENTRY = 65_536
SIZE_CELLS_PER_ENTRY_AVERAGE = 256
_SIZE_KEYS = ("input_sizes", "output_sizes")
_INT_FIELDS = attrgetter("record_id", "pg_id", "seq_id", "time_created_ns", "time_started_ns",
                         "time_completed_ns", "timeout_ms")
_BOTH_SIZES = itemgetter(*_SIZE_KEYS)


def _size_cells(raw: list[Any]) -> int:
    """How many ints the entries' size lists hold (memo references counted each time), in C;
    TypeError/AttributeError for entries the column reader would refuse anyway."""
    try:
        both: Iterable[Any] = map(_BOTH_SIZES, raw)
        return sum(map(len, chain.from_iterable(chain.from_iterable(both))))
    except KeyError:  # a dump that leaves sizes out (they default to none)
        lists = chain.from_iterable(chain.from_iterable(
            map(methodcaller("get", k, ()), raw) for k in _SIZE_KEYS))
        return sum(map(len, lists))


def _within_int64(entries: list[FrEntry]) -> bool:
    """Every integer field of every entry fits in int64 (one C pass: numpy refuses the rest
    with OverflowError; 0 and None, unset, are left out)."""
    try:
        np.fromiter(filter(None, chain.from_iterable(map(_INT_FIELDS, entries))), np.int64)
    except (OverflowError, TypeError, ValueError):
        return False
    return True


def _time(v: Any) -> int | None:
    t = _int(v)
    return t if t else None


def _sizes(v: Any) -> tuple[tuple[int, ...], ...]:
    if not v:
        return ()
    if sum(map(len, v)) > MAX_SIZE_CELLS_PER_ENTRY:
        raise ValueError("size lists too long")
    return tuple([tuple(map(int, s)) for s in v])


def _text(v: Any) -> str:
    """A string field: strings and numbers only (``str`` of a nested container would recurse
    through whatever depth a hostile dump built; such an entry is skipped instead)."""
    if type(v) is str:
        return v
    if isinstance(v, int | float | bytes) or v is None:
        return str(v)
    raise TypeError(f"expected text, got {type(v).__name__}")


#: profiling name → (backend, op): a job has a handful of distinct names and 10^5 entries.
_OPS: dict[str, tuple[str, str]] = {}


def _backend_op(profiling: str) -> tuple[str, str]:
    hit = _OPS.get(profiling)
    if hit is None:
        backend, _, op_part = profiling.partition(":")
        if not op_part:
            backend, op_part = "", profiling
        hit = (backend, op_part.split(" ", 1)[0])
        if len(_OPS) < 4096:
            _OPS[profiling] = hit
    return hit


def _bool(v: Any) -> bool:
    return v.lower() == "true" if isinstance(v, str) else bool(v)


def entries_by_column(rank: int, raw: list[Any]) -> list[FrEntry] | None:
    """Every entry of a dump at once, when all are well-formed in the types PyTorch's pickle
    writes (ints, strings, bools, lists of int lists, every key the fields need): one
    ``msgspec.convert`` builds and type-checks the records in C (strict: no bool for an int,
    no number for a string, no container where text belongs, fixed nesting), instead of a
    dozen Python calls per entry. The records are those :func:`_entry` makes; None (any entry
    malformed, or the JSON form's stringified numbers) sends the dump to the per-entry
    reader, which converts or skips bad entries one by one."""
    if not raw:
        return []
    try:  # sizes bounded before anything is built from them (a memo bomb would expand here)
        if _size_cells(raw) > SIZE_CELLS_PER_ENTRY_AVERAGE * len(raw):
            return None
    except (TypeError, AttributeError):
        return None
    try:
        entries = msgspec.convert(raw, list[FrEntry])
        seq = _p2p_seq_ids(raw, entries)
    except (msgspec.MsgspecError, KeyError):
        return None
    if not _within_int64(entries) or not all(
            _INT64_MIN <= v <= _INT64_MAX for _, v in seq):
        return None
    names = list(map(_PROFILING_NAME, entries))
    ops = {p: _backend_op(p) for p in set(names)}
    backend_of, op_of = ({p: pair[i] for p, pair in ops.items()} for i in (0, 1))
    _each(setattr, entries, repeat("rank"), repeat(rank))
    _each(setattr, entries, repeat("backend"), map(backend_of.__getitem__, names))
    _each(setattr, entries, repeat("op"), map(op_of.__getitem__, names))
    for e, seq_id in seq:
        e.seq_id = seq_id
    for field in ("time_started_ns", "time_completed_ns"):
        if 0 in map(attrgetter(field), entries):  # the JSON form's "unset"
            _each(setattr, entries, repeat(field),
                  [v or None for v in map(attrgetter(field), entries)])
    return entries


_PROFILING_NAME = attrgetter("profiling_name")
_RECORD_ID = attrgetter("record_id")


def _each(fn: Callable[..., object], *iterables: Iterable[Any]) -> None:
    """Call a C function over the iterables for its effect (no Python frame per item)."""
    deque(map(fn, *iterables), maxlen=0)


def _p2p_seq_ids(raw: list[Any], entries: list[FrEntry]) -> list[tuple[FrEntry, int]]:
    """Each p2p entry with its ``p2p_seq_id`` (its ``seq_id``); KeyError or ValidationError
    when one lacks it or it is not an int."""
    if True not in map(attrgetter("is_p2p"), entries):
        return []
    seq = [(e, d["p2p_seq_id"]) for d, e in zip(raw, entries, strict=True) if e.is_p2p]
    if {type(v) for _, v in seq} != {int}:
        raise msgspec.ValidationError("p2p_seq_id is not an int")
    return seq


def _entry(rank: int, e: Any) -> FrEntry | None:
    """One entry, or None when it lacks what matching needs (counted by the caller)."""
    try:
        name, desc = e["process_group"]
        profiling = _text(e["profiling_name"])
        backend, op = _backend_op(profiling)
        is_p2p = _bool(e.get("is_p2p", False))
        seq_key = "p2p_seq_id" if is_p2p else "collective_seq_id"
        return FrEntry(
            rank=rank, record_id=_int(e["record_id"]) or 0, pg_id=_int(e.get("pg_id"), -1) or 0,
            group=(_text(name), _text(desc)), seq_id=_int(e[seq_key]) or 0, is_p2p=is_p2p,
            backend=backend, op=op, profiling_name=profiling,
            input_sizes=_sizes(e.get("input_sizes")),
            output_sizes=_sizes(e.get("output_sizes")),
            input_dtypes=tuple([_text(d) for d in e.get("input_dtypes") or ()]),
            output_dtypes=tuple([_text(d) for d in e.get("output_dtypes") or ()]),
            state=_text(e.get("state", "")), retired=_bool(e.get("retired", False)),
            time_created_ns=_int(e.get("time_created_ns"), 0) or 0,
            time_started_ns=_time(e.get("time_discovered_started_ns")),
            time_completed_ns=_time(e.get("time_discovered_completed_ns")),
            timeout_ms=_int(e.get("timeout_ms")))
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
        return None


def _ranks_hinted_by_pg_config(dumps: Any) -> set[int]:
    """Ranks named by any ``pg_config`` membership list — a hint about world size only."""
    hinted: set[int] = set()
    for d in dumps:
        for cfg in d.pg_config.values():
            ranks = cfg.get("ranks") if isinstance(cfg, dict) else None
            try:
                parsed = json.loads(ranks) if isinstance(ranks, str) else ranks
                hinted.update(r for r in map(int, parsed or ()) if 0 <= r < MAX_WORLD_SIZE)
            except (ValueError, TypeError, OverflowError, RecursionError):
                continue
    return hinted
