"""Worker-log triage on REAL logs from public issue threads (tests/stalls/data/real/*/CASE.md).

Each case keeps the thread's log lines verbatim plus a CASE.md with the link, the root cause the
thread established and how sure that is. The expected verdict is what the evidence supports: a
rank's own error (rank_failure), what PyTorch itself concluded (desync report, DETAIL
fingerprints), or ``undecided`` where the excerpt cannot single anyone out.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from stormotel.analyzers.stalls import logs_parser as lp
from stormotel.analyzers.stalls.log_analysis import analyze_logs

REAL = Path(__file__).parent / "data" / "real"

#: case -> (kind of the root finding, its culprit ranks, category or None, suspects or None)
EXPECTED: dict[str, tuple[str, list[int], str | None, list[int] | None]] = {
    "pytorch-152623-desync-report": ("straggler", [7], "desync_report", None),
    "vllm-6042-illegal-memory-access": ("rank_failure", [3], "cuda_error", None),
    "axolotl-1473-illegal-memory-access": ("rank_failure", [7], "cuda_error", None),
    "lmdeploy-3258-illegal-memory-access": ("rank_failure", [2], "cuda_error", None),
    "ms-swift-6301-oom": ("rank_failure", [11], "oom", None),
    "cppo-6-sigkill": ("rank_failure", [0], "signal", None),
    "recurrent-drafter-5-sigkill": ("rank_failure", [7], "signal", None),
    "ms-swift-9443-detail-shape-mismatch": ("undecided", [], "mismatched_collective", [0, 1]),
    "opendde-23-detail-shape-mismatch": ("undecided", [], "mismatched_collective", [1, 2]),
    "pytorch-118369-untagged-groups": ("undecided", [], None, None),
    "torchtune-2093-checkpoint-save": ("undecided", [], None, None),
    "llamafactory-7396-all-waiting": ("undecided", [], None, None),
    "torchtune-2651-lora-save": ("undecided", [], None, None),
    "open-r1-620-grpo-broadcast": ("undecided", [], None, None),
}


def roots(case: str):  # type: ignore[no-untyped-def]
    result = analyze_logs(lp.parse_logs([str(REAL / case)]))
    return [f for f in result.findings if f.consequence_of is None]


def test_every_case_has_its_source_and_cause() -> None:
    cases = sorted(p.name for p in REAL.iterdir() if p.is_dir())
    assert cases == sorted(EXPECTED) and len(cases) >= 12
    for case in cases:
        text = (REAL / case / "CASE.md").read_text()
        assert "https://github.com/" in text and "root cause" in text and "confidence" in text


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_real_case_verdict(case: str) -> None:
    kind, ranks, category, suspects = EXPECTED[case]
    found = roots(case)
    assert found, f"{case}: no finding"
    first = found[0]
    assert (first.kind, first.ranks) == (kind, ranks), (case, first)
    if category is not None:
        assert first.evidence.get("category") == category
    if suspects is not None:
        assert first.evidence.get("suspects") == suspects
    if kind == "undecided":
        # never a wrong culprit: no other root finding may name a rank either
        assert all(not f.ranks for f in found), found
        assert all(f.evidence.get("category") != "fabric" for f in found)
        assert first.remediation


def test_oom_bytes_and_frame_are_reported() -> None:
    [f] = roots("ms-swift-6301-oom")
    assert f.evidence["requested_bytes"] == int(4.35 * 2**30)
    assert "sdpa_attention_forward" in f.evidence["frame"]


def test_signal_from_torchrun_summary() -> None:
    [f] = roots("cppo-6-sigkill")
    assert (f.evidence["exit_code"], f.evidence["signal"]) == (-9, "SIGKILL")
