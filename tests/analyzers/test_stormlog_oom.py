"""OOMs in Stormlog exports: real stormlog 0.4.3 files where ranks 1 and 3 ran out of memory.

Stormlog records no allocator OOM counter (``num_ooms`` appears only in its ``diagnose``
output, never in tracker events); an OOM is in its export only as the ``error`` event its
``capture_oom`` writes. Files written by tests/analyzers/data/make_stormlog_oom_fixtures.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.sources import load_paths
from stormotel.analyzers.summary import render_summary

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("rank3", ["stormlog_oom_rank3.json", "stormlog_oom_rank3.csv"])
def test_stormlog_oom_events_are_ooms_first_one_first(rank3: str) -> None:
    files = [str(DATA / f"stormlog_oom_rank{r}.json") for r in (0, 1, 2)] + [str(DATA / rank3)]
    report = analyze(load_paths(files))
    forensics = report.to_dict()["extra"]["oom_forensics"]
    assert [r["rank"] for r in forensics["ranks"]] == [1, 3]
    assert forensics["first_rank"] == 1 and not forensics["tie"]
    one, three = forensics["ranks"]
    assert 0.25e9 < three["oom_ns"] - one["oom_ns"] < 0.55e9  # 0.4 s apart when written
    assert one["cause"] == "genuine_peak"  # 90 % of the reservation was live tensors
    text = render_summary(report)
    assert "Out of memory: rank 1 ran out of memory first" in text
    verdict = text.splitlines()[-1]
    assert verdict.index("rank 1:") < verdict.index("rank 3:"), verdict


def test_a_stormlog_error_that_is_not_an_oom_is_not_one(tmp_path: Path) -> None:
    events = json.loads((DATA / "stormlog_oom_rank1.json").read_text())
    for e in events:
        if e["event_type"] == "error":
            e["context"] = "collector failed"
            e["metadata"] = {k: v for k, v in e["metadata"].items() if "oom" not in k}
    path = tmp_path / "rank1.json"
    path.write_text(json.dumps(events))
    assert "oom_forensics" not in analyze(load_paths([str(path)])).to_dict()["extra"]


@pytest.mark.parametrize("gap", ["missing", "null"])
def test_an_event_without_event_type_leaves_the_oom_found(tmp_path: Path, gap: str) -> None:
    """The event-type column is read in one pass over the decoded events; an export where one
    event lacks it (or has null) takes the per-event path and finds the same OOM."""
    events = json.loads((DATA / "stormlog_oom_rank1.json").read_text())
    first_sample = next(e for e in events if e["event_type"] == "sample")
    if gap == "missing":
        del first_sample["event_type"]
    else:
        first_sample["event_type"] = None
    path = tmp_path / "rank1.json"
    path.write_text(json.dumps(events))
    forensics = analyze(load_paths([str(path)])).to_dict()["extra"]["oom_forensics"]
    assert [r["rank"] for r in forensics["ranks"]] == [1]
