"""The inventory read back to torch 1.8 and NCCL 2.7 (helper inv2): the older wordings the
grammar now reads, at the CLI boundary, and the extractor's two additions (``--extend`` keeps
the tags already read; libtorch_python.so, read at 1.8/1.9 because c10d's C++ was linked into
it then, gives its messages but not its Python bindings' docstrings).

Each line is built from the emitter's format string at the release named, not from a case:
NCCL ``src/include/socket.h`` (2.7.8 – 2.11.4) / ``src/misc/socket.cc`` (2.12.12 – 2.14.3)
``WARN("Net : Connection closed by remote peer[ %s]")``, ``src/enqueue.cc`` (2.11.4 – 2.12.12)
``WARN("Invalid intra-node rank %d for peer %d", j, peer)``, torch 1.8 – 1.9 ``NCCLUtils.hpp``
``throw std::runtime_error("NCCL communicator was aborted.")``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.stalls.helpers import root_findings as cli
from tests.stalls.helpers import run_json

REPO = Path(__file__).resolve().parents[2]


def nccl_warn(rank: int, where: str, text: str) -> str:
    """src/debug.cc: "%s:%d:%d [%d] %s:%d NCCL WARN " fmt, behind torchrun's [rankN]: prefix."""
    return f"[rank{rank}]:node-1:4242:4301 [{rank}] {where} NCCL WARN {text}\n"


@pytest.mark.parametrize("text", [
    "Net : Connection closed by remote peer",  # 2.7.8 – 2.8.4: no address
    "Net : Connection closed by remote peer node-2<45123>",  # 2.10.3 – 2.14.3
])
def test_older_nccl_peer_closed_wordings_are_the_same_victim(tmp_path: Path,
                                                             text: str) -> None:
    code, found = cli(tmp_path, nccl_warn(3, "socket.h:1", text))
    assert code == 1
    [f] = [f for f in found if f["evidence"]["category"] == "fabric"]
    assert (f["kind"], f["ranks"], f["confidence"]) == ("undecided", [], "low")
    assert f["evidence"]["pattern"] == "nccl.warn.peer_closed"
    assert 3 not in f["evidence"]["suspects"], "the reporter lost its peer: a victim"


def test_nccl_2_11_invalid_intra_node_rank_is_the_reporters_own_failure(tmp_path: Path) -> None:
    code, found = cli(tmp_path, nccl_warn(3, "enqueue.cc:897", "Invalid intra-node rank -1 "
                                          "for peer 5"))
    assert code == 1
    assert found and all(f["confidence"] != "high" for f in found)
    assert found[0]["evidence"]["pattern"] == "nccl.warn.failure"
    assert 5 not in found[0]["ranks"] and 5 not in found[0]["evidence"].get("suspects", [])


def test_torch_1_8_aborted_communicator_without_a_rank_is_undecided(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("Traceback (most recent call last):\n  File \"train.py\", line 9, in "
                   "<module>\nRuntimeError: NCCL communicator was aborted.\n")
    code, report = run_json("--logs", str(log))
    roots: list[dict[str, Any]] = [f for f in report["stall_findings"]
                                   if f["consequence_of"] is None]
    assert code == 1, roots
    assert roots[0]["kind"] == "undecided" and roots[0]["ranks"] == []
    assert roots[0]["evidence"]["pattern"] == "torch.nccl.comm_aborted"
    assert roots[0]["evidence"]["suspects"] == []


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("stall_inventory",
                                                  REPO / "scripts" / "stall_inventory.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["stall_inventory"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_extend_keeps_what_was_read_and_skips_the_bindings_docstrings(tmp_path: Path) -> None:
    si = _script()
    old = {"emitter": "pytorch.c10d-cpp", "file": "libtorch_cuda.so", "call": "c10::str",
           "level": "error", "template": "Watchdog caught collective operation timeout: ",
           "tags": ["v2.0.0"], "expected": "handled"}
    data = tmp_path / "inv.json"
    si.save([old], data)
    torch = tmp_path / "src" / "torch-1.8.0"
    torch.mkdir(parents=True)
    (torch / "done").touch()
    (torch / "libtorch_python.so.strings").write_text(
        "Watchdog caught collective operation timeout: \n"
        "NCCL communicator was aborted.\n"
        "    world_size (int): The total number of processes using the store\n"
        "Waits for each key in ``keys`` to be added to the store, and throws an exception\n"
        "the workers using the store.\n"
        "Gets the timeout of the store.\n")
    assert si.main(["--extract", "--extend", "--data", str(data), "--torch-src",
                    str(tmp_path / "src"), "--mirrors", str(tmp_path / "none")]) == 0
    got = {(e["file"], e["template"]): e for e in json.loads(data.read_text())["entries"]}
    assert got[("libtorch_cuda.so", old["template"])]["tags"] == ["v2.0.0"]
    assert got[("libtorch_cuda.so", old["template"])]["expected"] == "handled"
    assert got[("libtorch_python.so", old["template"])]["tags"] == ["v1.8.0"]
    assert got[("libtorch_python.so", "NCCL communicator was aborted.")]["tags"] == ["v1.8.0"]
    assert len(got) == 3, sorted(got)  # the four docstring lines are not messages
    # without --extend the data file is what the sources on this machine give, nothing more
    assert si.main(["--extract", "--data", str(data), "--torch-src", str(tmp_path / "src"),
                    "--mirrors", str(tmp_path / "none")]) == 0
    assert len(json.loads(data.read_text())["entries"]) == 2
