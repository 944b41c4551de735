"""benchmarks/compare_fr_peers.py at its boundary: the table, the JSON, a missing peer venv.

The peers themselves (torch's fr_trace, NVIDIA Resiliency Extension) live in a venv outside the
repository (benchmarks/setup_fr_peers.sh); without it the script must still score stormotel and
say, in one line, that the peers were skipped. How fr_trace's log is read is tested on the
lines it printed for the suite's size-mismatch job.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "compare_fr_peers.py"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


#: what fr_trace (torch 2.13) logged for size_mismatch_rank0 of tests/stalls/fr_jobs.py
#: (pg_config rebuilt), stack frames cut
FR_TRACE_LOG = """tabulate is not installed. Proceeding without it.
Collective sequence number: 5 has errors
internal record id: 5
group info: 0:default_pg
collective: gloo:all_reduce
input sizes: [[6]]
expected ranks: {0, 1, 2, 3}
error msg: Culprit rank 3; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[6]]' \
does not match found input sizes: '[[4]]', Culprit rank 2; Error type: SIZE_OR_SYNTAX_MISMATCH, \
Culprit rank 1; Error type: SIZE_OR_SYNTAX_MISMATCH
collective stack trace:
 all_reduce at distributed_c10d.py:3245
Not all ranks joining collective, sequence number: 6
internal record id: 6
group info: 0:default_pg
collective: gloo:all_reduce
missing ranks: {0}
expected ranks: {0, 1, 2, 3}
"""


def test_fr_trace_log_is_cut_into_its_problem_blocks() -> None:
    blocks = _load("fr_peer_drivers").parse_fr_trace_log(FR_TRACE_LOG)
    assert [(b["what"], b["seq"], b["group"], b["ranks"]) for b in blocks] == [
        ("errors", 5, "0:default_pg", [1, 2, 3]), ("not_joined", 6, "0:default_pg", [0])]


def test_scoring() -> None:
    m = _load("compare_fr_peers")
    stall, healthy = m.Truth(True, (2,)), m.Truth(False)
    assert m.score(stall, "ranks", [2]) == "right"
    assert m.score(stall, "ranks", [2, 3]) == "wrong"
    assert m.score(stall, "healthy", []) == "missed"
    assert m.score(stall, "undecided", []) == "undecided"
    assert m.score(m.Truth(True, (0, 1), undecided_ok=True), "undecided", []) == "right"
    assert m.score(healthy, "healthy", []) == "right"
    assert m.score(healthy, "ranks", [0]) == "wrong"
    assert m.score(stall, "error", []) == "error"


@pytest.mark.slow
def test_without_the_peer_venv_stormotel_is_still_scored(tmp_path: Path) -> None:
    out = tmp_path / "peers.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--only", "nccl/*", "--peer-python",
                           str(tmp_path / "no-such-venv" / "python"), "--json", str(out),
                           "--work", str(tmp_path / "work")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "fr_trace and NVRx are skipped" in proc.stderr
    assert "| nccl/pipeline-stuck-2 | [2] | [2] straggler medium **right**" in proc.stdout
    report = json.loads(out.read_text())
    assert report["peer_python"] is None
    names = [s["name"] for s in report["sets"]]
    assert names == ["nccl/pipeline-stuck-2", "nccl/pipeline-stuck-2-ring3",
                     "nccl/pipeline-stuck-2-untimed", "nccl/pipeline-healthy",
                     "nccl/send-send-deadlock", "nccl/pp-subgroup-not-joined"]
    assert all(set(s["answers"]) == {"stormotel"} for s in report["sets"])
    assert report["tallies"]["stormotel"] == {"right": 6}


def test_nvrx_trace_folders_take_their_culprits_from_the_fault_log(tmp_path: Path) -> None:
    m = _load("compare_fr_peers")
    for name, log in {"gpu_error_1st": "Fault ranks: [12, 14]\nFault delay: 180.0\n",
                      "no_log": None, "unlabelled": "nothing here\n"}.items():
        (tmp_path / name).mkdir()
        if log is not None:
            (tmp_path / name / "fault_injection.log").write_text(log)
    [(name, make)] = list(m.nvrx_trace_sets(tmp_path))
    ds = make()
    assert (name, ds.truth.ranks, ds.folder) == ("nvrx/gpu_error_1st", (12, 14),
                                                 tmp_path / "gpu_error_1st")
    assert list(m.nvrx_trace_sets(None)) == []
