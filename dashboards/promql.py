"""PromQL for dashboards and rules, spelled only from :mod:`stormotel.schema` names.

Dashboards and alert rules ask the same questions (how full is this rank, how fast does its gap
grow), so the expressions live here once and both sides call them: a dashboard passes Grafana
variable matchers, a rule passes none and aggregates over every job.

Every aggregation keeps exactly the identity labels (``schema.IDENTITY_LABELS``) plus the
placement labels (``namespace``, ``cluster``) where present: other scrape labels
(``instance``, ``job``, ``otel_scope_*``) differ between the pull exporter, a collector and a
Pushgateway, and dropping them keeps arithmetic between series one-to-one whatever the pipeline.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from stormotel import schema

IDENTITY = ", ".join((*schema.IDENTITY_LABELS, *schema.PLACEMENT_LABELS))
JOB_RANK = f"{schema.ATTR_JOB_ID}, {schema.ATTR_RANK}"


def matchers(**values: str) -> str:
    """Regex label matchers, e.g. ``matchers(job_id="$job_id")`` → ``job_id=~"$job_id"``.

    Regex (``=~``) because Grafana expands multi-value variables to ``(a|b)``.
    """
    return ", ".join(f'{label}=~"{value}"' for label, value in values.items())


def dashboard_matchers(*, rank: bool = True, host: bool = True) -> str:
    """The matchers every dashboard query carries: ``$job_id``, ``$rank``, ``$host``."""
    values = {schema.ATTR_JOB_ID: f"${schema.ATTR_JOB_ID}"}
    if rank:
        values[schema.ATTR_RANK] = f"${schema.ATTR_RANK}"
    if host:
        values[schema.ATTR_HOST] = f"${schema.ATTR_HOST}"
    return matchers(**values)


# --- which names the tracker's series carry (docs/prometheus3.md) ------------------------------
# Set once per generation (``stormotel dashboards --name-translation``) and read by every
# expression below: threading the strategy through each of the dozens of helpers that name a
# metric would be the same value passed everywhere.
_NAMING: ContextVar[str] = ContextVar("stormotel_name_translation",
                                      default=schema.DEFAULT_NAME_TRANSLATION)
_LEGACY_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


@contextmanager
def naming(strategy: str) -> Iterator[None]:
    """Spell the tracker's series as Prometheus 3's OTLP ``strategy`` stores them, inside."""
    if strategy not in schema.NAME_TRANSLATIONS:
        raise ValueError(f"unknown name translation {strategy!r}: expected one of "
                         f"{', '.join(schema.NAME_TRANSLATIONS)}")
    token = _NAMING.set(strategy)
    try:
        yield
    finally:
        _NAMING.reset(token)


def name(metric: schema.Metric) -> str:
    """The stored series name of ``metric`` under the current naming."""
    return schema.stored_name(metric, _NAMING.get())


def series(name: str, match: str = "", extra: str = "") -> str:
    """``name{match, extra}``; the braces are left out when there is nothing to match.

    A name outside the classic charset (a dotted UTF-8 name) becomes the matcher
    ``{__name__="…", …}``: an equality matcher, as cheap as a bare name, and unlike Prometheus
    3's quoted ``{"…"}`` form it parses in Prometheus 2, promtool 2, VictoriaMetrics and Mimir.
    """
    inner = ", ".join(part for part in (match, extra) if part)
    if name and not _LEGACY_NAME.fullmatch(name):
        escaped = name.replace("\\", "\\\\").replace('"', '\\"')
        return "{" + ", ".join(p for p in (f'__name__="{escaped}"', inner) if p) + "}"
    return f"{name}{{{inner}}}" if inner else name


def of(metric: schema.Metric, match: str = "", extra: str = "") -> str:
    """The selector of ``metric`` under the current naming (see :func:`series`)."""
    return series(name(metric), match, extra)


def by_identity(aggregation: str, expr: str, labels: Iterable[str] = ()) -> str:
    """``max by (identity..., namespace, cluster, labels...) (expr)``: placement labels are
    kept where a scrape or a global ruler put them, absent (and harmless) elsewhere."""
    keep = ", ".join((*schema.IDENTITY_LABELS, *schema.PLACEMENT_LABELS, *labels))
    return f"{aggregation} by ({keep}) ({expr})"


def gauge(metric: schema.Metric, match: str = "") -> str:
    """One gauge per rank (``max`` over duplicate scrapes of the same rank)."""
    return by_identity("max", of(metric, match))


def histogram_mean(metric: schema.Metric, window: str, match: str = "") -> str:
    """Mean of a histogram per rank over ``window``: rate of its sum / rate of its count."""
    total, count = (series(f"{name(metric)}_{part}", match) for part in ("sum", "count"))
    return (f"{by_identity('sum', f'rate({total}[{window}])')}"
            f" / {by_identity('sum', f'rate({count}[{window}])')}")


# --- edges as metrics: exact times of the tracker's in-process edges --------------------------
def edge_time_ms(match: str = "") -> str:
    """Unix time (ms, what Grafana's date units read) of each rank's latest edge, per kind."""
    return f"{by_identity('max', of(schema.EDGE_TIMESTAMP, match), [schema.ATTR_EDGE])}" \
        " * 1000"


def edge_size(match: str = "") -> str:
    """Size of each rank's latest edge, per kind."""
    return by_identity("max", of(schema.EDGE_SIZE, match), [schema.ATTR_EDGE])


# --- derived memory quantities (the recording rules' bodies) -----------------------------------
def used_ratio(match: str = "") -> str:
    """Device used / limit, 0..1; a rank reporting a limit of 0 (unknown) has no ratio, not
    +Inf."""
    return f"{gauge(schema.DEVICE_USED, match)} / ({gauge(schema.DEVICE_LIMIT, match)} > 0)"


def headroom(match: str = "") -> str:
    """Bytes left on the device."""
    return f"{gauge(schema.DEVICE_LIMIT, match)} - {gauge(schema.DEVICE_USED, match)}"


def gap_slope(window: str, match: str = "") -> str:
    """Least-squares slope of the gap (bytes/s) over ``window``: drift, not a single spike."""
    return by_identity("max", f"deriv({of(schema.GAP, match)}[{window}])")


def time_to_full(match: str = "") -> str:
    """Seconds until the device is full if the gap keeps growing at its slope (growing only)."""
    return (f"{series(schema.REC_DEVICE_HEADROOM, match)}"
            f" / ({series(schema.REC_GAP_SLOPE, match)} > 0)")


def gap_growth_over(horizon_s: int, window: str, match: str = "") -> str:
    """Gap growth expected in ``horizon_s`` seconds (``predict_linear`` over ``window``)."""
    gap = of(schema.GAP, match)
    return (f"{by_identity('max', f'predict_linear({gap}[{window}], {horizon_s})')}"
            f" - {by_identity('max', gap)}")


def peak_over_estimate(window: str, match: str = "") -> str:
    """Highest allocator-allocated peak in ``window`` divided by the rank's estimate."""
    peak = by_identity("max", f"max_over_time({of(schema.ALLOC_ALLOCATED_PEAK, match)}"
                              f"[{window}])")
    return f"{peak} / {gauge(schema.ESTIMATE, match)}"


def rate_by(metric: schema.Metric, window: str, match: str = "",
            labels: Iterable[str] = ()) -> str:
    """Per-rank rate of a counter, optionally split by extra labels (``level``, ``reason``)."""
    return by_identity("sum", f"rate({of(metric, match)}[{window}])", labels)


def increase_by(metric: schema.Metric, window: str, match: str = "",
                labels: Iterable[str] = ()) -> str:
    """Per-rank increase of a counter over ``window``."""
    return by_identity("sum", f"increase({of(metric, match)}[{window}])", labels)


def or_zero(expr: str, window: str, match: str = "") -> str:
    """``expr``, or 0 for every rank that samples but has no such series yet.

    OTel counters appear on their first increment, so a rank that never dropped a sample has no
    drop series at all; this makes "nothing happened" read 0 instead of "no data", matched on the
    identity labels so a rank with real series is not shown twice.
    """
    zero = f"0 * {rate_by(schema.SAMPLES, window, match)}"
    return f"({expr} or on ({IDENTITY}) {zero})"


def label_values(metric: str, label: str, match: str = "") -> str:
    """Grafana's ``label_values(metric{match}, label)`` variable query."""
    return f"label_values({series(metric, match)}, {label})"


def analyzer_failed_outcomes() -> str:
    """Matcher for AN_RUNS outcomes that are not a success."""
    ok = "|".join(schema.AN_OUTCOMES_SUCCESS)
    return f'{schema.ANALYZER_LABEL_OUTCOME}!~"{ok}"'


# --- GPU attribution: the info series and the dcgm-exporter join ------------------------------
MIB_BYTES = schema.DCGM_UNIT_BYTES


def rank_info(match: str = "") -> str:
    """One series per rank (value 1) with DCGM's ``UUID`` label copied from ``gpu_uuid``.

    ``max by`` keeps the identity and GPU labels only: scrape labels and a pod restart's second
    series would otherwise make the join many-to-many.
    """
    keep = ", ".join((*schema.IDENTITY_LABELS, schema.ATTR_GPU_UUID))
    inner = f"max by ({keep}) ({of(schema.RANK_INFO, match)})"
    return (f'label_replace({inner}, "{schema.DCGM_LABEL_UUID}", "$1", '
            f'"{schema.ATTR_GPU_UUID}", "(.+)")')


def dcgm_per_gpu(metric: str, dcgm_match: str = "") -> str:
    """A DCGM FB gauge once per GPU (or MIG instance).

    dcgm-exporter repeats a shared GPU's series once per pod using it, each with the whole GPU's
    value: ``max`` collapses the copies; summing them would count the GPU several times.
    """
    return (f"max by ({schema.DCGM_LABEL_UUID}, {schema.DCGM_LABEL_GPU_INSTANCE}) "
            f"({series(metric, dcgm_match)})")


def _dcgm_fb(role_re: str, dcgm_match: str) -> str:
    """DCGM framebuffer series of any generation (``schema.DCGM_FB_NAME_RE`` with its role
    narrowed), with DCGM's "no value" codes filtered out in either unit."""
    names = schema.DCGM_FB_NAME_RE.replace("(USED|FREE|RESERVED|TOTAL)", role_re)
    sel = series("", f'__name__=~"(?i){names}"', dcgm_match)
    low, high = schema.DCGM_INT32_BLANK, schema.DCGM_INT32_BLANK + 15
    return f"(({sel} < {low} or {sel} > {high}) < {float(schema.DCGM_INT64_BLANK):.6g})"


def dcgm_unit_per_gpu(dcgm_match: str = "") -> str:
    """Bytes per reported unit for each GPU (UUID, MIG instance), told by the values: 1 when any
    of its framebuffer series reaches 2**24 (16 TiB as MiB: no GPU; 16 MiB as bytes: every
    GPU's total or free), else 1048576 (MiB, dcgm-exporter up to 4.8)."""
    gpu = f"{schema.DCGM_LABEL_UUID}, {schema.DCGM_LABEL_GPU_INSTANCE}"
    peak = f"max by ({gpu}) ({_dcgm_fb('(USED|FREE|RESERVED|TOTAL)', dcgm_match)})"
    mib = schema.DCGM_UNIT_BYTES
    return f"({mib} - {mib - 1} * ({peak} >= bool {schema.DCGM_BYTES_FLOOR:.0f}))"


def dcgm_used_per_gpu(dcgm_match: str = "") -> str:
    """DCGM's framebuffer used, in bytes, once per GPU (or MIG instance), whichever generation
    of dcgm-exporter is scraped (MiB up to 4.8, bytes from 4.9, renamed or not)."""
    gpu = f"{schema.DCGM_LABEL_UUID}, {schema.DCGM_LABEL_GPU_INSTANCE}"
    used = f"max by ({gpu}) ({_dcgm_fb('(USED)', dcgm_match)})"
    return f"{used} * on ({gpu}) group_left () {dcgm_unit_per_gpu(dcgm_match)}"


def dcgm_by_rank(match: str = "", dcgm_match: str = "") -> str:
    """DCGM's framebuffer used per training rank, in bytes, for either generation.

    ``* on(UUID) group_left(identity)`` copies job_id/rank/host/gpu from the rank's info series
    onto the GPU's series; GPUs no tracked rank owns drop out of the result.
    """
    return (f"{dcgm_used_per_gpu(dcgm_match)} * on({schema.DCGM_LABEL_UUID}) "
            f"group_left({IDENTITY}) {rank_info(match)}")
