"""Round two of the red-team corpus: decoder errors that escaped the skip path, shapes the
readers document but refused, ranks beyond the documented bound, secrets and raw control
characters in the HTML report, and several jobs writing one output path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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


def _fr_entry(i: int, **kw) -> dict:
    return {"record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"),
            "collective_seq_id": i + 1, "p2p_seq_id": 0, "op_id": i + 1,
            "profiling_name": "nccl:all_reduce", "time_created_ns": 1 + i,
            "input_sizes": [[4]], "input_dtypes": ["Float"], "output_sizes": [[4]],
            "output_dtypes": ["Float"], "state": "completed",
            "time_discovered_started_ns": None, "time_discovered_completed_ns": 2 + i,
            "retired": True, "timeout_ms": 600000, "is_p2p": False, **kw}


def _fr_dump(entries: list[dict]) -> bytes:
    import pickle

    return pickle.dumps({"version": "2.10", "pg_config": {}, "pg_status": {},
                         "entries": entries})


def _fr_folder(tmp_path: Path, bad: list[dict]) -> Path:
    folder = tmp_path / "fr"
    folder.mkdir()
    (folder / "nccl_trace_rank_0").write_bytes(_fr_dump([_fr_entry(i) for i in range(20)]))
    (folder / "nccl_trace_rank_1").write_bytes(
        _fr_dump([_fr_entry(i) for i in range(19)] + bad))
    return folder


def test_flight_recorder_sizes_memo_amplification_is_bounded(tmp_path):
    big = list(range(10_000))  # pickled once, referenced 100,000 times: 10**9 ints expanded
    folder = _fr_folder(tmp_path, [_fr_entry(19, input_sizes=[big] * 100_000)])
    assert (folder / "nccl_trace_rank_1").stat().st_size < 1_000_000
    run = run_bounded("analyze", "--flight-recorder", str(folder), "--format", "json", "-q")
    assert_clean(run, FOUND)


def test_flight_recorder_integers_beyond_int64_skip_their_entry(tmp_path):
    folder = _fr_folder(tmp_path, [_fr_entry(19, collective_seq_id=10**20, op_id=10**20),
                                   _fr_entry(20, time_created_ns=2**70,
                                             time_discovered_completed_ns=2**70),
                                   _fr_entry(21, input_sizes=[[2**70]])])
    run = run_bounded("analyze", "--flight-recorder", str(folder), "--format", "json", "-q")
    assert_clean(run, FOUND)


def _timeout_line(r: int, seq: int) -> str:
    return (f"[rank{r}]:[E1121 03:12:40.1180000 ProcessGroupNCCL.cpp:1316] [PG 0 Rank {r}] "
            f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
            "OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for "
            "600077 milliseconds before timing out.\n")


def _seven_digit_logs(tmp_path: Path, kind: str) -> Path:
    text = "".join(_timeout_line(r, 241) for r in range(4))
    if kind == "desync":
        text += ("[rank0]:[E515 18:36:47.343377708 ProcessGroupNCCL.cpp:1937] Rank 0\n"
                 "         - [0] Timeout at collective: ALLREDUCE, #315\n         - To our "
                 "best knowledge, the lagging/dead/mismatched ranks that caused the desync are:"
                 "\n             [9999999] finished collective #182, but didn't join collective"
                 " #183 (count from 1)\n         - Snapshot of ranks' latest states:\n")
    else:
        fp = ("CollectiveFingerPrint(SequenceNumber=21, OpType=BROADCAST, TensorShape=[{n}], "
              "TensorDtypes=Long, TensorDeviceTypes=TensorOptions(dtype=float (default), "
              "device=cuda))")
        text += "".join(
            f"[rank{r}]: RuntimeError: Detected mismatch between collectives on ranks. Rank "
            f"{r} is running collective: {fp.format(n=1)}, but Rank 9999999 is running "
            f"collective: {fp.format(n=41)}.\n" for r in (0, 1, 3))
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "job.log").write_text(text)
    return folder


@pytest.mark.parametrize("kind", ["desync", "fingerprint"])
def test_seven_digit_ranks_in_pytorch_reports_are_no_evidence(tmp_path, kind):
    run = run_bounded("analyze", "--logs", str(_seven_digit_logs(tmp_path, kind)),
                      "--format", "json", "-q")
    assert_clean(run, FOUND)
    rep = run.json()
    named = {r for f in rep["stall_findings"] for r in f["ranks"]}
    assert all(r < 1_000_000 for r in named | set(rep["missing_ranks"])), named
    assert rep["world_size"] is None or rep["world_size"] < 1_000_000


def test_several_scheduled_jobs_write_one_file_each(tmp_path):
    from stormotel.analyzers.sinks.outputs import safe_job_id

    from tests.hostile.hostile_server import hostile_server

    out = tmp_path / "out"
    with hostile_server() as url:
        run = run_bounded("analyze", "--prometheus", f"{url}/multi", "--scheduled", "--since",
                          "10m", "--settle", "0s", "--http-retries", "0", "--format", "json",
                          "-o", str(out / "report.json"), "--html", str(out / "{job}.html"),
                          "--perfetto", str(out / "trace.json"),
                          "--incident-dashboard", str(out / "dash-{job}.json"))
    assert_clean(run, FOUND)
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    x = safe_job_id("../x")  # never a path outside --output's folder
    assert x.startswith("_") and "/" not in x
    assert files == sorted([
        "a/report.json", "b/report.json", f"{x}/report.json",
        "a.html", "b.html", f"{x}.html", "a/trace.json", "b/trace.json", f"{x}/trace.json",
        "dash-a.json", "dash-b.json", f"dash-{x}.json"]), files
    assert json.loads((out / "b" / "report.json").read_text())["job_id"] == "b"
    assert not (tmp_path / "x").exists()


SECRET = "p@ss@w0rd-secret"
TOKEN = "TOKSECRET123456"


def test_html_report_has_no_secret_no_raw_control_and_no_markup_in_its_data(tmp_path):
    from tests.hostile.corpus import events, write

    folder = tmp_path / "job"
    url = f"http://admin:{SECRET}@prom:9090/api?token={TOKEN}"
    job_id = f"j\u202e\x00 {url}"
    for r in range(4):
        evs = events(r, job_id=job_id, grow_at=120 if r == 2 else None)
        for i, e in enumerate(evs):
            e["context"] = f"<!--<script> {url} \x00\u202e\u2028 step" if 50 <= i < 60 else None
        write(folder / f"rank{r}.json", evs)
    html = tmp_path / "report.html"
    report = tmp_path / "report.json"
    run = run_bounded("analyze", str(folder), "--html", str(html), "--format", "json",
                      "-o", str(report), "-q")
    assert_clean(run, FOUND)
    page = html.read_text(encoding="utf-8")
    everything = page + report.read_text() + run.stderr + run.stdout
    assert SECRET not in everything and TOKEN not in everything and "p@ss" not in everything
    assert "\x00" not in page and "\u202e" not in page and "\u2028" not in page
    data = page.split('id="stormotel-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and ">" not in data and "&" not in data
    assert json.loads(data)["charts"]


def test_failed_endpoint_url_is_redacted_as_a_json_key(tmp_path):
    from tests.hostile.hostile_server import hostile_server

    report = tmp_path / "report.json"
    with hostile_server() as url:
        run = run_bounded("analyze", "--prometheus", f"{url}/sched", "--prometheus",
                          f"http://user:{SECRET}@127.0.0.1:9/?token={TOKEN}", "--job-id", "j",
                          "--since", "10m", "--http-retries", "0", "--format", "json",
                          "-o", str(report))
    assert_clean(run, FOUND)
    written = report.read_text()
    assert SECRET not in written + run.stderr and TOKEN not in written + run.stderr
    assert "p@ss" not in written + run.stderr and "<redacted>" in written


_DISK_FULL_SCRIPT = r"""
import json, resource, signal, sys, time
from pathlib import Path
from stormotel.tracker import MemoryTracker

out = Path(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
tracker = MemoryTracker(sampler="simulated", sampling_interval=0.01, job_id="j", rank=0,
                        local_rank=0, world_size=1, host="h", env={}, archive_dir=out,
                        archive_format="lines")
resource.setrlimit(resource.RLIMIT_FSIZE, (30_000, hard))  # the disk fills up
tracker.start_tracking()
time.sleep(1.0)
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # space returns
time.sleep(0.5)
tracker.stop_tracking()
print(json.dumps(tracker.stats["export_failures"]))
"""


def test_lines_archive_on_a_full_disk_keeps_whole_lines_and_counts_drops(tmp_path):
    run = run_bounded(python=["-c", _DISK_FULL_SCRIPT, str(tmp_path / "a")])
    assert run.code == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    failures = json.loads(run.stdout.strip().splitlines()[-1])
    assert sum(n for k, n in failures.items() if k.startswith("archive/")) >= 1, failures
    lines = (tmp_path / "a" / "j" / "rank-0.metrics.jsonl").read_text().splitlines()
    assert len(lines) > 5
    for line in lines:
        json.loads(line)  # no half line left in the middle of the file
