"""Untrusted and broken input: a clear one-line error, exit USAGE, and nothing executes."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
from stormotel.analyzers.stalls.fr_loader import DumpError, load_dump_dir, load_dump_file
from stormotel.analyzers.stalls.safe_unpickle import UnsafePickleError, loads_plain

from stormotel import exitcodes
from tests.stalls.helpers import run_cli


class _Exploit:
    """Pickles to a call of os.system — what a hostile 'dump' would contain."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def _dump_bytes() -> bytes:
    entry = {"record_id": 0, "pg_id": 0, "process_group": ("0", "default_pg"),
             "collective_seq_id": 1, "p2p_seq_id": 0, "op_id": 1,
             "profiling_name": "nccl:all_reduce", "time_created_ns": 1, "input_sizes": [[4]],
             "input_dtypes": ["Float"], "output_sizes": [[4]], "output_dtypes": ["Float"],
             "state": "completed", "time_discovered_started_ns": None,
             "time_discovered_completed_ns": 2, "retired": True, "timeout_ms": 600000,
             "is_p2p": False}
    return pickle.dumps({"version": "2.10", "pg_config": {}, "pg_status": {},
                         "entries": [entry] * 50})


def test_forbidden_global_is_refused_and_never_called(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"version": "2.10", "entries": [_Exploit(marker)]})
    with pytest.raises(UnsafePickleError, match=r"refused global (posix|os|nt)\.system"):
        loads_plain(payload)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "nccl_trace_rank_0").write_bytes(payload)
    with pytest.raises(DumpError, match="nccl_trace_rank_0: refused global"):
        load_dump_dir(tmp_path / "d")
    proc = run_cli("--flight-recorder", str(tmp_path / "d"))
    assert proc.returncode == exitcodes.USAGE
    assert "refused global" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not marker.exists()  # nothing executed, through the API or the CLI


def test_other_globals_are_refused_too() -> None:
    for obj in (set, Path("x"), range(3), print):  # each pickles as a global reference
        data = pickle.dumps({"entries": obj, "version": "2.10"})
        with pytest.raises(UnsafePickleError):
            loads_plain(data)


def test_plain_containers_load() -> None:
    data = _dump_bytes()
    assert loads_plain(data)["entries"][0]["process_group"] == ("0", "default_pg")
    assert loads_plain(pickle.dumps({"s": frozenset({1, 2}), "t": (1.5, None, b"x")})) == {
        "s": frozenset({1, 2}), "t": (1.5, None, b"x")}


@pytest.mark.parametrize(("content", "reason"), [
    (b"", "empty file"),
    (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4, "neither a pickle nor JSON"),
    (_dump_bytes()[: len(_dump_bytes()) // 2], "truncated pickle"),
    (b"\x80\x04\x95garbage-that-is-not-a-pickle", "pickle"),
    (b'{"version": "2.10"', "not valid JSON"),
    (b'{"version": "3.0", "entries": []}', "format version '3.0' is not supported"),
    (b'{"hello": 1}', "no 'version' and 'entries'"),
])
def test_broken_dump_files_give_one_line_errors(tmp_path: Path, content: bytes,
                                                reason: str) -> None:
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(content)
    with pytest.raises(DumpError, match=reason):
        load_dump_file(path)
    proc = run_cli("--flight-recorder", str(tmp_path))
    assert proc.returncode == exitcodes.USAGE
    assert str(path) in proc.stderr and "Traceback" not in proc.stderr


def test_folder_without_dumps_and_missing_folder(tmp_path: Path) -> None:
    (tmp_path / "README").write_text("no dumps here")
    with pytest.raises(DumpError, match="no Flight Recorder dumps"):
        load_dump_dir(tmp_path)
    proc = run_cli("--flight-recorder", str(tmp_path / "nope"))
    assert proc.returncode == exitcodes.USAGE and "no such file or folder" in proc.stderr


@pytest.mark.parametrize(("content", "reason"), [
    (b"", "empty file"),
    (bytes(range(256)) * 8, "binary file"),
])
def test_bad_log_files(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "rank0.log"
    path.write_bytes(content)
    proc = run_cli("--logs", str(path))
    assert proc.returncode == exitcodes.USAGE
    assert reason in proc.stderr and str(path) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unmatched_log_glob_and_bad_world_size(tmp_path: Path) -> None:
    proc = run_cli("--logs", str(tmp_path / "*.log"))
    assert proc.returncode == exitcodes.USAGE and "no file matches" in proc.stderr
    log = tmp_path / "r.log"
    log.write_text("hello\n")
    proc = run_cli("--logs", str(log), "--world-size", "0")
    assert proc.returncode == exitcodes.USAGE and "--world-size" in proc.stderr


def _entries(n: int) -> list[dict[str, object]]:
    return [{"record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"),
             "collective_seq_id": i + 1, "p2p_seq_id": 0, "profiling_name": "nccl:all_reduce",
             "input_sizes": [[4, 4]], "input_dtypes": ["Float"], "output_sizes": [[4, 4]],
             "output_dtypes": ["Float"], "state": "completed", "retired": True,
             "time_created_ns": 10 + i, "time_discovered_started_ns": None,
             "time_discovered_completed_ns": 0, "timeout_ms": 600000, "is_p2p": False}
            for i in range(n)]


_MISSING = object()


@pytest.mark.parametrize("spoil", [
    None, ("record_id", "7"), ("process_group", (["x"], "y")), ("input_sizes", [[4, "x"]]),
    ("is_p2p", "true"), ("input_dtypes", [["nested"]]), ("pg_id", 1.5),
    # what a typed conversion must not let through: bools for numbers and back, text that
    # Python would iterate, bytes, None where the per-entry reader reads "unset", keys missing
    ("record_id", True), ("retired", 1), ("input_sizes", [[4, True]]), ("input_sizes", [[[4]]]),
    ("process_group", "xy"), ("process_group", ("a", "b", "c")), ("state", b"completed"),
    ("input_dtypes", "Float"), ("profiling_name", ["nccl:all_reduce"]), ("input_sizes", None),
    ("output_dtypes", None), ("time_created_ns", None), ("pg_id", None), ("timeout_ms", "6"),
    ("collective_seq_id", _MISSING), ("record_id", _MISSING), ("process_group", _MISSING)])
def test_column_reader_matches_the_entry_reader_or_declines(tmp_path, spoil):
    """One odd entry sends the whole dump to the per-entry reader (which skips or converts it
    as before); well-formed dumps give identical records either way."""
    from stormotel.analyzers.stalls import fr_loader

    raw = _entries(50)
    if spoil is not None:
        raw[17][spoil[0]] = spoil[1]
        if spoil[1] is _MISSING:
            del raw[17][spoil[0]]
    one_by_one = [e for e in (fr_loader._entry(3, x) for x in raw) if e]
    columns = fr_loader.entries_by_column(3, raw)
    assert (columns is None) == (spoil is not None)
    if columns is not None:
        assert columns == one_by_one
    path = tmp_path / "nccl_trace_rank_3"
    path.write_bytes(pickle.dumps({"version": "2.10", "entries": raw, "pg_status": {}}))
    dump = load_dump_file(path)
    assert dump.entries == sorted(one_by_one, key=lambda e: e.record_id)
    assert dump.skipped_entries == len(raw) - len(one_by_one)


def test_column_reader_takes_p2p_sequence_numbers(tmp_path):
    """A p2p entry's ``seq_id`` is its ``p2p_seq_id`` on both readers; one without it (or with
    a non-int) sends the dump to the per-entry reader, which skips that entry."""
    from stormotel.analyzers.stalls import fr_loader

    raw = _entries(6)
    for i in (2, 4):
        raw[i].update(is_p2p=True, p2p_seq_id=100 + i, profiling_name="nccl:send 0->1")
    one_by_one = [e for e in (fr_loader._entry(3, x) for x in raw) if e]
    columns = fr_loader.entries_by_column(3, raw)
    assert columns == one_by_one
    assert [e.seq_id for e in columns] == [1, 2, 102, 4, 104, 6]
    assert {(e.backend, e.op) for e in columns} == {("nccl", "all_reduce"), ("nccl", "send")}
    assert {e.rank for e in columns} == {3}
    # keys a dump may carry under the names of the fields the loader sets never reach them
    for key, value in (("rank", 9), ("backend", "x"), ("op", "y"), ("rank", "nine")):
        keyed = [dict(x, **{key: value}) for x in raw]
        assert fr_loader.entries_by_column(3, keyed) in (None, one_by_one)
        assert [e for e in (fr_loader._entry(3, x) for x in keyed) if e] == one_by_one
    for spoilt in (_MISSING, "7", True):
        spoiled = [dict(x) for x in raw]
        spoiled[4]["p2p_seq_id"] = spoilt
        if spoilt is _MISSING:
            del spoiled[4]["p2p_seq_id"]
        assert fr_loader.entries_by_column(3, spoiled) is None
