"""Writing back: Grafana (local stand-in), a REAL Pushgateway, Perfetto trace, dry run.

No Grafana server can be installed here, so :class:`tests.job.stubs.GrafanaStub` implements the
annotation and dashboard endpoints the sink uses and checks the bearer token; Prometheus and the
Pushgateway are the real servers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from stormotel.dashboards.incident import incident_uid

from stormotel import exitcodes, schema
from tests import servers
from tests.job import planted
from tests.job.conftest import run_cli, summary_line
from tests.job.stubs import GrafanaStub
from tests.servers import loopback_client

pytestmark = pytest.mark.servers
JOB = "sinks-1"
TOKEN = "glsa_s3cr3t-token-do-not-log"


@pytest.fixture(scope="module")
def tsdb(tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[servers.Server, planted.Planted]]:
    p, data = planted.make(job_id=JOB)
    with servers.prometheus(tmp_path_factory.mktemp("prom")) as prom:
        planted.write(prom.url + "/api/v1/write", JOB, data)
        t = data[(0, "reserved")][0]
        planted.write_markers(prom.url + "/api/v1/write", JOB, t, oom_at_ms=p.fault_ms + 30_000)
        yield prom, p


def _args(prom: servers.Server, p: planted.Planted) -> list[str]:
    return ["--prometheus", prom.url, "--job-id", JOB, "--start", str(p.start_ms / 1000 - 2),
            "--end", str(p.end_ms / 1000 + 2)]


def _pushed(pushgateway: servers.Server, name: str) -> list[str]:
    text = loopback_client().get(pushgateway.url + "/metrics", timeout=5).text
    return [ln for ln in text.splitlines() if ln.startswith(name + "{")]


def test_annotations_dashboard_push_and_trace_are_written_once(
        tsdb, pushgateway_server, tmp_path: Path) -> None:
    prom, p = tsdb
    token_file = tmp_path / "grafana-token"
    token_file.write_text(TOKEN + "\n")
    trace, board, report = tmp_path / "t.json", tmp_path / "board.json", tmp_path / "r.json"
    with GrafanaStub(TOKEN) as grafana:
        args = [*_args(prom, p), "--grafana-url", grafana.url, "--grafana-token-file",
                str(token_file), "--grafana-dashboard", "--incident-dashboard", str(board),
                "--pushgateway", pushgateway_server.url, "--perfetto", str(trace),
                "--format", "json", "-o", str(report)]
        first = run_cli(*args)
        assert first.returncode == exitcodes.FINDINGS, first.stderr
        assert grafana.bad_auth == 0
        assert len(grafana.annotations) >= 1
        ann = next(a for a in grafana.annotations if "first_cause" in a["tags"])
        assert {schema.ANNOTATION_TAG, "rank=2", f"job_id={JOB}"} <= set(ann["tags"])
        assert any(t.startswith("stormotel-key=") for t in ann["tags"])
        lead_ms = ann["timeEnd"] - ann["time"]
        assert abs(lead_ms - 20_000) <= 1000 and abs(ann["time"] - p.fault_ms) <= 1000
        assert grafana.dashboard_saves == 1
        assert incident_uid(JOB) in grafana.dashboards
        n_annotations = len(grafana.annotations)

        second = run_cli(*args)  # same window again
        assert second.returncode == exitcodes.FINDINGS, second.stderr
        assert len(grafana.annotations) == n_annotations
        assert grafana.dashboard_saves == 1
        assert f"grafana: created=0 updated=0 unchanged={n_annotations} dashboard=unchanged" \
            in second.stderr
        assert summary_line(second.stderr)["sinks"] == \
            "grafana:ok,incident_dashboard:ok,perfetto:ok,pushgateway:ok"

    # The token never leaves the Authorization header.
    for text in (first.stderr, first.stdout, second.stderr, report.read_text(),
                 board.read_text(), trace.read_text()):
        assert TOKEN not in text

    suspects = _pushed(pushgateway_server, schema.AN_FIRST_CAUSE)
    assert len(suspects) == 1 and 'rank="2"' in suspects[0] and f'job_id="{JOB}"' in suspects[0]
    assert len(_pushed(pushgateway_server, schema.AN_MISSING_RANKS)) == 1

    doc = json.loads(board.read_text())
    assert doc["uid"] == incident_uid(JOB)

    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {"rank 0", "rank 1", "rank 2", "rank 3"}
    assert sum(1 for e in events if e["ph"] == "C" and e["pid"] == 2) >= 600
    finding = [e for e in events if e.get("cat") == "finding" and e["name"] == "first_cause"]
    assert finding and finding[0]["pid"] == 2 and finding[0]["ph"] == "X"
    # Steps (from the step gauge) as slices, the OOM (counter increase) as an instant.
    steps = [e for e in events if e.get("cat") == "step" and e["pid"] == 0]
    assert len(steps) == 300 and steps[1]["name"] == "step 1" and steps[1]["dur"] == 2_000_000
    ooms = [e for e in events if e.get("cat") == "oom"]
    assert [(e["pid"], e["ph"]) for e in ooms] == [(2, "i")]
    assert abs(ooms[0]["ts"] // 1000 - (p.fault_ms + 30_000)) <= 1000


def test_dry_run_writes_nothing(tsdb, pushgateway_server, tmp_path: Path) -> None:
    prom, _ = tsdb
    state, trace = tmp_path / "state.json", tmp_path / "t.json"
    with GrafanaStub(TOKEN) as grafana:
        r = run_cli("--prometheus", prom.url, "--job-id", JOB, "--since", "30m", "--settle", "0",
                    "--state-file", str(state), "--grafana-url", grafana.url,
                    "--pushgateway", pushgateway_server.url, "--perfetto", str(trace),
                    "--remote-write", prom.url + "/api/v1/write", "--dry-run",
                    env={"GRAFANA_TOKEN": TOKEN})
        assert grafana.log == []
    assert r.returncode == exitcodes.FINDINGS, r.stderr
    assert "# would sync" in r.stdout and '"rank=2"' in r.stdout
    assert "# would remote-write" in r.stdout and schema.AN_FIRST_CAUSE in r.stdout
    assert "# would push" in r.stdout and "# would write" in r.stdout
    assert not state.exists() and not trace.exists()
    assert _pushed(pushgateway_server, schema.AN_FIRST_CAUSE) == [], r.stdout + r.stderr


def test_grafana_rejecting_the_token_is_a_sink_failure(tsdb, tmp_path: Path) -> None:
    prom, p = tsdb
    trace = tmp_path / "t.json"
    with GrafanaStub("another-token") as grafana:
        r = run_cli(*_args(prom, p), "--grafana-url", grafana.url, "--perfetto", str(trace),
                    env={"GRAFANA_TOKEN": TOKEN})
    assert r.returncode == exitcodes.SINK_FAILURE
    assert "grafana sink failed" in r.stderr and "HTTP 401" in r.stderr
    assert TOKEN not in r.stderr + r.stdout
    assert trace.exists()  # one failing sink does not stop the others
    assert summary_line(r.stderr)["sinks"] == "grafana:failed,perfetto:ok"


def test_stall_findings_reach_every_sink(pushgateway_server, tmp_path: Path) -> None:
    """Worker logs of a stuck job (rank 2 never joined all_reduce #8) → annotation, AN_STALL
    series and a trace marker, with no telemetry at all."""
    logs = Path(__file__).resolve().parents[1] / "stalls" / "data" / "logs" / "straggler_v25"
    trace = tmp_path / "t.json"
    with GrafanaStub(TOKEN) as grafana:
        r = run_cli("--logs", str(logs / "rank*.log"), "--job-id", "stuck-1", "-q",
                    "--grafana-url", grafana.url, "--pushgateway", pushgateway_server.url,
                    "--perfetto", str(trace), env={"GRAFANA_TOKEN": TOKEN})
        assert r.returncode == exitcodes.FINDINGS, r.stderr
        [ann] = grafana.annotations
    assert {"straggler", "stall", "rank=2", "job_id=stuck-1"} <= set(ann["tags"])
    assert ann["time"] == 1795238892415  # rank 0's watchdog timeout, from the logs
    stalls = _pushed(pushgateway_server, schema.AN_STALL)
    assert len(stalls) == 1 and 'kind="straggler"' in stalls[0] and 'rank="2"' in stalls[0]
    events = json.loads(trace.read_text())["traceEvents"]
    assert [e["pid"] for e in events if e.get("name") == "straggler"] == [2]
