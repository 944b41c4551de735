"""Every file reader under generated input (the way Prometheus and the OTel Collector fuzz their
parsers): valid telemetry mutated — values replaced by any JSON, keys dropped, lists cut,
shapes wrapped — gives a report, a counted skip or exit 2/3; never exit 70, a traceback, a
secret or a raw control character in what is printed or written."""

from __future__ import annotations

import csv
import functools
import io
import json
import pickle
import tempfile
from pathlib import Path

import zstandard
from hypothesis import given
from hypothesis import strategies as st

from stormotel import schema
from tests.fuzz.boundary import analyze, check, hostile_text, json_values, mutate
from tests.hostile.corpus import events

GIB = 1024**3


def _folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="stormotel-fuzz-"))


def _analyze_folder(folder: Path, *extra: str) -> None:
    report = folder / "out" / "report.json"
    html = folder / "out" / "report.html"
    result = analyze(str(folder / "in"), "--format", "json", "-o", str(report),
                     "--html", str(html), "-q", *extra)
    check(result, report, html)


# --- Stormlog JSON and CSV -----------------------------------------------------------------
@given(st.data(), st.sampled_from(["array", "object", "lines"]))
def test_stormlog_json(data, shape):
    folder = _folder()
    (folder / "in").mkdir()
    for r in range(2):
        evs = mutate(events(r, 20, world_size=2, grow_at=12 if r else None), data)
        text = (json.dumps({"events": evs}) if shape == "object"
                else "\n".join(json.dumps(e) for e in evs) if shape == "lines" and
                isinstance(evs, list) else json.dumps(evs))
        (folder / "in" / f"rank{r}.json").write_text(text)
    _analyze_folder(folder)


@given(st.data())
def test_stormlog_csv(data):
    folder = _folder()
    (folder / "in").mkdir()
    for r in range(2):
        evs = events(r, 20, world_size=2)
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(evs[0]))
        writer.writeheader()
        for e in evs:
            if data.draw(st.booleans(), label="mutate row"):
                key = data.draw(st.sampled_from(list(e)), label="cell")
                e[key] = data.draw(st.one_of(hostile_text, st.integers(-2**70, 2**70)),
                                   label="value")
            writer.writerow(e)
        (folder / "in" / f"rank{r}.csv").write_text(buf.getvalue().replace("\x00", "\\0"))
    _analyze_folder(folder)


# --- OTLP JSON in every shape ----------------------------------------------------------------
@functools.cache
def _requests() -> tuple[str, ...]:
    from tests.analyzers.otlp_fixtures import json_lines, metrics_requests
    from tests.analyzers.synth import healthy

    reqs = [r for d in healthy(2, 30) for r in metrics_requests(d)]
    return tuple(json_lines(reqs).decode().splitlines())


@given(st.data(), st.sampled_from(["lines", "document", "array", "bare", "pretty-lines"]))
def test_otlp_json(data, shape):
    reqs = [mutate(json.loads(line), data, 2) for line in _requests()]
    folder = _folder()
    (folder / "in").mkdir()
    if shape == "lines":
        text = "\n".join(map(json.dumps, reqs))
    elif shape == "document":
        text = json.dumps({"resourceMetrics": [rm for r in reqs if isinstance(r, dict)
                                               for rm in r.get("resourceMetrics") or []
                                               ] if all(isinstance(r, dict) and isinstance(
                                                   r.get("resourceMetrics"), list)
                                                   for r in reqs) else reqs}, indent=1)
    elif shape == "array":
        text = json.dumps(reqs)
    elif shape == "bare":
        text = "\n".join(json.dumps(rm) for r in reqs if isinstance(r, dict)
                         and isinstance(r.get("resourceMetrics"), list)
                         for rm in r["resourceMetrics"])
    else:
        text = "\n".join(json.dumps(r, indent=1) for r in reqs)
    (folder / "in" / "rank-0.metrics.jsonl").write_text(text + "\n")
    _analyze_folder(folder)


# --- the compact archive ---------------------------------------------------------------------
@functools.cache
def _compact_lines() -> tuple[str, ...]:
    from stormotel.archive_writer import CompactArchiveWriter
    from stormotel.samplers.base import Sample

    folder = _folder()
    ident = {schema.ATTR_JOB_ID: "j", schema.ATTR_RANK: "0", schema.ATTR_WORLD_SIZE: "1"}
    w = CompactArchiveWriter(folder, 0, {}, ident, collect=None, on_failure=lambda r: None,
                             on_drop=lambda r, n: None)
    t0 = 1_700_000_000_000_000_000
    for i in range(40):
        w.put(Sample(t0 + i * 100_000_000, allocated=4 * GIB, reserved=5 * GIB,
                     device_used=6 * GIB, device_total=80 * GIB), i, 0.1)
    w.close()
    [zst] = sorted(folder.rglob("*.metrics.jsonl.zst"))
    z = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)  # every frame
    text = z.decompress(zst.read_bytes()).decode()
    return tuple(text.splitlines())


@given(st.data())
def test_compact_archive(data):
    lines = [mutate(json.loads(line), data, 3) for line in _compact_lines()]
    folder = _folder()
    (folder / "in").mkdir()
    text = "\n".join(map(json.dumps, lines)) + "\n"
    if data.draw(st.booleans(), label="cut"):
        text = text[:data.draw(st.integers(0, len(text)), label="at")]
    (folder / "in" / "rank-0.metrics.jsonl.zst").write_bytes(
        zstandard.ZstdCompressor().compress(text.encode()))
    _analyze_folder(folder)


@functools.cache
def _compact_with_companion() -> tuple[bytes, tuple[bytes, ...]]:
    """A compact file of several frames and its companion's frame contents (inflated)."""
    from stormotel.analyzers.sources.otlp_cols import _frames

    from stormotel.archive_format import cols_path_for
    from stormotel.archive_writer import ArchiveLimits, CompactArchiveWriter
    from stormotel.samplers.base import Sample

    folder = _folder()
    ident = {schema.ATTR_JOB_ID: "j", schema.ATTR_RANK: "0", schema.ATTR_WORLD_SIZE: "1"}
    w = CompactArchiveWriter(folder, 0, {}, ident, collect=None, on_failure=lambda r: None,
                             on_drop=lambda r, n: None,
                             limits=ArchiveLimits(batch_s=3600, cols_frame_samples=20))
    t0 = 1_700_000_000_000_000_000
    for i in range(60):
        w.put(Sample(t0 + i * 100_000_000, allocated=4 * GIB + i, reserved=5 * GIB,
                     device_used=6 * GIB + 3 * i, device_total=80 * GIB), i, 0.1)
        if i % 10 == 9:
            w.flush()
    w.close()
    [zst] = sorted(folder.rglob("*.metrics.jsonl.zst"))
    return zst.read_bytes(), tuple(_frames(cols_path_for(zst).read_bytes(), 2**30))


@given(st.data())
def test_compact_companion(data):
    """The columnar companion mutated (header fields replaced by any JSON, bytes flipped or
    cut, frames dropped or repeated) beside an intact JSON file."""
    import struct

    from stormotel.archive_format import MAGIC

    json_zst, contents = _compact_with_companion()
    frames = list(contents)
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        i = data.draw(st.integers(0, len(frames) - 1), label="frame")
        kind = data.draw(st.sampled_from(["header", "flip", "cut", "drop", "repeat"]),
                         label="kind")
        content = frames[i]
        if kind == "header":
            try:  # an earlier edit may have broken the header itself: nothing to edit then
                (hlen,) = struct.unpack_from("<I", content, len(MAGIC))
                start = len(MAGIC) + 4
                header = json.loads(content[start:start + hlen])
            except (struct.error, ValueError):
                continue
            if not isinstance(header, dict) or not header:
                continue
            key = data.draw(st.sampled_from(sorted(header)), label="key")
            header[key] = data.draw(json_values, label="value")
            head = json.dumps(header).encode()
            frames[i] = MAGIC + struct.pack("<I", len(head)) + head + content[start + hlen:]
        elif kind == "flip":
            at = data.draw(st.integers(0, len(content) - 1), label="at")
            frames[i] = content[:at] + bytes([content[at] ^ 0x5A]) + content[at + 1:]
        elif kind == "cut":
            frames[i] = content[:data.draw(st.integers(0, len(content)), label="at")]
        elif kind == "drop" and len(frames) > 1:
            del frames[i]
        else:
            frames.insert(i, content)
    folder = _folder()
    (folder / "in").mkdir()
    (folder / "in" / "rank-0.00000.metrics.jsonl.zst").write_bytes(json_zst)
    c = zstandard.ZstdCompressor()
    (folder / "in" / "rank-0.00000.metrics.cols.zst").write_bytes(
        b"".join(c.compress(x) for x in frames))
    _analyze_folder(folder)


# --- Flight Recorder pickles (through the safe unpickler) -----------------------------------
def _fr_entry(i: int) -> dict:
    return {"record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"),
            "collective_seq_id": i + 1, "p2p_seq_id": 0, "op_id": i + 1,
            "profiling_name": "nccl:all_reduce", "time_created_ns": 1 + i,
            "input_sizes": [[4]], "input_dtypes": ["Float"], "output_sizes": [[4]],
            "output_dtypes": ["Float"], "state": "completed",
            "time_discovered_started_ns": None, "time_discovered_completed_ns": 2 + i,
            "retired": True, "timeout_ms": 600000, "is_p2p": False}


@given(st.data(), st.integers(2, 5), st.booleans())
def test_flight_recorder_pickles(data, protocol, raw_bytes):
    folder = _folder()
    (folder / "fr").mkdir()
    for r in range(2):
        dump = {"version": "2.10", "pg_config": {"0": {"name": "default_pg", "ranks": "[0, 1]"}},
                "pg_status": {"0": {"last_enqueued_collective": 5}},
                "entries": [_fr_entry(i) for i in range(6 - r)]}
        blob = pickle.dumps(mutate(dump, data, 4), protocol=protocol)
        if raw_bytes and r == 1:  # bytes of the pickle stream itself changed
            at = data.draw(st.integers(2, len(blob) - 1), label="byte")
            blob = blob[:at] + data.draw(st.binary(min_size=1, max_size=4), label="b") \
                + blob[at + 1:]
        (folder / "fr" / f"nccl_trace_rank_{r}").write_bytes(blob)
    result = analyze("--flight-recorder", str(folder / "fr"), "--format", "json", "-q")
    check(result)


# --- worker logs -------------------------------------------------------------------------------
_TEMPLATES = [
    "[rank{r}]:[E1121 03:12:40.118000 ProcessGroupNCCL.cpp:1316] [PG 0 Rank {r}] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum={n}, OpType=ALLREDUCE, "
    "NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for {n} milliseconds before timing out.",
    "[rank{r}]: RuntimeError: Detected mismatch between collectives on ranks. Rank {r} is "
    "running collective: CollectiveFingerPrint(SequenceNumber={n}, OpType=BROADCAST), but Rank "
    "{n} is running collective: CollectiveFingerPrint(SequenceNumber={n}, OpType=ALLREDUCE).",
    "         - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync "
    "are:", "             [{n}] finished collective #{n}, but didn't join collective #{n}",
    "[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {n} GiB",
    "WORLD_SIZE={n}", "{text}",
]


@given(st.lists(st.tuples(st.sampled_from(_TEMPLATES), st.integers(0, 7),
                          st.one_of(st.integers(0, 10**25), st.just(3)), hostile_text),
                max_size=25))
def test_worker_logs(lines):
    folder = _folder()
    (folder / "logs").mkdir()
    text = "\n".join(t.format(r=r, n=n, text=x) for t, r, n, x in lines)
    (folder / "logs" / "rank0.log").write_text(text, encoding="utf-8", errors="surrogatepass")
    result = analyze("--logs", str(folder / "logs"), "--format", "json", "-q")
    check(result)


# --- the scheduled run's state file -----------------------------------------------------------
@given(st.one_of(json_values, st.fixed_dictionaries({
    "schema": st.just("stormotel.analyzer-state/v1"),
    "jobs": st.one_of(json_values, st.dictionaries(st.text(max_size=5), json_values))})))
def test_state_file(doc):
    from stormotel.analyzers.scheduled.state import StateError, StateFile

    folder = _folder()
    path = folder / "state.json"
    path.write_text(json.dumps(doc))
    state = StateFile(path)
    try:
        state.read()
    except StateError:
        return
    for job in [*list(state.doc["jobs"])[:3], "new"]:
        state.last_end_ns(job)
        state.count_run(job, "ok")
    state.save()
    StateFile(path).read()
