"""The Flight Recorder dump the tracker asks for at a stall: a real gloo process group, and the
call shapes of releases that differ."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from stormotel import fr_dump

REPO = Path(__file__).resolve().parents[2]


def test_a_real_dump_is_written_without_importing_the_compiler(tmp_path: Path) -> None:
    """With the recorder's stack traces torch imports torch._dynamo and torch._inductor inside
    the rank to symbolise them (seconds, and in a hung 20-rank job on 2 cores no dump at all);
    the tracker's dump must not."""
    pytest.importorskip("torch")
    script = textwrap.dedent(f"""
        import json, os, sys
        os.environ["TORCH_FR_BUFFER_SIZE"] = "100"
        import torch, torch.distributed as dist
        from stormotel.fr_dump import dump_flight_recorder
        dist.init_process_group("gloo", init_method="file://{tmp_path}/init", rank=0,
                                world_size=1)
        for _ in range(3):
            dist.all_reduce(torch.ones(4))
        path = dump_flight_recorder(__import__("pathlib").Path("{tmp_path}/fr"), 0)
        print(json.dumps({{"path": str(path),
                          "inductor": "torch._inductor" in sys.modules,
                          "dynamo": "torch._dynamo" in sys.modules}}))
        os._exit(0)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["path"] == str(tmp_path / "fr" / "nccl_trace_rank_0")
    assert not out["inductor"] and not out["dynamo"], out

    entries = pickle.loads(Path(out["path"]).read_bytes())["entries"]  # our own test's dump
    assert [e["profiling_name"] for e in entries] == ["gloo:all_reduce"] * 3
    assert all(not e.get("frames") for e in entries)


def _fake_torch(monkeypatch: pytest.MonkeyPatch, fn: object) -> None:
    c10d = types.SimpleNamespace(_dump_fr_trace=fn)
    monkeypatch.setitem(sys.modules, "torch",
                        types.SimpleNamespace(_C=types.SimpleNamespace(_distributed_c10d=c10d)))


def test_the_dump_asks_for_collectives_without_stack_traces(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[object, ...]] = []

    def dump(*args: object) -> bytes:
        calls.append(args)
        return b"payload"

    _fake_torch(monkeypatch, dump)
    path = fr_dump.dump_flight_recorder(tmp_path, 3, {"TORCH_FR_BUFFER_SIZE": "10"})
    assert calls == [(True, False, False)]
    assert path == tmp_path / "nccl_trace_rank_3" and path.read_bytes() == b"payload"


def test_a_release_whose_dump_takes_no_arguments_is_called_without(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def dump() -> bytes:
        return b"old"

    _fake_torch(monkeypatch, dump)
    path = fr_dump.dump_flight_recorder(tmp_path, 0, {"TORCH_NCCL_TRACE_BUFFER_SIZE": "10"})
    assert path is not None and path.read_bytes() == b"old"


def test_nothing_is_asked_when_the_recorder_is_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def dump(*args: object) -> bytes:
        raise AssertionError("asked for a dump with the recorder off")

    _fake_torch(monkeypatch, dump)
    assert fr_dump.dump_flight_recorder(tmp_path, 0, {"TORCH_FR_BUFFER_SIZE": "0"}) is None
    assert list(tmp_path.iterdir()) == []


def test_the_newer_buffer_variable_wins_as_in_torch() -> None:
    """torch's getCvarInt reads {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"} so the
    first name set decides (FlightRecorder.hpp, torch 2.13)."""
    assert fr_dump.recorder_enabled({"TORCH_NCCL_TRACE_BUFFER_SIZE": "10"})
    assert fr_dump.recorder_enabled({"TORCH_FR_BUFFER_SIZE": "10"})
    assert not fr_dump.recorder_enabled({"TORCH_FR_BUFFER_SIZE": "0",
                                         "TORCH_NCCL_TRACE_BUFFER_SIZE": "10"})
    assert fr_dump.recorder_enabled({"TORCH_FR_BUFFER_SIZE": "5",
                                     "TORCH_NCCL_TRACE_BUFFER_SIZE": "0"})
    assert not fr_dump.recorder_enabled({})
