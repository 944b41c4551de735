"""``stormotel estimate`` as users run it: a subprocess, its stdout, stderr, files and exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stormotel import exitcodes
from stormotel.estimate.report import CATEGORIES
from stormotel.tracker import load_estimate

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stormotel", "estimate", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_table_fits() -> None:
    proc = run("examples.estimate_models:mlp_adam", "--device-memory", "80GiB")
    assert proc.returncode == exitcodes.OK, proc.stderr
    out = proc.stdout
    for name in CATEGORIES:
        assert name in out
    assert "FITS: peak" in out and "of 80.00 GiB device memory" in out
    assert "MLP.fc1" in out  # module breakdown to the default depth 2
    assert "iteration 2/2" in proc.stderr  # progress goes to stderr


def test_json_to_file_does_not_fit(tmp_path: Path) -> None:
    out = tmp_path / "estimate.json"
    proc = run("examples.estimate_models:transformer_adamw", "--format", "json", "--output",
               str(out), "--device-memory", "1MiB", "--depth", "1", "--iterations", "3", "-q")
    assert proc.returncode == exitcodes.FINDINGS, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""
    data = json.loads(out.read_text())
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
    assert load_estimate(out) == data["peak_bytes"]


def test_real_mode_reports_tracker_accuracy_as_json() -> None:
    proc = run("examples.estimate_models:mlp_sgd", "--mode", "real", "--format", "json", "-q")
    assert proc.returncode == exitcodes.OK, proc.stderr
    assert proc.stderr == ""  # the profiler's own start/stop chatter is kept off stderr
    acc = json.loads(proc.stdout)["accuracy"]
    assert acc["measured_with"].startswith("the CPU allocator")
    assert acc["ratio"] == pytest.approx(1.0, abs=0.05)


def test_fsdp_model_uses_fsdp_tracker_shards_parameters_and_fake_matches_real() -> None:
    results = {}
    for mode in ("fake", "real"):
        proc = run("examples.estimate_models:fsdp_mlp_adam", "--mode", mode, "--format", "json",
                   "--round-to", "1", "-q")
        assert proc.returncode == exitcodes.OK, proc.stderr
        results[mode] = json.loads(proc.stdout)
    data = results["real"]
    assert data["tracker"] == results["fake"]["tracker"] == "FSDPMemTracker"
    # Without the warm-up step, the first fake step counted DTensor propagation (+93 %).
    assert results["fake"]["peak_bytes"] == pytest.approx(data["peak_bytes"], rel=0.01)
    assert data["accuracy"]["ratio"] == pytest.approx(1.0, abs=0.05)
    from examples.estimate_models import mlp_adam

    full = sum(p.numel() * p.element_size() for p in mlp_adam()[0].parameters())
    # Each of 4 ranks keeps a quarter of the parameters (padding makes it at most a bit more).
    assert full / 4 <= data["tracker_categories"]["Sharded Param"] <= full / 4 * 1.05
    assert data["optimizer"]["state_bytes"] == 2 * data["tracker_categories"]["Sharded Param"]


@pytest.mark.parametrize(("args", "fragment"), [
    (["tests.estimate.nope:build"], "no module named 'tests.estimate.nope'"),
    (["tests.estimate.factories:wrong_shape"], "must return (model, optimizer, batch)"),
    (["tests.estimate.factories:raises"],
     "raised ValueError: dataset path /data/missing does not exist (at factories.py:"),
    (["tests.estimate.factories:data_dependent"], "try --mode real"),
    (["examples.estimate_models:mlp_sgd", "--device-memory", "80G"], "GiB (binary)"),
])
def test_user_errors_exit_usage_without_traceback(args: list[str], fragment: str) -> None:
    proc = run(*args, "-q")
    assert proc.returncode == exitcodes.USAGE
    assert fragment in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_unwritable_output_is_a_sink_failure(tmp_path: Path) -> None:
    proc = run("examples.estimate_models:mlp_sgd", "-q", "--output",
               str(tmp_path / "missing-dir" / "e.json"))
    assert proc.returncode == exitcodes.SINK_FAILURE
    assert "cannot write" in proc.stderr and "Traceback" not in proc.stderr


def test_help_explains_every_flag() -> None:
    proc = run("--help")
    assert proc.returncode == 0
    for flag in ("--iterations", "--mode", "--device-memory", "--depth", "--format", "--output",
                 "--round-to", "--quiet"):
        assert flag in proc.stdout
