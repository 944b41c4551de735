"""Stack snapshots belong to their job and their numbers are bounded (issue 39, item 3): through
the command line, on the tracker's real snapshots (the fuzz seed corpus, a 2-rank gloo job
where rank 1 skipped an ``all_reduce``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stormotel import schema
from tests.fuzz.boundary import analyze, check

SEEDS = Path(__file__).resolve().parents[1] / "fuzz" / "seeds" / "stacks"


def _copy(dst: Path, job: str | None = None, **header: object) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for seed in SEEDS.glob(f"*{schema.STACK_SUFFIX}"):
        first, _, body = seed.read_text().partition("\n")
        head = json.loads(first[len(schema.STACK_HEADER_PREFIX):])
        if job is not None:
            head["job_id"] = job
        head.update(header)
        (dst / seed.name).write_text(schema.STACK_HEADER_PREFIX + json.dumps(head) + "\n" + body)


def _run(tmp_path: Path, *args: str) -> tuple[int, dict]:
    out = tmp_path / "report.json"
    result = analyze(*args, "--format", "json", "-o", str(out), "-q")
    check(result, out)
    return result.code, json.loads(out.read_text())


def test_another_jobs_snapshots_are_never_judged_as_this_jobs(tmp_path: Path) -> None:
    _copy(tmp_path / "stacks" / "a", job="job-a")
    # job-b: the same two ranks, both at the same place (would turn the split into noise)
    _copy(tmp_path / "stacks" / "b", job="job-b")
    code, report = _run(tmp_path, "--stacks", str(tmp_path / "stacks"), "--job-id", "job-a")
    assert code == 1
    assert report["stall_findings"][0]["ranks"] == [1]
    assert report["skipped"].get("other_job") == 2
    assert any("other jobs than 'job-a'" in n for n in report["notes"])
    # no --job-id and two jobs: none compared, said so (not judged as one job)
    code, report = _run(tmp_path, "--stacks", str(tmp_path / "stacks"))
    assert report["stall_findings"] == []
    assert any("pass --job-id" in n for n in report["notes"]), report["notes"]


def test_an_earlier_run_of_the_job_is_left_out(tmp_path: Path) -> None:
    _copy(tmp_path / "s" / "old", job="j", restart_count=0, rank=0)  # both files say rank 0
    _copy(tmp_path / "s" / "new", job="j", restart_count=1)
    code, report = _run(tmp_path, "--stacks", str(tmp_path / "s"))
    assert code == 1 and report["stall_findings"][0]["ranks"] == [1]
    assert report["skipped"]["snapshot_earlier_run"] == 2


@pytest.mark.parametrize("key,raw", [("timeout_s", "1e308"), ("timeout_s", "1e400"),
                                     ("armed_unix_ns", "1" + "0" * 400),
                                     ("armed_unix_ns", "1e30"), ("armed_unix_ns", "1e+30"),
                                     ("last_progress_unix_ns", "1e30"),
                                     ("training_thread", "-5"), ("timeout_s", "NaN")])
def test_out_of_range_header_numbers_are_counted_skips(tmp_path: Path, key: str,
                                                        raw: str) -> None:
    _copy(tmp_path / "s")
    victim = sorted((tmp_path / "s").iterdir())[1]  # rank 1's snapshot
    first, _, body = victim.read_text().partition("\n")
    head = json.loads(first[len(schema.STACK_HEADER_PREFIX):])
    head.pop(key, None)
    text = json.dumps(head)[:-1] + f', "{key}": {raw}}}'
    victim.write_text(schema.STACK_HEADER_PREFIX + text + "\n" + body)
    code, report = _run(tmp_path, "--stacks", str(tmp_path / "s"))
    assert code in (0, 1)
    assert report["skipped"]["bad_stack_snapshot"] == 1
    assert any(victim.name in n and key in n for n in report["notes"]), report["notes"]
    # rank 0 alone is still evidence: its place is said, never a GIL held for 1e21 s
    assert all("gil_held" not in f["evidence"] for f in report["stall_findings"])


def test_the_seed_snapshots_name_the_rank_that_skipped(tmp_path: Path) -> None:
    shutil.copytree(SEEDS, tmp_path / "s")
    code, report = _run(tmp_path, "--stacks", str(tmp_path / "s"))
    assert code == 1
    (f,) = report["stall_findings"]
    assert f["kind"] == "op_type_mismatch" and f["ranks"] == [1]
    assert f["evidence"]["pattern"] == "stormotel.stacks.skipped_mark"
    assert f["confidence"] == "medium"
    places = report["extra"]["stalls"]["per_rank"]
    assert places["0"]["sources"]["stacks"]["collective"] == "all_reduce"
    assert places["1"]["sources"]["stacks"]["collective"] == "barrier"


def test_the_world_line_comes_from_the_finding_that_states_it(tmp_path: Path) -> None:
    # the snapshots' finding leads and states no world; the logs' findings state 2 (from the
    # [rankN]: prefixes): the Stalls section says 2, never "unknown" above findings naming ranks
    shutil.copytree(SEEDS, tmp_path / "s")
    log = tmp_path / "train.log"
    log.write_text(
        "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
        "Timed out waiting 90000ms for recv operation to complete\n"
        "[rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
        "Connection closed by peer [127.0.0.1]:29500\n")
    text = tmp_path / "summary.txt"
    result = analyze("--stacks", str(tmp_path / "s"), "--logs", str(log), "-o", str(text), "-q")
    check(result, text)
    summary = text.read_text()
    assert result.code == 1
    assert "world size unknown" not in summary, summary
    assert "world size 2" in summary, summary


@pytest.mark.parametrize("key,raw", [("rank", '"\\u00b2"'), ("rank", '"\\u2460"'),
                                     ("world_size", '"\\u00b2"')])
def test_digits_that_are_not_ascii_are_no_number(tmp_path: Path, key: str, raw: str) -> None:
    # str.isdigit() is true of '²' and '①', and int() refuses them: a header rank read that way
    # raised int()'s own message ("invalid literal for int() …") instead of the reader's
    _copy(tmp_path / "s")
    victim = sorted((tmp_path / "s").iterdir())[1]  # rank 1's snapshot
    first, _, body = victim.read_text().partition("\n")
    head = json.loads(first[len(schema.STACK_HEADER_PREFIX):])
    head.pop(key, None)
    victim.write_text(schema.STACK_HEADER_PREFIX + json.dumps(head)[:-1] + f', "{key}": {raw}}}'
                      + "\n" + body)
    code, report = _run(tmp_path, "--stacks", str(tmp_path / "s"))
    assert code in (0, 1)
    assert not any("invalid literal" in n for n in report["notes"]), report["notes"]
    if key == "rank":
        assert report["skipped"]["bad_stack_snapshot"] == 1
        assert any("no valid rank" in n for n in report["notes"]), report["notes"]
