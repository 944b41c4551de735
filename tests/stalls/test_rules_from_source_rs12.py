"""Rules written from the emitters' source (helper rs12), at the CLI (``stormotel analyze --logs``).

Every line below is SYNTHETIC: built from the emitter's format string at the versions its
module's docstring names, not copied from any collected case; ranks, hosts, paths and devices
are invented.

- Megatron's non-finite checks (log_megatron_nan): megatron-core's
  ``distributed/param_and_grad_buffer.py`` assert (0.6 – 0.9 wheels), ``rerun_state_machine.py``'s
  RuntimeError (0.12 – 0.14 wheels) and ``pretrain_gpt.py``'s loss assert: one rank names that
  (global) rank at low; several ranks are suspects, nobody named.
"""

from __future__ import annotations

from pathlib import Path

from tests.stalls.helpers import analyze_log_text
from tests.stalls.helpers import root_findings as _run
from tests.stalls.test_rules_from_source_rs9 import _by, _suspects

MEGATRON = "megatron.nan_check"


# --- Megatron (synthetic, from start_grad_sync's assert and validate_result's RuntimeError) -----
def _assert_grad(rank: int, *, prefix: str = "", host: str = "node-a7") -> str:
    body = (
        "Traceback (most recent call last):\n"
        '  File "/opt/megatron/pretrain_gpt.py", line 301, in <module>\n'
        "    pretrain(datasets_provider, model_provider, ModelType.encoder_or_decoder, step)\n"
        '  File "/opt/megatron/megatron/core/distributed/param_and_grad_buffer.py", line 115, '
        "in start_grad_sync\n"
        "    assert not norm.isnan(), (\n"
        f"AssertionError: Rank {rank}: found NaN in local grad norm in backward pass before "
        f"data-parallel communication collective. Device: {rank % 8}, node: {host}\n")
    return "".join(prefix + line + "\n" for line in body.splitlines())


def _assert_loss(rank: int) -> str:
    return ("Traceback (most recent call last):\n"
            '  File "/opt/megatron/pretrain_gpt.py", line 182, in loss_func\n'
            "    assert not loss[0].isnan(), (\n"
            f"AssertionError: Rank {rank}: found NaN in local forward loss calculation. "
            f"Device: {rank % 8}, node: node-b2\n")


def _rerun(rank: int, message: str, *, result: str = "tensor(nan, device='cuda:3')") -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/opt/megatron/megatron/core/rerun_state_machine.py", line 505, in '
        "validate_result\n"
        "    raise RuntimeError(full_message)\n"
        f"RuntimeError: Rank {rank}, node node-c4, device 3, iteration 1207: Unexpected result "
        f"{result} (message='{message}')\n")


_GRAD = ("found Inf in local grad norm for bucket #2 in backward pass before data-parallel "
         "communication collective")


def test_megatron_rerun_error_without_a_prefix_names_the_rank_at_low(tmp_path: Path) -> None:
    for text, rank in ((_rerun(11, _GRAD), 11),
                       (_rerun(6, "found NaN in local forward loss calculation",
                               result="nan"), 6),
                       (_assert_loss(21), 21)):
        code, roots = _run(tmp_path, text)
        assert code == 1, text
        assert _by(roots, MEGATRON) == [("rank_failure", [rank], "low")], text
        assert "global" in roots[0]["evidence"]["rank_from"]


def test_megatron_assert_under_a_rank_prefix_agrees_with_the_exception_rule(
        tmp_path: Path) -> None:
    code, report = analyze_log_text(tmp_path, "train.log", _assert_grad(5, prefix="[rank5]: "))
    assert code == 1
    mine = [f for f in report["stall_findings"] if f["evidence"].get("pattern") == MEGATRON]
    assert [(f["kind"], f["ranks"], f["confidence"]) for f in mine] == [
        ("rank_failure", [5], "low")]
    # nothing in the report names another rank as the first to fail
    assert {r for f in report["stall_findings"] if f["kind"] == "rank_failure"
            for r in f["ranks"]} == {5}


def test_megatron_several_ranks_are_suspects_not_a_culprit(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _rerun(2, _GRAD) + _rerun(3, _GRAD) + _assert_loss(7))
    assert code == 1
    assert not any(f["kind"] == "rank_failure" and f["evidence"].get("pattern") == MEGATRON
                   for f in roots)
    assert _by(roots, MEGATRON) == [("undecided", [], "low")]
    assert _suspects(roots) == [2, 3, 7]


def test_megatron_other_lines_with_the_same_words_are_not_read(tmp_path: Path) -> None:
    # the rerun machine's initial-run log line names no rank; an "Unexpected result" elsewhere
    # (no "Rank R, node H, device D, iteration I:" head) is not Megatron's
    text = ("ERROR Unexpected result nan at /opt/megatron/pretrain_gpt.py line 180, invokation #1 "
            "at iteration #52 (message='found NaN in local forward loss calculation')\n"
            "Rank 3 got an Unexpected result from the tokenizer (message='bad')\n")
    code, report = analyze_log_text(tmp_path, "train.log", text)
    assert not [f for f in report["stall_findings"]
                if f["evidence"].get("pattern") == MEGATRON]
    assert code != 0
