"""The estimate's table and JSON without running a model: verdicts, missing figures, accuracy."""

from __future__ import annotations

import json

from stormotel.estimate.report import (
    CATEGORIES,
    Accuracy,
    Estimate,
    ModuleRow,
    OptimizerState,
    render_table,
)


def _estimate(**overrides: object) -> Estimate:
    categories = dict.fromkeys(CATEGORIES, 0) | {"parameters": 1024, "activations": 3072}
    fields: dict[str, object] = {
        "factory": "m:f", "mode": "real", "iterations": 2, "round_to": 512,
        "tracker": "FSDPMemTracker", "device": "cuda:0", "categories": categories,
        "peak_bytes": 4096, "peak_during": "iteration 1 backward",
        "optimizer": OptimizerState("Adam", 2048, 512, 0),
        "modules": [ModuleRow("Net", 1, None, None, None, None, 4096, 4096),
                    ModuleRow("Net.fc", 2, None, None, None, None, 3000, 3500)],
        "accuracy": Accuracy(4096, 5120, "torch.cuda.max_memory_allocated"),
        "device_memory_bytes": 2048}
    fields.update(overrides)
    return Estimate(**fields)  # type: ignore[arg-type]


def test_table_verdict_modules_and_accuracy() -> None:
    text = render_table(_estimate())
    assert "DOES NOT FIT: peak 4.00 KiB of 2.00 KiB device memory, headroom -2.00 KiB" in text
    assert "  Net.fc" in text  # indented by depth
    fc_row = next(line for line in text.splitlines() if "Net.fc" in line)
    assert fc_row.split()[1:5] == ["-", "-", "-", "-"]  # FSDPMemTracker has no per-module sizes
    assert "= 0.8000 (measured with torch.cuda.max_memory_allocated)" in text
    assert "no fit check" in render_table(_estimate(device_memory_bytes=None))


def test_json_contract() -> None:
    data = json.loads(_estimate(device_memory_bytes=8192).to_json())
    assert data["schema"] == "stormotel.estimate/v1"
    assert data["fits"] is True and data["headroom_bytes"] == 4096
    assert data["optimizer"] == {"class": "Adam", "state_bytes": 2048, "step_tensor_bytes": 512,
                                 "step_temporaries_bytes": 0}
    assert data["accuracy"]["ratio"] == 0.8
    assert data["modules"][1]["parameter_bytes"] is None
    no_limit = json.loads(_estimate(device_memory_bytes=None, accuracy=None).to_json())
    assert no_limit["fits"] is None and no_limit["headroom_bytes"] is None
    assert no_limit["accuracy"] is None
