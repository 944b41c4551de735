"""Damaged VictoriaMetrics native answers, counted by where the damage falls and what the
decoder made of it.

VictoriaMetrics' native export (``/api/v1/export/native``) has no checksum: whatever damage
still parses is read as numbers. This module takes REAL answers of a real server, classifies
every byte offset by the field it belongs to (the walk below follows the layout
:mod:`stormotel.analyzers.sources.vm_native` decodes), damages them — a cut at an offset, one
flipped bit — and sorts each outcome:

* ``refused``: :class:`~stormotel.analyzers.sources.vm_native.NativeFormatError` or a series
  the read's selector does not select (what :meth:`NativeReader._read` refuses: the read goes
  through the JSON export, with a note);
* ``same``: decoded to exactly the undamaged answer's series (a bit the decode never uses, a
  sample outside the asked range) — no harm;
* ``silent``: decoded without error to other series or samples — the damage this module
  exists to count;
* ``crash``: any other exception (a bug: the reader would fail with it).

Used by tests/fuzz/test_native_damage.py (a fixed-seed campaign with bounds) and
benchmarks/bench_native_damage.py (the counted table in docs/benchmarks.md).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from stormotel.analyzers.sources import vm_native
from stormotel.analyzers.sources.prometheus_api import Series
from stormotel.analyzers.sources.promql_selector import unselected

#: The fields of a native answer, in the order they come.
CLASSES = ("range", "name_len", "name", "block_len", "first_t", "first_v", "rows", "scale",
           "types", "t_len", "t_data", "v_len", "v_data")
OUTCOMES = ("refused", "same", "silent", "crash")
#: The damage: one flipped bit, a byte set to another value, the answer cut at an offset.
KINDS = ("flip", "byte", "cut")


def offset_classes(body: bytes) -> list[str]:
    """The field each byte of an undamaged answer belongs to (:data:`CLASSES`)."""
    out = ["range"] * 16
    at = 16
    while at < len(body):
        mlen = int.from_bytes(body[at:at + 4], "big")
        out += ["name_len"] * 4 + ["name"] * mlen
        at += 4 + mlen
        blen = int.from_bytes(body[at:at + 4], "big")
        out += ["block_len"] * 4
        at += 4
        blk_end = at + blen
        for name in ("first_t", "first_v", "rows", "scale"):
            _, nxt = vm_native._uvarint(body, at)
            out += [name] * (nxt - at)
            at = nxt
        out += ["types"] * 2
        at += 2
        for ln, data in (("t_len", "t_data"), ("v_len", "v_data")):
            n, nxt = vm_native._uvarint(body, at)
            out += [ln] * (nxt - at) + [data] * n
            at = nxt + n
        assert at == blk_end, "the walk does not match the answer's framing"
    assert len(out) == len(body)
    return out


@dataclass
class Answer:
    """One real answer and how it was asked for."""

    body: bytes
    selector: str
    start_ms: int
    end_ms: int
    dedup_ms: int = 0
    clean: list[Series] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.clean = decode(self)
        self.classes = offset_classes(self.body)


def decode(a: Answer, body: bytes | None = None) -> list[Series]:
    """What the native reader keeps of ``body`` (the answer's own by default): its decode and
    the selector check (NativeFormatError for either refusal)."""
    series = vm_native.decode_native(a.body if body is None else body, a.start_ms, a.end_ms,
                                     a.dedup_ms)
    if (why := unselected(a.selector, (s.labels for s in series))) is not None:
        raise vm_native.NativeFormatError(f"a series the selector does not select: {why}")
    return series


def same(x: list[Series], y: list[Series]) -> bool:
    """The same series, labels, timestamps and values bit for bit."""
    if len(x) != len(y):
        return False
    for a, b in zip(x, y, strict=True):
        if a.labels != b.labels or a.t_ns is None or b.t_ns is None:
            return False
        assert a.v is not None and b.v is not None
        if not (np.array_equal(a.t_ns, b.t_ns)
                and np.array_equal(a.v.view(np.uint64), b.v.view(np.uint64))):
            return False
    return True


def outcome(a: Answer, body: bytes) -> tuple[str, str]:
    """(outcome, detail) of the damaged ``body``: the refusal's reason or the exception."""
    try:
        got = decode(a, body)
    except vm_native.NativeFormatError as e:
        return "refused", str(e)
    except Exception as e:
        return "crash", f"{type(e).__name__}: {e}"
    return ("same", "") if same(got, a.clean) else ("silent", "")


def mutations(a: Answer, rng: random.Random, per_class: int
              ) -> Iterator[tuple[str, str, bytes]]:
    """(kind, class, damaged body): ``per_class`` each of cuts, one-bit flips and bytes set
    to another value, at offsets drawn in each field class the answer has (a cut at an
    offset keeps the bytes before it)."""
    where: dict[str, list[int]] = {}
    for i, c in enumerate(a.classes):
        where.setdefault(c, []).append(i)
    body = a.body
    for c in CLASSES:
        offsets = where.get(c)
        if not offsets:
            continue
        for _ in range(per_class):
            at = rng.choice(offsets)
            yield "cut", c, body[:at]
        for _ in range(per_class):
            at = rng.choice(offsets)
            yield "flip", c, body[:at] + bytes([body[at] ^ (1 << rng.randrange(8))]) \
                + body[at + 1:]
        for _ in range(per_class):
            at = rng.choice(offsets)
            yield "byte", c, body[:at] + bytes([body[at] ^ rng.randrange(1, 256)]) \
                + body[at + 1:]


@dataclass
class Tally:
    """Outcomes counted per (kind, class), and a few examples of each silent or crash."""

    counts: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, cls: str, what: str, detail: str) -> None:
        self.counts[kind, cls, what] += 1
        if what in ("silent", "crash"):
            ex = self.examples.setdefault(f"{kind}/{cls}/{what}", [])
            if len(ex) < 3:
                ex.append(detail)

    def total(self, what: str, kind: str | None = None, cls: str | None = None) -> int:
        return sum(n for (k, c, w), n in self.counts.items()
                   if w == what and kind in (None, k) and cls in (None, c))

    def all(self, kind: str | None = None, cls: str | None = None) -> int:
        return sum(self.total(w, kind, cls) for w in OUTCOMES)

    def table(self) -> str:
        """A Markdown table: per class, each kind's outcomes."""
        rows = ["| field | " + " | ".join(f"{k}s | refused | same | silent" for k in KINDS)
                + " |", "|---" * (1 + 4 * len(KINDS)) + "|"]
        for c in (*CLASSES, None):
            cells = [c or "**all**"]
            for kind in KINDS:
                n = self.all(kind, c)
                cells += [str(n)] + [f"{self.total(w, kind, c)}" for w in
                                     ("refused", "same", "silent")]
            if self.all(None, c):
                rows.append("| " + " | ".join(cells) + " |")
        crashes = self.total("crash")
        if crashes:
            rows.append(f"\n{crashes} crashed: {self.examples}")
        return "\n".join(rows)


def campaign(answers: list[Answer], seed: int, per_class: int) -> Tally:
    """Every answer damaged ``per_class`` times per field class and kind."""
    rng = random.Random(seed)
    tally = Tally()
    for a in answers:
        for kind, cls, body in mutations(a, rng, per_class):
            what, detail = outcome(a, body)
            tally.add(kind, cls, what, detail)
    return tally


# --- a production-shaped job in a real VictoriaMetrics, and its native answers ---------------
GiB = float(1 << 30)
STALE = float(np.array(vm_native.STALE_NAN_BITS, np.uint64).view(np.float64))


def job_series(job: str, ranks: int, minutes: int, end_ms: int, seed: int
               ) -> Iterator[tuple[str, dict[str, str], np.ndarray, np.ndarray]]:
    """What a tracker's scrapes leave in a TSDB: per rank, memory gauges in bytes (a rise
    partway, noise), the step counter and the OOM counter, scraped every 15 or 30 s with a
    few ms of jitter, starts staggered; every fourth rank's target gone 5 minutes before the
    end (a staleness marker after its last sample); short series from a rank that started
    late."""
    from stormotel import schema  # the names' one home

    rng = np.random.default_rng(seed)
    start = end_ms - minutes * 60_000
    names = {schema.FIELD_METRICS[f].prom_aliases[0]: f
             for f in ("reserved", "allocated", "device_used", "device_total")}
    for rank in range(ranks):
        interval = 15_000 if rank % 3 else 30_000
        first = start + int(rng.integers(0, 90_000))
        last = end_ms - (5 * 60_000 if rank % 4 == 3 else 0)
        if rank == ranks - 1:  # a late rank: a few samples
            first, last = end_ms - 4 * interval, end_ms
        t = np.arange(first, last, interval, dtype=np.int64)
        t = t + rng.integers(0, 40, t.size)  # scrape jitter: timestamps not delta-const
        n = t.size
        labels = {schema.ATTR_JOB_ID: job, schema.ATTR_RANK: str(rank),
                  schema.ATTR_LOCAL_RANK: str(rank % 8), schema.ATTR_WORLD_SIZE: str(ranks),
                  schema.ATTR_HOST: f"node-{rank // 8:03d}", schema.ATTR_GPU: str(rank % 8)}
        reserved = np.round(20 * GiB + np.where(np.arange(n) > n // 2, 6 * GiB, 0.0)
                            + rng.normal(0, 5e7, n))
        values = {"reserved": reserved, "allocated": reserved - np.round(2 * GiB
                                                                         * rng.random(n)),
                  "device_used": reserved + 1.5 * GiB, "device_total": np.full(n, 80 * GiB)}
        series = {name: values[f] for name, f in names.items()}
        series[schema.STEP.prom] = np.floor((t - t[0]) / 1900.0)
        series[schema.OOMS.prom] = np.where(np.arange(n) > n // 3, 1.0, 0.0)
        for name, v in series.items():
            if last < end_ms:
                yield name, labels, np.append(t, t[-1] + interval), np.append(v, STALE)
            else:
                yield name, labels, t, v


def load_job(url: str, job: str, ranks: int, minutes: int, end_ms: int, seed: int
             ) -> list[str]:
    """Remote-writes :func:`job_series` into the VictoriaMetrics at ``url``, flushed and
    searchable; the metric names written."""
    import time

    import httpx
    from stormotel.analyzers.sinks import remote_write

    names: set[str] = set()
    with httpx.Client(timeout=60) as c:
        for name, labels, t, v in job_series(job, ranks, minutes, end_ms, seed):
            names.add(name)
            r = c.post(url + "/api/v1/write", headers=remote_write.HEADERS,
                       content=remote_write.encode_arrays(name, labels, t, v))
            assert r.status_code in (200, 204), r.text
        c.get(url + "/internal/force_flush")
        deadline = time.monotonic() + 30
        want = len(names) * ranks
        while time.monotonic() < deadline:
            got = c.get(url + "/api/v1/series", params={"match[]": f'{{job_id="{job}"}}',
                                                        "start": end_ms / 1000 - 86400})
            if len(got.json()["data"]) >= want:
                break
            time.sleep(0.2)
    return sorted(names)


def fetch_answers(url: str, job: str, names: list[str], ranks: int, start_ms: int,
                  end_ms: int) -> list[Answer]:
    """The native answers the reader's reads get: one per metric name, the job's ranks in
    batches of 16 (the selector as :mod:`..prometheus.plan` builds it)."""
    import httpx
    from stormotel.analyzers.sources.prometheus.plan import rank_selector
    from stormotel.analyzers.sources.prometheus_api import label_selector

    from stormotel import schema

    out = []
    with httpx.Client(timeout=60) as c:
        for name in names:
            base = label_selector({"__name__": name, schema.ATTR_JOB_ID: job})
            for lo in range(0, ranks, 16):
                sel = rank_selector(base, list(range(lo, min(ranks, lo + 16))))
                r = c.post(url + vm_native.PATH, data={"match[]": sel,
                                                       "start": f"{start_ms / 1000:.3f}",
                                                       "end": f"{end_ms / 1000:.3f}"})
                assert r.status_code == 200, r.text
                out.append(Answer(r.content, sel, start_ms, end_ms))
    return out


# --- one field of an answer's first block, rewritten (the minimal inputs of the tests) --------
def first_block(body: bytes) -> dict[str, tuple[int, int]]:
    """Where each field of the answer's first block lies: (start, end) offsets."""
    out: dict[str, tuple[int, int]] = {}
    for i, c in enumerate(offset_classes(body)):
        if c == "name_len" and "v_len" in out:
            break
        lo, _ = out.get(c, (i, i))
        out[c] = (lo, i + 1)
    return out


def with_field(body: bytes, name: str, new: bytes) -> bytes:
    """The answer with its first block's field ``name`` replaced by ``new`` (the block's and,
    for ``name``, the metric name's length fixed to match)."""
    f = first_block(body)
    lo, hi = f[name]
    grow = len(new) - (hi - lo)
    out = bytearray(body[:lo] + new + body[hi:])
    if name == "name":
        a, b = f["name_len"]
        out[a:b] = (hi - lo + grow).to_bytes(4, "big")
    else:
        a, b = f["block_len"]
        out[a:b] = (int.from_bytes(body[a:b], "big") + grow).to_bytes(4, "big")
    return bytes(out)
