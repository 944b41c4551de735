"""benchmarks/eval_exit_code_first.py at its command line: the first exit-code report of each
launcher, found through the analyzer's scanners, compared with a case's label.

Synthetic cases (labelled, ``"real": true`` so the script counts them) carry one launcher's
lines each, in the emitters' own words (the formats the scanners' docstrings quote from
source); the real corpus run checks the script's rows agree with the labels it read and that
fresh10 — held out for the decision this measure informs — and fresh11, fresh12, fresh13 and
fresh14 — held out whole — are never read. The script takes
about 2 s over the corpus, so it runs here (docs/benchmarks.md, "Exit-code reports").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_modules import load_benchmark

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "eval_exit_code_first.py"
ec = load_benchmark("eval_exit_code_first")

#: case id -> (its log lines, its label's ranks, the outcome the script must give)
CASES: dict[str, tuple[str, list[int] | None, str | None]] = {
    "spawn-exit-code": (
        "Traceback (most recent call last):\n"
        "  File \"train.py\", line 9, in <module>\n"
        "    mp.spawn(main_worker, nprocs=4)\n"
        "torch.multiprocessing.spawn.ProcessExitedException: process 2 terminated with exit "
        "code 1\n", [2], "culprit"),
    "spawn-signal": (  # a death signal is not an exit-code report: no row
        "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal "
        "SIGKILL\n", [1], None),
    "composer-crashed": (
        "ERROR:composer.cli.launcher:Rank 1 crashed with exit code 1.\n"
        "ERROR:composer.cli.launcher:Rank 3 crashed with exit code 1.\n", [3], "other"),
    "lightning-child": (
        "[rank: 3] Child process with PID 4242 terminated with code 1. Forcefully terminating "
        "all other processes to avoid zombies\n", None, "undecided_label"),
    "elastic-table": (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "============================================================\n"
        "train.py FAILED\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n"
        "  time      : 2024-01-01_00:00:00\n"
        "  host      : node0\n"
        "  rank      : 0 (local_rank: 0)\n"
        "  exitcode  : 1 (pid: 100)\n"
        "  error_file: <N/A>\n"
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/"
        "errors.html\n"
        "============================================================\n", [0], "culprit"),
    "elastic-table-pasted-bare": (  # no "[0]:" / time lines: read from the table's fields
        "Root Cause (first observed failure):\n"
        "rank : 1 (local_rank: 1)\n"
        "exitcode : 1\n"
        "============================================================\n", [0], "other"),
    "srun-two-tasks": (
        "srun: error: gpu7: tasks 2-3: Exited with exit code 1\n", [2], "tie"),
    "mpirun-first": (
        "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n"
        "\n"
        "  Process name: [[29973,1],5]\n"
        "  Exit code:    1\n", [5], "culprit"),
}


def _write_case(root: Path, case_id: str, text: str, ranks: list[int] | None) -> None:
    d = root / "synthetic" / case_id
    (d / "logs").mkdir(parents=True)
    (d / "logs" / "worker.log").write_text(text)
    (d / "expect.json").write_text(json.dumps({
        "id": case_id, "real": True, "half": "heldout",
        "evidence": {"logs": ["logs/worker.log"], "flight_recorder": None},
        "expected": {"ranks": ranks, "evidence_names_them": ranks is not None,
                     "kinds": ["rank_failure"], "category": None}}))




def test_first_report_per_emitter_against_labels(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    for case_id, (text, ranks, _) in CASES.items():
        _write_case(tmp_path, case_id, text, ranks)
    out = tmp_path / "out.json"
    assert ec.main(["--data", str(tmp_path), "--per-case", "--json", str(out)]) == 0
    stdout = capsys.readouterr().out
    got = {r["case"]: r for r in json.loads(out.read_text())["rows"]}
    want = {c: o for c, (_, _, o) in CASES.items() if o is not None}
    assert {c: r["outcome"] for c, r in got.items()} == want
    assert got["composer-crashed"]["rank"] == 1  # the first "crashed" line, not the last
    assert got["elastic-table"]["emitter"] == "torchelastic root cause"
    summary = json.loads(out.read_text())["summary"]["(all)"]
    # named: every row but the tie; right: the two culprits
    assert (summary["all"]["named"], summary["all"]["right"]) == (6, 3)
    assert "| spawn | 1 | 1 | 0 | 0 | 0 |" in stdout
    assert "| mpirun-first | heldout | mpirun | 5 | 1 | [5] | culprit |" in stdout


def test_wilson_lower_bound() -> None:
    assert ec.wilson_low(2, 2) == pytest.approx(0.3424, abs=1e-3)  # the textbook 2 of 2
    assert ec.wilson_low(0, 0) is None
    assert ec.wilson_low(0, 5) == 0.0


def test_corpus_rows_agree_with_labels_and_skip_the_held_out_sets(tmp_path: Path) -> None:
    out = tmp_path / "corpus.json"
    assert ec.main(["--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert rows, "the corpus holds exit-code reports (e2fgvi#56, moco#54 at least)"
    assert not {r["set"] for r in rows} & {"fresh10", "fresh11", "fresh12", "fresh13",
                                           "fresh14"}
    for r in rows:
        label = r["label"]
        want = ("tie" if r["rank"] is None else "undecided_label" if label is None
                else "culprit" if label == [r["rank"]] else "other")
        assert r["outcome"] == want, r
        assert r["exit_code"] > 0, r


def test_missing_data_folder_is_a_clear_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--data", str(tmp_path / "absent")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "no such folder" in done.stderr and "Traceback" not in done.stderr
