"""The scheduled analyzer as a CronJob runs it: no job ids, no state volume, a flaky Grafana.

A REAL Prometheus holds a planted 10-minute job (rank 2 rises first at 60 %) and receives the
analyzer's own remote writes; the Grafana stand-in stores an annotation and then answers 500
(what a proxy that times out in front of Grafana does). The run's clock is injected so four cron
ticks take seconds.
"""

from __future__ import annotations

import collections
import io
import shlex
import time
from pathlib import Path

import httpx
import pytest
from stormotel.analyzers.cli.args import options_from_args
from stormotel.analyzers.cli.flags import build_parser
from stormotel.analyzers.options import AnalyzeOptions
from stormotel.analyzers.report import CrossRank, Report, Suspect
from stormotel.analyzers.scheduled import job
from stormotel.analyzers.scheduled.run import run_scheduled
from stormotel.analyzers.sinks import grafana, remote_write
from stormotel.analyzers.sinks.findings_series import SeriesPoint
from stormotel.analyzers.sources.discovery import discovery_query

from stormotel import exitcodes, schema
from tests.job import planted
from tests.job.stubs import GrafanaStub
from tests.servers import loopback_client

pytestmark = pytest.mark.servers
JOB = "cron-e2e"
OTHER = "other-team"
TOKEN = "glsa_cron-token"
S = 1_000_000_000
MIN = 60 * S


def _args(*argv: str) -> AnalyzeOptions:
    """The options ``stormotel analyze ARGV`` runs with."""
    return options_from_args(build_parser().parse_args(list(argv)))


def _code(opts: AnalyzeOptions, *, err: io.StringIO, now_ns: int) -> int:
    return job.run_job(opts, err=err, now_ns=now_ns).code


def _summaries(err: str) -> list[dict[str, str]]:
    return [dict(p.split("=", 1) for p in shlex.split(ln)[1:]) for ln in err.splitlines()
            if ln.startswith(job.SUMMARY_PREFIX)]


def _instant(prom: str, expr: str, at_ns: int) -> list[dict]:
    r = loopback_client().get(prom + "/api/v1/query", params={"query": expr, "time": at_ns / 1e9},
                              timeout=10)
    result: list[dict] = r.json()["data"]["result"]
    return result


def _keys(stub: GrafanaStub) -> list[str]:
    return [t for a in stub.annotations for t in a["tags"] if t.startswith(grafana.KEY_TAG_PREFIX)]


def test_three_cron_ticks_over_a_job_that_ends(tmp_path: Path) -> None:
    """Ticks at minute 5, 9 and 13 of a 10-minute job, then one more at 20: every run exits 0
    (findings written are a success), the window advances from what the runs wrote to the TSDB
    (no state file), each finding is annotated exactly once although Grafana answered a stored
    POST with 500, and the ended job is not analysed again."""
    from tests import servers

    real_now_ms = int(time.time() * 1000)
    p, data = planted.make(job_id=JOB, now_ms=real_now_ms - 25 * 60_000)
    _, other = planted.make(job_id=OTHER, now_ms=real_now_ms - 25 * 60_000)
    with servers.prometheus(tmp_path / "prom") as prom, GrafanaStub(TOKEN) as stub:
        planted.write(prom.url + "/api/v1/write", JOB, data)
        planted.write(prom.url + "/api/v1/write", OTHER, other)
        planted.wait_visible(prom.url, JOB, 16)
        token = tmp_path / "token"
        token.write_text(TOKEN)
        stub.fail_after_store = 1
        selector = ["--job-selector", f'{schema.ATTR_JOB_ID}=~"cron-.*"']
        argv = ["--prometheus", prom.url, "--scheduled", "--since", "6m", "--max-window", "6m",
                "--settle", "30s", *selector,
                "--grafana-url", stub.url, "--grafana-token-file", str(token),
                "--remote-write", prom.url + "/api/v1/write", "--http-retries", "2"]
        ticks = [p.start_ns + 5 * MIN, p.start_ns + 9 * MIN, p.start_ns + 13 * MIN,
                 p.start_ns + 20 * MIN]
        codes, runs, posts = [], [], []
        for now in ticks:
            err = io.StringIO()
            codes.append(run_scheduled(_args(*argv), err=err,
                                       now_ns=now))
            runs.append(_summaries(err.getvalue()))
            posts.append(sum(1 for m, path, _ in stub.log
                             if m == "POST" and path == "/api/annotations"))
        # Exit codes: every run ran and wrote what it found.
        assert codes == [exitcodes.OK] * 4, runs
        # Discovery: only the selected job, one summary line per run; the tick after the job
        # ended (its last sample older than the discovery window) finds nothing to do.
        assert [len(r) for r in runs] == [1, 1, 1, 0]
        assert all(r[0]["job_id"] == JOB for r in runs[:3])
        # The windows tile time without a state file: each starts where the previous ended,
        # and the third holds the job's end (its final analysis).
        windows = [r[0]["window"].split("/") for r in runs[:3]]
        assert windows[1][0] == windows[0][1] and windows[2][0] == windows[1][1]
        assert [r[0]["outcome"] for r in runs[:3]].count("findings") >= 1
        # A listed job id still works: after the end it is a quiet success, not exit 3.
        err = io.StringIO()
        listed_argv = ["--job-id", JOB, *(a for a in argv if a not in selector)]
        code = _code(_args(*listed_argv), err=err, now_ns=ticks[-1])
        assert code == exitcodes.OK, err.getvalue()
        listed = _summaries(err.getvalue())[0]
        assert listed["note"] == "job ended; its final window was analysed before"
        assert listed["window"].split("/")[0] == windows[2][1]
        # Exactly one annotation per finding, although the first POST was answered 500.
        assert stub.fail_after_store == 0
        keys = _keys(stub)
        assert keys and len(keys) == len(set(keys)), collections.Counter(keys)
        assert posts[3] == posts[2], "the ended job was annotated again"
        # What the runs wrote: three window ends, successes only, no failure.
        sel = f'{{{schema.ATTR_JOB_ID}="{JOB}"}}'
        at = ticks[-1]
        ends = _instant(prom.url, f"count_over_time({schema.AN_MISSING_RANKS}{sel}[30m])", at)
        assert float(ends[0]["value"][1]) == 3
        assert _instant(prom.url, f"last_over_time({schema.AN_LAST_FAILURE}{sel}[30m])",
                        at) == []
        assert _instant(prom.url, f"last_over_time({schema.AN_LAST_SUCCESS}{sel}[30m])", at)
        # The failure counter exists from the first run, at 0.
        fails = _instant(prom.url, f'last_over_time({schema.AN_RUNS}{{{schema.ATTR_JOB_ID}='
                                   f'"{JOB}", outcome="source_failure"}}[30m])', at)
        assert fails and float(fails[0]["value"][1]) == 0


def _report(rank: int, onset_ns: int) -> Report:
    return Report(job_id=JOB, world_size=4, participating_ranks=[0, 1, 2, 3], missing_ranks=[],
                  cross_rank=CrossRank(cluster_onset_ns=onset_ns, first_cause_suspects=[
                      Suspect(rank=rank, confidence="high", first_spike_ns=onset_ns - 5 * S,
                              lead_ns=5 * S, delta_bytes=2**30)]),
                  window_start_ns=onset_ns - 10 * MIN, window_end_ns=onset_ns + MIN)


def test_a_contradicting_verdict_replaces_the_earlier_one() -> None:
    """Run 1 blames rank 2; a later run over more data blames rank 1: one first-cause
    annotation remains, and it names rank 1."""
    from stormotel.analyzers.http import HttpSettings

    onset = 1_800_000_000 * S
    with GrafanaStub(TOKEN) as stub, httpx.Client(
            headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        api = grafana.GrafanaAPI(stub.url, client, HttpSettings(retries=1))
        for rank, at in ((2, onset), (1, onset + 90 * S)):
            grafana.sync_annotations(api, grafana.annotations_for(_report(rank, at)), JOB)
        first = [a for a in stub.annotations if "first_cause" in a["tags"]]
        assert len(first) == 1
        assert "rank 1 is first-cause suspect #1" in first[0]["text"]
        assert "rank=1" in first[0]["tags"]


def test_failed_runs_are_recorded_and_never_as_success(tmp_path: Path,
                                                        prometheus_server) -> None:
    """A source failure writes its failure time; a sink failure (Grafana rejects the token)
    exits 4 and writes a failure, not a last success."""
    prom = prometheus_server.url
    now = time.time_ns()
    write = prom + "/api/v1/write"
    err = io.StringIO()
    code = _code(_args("--prometheus", prom, "--job-id", "ghost", "--since", "5m",
                             "--remote-write", write), err=err, now_ns=now)
    assert code == exitcodes.SOURCE_FAILURE
    p, data = planted.make(job_id=JOB)
    planted.write(write, JOB, data)
    planted.wait_visible(prom, JOB, 16)
    token = tmp_path / "token"
    token.write_text("wrong-token")
    with GrafanaStub(TOKEN) as stub:
        err = io.StringIO()
        code = _code(_args("--prometheus", prom, "--job-id", JOB, "--start",
                                 str(p.start_ns / 1e9 - 2), "--end", str(p.end_ns / 1e9 + 2),
                                 "--grafana-url", stub.url, "--grafana-token-file", str(token),
                                 "--remote-write", write, "--scheduled"),
                           err=err, now_ns=now)
    assert code == exitcodes.SINK_FAILURE, err.getvalue()
    assert _summaries(err.getvalue())[0]["outcome"] == "sink_failure"
    later = time.time_ns() + S
    for job_id in ("ghost", JOB):
        sel = f'{{{schema.ATTR_JOB_ID}="{job_id}"}}'
        assert _instant(prom, f"last_over_time({schema.AN_LAST_FAILURE}{sel}[10m])", later)
        assert _instant(prom, f"last_over_time({schema.AN_LAST_SUCCESS}{sel}[10m])",
                        later) == []


def test_a_rejected_remote_write_is_a_sink_failure(prometheus_server) -> None:
    """The TSDB already holds a newer sample of a findings series, so Prometheus rejects the
    run's sample as out of order: the samples were not stored, so the sink failed (it used to
    be reported as written)."""
    prom = prometheus_server.url
    p, data = planted.make(job_id=JOB)
    planted.write(prom + "/api/v1/write", JOB, data)
    planted.wait_visible(prom, JOB, 16)
    end_ns = p.end_ns + 2 * S
    newer = SeriesPoint(schema.AN_MISSING_RANKS, {schema.ATTR_JOB_ID: JOB}, 5.0,
                        end_ns // 1_000_000 + 60_000)
    r = loopback_client().post(prom + "/api/v1/write", content=remote_write.encode([newer]),
                               headers=remote_write.HEADERS, timeout=10)
    assert r.status_code in (200, 204)
    err = io.StringIO()
    code = _code(_args("--prometheus", prom, "--job-id", JOB, "--start",
                             str(p.start_ns / 1e9 - 2), "--end", str(end_ns / 1e9),
                             "--remote-write", prom + "/api/v1/write", "--scheduled"),
                       err=err, now_ns=time.time_ns())
    assert code == exitcodes.SINK_FAILURE, err.getvalue()
    said = err.getvalue()
    assert "remote_write sink failed" in said and "does not hold" in said


def test_incident_dashboard_goes_into_the_folder(prometheus_server, tmp_path: Path) -> None:
    prom = prometheus_server.url
    p, data = planted.make(job_id=JOB)
    planted.write(prom + "/api/v1/write", JOB, data)
    planted.wait_visible(prom, JOB, 16)
    token = tmp_path / "token"
    token.write_text(TOKEN)
    with GrafanaStub(TOKEN) as stub:
        code = _code(_args("--prometheus", prom, "--job-id", JOB, "--start",
                                 str(p.start_ns / 1e9 - 2), "--end", str(p.end_ns / 1e9 + 2),
                                 "--grafana-url", stub.url, "--grafana-token-file", str(token),
                                 "--grafana-dashboard", "--grafana-folder", "stormotel-f1"),
                           err=io.StringIO(), now_ns=time.time_ns())
        assert code == exitcodes.FINDINGS
        assert list(stub.folders.values()) == ["stormotel-f1"]


def test_discovery_query_narrows_by_selector() -> None:
    q = discovery_query('namespace="ml"', 3600)
    assert q.startswith(f"group by ({schema.ATTR_JOB_ID}) (last_over_time({{")
    assert 'namespace="ml"' in q and "[3600s]" in q
    for alias in schema.DEVICE_USED.prom_aliases:
        assert alias.replace(".", "\\\\.") in q


def test_every_sink_has_the_one_interface(tmp_path: Path) -> None:
    """A name, a dry-run plan that changes nothing, a write: all sinks of a run, one shape."""
    from stormotel.analyzers import http
    from stormotel.analyzers.sinks.base import RunContext
    from stormotel.analyzers.sinks.dispatch import sink_classes

    args = _args("--prometheus", "http://127.0.0.1:1", "--job-id", JOB, "--grafana-url",
                 "http://127.0.0.1:1", "--grafana-dashboard", "--incident-dashboard",
                 str(tmp_path / "b.json"), "--perfetto", str(tmp_path / "t.json"),
                 "--remote-write", "http://127.0.0.1:1/a", "--remote-write",
                 "http://127.0.0.1:1/b", "--pushgateway", "http://127.0.0.1:1")
    report = _report(2, 1_800_000_000 * S)
    from stormotel.analyzers.timeline import Timeline

    ctx = RunContext(report, Timeline(ranks={}), args.job.sinks, args.output, JOB,
                     http.HttpSettings(), None, points=[])
    sinks = [s for cls in sink_classes(ctx) if cls.kind != "output" for s in cls.for_run(ctx)]
    assert [s.name for s in sinks] == ["grafana", "incident_dashboard", "perfetto",
                                       "remote_write1", "remote_write2", "pushgateway"]
    out = io.StringIO()
    for sink in sinks:
        sink.plan(out)
        assert callable(sink.write)
    assert not list(tmp_path.iterdir()), "a dry-run plan wrote a file"
    assert "# would sync 1 annotation(s)" in out.getvalue()
