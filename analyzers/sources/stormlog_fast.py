"""Typed decoding of Stormlog JSON exports: only the fields the reader uses, no per-event dicts.

A real stormlog 0.4.x event is ~1.5 KB, most of it a nested ``metadata`` object (collector
health, capabilities) that the analyzer reads only in legacy exports that keep identity there;
``orjson`` builds every one of those dicts and lists. msgspec decodes each event into a
``gc=False`` struct that declares only the used keys (the v2-v4 counters, identity, context, the
legacy names) and skips the rest in C, with the garbage collector paused. ``metadata`` is kept as
its raw JSON text (what scanning past it costs anyway) and decoded only when a fallback asks.

The structs answer ``get``/``in``/``[]`` like the dicts they replace, so
:func:`stormotel.analyzers.sources.stormlog.load_records` validates them unchanged; its column
reader pulls whole columns with ``attrgetter``. A key the export lacks is :data:`msgspec.UNSET`
(missing, as opposed to ``null``), which keeps the legacy fallbacks exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType
from stormotel.analyzers.gcpause import gc_paused

__all__ = ["COMPLETE_KEYS", "COUNTER_KEYS", "EVENT_TYPES", "UNSET", "CompleteEvent", "Event",
           "decode_events", "metadata"]


class _Lookup:
    """Read-only mapping access over a struct's fields (UNSET = key absent)."""

    __slots__ = ()

    def get(self, key: str, default: Any = None) -> Any:
        v = getattr(self, key, UNSET)
        return default if v is UNSET else v

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and getattr(self, key, UNSET) is not UNSET

    def __getitem__(self, key: str) -> Any:
        v = getattr(self, key, UNSET)
        if v is UNSET:
            raise KeyError(key)
        return v


class Meta(_Lookup, msgspec.Struct, gc=False):
    rank: Any | UnsetType = UNSET
    total_memory: Any | UnsetType = UNSET
    device_total: Any | UnsetType = UNSET
    host: Any | UnsetType = UNSET
    job_id: Any | UnsetType = UNSET
    session_id: Any | UnsetType = UNSET
    #: what Stormlog's capture_oom puts on its OOM ``error`` event (its ``is_oom_event``)
    oom_reason: Any | UnsetType = UNSET
    oom_dump_path: Any | UnsetType = UNSET


class Event(_Lookup, msgspec.Struct, kw_only=True, gc=False):
    """The keys ``stormlog.load_records`` reads (current names, then legacy ones).

    Declared in the order stormlog 0.4.x writes them: msgspec looks a key up from the field
    after the last one it matched, so this order finds each key at once (8 % of the decode).
    ``kw_only`` keeps that order in :class:`CompleteEvent`, which makes some of them required.
    """

    schema_version: Any | UnsetType = UNSET
    session_id: Any | UnsetType = UNSET
    timestamp_ns: Any | UnsetType = UNSET
    event_type: Any | UnsetType = UNSET
    host: Any | UnsetType = UNSET
    job_id: Any | UnsetType = UNSET
    rank: Any | UnsetType = UNSET
    local_rank: Any | UnsetType = UNSET
    world_size: Any | UnsetType = UNSET
    device_id: Any | UnsetType = UNSET
    allocator_allocated_bytes: Any | UnsetType = UNSET
    allocator_reserved_bytes: Any | UnsetType = UNSET
    allocator_active_bytes: Any | UnsetType = UNSET
    allocator_inactive_bytes: Any | UnsetType = UNSET
    device_used_bytes: Any | UnsetType = UNSET
    device_free_bytes: Any | UnsetType = UNSET
    device_total_bytes: Any | UnsetType = UNSET
    context: Any | UnsetType = UNSET
    #: Kept as its JSON text and decoded only when a legacy fallback reads it (:func:`metadata`):
    #: scanning past it costs what skipping it would, parsing it a fifth of the whole decode.
    metadata: msgspec.Raw | UnsetType = UNSET
    # legacy (pre-v2) names Stormlog itself still converts
    timestamp: Any | UnsetType = UNSET
    memory_allocated: Any | UnsetType = UNSET
    memory_reserved: Any | UnsetType = UNSET
    memory_mb: Any | UnsetType = UNSET
    total_memory: Any | UnsetType = UNSET
    device_total: Any | UnsetType = UNSET
    total_bytes: Any | UnsetType = UNSET
    message: Any | UnsetType = UNSET


class CompleteEvent(Event, kw_only=True, gc=False):
    """An event with every key stormlog 0.4.x always writes (:data:`COMPLETE_KEYS`), and its
    counters integers or null as 0.4.x writes them, checked in C while decoding: its columns
    need no per-value test for a missing key, and a counter column without nulls converts as
    integers (:data:`COUNTER_KEYS`). An export with anything else is read as :class:`Event`."""

    timestamp_ns: Any
    allocator_allocated_bytes: int | None
    allocator_reserved_bytes: int | None
    allocator_active_bytes: int | None
    allocator_inactive_bytes: int | None
    device_used_bytes: int | None
    device_total_bytes: int | None
    device_free_bytes: int | None
    context: Any
    schema_version: Any
    rank: Any
    session_id: Any


#: The keys a :class:`CompleteEvent` has (the v2 schema's required fields, then what 0.4.x adds).
COMPLETE_KEYS = ("timestamp_ns", "allocator_allocated_bytes", "allocator_reserved_bytes",
                 "allocator_active_bytes", "allocator_inactive_bytes", "device_used_bytes",
                 "device_total_bytes", "device_free_bytes", "context", "schema_version", "rank",
                 "session_id")
#: The byte counters, integers or null in a :class:`CompleteEvent`.
COUNTER_KEYS = COMPLETE_KEYS[1:8]
#: The typed event classes (``load_records`` reads them as it reads dicts).
EVENT_TYPES: tuple[type[Event], ...] = (Event, CompleteEvent)

Mapping.register(Meta)  # so ``isinstance(m, Mapping)`` checks accept them
Mapping.register(Event)


class _Wrapper(msgspec.Struct, gc=False):
    events: list[Event] | UnsetType = UNSET
    telemetry_events: list[Event] | UnsetType = UNSET


class _CompleteWrapper(msgspec.Struct, gc=False):
    events: list[CompleteEvent] | UnsetType = UNSET
    telemetry_events: list[CompleteEvent] | UnsetType = UNSET


_complete_decoder = msgspec.json.Decoder(list[CompleteEvent] | _CompleteWrapper)
_decoder = msgspec.json.Decoder(list[Event] | _Wrapper)


_meta_decoder = msgspec.json.Decoder(Meta | None)


def metadata(raw: msgspec.Raw) -> Meta | None:
    """An event's ``metadata`` decoded (the few keys legacy exports keep identity in); ``None``
    when it is not an object, which is what the dict path's ``isinstance(m, Mapping)`` sees."""
    try:
        return _meta_decoder.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):  # bad UTF-8 (DecodeError from msgspec
        return None  # 0.23, UnicodeDecodeError before); a ValidationError is a DecodeError


def decode_events(data: bytes) -> list[Event] | list[CompleteEvent] | None:
    """The events of a JSON export (a list, or an ``events``/``telemetry_events`` wrapper);
    ``None`` when the document is not that shape (the generic path then decides).

    Events are :class:`CompleteEvent` when every one has every key 0.4.x writes (its exports
    always do), else :class:`Event` (decoded a second time: older or hand-made exports)."""
    obj: list[CompleteEvent] | _CompleteWrapper | list[Event] | _Wrapper
    with gc_paused():
        try:
            obj = _complete_decoder.decode(data)
        except msgspec.ValidationError:  # a key missing somewhere (or not Stormlog at all)
            try:
                obj = _decoder.decode(data)
            except (msgspec.DecodeError, UnicodeDecodeError):  # ValidationError included
                return None
        except (msgspec.DecodeError, UnicodeDecodeError):  # not JSON (msgspec raises the
            return None  # latter for invalid UTF-8 in a string; the generic path counts it)
    if isinstance(obj, list):
        stormlog_like = bool(obj) and (obj[0].schema_version is not UNSET or
                                       obj[0].timestamp_ns is not UNSET)
        return obj if stormlog_like else None
    for events in (obj.events, obj.telemetry_events):
        if isinstance(events, list):
            return events
    return None

