"""The writers under generated text (job ids, hosts, marker names, notes, sources, stall
evidence): the HTML page, the text summary, the JSON report, the Perfetto trace and the logfmt
line never carry a secret, a raw control or bidi character, or markup inside the page's
inline JSON."""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.scheduled import job
from stormotel.analyzers.sinks.html_report import render_html
from stormotel.analyzers.sinks.perfetto import write_trace
from stormotel.analyzers.sources import load_paths
from stormotel.analyzers.summary import render_summary

from tests.fuzz.boundary import SECRET, hostile_text, raw_controls
from tests.hostile.corpus import events


@functools.cache
def _events() -> tuple[str, ...]:
    return tuple(json.dumps(events(r, 60, world_size=2, grow_at=30 if r else None))
                 for r in range(2))


@given(job_id=hostile_text, host=hostile_text, context=hostile_text,
       notes=st.lists(hostile_text, max_size=3), source=hostile_text, evidence=hostile_text)
def test_every_writer_escapes_and_redacts(job_id, host, context, notes, source, evidence):
    folder = Path(tempfile.mkdtemp(prefix="stormotel-fuzz-"))
    for r, text in enumerate(_events()):
        evs = json.loads(text)
        for i, e in enumerate(evs):
            e["job_id"] = job_id or "j"
            e["hostname"] = host
            e["context"] = context if 10 <= i < 20 else None
        (folder / f"rank{r}.json").write_text(json.dumps(evs))
    timeline = load_paths([str(folder)])
    report = analyze(timeline)
    report.notes.extend(notes)
    report.sources.append(source)
    report.stall_findings.append(StallFinding(
        kind="straggler", ranks=[1], process_group=evidence, seq_id=1, op=evidence,
        source="logs", confidence="low", evidence={"category": evidence, evidence: evidence},
        remediation=[evidence]))
    page, _ = render_html(timeline, report)
    text = render_summary(report)
    doc = report.to_json()
    line = job.logfmt({"job_id": report.job_id, "note": evidence, "exit": 0})
    write_trace(folder / "trace.json", timeline, report)
    trace = (folder / "trace.json").read_text(encoding="utf-8")
    json.loads(trace)
    for out in (page, text, doc, line, trace):
        assert SECRET not in out
        assert not raw_controls(out, "\n"), (raw_controls(out, "\n"), out[:200])
    assert "\n" not in line
    data = page.split('id="stormotel-data">', 1)[1].split("</script>", 1)[0]
    assert not set("<>&") & set(data)
    json.loads(data)
