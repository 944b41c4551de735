"""The stack-snapshot reader under generated input: the tracker's real snapshots (seed corpus in
``tests/fuzz/seeds/stacks``) with their header and progress trailer mutated — any JSON value,
numbers such as 1e308, 10**400 or a timestamp of 1e30, keys dropped — and their frames cut.
Every input gives a report or a counted skip with a note: never exit 70 or a traceback, and no
number from a header that is not a plausible one (no rank "holds the GIL for 1e21 s")."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from stormotel import schema
from tests.fuzz.boundary import analyze, check, mutate

SEEDS = Path(__file__).parent / "seeds" / "stacks"
#: numbers a header must never be trusted with
ABSURD = st.sampled_from(["1e308", "-1e308", "1" + "0" * 400, "1e30", "1e400", "-1", "NaN",
                          "Infinity", "0.5", "true", '"12"', "18446744073709551617"])


def _split(text: str) -> tuple[dict, str, dict | None]:
    first, _, body = text.partition("\n")
    header = json.loads(first[len(schema.STACK_HEADER_PREFIX):])
    at = body.rfind("\n" + schema.STACK_TRAILER_PREFIX)
    trailer = json.loads(body[at + 1 + len(schema.STACK_TRAILER_PREFIX):]) if at >= 0 else None
    return header, body[:at] if at >= 0 else body, trailer


def _write(folder: Path, data: st.DataObject, raw_number: str | None) -> None:
    for seed in sorted(SEEDS.glob(f"*{schema.STACK_SUFFIX}")):
        header, frames, trailer = _split(seed.read_text())
        header = mutate(header, data)
        lines = frames.splitlines()
        cut = data.draw(st.integers(0, len(lines)), label="frame lines kept")
        head = json.dumps(header)
        if raw_number is not None and isinstance(header, dict):
            key = data.draw(st.sampled_from(["armed_unix_ns", "timeout_s", "rank",
                                             "last_progress_unix_ns", "training_thread",
                                             "restart_count"]), label="absurd key")
            head = head[:-1] + (", " if header else "") + f'"{key}": {raw_number}}}'
        text = schema.STACK_HEADER_PREFIX + head + "\n" + "\n".join(lines[:cut])
        if trailer is not None:
            text += "\n" + schema.STACK_TRAILER_PREFIX + json.dumps(mutate(trailer, data))
        (folder / seed.name).write_text(text + "\n")


@given(st.data(), st.one_of(st.none(), ABSURD))
@example(data=None, raw_number=None)  # the seeds as written: a named culprit
def test_mutated_snapshots_are_a_report_or_a_counted_skip(data, raw_number):
    folder = Path(tempfile.mkdtemp(prefix="stormotel-fuzz-stacks-"))
    try:
        (folder / "in").mkdir()
        if data is None:
            for seed in SEEDS.glob(f"*{schema.STACK_SUFFIX}"):
                shutil.copy(seed, folder / "in" / seed.name)
        else:
            _write(folder / "in", data, raw_number)
        report_path, html = folder / "report.json", folder / "report.html"
        result = analyze("--stacks", str(folder / "in"), "--format", "json", "-o",
                         str(report_path), "--html", str(html), "-q")
        check(result, report_path, html)
        if data is None:
            assert result.code == 1
            report = json.loads(report_path.read_text())
            assert report["stall_findings"][0]["ranks"] == [1]
        if result.code in (0, 1) and report_path.exists():
            report = json.loads(report_path.read_text())
            for f in report["stall_findings"]:
                for held in f["evidence"].get("gil_held") or []:
                    assert held["no_samples_s"] < 10**7, held
    finally:
        shutil.rmtree(folder, ignore_errors=True)
