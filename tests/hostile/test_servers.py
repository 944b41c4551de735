"""Hostile servers against ``stormotel analyze --prometheus``: bounded time and memory, exit
SOURCE_FAILURE with one line, and no credential ever printed or written."""

from __future__ import annotations

import pytest

from stormotel import exitcodes
from tests.hostile.harness import GIB, assert_clean, run_bounded
from tests.hostile.hostile_server import hostile_server

TOKEN = "s3cr3t-bearer-token-0123456789"
PASSWORD = "hunter2-pw-in-url"
TENANT = "tenant-secret-42"


@pytest.fixture(scope="module")
def server():
    with hostile_server() as url:
        yield url


def tsdb(url: str, *extra: str, **kw):
    return run_bounded("analyze", "--prometheus", url, "--job-id", "j", "--since", "10m",
                       "--http-retries", "0", *extra, **kw)


def test_trickling_server_cannot_outlive_the_timeout(server):
    run = tsdb(f"{server}/trickle", "--http-timeout", "3", "--timeout", "6s", timeout=60,
               fresh=True)  # exit 3 from a fresh interpreter (the others are forked)
    assert_clean(run, exitcodes.SOURCE_FAILURE, within_s=20)
    assert "timed out" in run.stderr or "deadline" in run.stderr


def test_endless_body_is_refused_within_memory(server):
    run = tsdb(f"{server}/huge", "--http-timeout", "60", memory=2 * GIB, timeout=120)
    assert_clean(run, exitcodes.SOURCE_FAILURE, within_s=120)
    assert "larger than" in run.stderr


def test_error_body_echoing_request_headers_leaks_nothing(server, tmp_path):
    token = tmp_path / "token"
    token.write_text(TOKEN)
    run = tsdb(f"http://user:{PASSWORD}@{server.removeprefix('http://')}/echo",
               "--bearer-token-file", str(token), "--http-header", f"X-Scope-OrgID: {TENANT}",
               "--format", "json", "--output", str(tmp_path / "report.json"))
    assert_clean(run, exitcodes.SOURCE_FAILURE)
    everything = run.stderr + run.stdout
    for secret in (TOKEN, PASSWORD, TENANT):
        assert secret not in everything, everything
    assert "HTTP 400" in run.stderr


def test_password_in_url_is_redacted_from_report_and_warnings(server, tmp_path):
    report = tmp_path / "report.json"
    run = tsdb(f"http://user:{PASSWORD}@{server.removeprefix('http://')}/garbage",
               "--format", "json", "--output", str(report))
    assert_clean(run, (exitcodes.OK, exitcodes.SOURCE_FAILURE))
    written = report.read_text() if report.exists() else ""
    assert PASSWORD not in run.stderr + run.stdout + written


def test_list_valued_labels_and_non_numeric_values_are_counted(server):
    run = tsdb(f"{server}/garbage", "--format", "json")
    assert_clean(run, (exitcodes.OK, exitcodes.SOURCE_FAILURE))


def test_dry_run_prints_sink_urls_without_passwords(tmp_path):
    from tests.hostile.test_boundary import faulted

    run = run_bounded("analyze", str(faulted(tmp_path / "job")), "--dry-run",
                      "--grafana-url", f"http://admin:{PASSWORD}@127.0.0.1:9/?token={TOKEN}",
                      "--remote-write", f"https://u:{PASSWORD}@127.0.0.1:9/api/v1/write",
                      "--pushgateway", f"http://u:{PASSWORD}@127.0.0.1:9/")
    assert_clean(run, exitcodes.FINDINGS)
    assert "# would sync 1 annotation(s) to http://<redacted>@127.0.0.1:9/" in run.stdout
    assert "# would push" in run.stdout and "# would remote-write" in run.stdout
    assert PASSWORD not in run.stderr + run.stdout and TOKEN not in run.stdout


def test_tsdb_samples_75_years_ahead_are_skipped(server):
    run = tsdb(f"{server}/future", "--format", "json", "-q")
    assert_clean(run, (exitcodes.OK, exitcodes.FINDINGS))
    rep = run.json()
    assert rep["skipped"]["future_timestamp"] == 10
    assert not rep["cross_rank"]["first_cause_suspects"]


@pytest.mark.parametrize("mode", ["deep", "deep400"])
def test_deeply_nested_server_json_is_an_endpoint_failure(server, mode):
    assert_clean(tsdb(f"{server}/{mode}"), exitcodes.SOURCE_FAILURE)


@pytest.mark.parametrize("mode", ["names", "probe"])
def test_list_valued_metric_name_and_non_numeric_probe_are_counted(server, mode):
    run = tsdb(f"{server}/{mode}", "--format", "json", "-q")
    assert_clean(run, (exitcodes.OK, exitcodes.FINDINGS))
    rep = run.json()
    assert rep["participating_ranks"] == [0, 1]
    if mode == "names":
        assert rep["skipped"]["series_without_valid_rank_label"] == 1
