"""Round two of the red-team corpus: decoder errors that escaped the skip path, shapes the
readers document but refused, ranks beyond the documented bound, secrets and raw control
characters in the HTML report, and several jobs writing one output path."""

from __future__ import annotations

import json
from pathlib import Path

from stormotel import exitcodes
from tests.hostile.corpus import healthy_folder
from tests.hostile.harness import assert_clean, run_bounded

FOUND = (exitcodes.OK, exitcodes.FINDINGS)


def analyze_json(*args: str, **kw) -> tuple:
    run = run_bounded("analyze", *args, "--format", "json", "-q", **kw)
    return run, (run.json() if run.stdout.strip() else None)


def _otlp_requests() -> list[dict]:
    from tests.analyzers.otlp_fixtures import json_lines, metrics_requests
    from tests.analyzers.synth import healthy

    reqs = [r for d in healthy(2, 40) for r in metrics_requests(d)]
    return [json.loads(line) for line in json_lines(reqs).splitlines()]


def test_compact_archive_line_nested_100k_deep_is_an_unreadable_file(tmp_path):
    folder = healthy_folder(tmp_path / "job")
    deep = "[" * 100_000 + "]" * 100_000
    line = json.dumps(_otlp_requests()[0]).replace('"dataPoints": [', f'"dataPoints": [{deep}, ', 1)
    (folder / "rank-9.metrics.jsonl").write_text(line + "\n")
    run, rep = analyze_json(str(folder))
    assert_clean(run, FOUND)
    assert rep["skipped"].get("unreadable_file") == 1
    assert rep["participating_ranks"] == [0, 1, 2, 3]


def test_json_array_of_export_requests_is_read(tmp_path):
    reqs = _otlp_requests()
    path = tmp_path / "export.json"
    path.write_text(json.dumps(reqs) + "\n")
    run, rep = analyze_json(str(path))
    assert_clean(run, FOUND)
    assert rep["participating_ranks"] == [0, 1]
    assert not rep["skipped"].get("wrong_type")


def _faulted(tmp_path: Path) -> Path:
    from tests.hostile.test_boundary import faulted

    return faulted(tmp_path / "job")
