"""docs/metrics.md is generated from stormotel/schema.py; this test keeps them identical.

Regenerate after changing schema.py:  .venv/bin/python -m tests.tracker.test_metrics_doc
"""

from __future__ import annotations

import sys
from pathlib import Path

from stormotel import schema

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
BEGIN = "<!-- generated from stormotel/schema.py: begin -->"
END = "<!-- generated from stormotel/schema.py: end -->"


def table() -> str:
    rows = ["| OTel name | unit | kind | Prometheus (pull exporter) | other accepted spellings "
            "| meaning |", "|---|---|---|---|---|---|"]
    for m in schema.ALL_METRICS:
        aliases = ", ".join(f"`{a}`" for a in m.prom_aliases[1:])
        rows.append(f"| `{m.name}` | `{m.unit}` | {m.kind.value} | `{m.prom}` | {aliases} | "
                    f"{m.description} |")
    labels = ", ".join(f"`{k}`" for k in schema.IDENTITY_LABELS)
    optional = ", ".join(f"`{k}`" for k in schema.ATTRIBUTION_LABELS)
    hw = ", ".join(f"`{schema.prom_label(k)}`" for k in (schema.ATTR_HW_NAME, schema.ATTR_HW_MODEL,
                                                         schema.ATTR_HW_VENDOR))
    rows += ["", f"Every series carries the identity labels {labels} and `hw_id` (OTel "
             f"`{schema.ATTR_HW_ID}`: the GPU UUID, else its index); when known also {optional} "
             f"(Kubernetes downward API / `OTEL_RESOURCE_ATTRIBUTES`, SLURM) and {hw} (the "
             "sampler's device name and vendor). Extra attributes: "
             f"`{schema.ATTR_LEVEL}` on `{schema.THRESHOLD_CROSSINGS.prom}`, "
             f"`{schema.ATTR_REASON}` on `{schema.SAMPLES_DROPPED.prom}`, "
             f"`{schema.ATTR_DESTINATION}` and `{schema.ATTR_REASON}` on "
             f"`{schema.EXPORT_FAILURES.prom}`."]
    spans = [("span", schema.SPAN_SESSION, "one per tracking session (start_tracking → "
              f"stop_tracking); `{schema.SPAN_ATTR_SAMPLER}`, "
              f"`{schema.SPAN_ATTR_SAMPLING_INTERVAL}`"),
             ("span", schema.SPAN_STEP, f"`tracker.step(n)`; attributes `{schema.SPAN_ATTR_STEP}`"
              f", `{schema.SPAN_ATTR_KIND}`=`{schema.SPAN_KIND_STEP}`"
              f", `{schema.SPAN_ATTR_MEM_START}`, `{schema.SPAN_ATTR_MEM_END}`, "
              f"`{schema.SPAN_ATTR_MEM_PEAK}`"),
             ("span", "<mark name>", f"`tracker.mark(name)`, named by the mark (e.g. "
              f"`nccl:all_reduce`); `{schema.SPAN_ATTR_MARK}`, `{schema.SPAN_ATTR_KIND}`="
              f"`{schema.SPAN_KIND_MARK}` and the same memory attributes (older archives: "
              f"`{schema.SPAN_MARK}`, still read)"),
             ("span", schema.SPAN_EDGE, "zero-length, parent = session, carries exactly one of "
              f"the events below at the exact sample time (named in `{schema.SPAN_ATTR_EDGE}`)"),
             ("event", schema.EVENT_FIRST_RISE, f"`{schema.EVENT_ATTR_SERIES}`, "
              f"`{schema.EVENT_ATTR_BYTES}`, `{schema.EVENT_ATTR_BASELINE}`, "
              f"`{schema.EVENT_ATTR_DELTA}`"),
             ("event", schema.EVENT_THRESHOLD, f"`{schema.EVENT_ATTR_LEVEL}`, "
              f"`{schema.EVENT_ATTR_PERCENT}`, `{schema.EVENT_ATTR_BYTES}`, "
              f"`{schema.EVENT_ATTR_THRESHOLD}`"),
             ("event", schema.EVENT_OOM, f"`{schema.EVENT_ATTR_CONTEXT}`, "
              f"`{schema.EVENT_ATTR_DUMP_PATH}`, `{schema.EVENT_ATTR_MESSAGE}`, "
              f"`{schema.EVENT_ATTR_BYTES}`"),
             ("event", schema.EVENT_STALL, f"`{schema.EVENT_ATTR_STACK_PATH}`, "
              f"`{schema.EVENT_ATTR_SINCE_PROGRESS}`, `{schema.EVENT_ATTR_DEADLINE}`, and "
              f"`{schema.EVENT_ATTR_DUMP_PATH}` when a Flight Recorder dump was taken with it")]
    rows += ["", "| kind | name | carries |", "|---|---|---|"]
    rows += [f"| {k} | `{n}` | {c} |" for k, n, c in spans]
    return "\n".join(rows)


def render(current: str) -> str:
    head, _, rest = current.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{table()}\n{END}{tail}"


def test_metrics_doc_matches_schema() -> None:
    current = DOC.read_text()
    assert BEGIN in current and END in current
    assert current == render(current), ("docs/metrics.md is stale: run "
                                        ".venv/bin/python -m tests.tracker.test_metrics_doc")


if __name__ == "__main__":
    DOC.write_text(render(DOC.read_text()))
    sys.exit(0)
