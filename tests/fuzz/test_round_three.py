"""Fuzzing the surfaces of round three: the companion bound to its JSON, the tracker's
``STORMOTEL_*`` settings, the scheduled run's per-job state (and ``--shard``).

Each property has a seed corpus (``@example``: the red team's cases, run first every time) and
runs under the profiles of tests/fuzz/conftest.py (25 fixed examples in ``make test``,
``make fuzz`` for the long random run).
"""

from __future__ import annotations

import functools
import json
import math
import tempfile
import time
from pathlib import Path

import msgspec
import numpy as np
import zstandard
from hypothesis import example, given
from hypothesis import strategies as st

from stormotel import archive_format, environment, schema
from tests.fuzz.boundary import json_values


def _folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="stormotel-fuzz3-"))


# --- the companion, forged --------------------------------------------------------------------
@functools.cache
def _written() -> tuple[bytes, bytes, tuple[bytes, ...]]:
    """(compact JSON file, its companion, the companion's inflated frames) of one rank."""
    from stormotel.analyzers.sources.otlp_cols import _frames

    from stormotel.archive_writer import ArchiveLimits, CompactArchiveWriter
    from stormotel.samplers.base import Sample

    folder = _folder()
    ident = {schema.ATTR_JOB_ID: "j", schema.ATTR_RANK: "0", schema.ATTR_WORLD_SIZE: "1"}
    w = CompactArchiveWriter(folder, 0, {}, ident, collect=None, on_failure=lambda r: None,
                             on_drop=lambda r, n: None,
                             limits=ArchiveLimits(batch_s=3600, cols_frame_samples=20))
    gib = 2**30
    for i in range(60):
        spike = 8 * gib if 30 <= i < 33 else 0
        w.put(Sample(1_700_000_000_000_000_000 + i * 100_000_000, allocated=4 * gib + i,
                     reserved=5 * gib + spike, device_used=6 * gib + 3 * i + spike,
                     device_total=80 * gib), i, 0.1)
        if i % 10 == 9:
            w.flush()
    w.close()
    [zst] = sorted(folder.rglob("*.metrics.jsonl.zst"))
    cols = archive_format.cols_path_for(zst)
    return zst.read_bytes(), cols.read_bytes(), tuple(_frames(cols.read_bytes(), 2**30))


@functools.cache
def _json_alone() -> tuple[tuple[str, bytes], ...]:
    """The JSON file's Timeline without its companion, as comparable bytes per field."""
    from stormotel.analyzers.sources import load_paths

    folder = _folder()
    (folder / "rank-0.00000.metrics.jsonl.zst").write_bytes(_written()[0])
    return _fingerprint(load_paths([str(folder)]))


def _fingerprint(timeline: object) -> tuple[tuple[str, bytes], ...]:
    series = timeline.ranks[0]  # type: ignore[attr-defined]
    out = [("t", np.asarray(series.t_ns).tobytes())]
    out += [(name, np.asarray(series.field(name)).tobytes()) for name in sorted(series.values)]
    return tuple(out)


_EDITS = st.sampled_from(["scale", "add", "shift", "drop", "nan", "reverse", "none"])


def _forge(content: bytes, edit: str, factor: float, at: int) -> bytes:
    """One frame with its values, times or count changed, re-encoded as the writer does,
    every header field it checks (rank, file, JSON range and tail, digest) kept."""
    f = archive_format.parse_frame(content)
    t = f.t.copy()
    cols = {c.name: f.columns[c.name][1].copy() for c in f.header.columns}
    keep = np.ones(t.size, bool)
    if edit == "scale":
        cols = {k: v * factor for k, v in cols.items()}
    elif edit == "add":
        cols = {k: v + factor * 2**20 for k, v in cols.items()}
    elif edit == "shift":
        t = t + int(factor * 1e9)
    elif edit == "drop":
        keep[at % t.size] = False
    elif edit == "nan":
        cols = {k: np.where(np.arange(v.size) == at % v.size, np.nan, v) for k, v in cols.items()}
    elif edit == "reverse":
        cols = {k: v[::-1].copy() for k, v in cols.items()}
    t = t[keep]
    arrays = [archive_format.plane(np.diff(t, prepend=np.int64(0)).astype("<i8"))]
    columns = []
    for name, values in cols.items():
        v = values[keep]
        columns.append(archive_format.Column(name, "<f8", False, int(v.size), False))
        arrays.append(archive_format.plane(v.astype("<f8")))
    header = msgspec.structs.replace(f.header, samples=int(t.size), t_first=int(t[0]),
                                     t_last=int(t[-1]), columns=columns)
    return archive_format.encode_frame(header, f.resource, f.context, arrays)


@given(edits=st.lists(st.tuples(st.integers(0, 2), _EDITS,
                                st.sampled_from([2.0, 0.5, -1.0, 3.0, 1e-9]),
                                st.integers(0, 100)), min_size=1, max_size=3))
@example(edits=[(1, "scale", 2.0, 0)])  # doubled values
@example(edits=[(1, "add", -1.0, 0)])  # the spike erased (shifted down)
@example(edits=[(0, "shift", 3.0, 0), (2, "shift", 3.0, 0)])  # timestamps 3 s later
@example(edits=[(1, "drop", 1.0, 7)])  # fewer samples
@example(edits=[(2, "nan", 1.0, 3)])  # NaNs
@example(edits=[(1, "none", 1.0, 0)])  # re-encoded as f8: same values, other bytes
def test_a_forged_companion_reads_as_the_json_alone(edits):
    """Whatever a forger changes in a frame, the Timeline is the JSON's, with one note; a
    frame left byte-identical leaves the companion in use, without a note."""
    from stormotel.analyzers.sources import load_paths

    json_zst, _cols, contents = _written()
    frames = list(contents)
    for i, edit, factor, at in edits:
        frames[i] = _forge(frames[i], edit, factor, at)
    folder = _folder()
    (folder / "rank-0.00000.metrics.jsonl.zst").write_bytes(json_zst)
    c = zstandard.ZstdCompressor(write_checksum=True)
    (folder / "rank-0.00000.metrics.cols.zst").write_bytes(b"".join(c.compress(x)
                                                                    for x in frames))
    got = load_paths([str(folder)])
    assert _fingerprint(got) == _json_alone()
    changed = any(f != o for f, o in zip(frames, contents, strict=True))
    assert got.skipped.get("unusable_columns", 0) == (1 if changed else 0), got.skipped


# --- the tracker's settings ---------------------------------------------------------------------
_NUMBERS = st.one_of(
    st.sampled_from(["1e10", "1e12", "nan", "-nan", "inf", "-inf", "-1", "0", "1e400", "0x10",
                     "1_000", " 20 ", "20s", "", "1e-400", "9" * 400, "２０"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(2**70), 2**70).map(str), st.text(max_size=30))


@given(var=st.sampled_from(sorted(environment.VARIABLES)), raw=_NUMBERS)
@example(var=environment.STALL_FLOOR_S, raw="1e10")
@example(var=environment.STALL_MULTIPLE, raw="1e12")
@example(var=environment.STALL_FLOOR_S, raw="nan")
@example(var=environment.LINGER_S, raw="inf")
@example(var=environment.SIM_EPOCH_NS, raw="99999999999999999999")
@example(var=environment.SIM_FAULTS, raw="rank=0:melt@t=1s")
@example(var=environment.ARCHIVE_FORMAT, raw="xml")
def test_every_setting_is_a_value_in_range_or_the_default(var, raw):
    """Every ``STORMOTEL_*`` value is read once into a finite, in-range setting (or the
    default, with a warning) and the stall watch built from it arms without raising."""
    from stormotel.config import ExportConfig
    from stormotel.stall_watch import MAX_DEADLINE_S, MAX_MULTIPLE, StallWatch, stall_settings

    env = {var: raw}
    stall = stall_settings(env, None, None, None, None, _folder())
    assert 0 < stall.floor_s <= MAX_DEADLINE_S and 0 < stall.multiple <= MAX_MULTIPLE
    cfg = ExportConfig(archive_dir=str(_folder())).resolve(env)
    for seconds in (cfg.linger_after_event_s, cfg.prometheus_linger_s):
        assert seconds is not None and math.isfinite(seconds) and 0 <= seconds <= 86_400
    assert cfg.archive_format in schema.ARCHIVE_FORMATS
    epoch = environment.env_epoch_ns(env)
    assert epoch is None or 0 <= epoch < 2**63
    if var == environment.SIM_FAULTS:
        import os
        from unittest import mock

        from stormotel.samplers.simulated import SimulatedSampler

        with mock.patch.dict(os.environ, {var: raw}):
            SimulatedSampler(rank=0)  # a spec that does not parse: a warning, no faults
    watch = StallWatch(_folder(), {"rank": 0}, multiple=stall.multiple, floor_s=stall.floor_s)
    try:
        watch._intervals.extend([1e6] * 4)  # a slow rhythm: the deadline clamps, never raises
        watch._last = time.monotonic()
        watch.progress()
    finally:
        watch.close()


# --- the scheduled run's per-job state and --shard ----------------------------------------------
_STATE = st.one_of(json_values, st.fixed_dictionaries({
    "schema": st.just("stormotel.analyzer-state/v1"),
    "jobs": st.one_of(json_values, st.dictionaries(
        st.sampled_from(["a", "b", ""]), st.one_of(json_values, st.fixed_dictionaries({
            "last_end_ns": st.one_of(st.integers(-(2**70), 2**70), json_values),
            "runs": st.one_of(st.dictionaries(st.text(max_size=4), st.integers(-5, 2**64)),
                              json_values)}))))}))


@given(own=st.one_of(st.none(), _STATE), legacy=st.one_of(st.none(), _STATE),
       job_id=st.sampled_from(["a", "b", "é/../x", ""]), shard_text=st.text(max_size=12))
@example(own=None, legacy={"schema": "stormotel.analyzer-state/v1",
                           "jobs": {"a": {"last_end_ns": 1_800_000_000 * 10**9, "runs": {}}}},
         job_id="a", shard_text="0/2")  # an unsharded run's file, read by a sharded one
@example(own={"schema": "stormotel.analyzer-state/v1", "jobs": {"a": {"last_end_ns": 2**70}}},
         legacy=None, job_id="a", shard_text="3")
def test_a_job_state_reads_or_is_a_usage_error(own, legacy, job_id, shard_text):
    """Any per-job and legacy state: read and locked, or a one-line StateError (exit 2); what
    it says is an int64 end or nothing; an advance is read back the same by every mode."""
    from stormotel.analyzers import options as shard_options
    from stormotel.analyzers.scheduled import shard
    from stormotel.analyzers.scheduled.job import job_state
    from stormotel.analyzers.scheduled.state import StateError

    try:
        spec = shard_options.parse_shard(shard_text)
        assert 1 <= spec.count <= shard_options.MAX_SHARDS
        assert spec.index is None or 0 <= spec.index < spec.count
    except ValueError as e:
        assert "\n" not in str(e)
    base = _folder() / "state.json"
    if legacy is not None:
        base.write_text(json.dumps(legacy))
    if own is not None:
        shard.job_state_file(base, job_id).write_text(json.dumps(own))
    state = job_state(base, job_id)
    try:
        with state.locked():
            end = state.last_end_ns(job_id)
            assert end is None or 0 < end < 2**63
            state.count_run(job_id, "ok")
            state.advance(job_id, 1_900_000_000 * 10**9, "now")
            state.save()
    except StateError as e:
        assert "\n" not in str(e)
        return
    assert job_state(base, job_id).read().last_end_ns(job_id) == 1_900_000_000 * 10**9
