"""``stormotel estimate`` as users run it: a subprocess, its stdout, stderr, files and exit code.

One module fixture starts every invocation at once and the tests then read their own result.
The default table run, ``--help`` and an argparse error each get a fresh interpreter (what a
user starts); the other runs share one interpreter (:mod:`tests.estimate.cli_batch`: the same
entry point, file descriptors 1 and 2 captured per run), because each fresh one spent ~4 s of
CPU importing torch and the trackers, and start-up is not what those tests check.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stormotel import exitcodes
from stormotel.estimate.report import CATEGORIES
from stormotel.tracker import load_estimate

ROOT = Path(__file__).resolve().parents[2]

ERROR_CASES = {  # name → (arguments, fragment the one-line error must contain)
    "no_module": (["tests.estimate.nope:build"], "no module named 'tests.estimate.nope'"),
    "wrong_shape": (["tests.estimate.factories:wrong_shape"],
                    "must return (model, optimizer, batch)"),
    "raises": (["tests.estimate.factories:raises"],
               "raised ValueError: dataset path /data/missing does not exist (at factories.py:"),
    "untraceable": (["tests.estimate.factories:data_dependent"], "try --mode real"),
    "bad_size": (["examples.estimate_models:mlp_sgd", "--device-memory", "80G"], "GiB (binary)"),
}


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("estimate-cli")


@pytest.fixture(scope="module")
def runs(out_dir: Path) -> Iterator[dict[str, subprocess.CompletedProcess[str]]]:
    fresh: dict[str, list[str]] = {
        "table": ["examples.estimate_models:mlp_adam", "--device-memory", "80GiB"],
        "help": ["--help"],
        "bad_size": [*ERROR_CASES["bad_size"][0], "-q"],
        "no_module": [*ERROR_CASES["no_module"][0], "-q"],  # told before torch is imported
    }
    batch: dict[str, list[str]] = {
        **{name: [*args, "-q"] for name, (args, _) in ERROR_CASES.items() if name not in fresh},
        "json_file": ["examples.estimate_models:transformer_adamw", "--format", "json",
                      "--output", str(out_dir / "estimate.json"), "--device-memory", "1MiB",
                      "--depth", "1", "--iterations", "3", "-q"],
        "real": ["examples.estimate_models:mlp_sgd", "--mode", "real", "--format", "json", "-q"],
        "unwritable": ["examples.estimate_models:mlp_sgd", "-q", "--output",
                       str(out_dir / "missing-dir" / "e.json")],
        # last: the FSDP factory leaves PyTorch's fake process group initialised
        "fsdp_fake": ["examples.estimate_models:fsdp_mlp_adam", "--format", "json",
                      "--round-to", "1", "-q"],
        "fsdp_real": ["examples.estimate_models:fsdp_mlp_adam", "--mode", "real", "--format",
                      "json", "--round-to", "1", "-q"],
    }
    batch_dir = out_dir / "batch"
    batch_dir.mkdir()
    (batch_dir / "runs.json").write_text(json.dumps(batch))
    procs = {name: subprocess.Popen([sys.executable, "-m", "stormotel", "estimate", *args],
                                    cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
             for name, args in fresh.items()}
    procs["batch"] = subprocess.Popen([sys.executable, "-m", "tests.estimate.cli_batch",
                                       str(batch_dir)], cwd=ROOT, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
    results: dict[str, subprocess.CompletedProcess[str]] = {}
    try:
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=240)
            results[name] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout,
                                                        stderr)
        assert results["batch"].returncode == 0, results["batch"].stderr[-2000:]
        for name, args in batch.items():
            results[name] = subprocess.CompletedProcess(
                args, int((batch_dir / f"{name}.code").read_text()),
                (batch_dir / f"{name}.out").read_text(), (batch_dir / f"{name}.err").read_text())
        yield results
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_table_fits(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = runs["table"]
    assert proc.returncode == exitcodes.OK, proc.stderr
    out = proc.stdout
    for name in CATEGORIES:
        assert name in out
    assert "FITS: peak" in out and "of 80.00 GiB device memory" in out
    assert "MLP.fc1" in out  # module breakdown to the default depth 2
    assert "iteration 2/2" in proc.stderr  # progress goes to stderr


def test_json_to_file_does_not_fit(runs: dict[str, subprocess.CompletedProcess[str]],
                                   out_dir: Path) -> None:
    proc = runs["json_file"]
    assert proc.returncode == exitcodes.FINDINGS, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""
    path = out_dir / "estimate.json"
    data = json.loads(path.read_text())
    assert data["schema"] == "stormotel.estimate/v1"
    assert set(CATEGORIES) <= set(data["categories"])
    assert sum(data["categories"][c] for c in CATEGORIES) == data["peak_bytes"]
    assert data["device_memory_bytes"] == 2**20
    assert data["fits"] is False
    assert data["headroom_bytes"] == 2**20 - data["peak_bytes"] < 0
    assert [m["module"] for m in data["modules"]] == ["TinyTransformerBlock"]
    assert len(data["per_iteration"]) == 3 and data["round_to"] == 512
    assert data["accuracy"] is None and data["mode"] == "fake"
    # The tracker reads this file back as the rank's estimate (MemoryTracker(estimate_bytes=)).
    assert load_estimate(path) == data["peak_bytes"]


def test_real_mode_reports_tracker_accuracy_as_json(
        runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = runs["real"]
    assert proc.returncode == exitcodes.OK, proc.stderr
    assert proc.stderr == ""  # the profiler's own start/stop chatter is kept off stderr
    acc = json.loads(proc.stdout)["accuracy"]
    assert acc["measured_with"].startswith("the CPU allocator")
    assert acc["ratio"] == pytest.approx(1.0, abs=0.05)


def test_fsdp_model_uses_fsdp_tracker_shards_parameters_and_fake_matches_real(
        runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    results = {}
    for mode in ("fake", "real"):
        proc = runs[f"fsdp_{mode}"]
        assert proc.returncode == exitcodes.OK, proc.stderr
        results[mode] = json.loads(proc.stdout)
    data = results["real"]
    assert data["tracker"] == results["fake"]["tracker"] == "FSDPMemTracker"
    # Without the warm-up step, the first fake step counted DTensor propagation (+25 % peak).
    assert results["fake"]["peak_bytes"] == pytest.approx(data["peak_bytes"], rel=0.01)
    assert data["accuracy"]["ratio"] == pytest.approx(1.0, abs=0.05)
    from examples.estimate_models import mlp_adam

    full = sum(p.numel() * p.element_size() for p in mlp_adam()[0].parameters())
    # Each of 4 ranks keeps a quarter of the parameters (padding makes it at most a bit more).
    assert full / 4 <= data["tracker_categories"]["Sharded Param"] <= full / 4 * 1.05
    assert data["optimizer"]["state_bytes"] == 2 * data["tracker_categories"]["Sharded Param"]


@pytest.mark.parametrize("name", list(ERROR_CASES))
def test_user_errors_exit_usage_without_traceback(
        runs: dict[str, subprocess.CompletedProcess[str]], name: str) -> None:
    proc = runs[name]
    assert proc.returncode == exitcodes.USAGE
    assert ERROR_CASES[name][1] in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_a_missing_factory_module_is_told_before_torch_is_imported() -> None:
    """The commonest mistake, a typo in the spec, costs the user no torch import (~4 s)."""
    code = ("import sys; from stormotel.estimate.cli import main; "
            "rc = main(['tests.estimate.nope:build', '-q']); print(rc, 'torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout.split() == [str(exitcodes.USAGE), "False"], proc.stderr
    assert "no module named 'tests.estimate.nope'" in proc.stderr


def test_unwritable_output_is_a_sink_failure(
        runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = runs["unwritable"]
    assert proc.returncode == exitcodes.SINK_FAILURE
    assert "cannot write" in proc.stderr and "Traceback" not in proc.stderr


def test_help_explains_every_flag(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = runs["help"]
    assert proc.returncode == 0
    for flag in ("--iterations", "--mode", "--device-memory", "--depth", "--format", "--output",
                 "--round-to", "--quiet"):
        assert flag in proc.stdout
