"""A replica's traceback at the entry of a "main process first" guard is a stall, never
"healthy" (fresh4's dev llamafactory-360 read exit 0 before log_main_first).

The tracebacks are written the way CPython prints them through each guard's source (transformers
``TrainingArguments.main_process_first``, accelerate ``PartialState._goes_first``, yolov5
``torch_distributed_zero_first``); they are not the case logs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stormotel import exitcodes
from tests.stalls.helpers import analyze_log_text

PY = "/opt/conda/lib/python3.10"
BAR = "Running tokenizer on dataset:  61%|██████    | 61000/100000 [29:58<18:41, 34.7 examples/s]"
TRANSFORMERS_ENTRY = BAR + f"""Traceback (most recent call last):
  File "/work/train.py", line 88, in <module>
    main()
  File "/work/train.py", line 41, in main
    with training_args.main_process_first(desc="dataset map tokenization"):
  File "{PY}/contextlib.py", line 135, in __enter__
    return next(self.gen)
  File "{PY}/site-packages/transformers/training_args.py", line 2110, in main_process_first
    dist.barrier()
"""
ACCELERATE_ENTRY = f"""[rank3]: Traceback (most recent call last):
[rank3]:   File "/work/prep.py", line 12, in <module>
[rank3]:     with state.local_main_process_first():
[rank3]:   File "{PY}/contextlib.py", line 137, in __enter__
[rank3]:     return next(self.gen)
[rank3]:   File "{PY}/site-packages/accelerate/state.py", line 430, in _goes_first
[rank3]:     self.wait_for_everyone()
"""
YOLO_ENTRY = f"""Traceback (most recent call last):
  File "train.py", line 230, in train
    with torch_distributed_zero_first(LOCAL_RANK):
  File "{PY}/contextlib.py", line 119, in __enter__
    return next(self.gen)
"""
#: the main process after the work, waiting in the guard's ``finally`` for the replicas
MAIN_EXIT = f"""Traceback (most recent call last):
  File "/work/train.py", line 41, in main
    with training_args.main_process_first(desc="dataset map tokenization"):
  File "{PY}/contextlib.py", line 142, in __exit__
    next(self.gen)
  File "{PY}/site-packages/transformers/training_args.py", line 2115, in main_process_first
    dist.barrier()
"""


def _analyze(tmp_path: Path, text: str) -> tuple[int, dict[str, Any]]:
    return analyze_log_text(tmp_path, "train.log", text)


@pytest.mark.parametrize("text", [TRANSFORMERS_ENTRY, ACCELERATE_ENTRY, YOLO_ENTRY],
                         ids=["transformers", "accelerate-local", "yolo-zero-first"])
def test_a_replica_at_the_guard_entry_is_undecided_with_rank_0_suspected(
        tmp_path: Path, text: str) -> None:
    code, report = _analyze(tmp_path, text)
    assert code == exitcodes.FINDINGS
    [finding] = [f for f in report["stall_findings"]
                 if f["evidence"]["pattern"] == "python.main_first_entry"]
    assert finding["kind"] == "undecided" and finding["ranks"] == []
    assert finding["confidence"] == "low"
    assert finding["evidence"]["suspects"] == [0]
    assert "main process" in finding["evidence"]["reason"]


def test_the_reporting_rank_is_kept_from_its_prefix(tmp_path: Path) -> None:
    _, report = _analyze(tmp_path, ACCELERATE_ENTRY)
    [finding] = [f for f in report["stall_findings"]
                 if f["evidence"]["pattern"] == "python.main_first_entry"]
    assert "rank(s) [3]" in finding["evidence"]["reason"]


def test_the_main_process_waiting_at_exit_is_not_read_as_a_replica(tmp_path: Path) -> None:
    _, report = _analyze(tmp_path, MAIN_EXIT)
    assert not [f for f in report.get("stall_findings") or []
                if f["evidence"]["pattern"] == "python.main_first_entry"]


def test_a_rule_that_names_the_rank_decides_first(tmp_path: Path) -> None:
    """The store message names rank 0 itself: the guard is only the fallback."""
    text = TRANSFORMERS_ENTRY + (
        "RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] "
        "via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout\n")
    _, report = _analyze(tmp_path, text)
    roots = [f for f in report["stall_findings"] if f.get("consequence_of") is None]
    assert roots and roots[0]["evidence"]["pattern"] != "python.main_first_entry"


def test_a_guard_line_without_its_entry_frame_is_not_evidence(tmp_path: Path) -> None:
    code, report = _analyze(tmp_path, "    with training_args.main_process_first(desc='x'):\n"
                                      "INFO step 1 loss 2.3\nINFO step 2 loss 2.2\n"
                                      "INFO step 3 loss 2.1\nINFO step 4 loss 2.0\n"
                                      "INFO step 5 loss 1.9\nFile \"/x/contextlib.py\", line 9, "
                                      "in __enter__\n")
    assert not [f for f in report.get("stall_findings") or []
                if f["evidence"]["pattern"] == "python.main_first_entry"]
    assert code != exitcodes.INTERNAL
