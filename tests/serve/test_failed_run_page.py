"""A page whose analysis failed: the job's URL — the ``report_url`` the notification links to —
says why there is no report (outcome, exit code, the run's last message), not a bare "no
analysis of this job" that leaves the on-call engineer to find the receiver's log. Found in the
first-hour audit (helper fa): ``serve`` behind an unreachable Prometheus answered a page, logged
"no Prometheus endpoint answered", and its job page said nothing of it."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from stormotel.analyzers.serve.store import FAILED_JSON, META_JSON, Store

from tests.serve import receiver as rx


def test_the_job_page_says_why_the_run_wrote_no_report(tmp_path: Path) -> None:
    with rx.running(tmp_path / "out", rx.refused_url()) as recv:
        posted = httpx.post(recv.url + "/alertmanager", content=rx.payload([rx.alert("run-7")]),
                            headers={"Content-Type": "application/json"}, timeout=10)
        assert posted.status_code == 200, posted.text
        deadline, page = time.monotonic() + 90, None
        while time.monotonic() < deadline:
            page = httpx.get(recv.url + "/jobs/run-7/", timeout=10)
            if "last run" in page.text:
                break
            time.sleep(0.5)
        assert page is not None and page.status_code == 404, recv.logs()
        assert "outcome source_failure (exit 3)" in page.text, (page.text, recv.logs())
        assert "no Prometheus endpoint answered for job 'run-7'" in page.text, page.text
        json_page = httpx.get(recv.url + "/jobs/run-7/report.json", timeout=10)
        assert json_page.status_code == 404 and "source_failure" in json_page.text
        never = httpx.get(recv.url + "/jobs/other-job/", timeout=10)
        assert never.status_code == 404 and never.text.strip() == "no analysis of this job"


def test_a_report_clears_the_failure_and_failures_age_out(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.record_failure("j", {"outcome": "source_failure", "exit": 3, "reason": "down"})
    assert store.failure("j") == {"outcome": "source_failure", "exit": 3, "reason": "down"}
    store.staging("j")
    store.publish("j", {"job_id": "j"})
    assert store.failure("j") is None and (store.job_dir("j") / META_JSON).exists()
    store.record_failure("only-failed", {"outcome": "source_failure"})
    assert (store.job_dir("only-failed") / FAILED_JSON).exists()
    assert store.sweep(retention_s=60, now=time.time() + 3600) == 2
    assert not store.job_dir("only-failed").exists()
