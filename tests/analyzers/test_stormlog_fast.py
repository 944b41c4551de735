"""The typed Stormlog decoder gives the same Timeline as the dict path on every export shape."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from stormotel.analyzers.sources import stormlog, stormlog_fast
from stormotel.analyzers.sources.base import LoadContext
from stormotel.analyzers.sources.jsonio import loads

DATA = Path(__file__).parent / "data"


def _both(data: bytes) -> tuple[LoadContext, LoadContext]:
    events = stormlog_fast.decode_events(data)
    assert events is not None and type(events[0]) in stormlog_fast.EVENT_TYPES
    out = []
    for records in (stormlog.records_from_json(loads(data), "x.json"), events):
        ctx = LoadContext()
        stormlog.load_records(records, "x.json", ctx)
        out.append(ctx)
    return out[0], out[1]


def _assert_same(a: LoadContext, b: LoadContext) -> None:
    ta, tb = a.builder.build(), b.builder.build()
    assert ta.rank_ids == tb.rank_ids and ta.notes == tb.notes and ta.skipped == tb.skipped
    assert ta.meta == tb.meta
    for r in ta.rank_ids:
        sa, sb = ta.ranks[r], tb.ranks[r]
        assert sa.identity == sb.identity
        np.testing.assert_array_equal(sa.t_ns, sb.t_ns)
        assert sa.values.keys() == sb.values.keys()
        for k in sa.values:
            np.testing.assert_array_equal(sa.values[k], sb.values[k])
        assert list(sa.markers.name) == list(sb.markers.name)
        np.testing.assert_array_equal(sa.markers.start_ns, sb.markers.start_ns)


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("stormlog_events_rank*.json")))
def test_real_exports_match_the_dict_path(name: str) -> None:
    data = (DATA / name).read_bytes()
    events = stormlog_fast.decode_events(data)
    assert events is not None and {type(e) for e in events} == {stormlog_fast.CompleteEvent}
    _assert_same(*_both(data))


def test_an_event_without_a_key_decodes_every_event_as_optional() -> None:
    """One event lacking a key 0.4.x always writes (here the last one's ``session_id``): the
    whole file is read as :class:`Event`, whose columns check each value for a missing key."""
    events = json.loads((DATA / "stormlog_events_rank1.json").read_bytes())
    for key in stormlog_fast.COMPLETE_KEYS:
        changed = [*events[:-1], {k: v for k, v in events[-1].items() if k != key}]
        data = json.dumps(changed).encode()
        decoded = stormlog_fast.decode_events(data)
        assert decoded is not None and {type(e) for e in decoded} == {stormlog_fast.Event}
        _assert_same(*_both(data))


def test_odd_exports_match_the_dict_path() -> None:
    """Missing keys, nulls, legacy names, identity only in metadata, wrong types, a wrapper."""
    base = json.loads((DATA / "stormlog_events_rank1.json").read_bytes())
    events = [dict(e) for e in base]
    for e in events[::3]:
        e.pop("allocator_reserved_bytes", None)
        e.pop("rank", None)
        e["metadata"] = {**(e.get("metadata") or {}), "rank": 1, "host": "meta-host"}
    events[1].pop("device_used_bytes", None)
    events[2]["memory_mb"] = 12.5
    events[4]["device_used_bytes"] = "not a number"
    events[5]["allocator_allocated_bytes"] = -3
    events[6] = {"timestamp": events[6]["timestamp_ns"] / 1e9, "memory_allocated": 1000,
                 "total_memory": 10**9, "message": "legacy"}
    _assert_same(*_both(json.dumps({"events": events}).encode()))
    legacy_first = [events[6], *events[7:]]  # left to the generic path (tested elsewhere)
    assert stormlog_fast.decode_events(json.dumps(legacy_first).encode()) is None


def test_not_stormlog_shapes_are_left_to_the_generic_path() -> None:
    assert stormlog_fast.decode_events(b'[{"foo": 1}]') is None
    assert stormlog_fast.decode_events(b'[1, 2]') is None
    assert stormlog_fast.decode_events(b'{"schema_version": 4, "timestamp_ns": 5}') is None
    assert stormlog_fast.decode_events(b'[{"timestamp_ns": NaN}]') is None


def _identity_only_in_metadata(metadata: object) -> list[dict]:
    """The real export with rank, session, host, job and total moved into ``metadata`` (the
    legacy layout), so every fallback that reads ``metadata`` is taken."""
    events = [dict(e) for e in json.loads((DATA / "stormlog_events_rank1.json").read_bytes())]
    for e in events:
        for key in ("rank", "session_id", "host", "job_id", "device_total_bytes"):
            e.pop(key, None)
        e["metadata"] = metadata
    return events


@pytest.mark.parametrize("metadata", [
    {"rank": 3, "session_id": 's"{[}]\\n', "host": "h\u00e9\\\"}", "job_id": "j\u2603",
     "total_memory": 2**34, "nested": {"a": [1, {"b": "}"}]}},
    {"device_total": 2**33, "rank": "2", "host": "", "job_id": None},
    [1, 2], "a string", 7, None, {},
], ids=["escaped", "legacy-names", "list", "string", "number", "null", "empty"])
def test_metadata_read_on_demand_matches_the_dict_path(metadata: object) -> None:
    """The typed decoder keeps ``metadata`` as raw JSON; decoded on demand it gives what the
    dict path reads, whatever it holds (escaped quotes and braces, non-objects, nothing)."""
    _assert_same(*_both(json.dumps(_identity_only_in_metadata(metadata)).encode()))


@pytest.mark.parametrize("dump", [
    lambda ev: json.dumps(ev, indent=2),
    lambda ev: json.dumps(ev, sort_keys=True),
    lambda ev: json.dumps([dict(reversed(list(e.items()))) for e in ev], ensure_ascii=False),
    lambda ev: json.dumps({"telemetry_events": ev}, separators=(",", ":")),
], ids=["pretty", "sorted-keys", "reversed-keys", "compact-wrapper"])
def test_layouts_match_the_dict_path(dump) -> None:  # type: ignore[no-untyped-def]
    """Pretty-printed, reordered (``metadata`` first or in the middle) and compact layouts of
    the real export and of its legacy variant."""
    real = json.loads((DATA / "stormlog_events_rank1.json").read_bytes())
    _assert_same(*_both(dump(real).encode()))
    legacy = _identity_only_in_metadata({"rank": 4, "host": "m", "total_memory": 2**30})
    _assert_same(*_both(dump(legacy).encode()))


@pytest.mark.parametrize(("value", "complete"), [
    (1.5e9, False), (2**63 + 5, True), (None, True), (True, False), ("12", False), (-7, True),
    (2**53 + 1, True),
], ids=["float", "beyond-int64", "null", "bool", "text", "negative", "beyond-2^53"])
def test_counter_values_convert_as_the_dict_path_does(value: object, complete: bool) -> None:
    """Counters of a complete export convert as integers; a float, bool or text anywhere makes
    the export optional Events, a null or an integer beyond int64 the per-value conversion;
    every way gives the dict path's Timeline (values, skips, notes)."""
    events = json.loads((DATA / "stormlog_events_rank1.json").read_bytes())
    events = [dict(e) for e in events]
    for e in events[5:40:7]:
        e["device_used_bytes"] = value
        e["allocator_reserved_bytes"] = value
    data = json.dumps(events).encode()
    decoded = stormlog_fast.decode_events(data)
    assert decoded is not None
    assert (type(decoded[0]) is stormlog_fast.CompleteEvent) == complete
    _assert_same(*_both(data))
