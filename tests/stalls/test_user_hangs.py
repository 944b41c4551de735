"""Hangs as users make them (issue 36): REAL gloo jobs at 2, 3, 4 and 8 ranks with the tracker in
every rank (tests/stalls/user_hang_jobs.py) — one rank skips an ``all_reduce`` and waits in the
step's next collective, or sleeps in its own code — judged from the archive alone. A hung job
is never healthy: exit 1, the culprit named at medium at most, every rank's place in the text
summary and the HTML; the healthy 2-rank job stays quiet (exit 0)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from stormotel import exitcodes, schema
from tests.cpu_lock import cpu_heavy
from tests.fuzz.boundary import analyze, check
from tests.stalls import user_hang_jobs as jobs
from tests.stalls.helpers import run_job_group

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
HANGS = [n for n, (kind, *_rest) in jobs.SCENARIOS.items() if kind != "healthy"]


@pytest.fixture(scope="module")
def user_hangs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("user_hangs")
    started = time.monotonic()
    with cpu_heavy(tmp_path_factory, exclusive=True):
        proc = run_job_group("tests.stalls.user_hang_jobs", root, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    print(f"user hang jobs ran in {time.monotonic() - started:.1f} s")
    return root


def _analyze(root: Path, name: str, fmt: str) -> tuple[int, str, str]:
    out = root / f"{name}.{fmt}"
    html = root / f"{name}.html"
    result = analyze(str(root / name / "archive"), "--format", fmt, "-o", str(out),
                     "--html", str(html), "-q")
    check(result, out, html)
    return result.code, out.read_text(), html.read_text()


@pytest.mark.parametrize("name", HANGS)
def test_a_hung_job_names_its_culprit_and_every_rank_s_place(user_hangs: Path,
                                                             name: str) -> None:
    kind, world, culprit, second = jobs.SCENARIOS[name]
    code, text, _ = _analyze(user_hangs, name, "json")
    report = json.loads(text)
    assert code == exitcodes.FINDINGS
    roots = [f for f in report["stall_findings"] if f["consequence_of"] is None]
    assert roots and roots[0]["source"] == "stacks", report["stall_findings"]
    lead = roots[0]
    assert lead["ranks"] == [culprit], lead
    assert all(f["confidence"] != "high" for f in report["stall_findings"])
    assert lead["confidence"] == "medium"
    places = report["extra"]["stalls"]["per_rank"]
    assert sorted(int(r) for r in places) == list(range(world))
    for r in range(world):
        place = places[str(r)]["sources"]["stacks"]
        if kind == "sleep" and r == culprit:
            assert place["collective"] is None and place["function"] == "slow_user_code"
        elif kind == "skip" and r == culprit:
            assert place["collective"] == second, place
        else:
            assert place["collective"] == "all_reduce", (r, place)
    if kind == "skip":
        # ahead in the program: the tracker's marks prove the skip
        assert lead["kind"] == "op_type_mismatch"
        assert lead["evidence"]["pattern"] == "stormotel.stacks.skipped_mark"
        assert "nccl:all_reduce" in lead["evidence"]["proof"]
        assert "all_reduce" in lead["evidence"]["reason"] and second in lead["evidence"]["reason"]
    else:
        assert lead["kind"] == "straggler"
        assert any("slow_user_code" in f for f in lead["evidence"]["frames"][str(culprit)])


@pytest.mark.parametrize("name", ["skip2", "sleep2", "skip4"])
def test_the_summary_and_the_html_say_where_each_rank_is(user_hangs: Path, name: str) -> None:
    kind, world, culprit, second = jobs.SCENARIOS[name]
    code, text, html = _analyze(user_hangs, name, "text")
    assert code == exitcodes.FINDINGS
    verdict = text.strip().splitlines()[-1]
    assert verdict.startswith("Verdict: FINDINGS") and f"rank(s) {culprit}" in verdict, verdict
    assert "Where each rank is" in text
    for r in range(world):
        line = next(ln for ln in text.splitlines() if ln.startswith(f"  rank {r}: main thread"))
        want = second if r == culprit and kind == "skip" else \
            "own code" if r == culprit else "all_reduce"
        assert want in line and "user_hang_jobs.py:" in line, line
    assert f"rank(s) {culprit}" in html and "rank(s) []" not in html
    assert "<th>reason</th>" in html and "<th>fix</th>" in html
    assert "Where each rank is" in html


def test_a_healthy_two_rank_job_stays_quiet(user_hangs: Path) -> None:
    root = user_hangs / "healthy2"
    assert all((root / f"done{r}").exists() for r in range(2))
    assert not [p for p in root.rglob("*") if schema.STACKS_DIR in p.parts and p.is_file()]
    code, text, _ = _analyze(user_hangs, "healthy2", "text")
    assert code == exitcodes.OK
    assert text.strip().splitlines()[-1] == "Verdict: healthy"


def test_an_undecided_flight_recorder_never_hides_what_the_snapshots_show(
        user_hangs: Path) -> None:
    """Two ranks at the same sequence number in different ops: the dumps alone cannot say who
    is wrong (no majority of two); the snapshots' marks can. Both are joined per rank."""
    dumps = user_hangs / "skip2fr" / "archive" / "skip2fr" / schema.FR_DUMPS_DIR
    assert sorted(p.name for p in dumps.glob("nccl_trace_rank_*")) == [
        "nccl_trace_rank_0", "nccl_trace_rank_1"]
    out = user_hangs / "skip2fr-fr.json"
    result = analyze(str(user_hangs / "skip2fr" / "archive"), "--flight-recorder", str(dumps),
                     "--format", "json", "-o", str(out), "-q")
    check(result, out)
    assert result.code == exitcodes.FINDINGS
    report = json.loads(out.read_text())
    first = report["stall_findings"][0]
    assert (first["source"], first["kind"], first["ranks"]) == ("stacks", "op_type_mismatch", [1])
    fr = [f for f in report["stall_findings"] if f["source"] == "flight_recorder"]
    assert fr and all(f["confidence"] != "high" for f in fr)
    per_rank = report["extra"]["stalls"]["per_rank"]
    ops = {r: next(iter(per_rank[r]["sources"]["flight_recorder"]["groups"].values()))["last_op"]
           for r in ("0", "1")}
    assert ops == {"0": "all_reduce", "1": "barrier"}
    assert per_rank["1"]["sources"]["stacks"]["collective"] == "barrier"
