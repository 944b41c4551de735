"""The panel catalogue: each function returns one dashboard section as a list of cells.

Sections take the label matchers to apply, so the overview (``$job_id``/``$rank``/``$host``), the
rank drill-down (one ``$rank``) and an incident dashboard (pinned suspects) show the same panels
over different selections. Legends always name the rank (and host where ranks share a panel).
"""

from __future__ import annotations

from dataclasses import dataclass

from stormotel.dashboards import promql
from stormotel.dashboards.common import (
    RATE_INTERVAL,
    STEP_INTERVAL,
    Cell,
    row,
    stat,
    table,
    timeseries,
)
from stormotel.dashboards.settings import Settings

from stormotel import schema

RANK_LEGEND = "rank {{rank}} ({{host}})"
_DASHED = {"custom.lineStyle": {"dash": [10, 10], "fill": "dash"}}


def _override_dashed(regex: str) -> dict[str, object]:
    return {"matcher": {"id": "byRegexp", "options": regex},
            "properties": [{"id": key, "value": value} for key, value in _DASHED.items()]}


def _solid_and_dashed(title: str, match: str, solid: tuple[schema.Metric, str],
                      dashed: tuple[schema.Metric, str], description: str) -> Cell:
    """A bytes panel of two per-rank gauges, each legend the rank's and its word; the second
    drawn dashed (a limit, a peak, what the first contains)."""
    return timeseries(title, [(promql.gauge(metric, match), f"{RANK_LEGEND} {word}")
                              for metric, word in (solid, dashed)],
                      "bytes", overrides=[_override_dashed(f".* {dashed[1]}")],
                      description=description)


def _per_step(metric: schema.Metric, match: str) -> str:
    """A counter's change over each step, for bar panels: adjacent, non-overlapping windows, so
    one event is one bar (``increase`` over ``$__rate_interval`` draws it in every step whose
    window covers it). A series that appears within the step counts from 0 (OTel counters
    appear on their first increment); a reset (restarted rank) counts as no change."""
    x = promql.of(metric, match)
    return promql.by_identity("sum", f"clamp_min({x} - ({x} offset {STEP_INTERVAL} or 0 * {x}),"
                                     " 0)")


def _counter(expr: str, match: str) -> str:
    """A counter panel query that reads 0, not "no data", before the first event."""
    return promql.or_zero(expr, RATE_INTERVAL, match)


@dataclass(frozen=True)
class Selection:
    """Label matchers for tracker series (identity labels) and analyzer series (job, rank)."""

    tracker: str
    analyzer_job: str
    analyzer_rank: str

    @classmethod
    def dashboard(cls) -> Selection:
        job = promql.matchers(**{schema.ATTR_JOB_ID: f"${schema.ATTR_JOB_ID}"})
        job_rank = promql.matchers(**{schema.ATTR_JOB_ID: f"${schema.ATTR_JOB_ID}",
                                      schema.ATTR_RANK: f"${schema.ATTR_RANK}"})
        return cls(promql.dashboard_matchers(), job, job_rank)


def memory(sel: Selection, cfg: Settings) -> list[Cell]:
    m = sel.tracker
    return [
        row("Device memory"),
        _solid_and_dashed("Device memory used vs limit", m, (schema.DEVICE_USED, "used"),
                          (schema.DEVICE_LIMIT, "limit"),
                          f"{schema.DEVICE_USED.description} Dashed: the device's total memory."),
        timeseries("Device memory used %", [
            (f"100 * {promql.series(schema.REC_DEVICE_USED_RATIO, m)}", RANK_LEGEND),
        ], "percent", thresholds=cfg.percent_steps(), min_value=0,
            description="Used / limit per rank; the dashed lines are the warning and critical"
                        " percentages the alerts use."),
        _solid_and_dashed("Allocator reserved / allocated", m, (schema.ALLOC_RESERVED, "reserved"),
                          (schema.ALLOC_ALLOCATED, "allocated"),
                          "What the framework's caching allocator holds (reserved) and what live"
                          " tensors use (allocated, dashed)."),
        _solid_and_dashed("Gap: device used − allocator reserved", m, (schema.GAP, "gap"),
                          (schema.GAP_PEAK, "gap peak"),
                          f"{schema.GAP.description} Dashed: the peak between exports."),
        timeseries("Headroom", [
            (promql.series(schema.REC_DEVICE_HEADROOM, m), RANK_LEGEND),
        ], "bytes", min_value=0, description="Device memory still free on each rank's GPU."),
        table("Top ranks by gap growth", [
            (f"topk(5, {promql.series(schema.REC_GAP_SLOPE, m)})", RANK_LEGEND),
        ], "Bps", description="Steepest gap slopes (least squares over the rule window): a"
                              " persistent positive slope is a leak outside the allocator."),
        table("Time until full at the current gap growth", [
            (f"bottomk(5, {promql.series(schema.REC_TIME_TO_FULL, m)})", RANK_LEGEND),
        ], "s", description="Headroom divided by the gap slope, for ranks whose gap grows."),
    ]


def events(sel: Selection) -> list[Cell]:
    m = sel.tracker
    return [
        row("OOMs and threshold crossings"),
        timeseries("OOMs", [
            (_counter(_per_step(schema.OOMS, m), m), RANK_LEGEND),
        ], "short", draw="bars", min_value=0, width=8,
            description=f"{schema.OOMS.description} One bar per OOM: each bar is the counter's"
                        " change over its own step."),
        timeseries("Threshold crossings", [
            (_counter(promql.increase_by(schema.THRESHOLD_CROSSINGS, RATE_INTERVAL, m,
                                         [schema.ATTR_LEVEL]), m), f"{RANK_LEGEND} {{{{level}}}}"),
        ], "short", draw="bars", min_value=0, width=8,
            description=schema.THRESHOLD_CROSSINGS.description),
        timeseries("Allocator retries", [
            (_counter(promql.increase_by(schema.ALLOC_RETRIES, RATE_INTERVAL, m), m),
             RANK_LEGEND),
        ], "short", draw="bars", min_value=0, width=8,
            description=schema.ALLOC_RETRIES.description),
    ]


def estimate(sel: Selection, cfg: Settings) -> list[Cell]:
    m = sel.tracker
    peak = promql.by_identity(
        "max", f"max_over_time({promql.of(schema.ALLOC_ALLOCATED_PEAK, m)}"
               f"[{RATE_INTERVAL}])")
    return [
        row("Estimate vs actual"),
        timeseries("Estimated vs actual peak", [
            (promql.gauge(schema.ESTIMATE, m), f"{RANK_LEGEND} estimate"),
            (peak, f"{RANK_LEGEND} actual peak"),
        ], "bytes", overrides=[_override_dashed(".* estimate")],
            description="The `stormotel estimate` prediction (dashed) against the allocator's"
                        " measured peak."),
        timeseries("Actual peak / estimate", [
            (promql.series(schema.REC_ESTIMATE_RATIO, m), RANK_LEGEND),
        ], "percentunit", min_value=0,
            thresholds=[{"color": "green", "value": None},
                        {"color": "red", "value": cfg.estimate_margin}],
            description=f"Above {cfg.estimate_margin:g} the estimate missed by more than the"
                        " alert margin."),
    ]


def tracker_health(sel: Selection) -> list[Cell]:
    m = sel.tracker
    return [
        row("Tracker health"),
        timeseries("Samples per second", [
            (promql.rate_by(schema.SAMPLES, RATE_INTERVAL, m), RANK_LEGEND),
        ], "short", width=6, min_value=0, description=schema.SAMPLES.description),
        timeseries("Dropped samples per second", [
            (_counter(promql.rate_by(schema.SAMPLES_DROPPED, RATE_INTERVAL, m,
                                     [schema.ATTR_REASON]), m), f"{RANK_LEGEND} {{{{reason}}}}"),
        ], "short", width=6, min_value=0, description=schema.SAMPLES_DROPPED.description),
        timeseries("Export failures", [
            (_counter(promql.increase_by(schema.EXPORT_FAILURES, RATE_INTERVAL, m,
                                         [schema.ATTR_DESTINATION]), m),
             f"{RANK_LEGEND} {{{{destination}}}}"),
        ], "short", width=6, min_value=0, draw="bars",
            description=schema.EXPORT_FAILURES.description),
        timeseries("Sample duration (mean)", [
            (promql.histogram_mean(schema.SAMPLE_DURATION, RATE_INTERVAL, m), RANK_LEGEND),
        ], "s", width=6, min_value=0, description=schema.SAMPLE_DURATION.description),
    ]


def training(sel: Selection) -> list[Cell]:
    return [
        timeseries("Training step", [
            (promql.gauge(schema.STEP, sel.tracker), RANK_LEGEND),
        ], "short", width=24, height=6,
            description="The step each rank is in; a rank that lags or stops shows here first."),
    ]


def analyzer(sel: Selection, cfg: Settings) -> list[Cell]:
    j, jr = sel.analyzer_job, sel.analyzer_rank
    rank_job = "rank {{rank}}"
    return [
        row("Analyzer findings"),
        table("First-cause suspects", [
            (promql.series(schema.AN_FIRST_CAUSE, jr), "rank {{rank}} {{confidence}}"),
            (promql.series(schema.AN_FIRST_CAUSE_LEAD, jr), rank_job),
        ], "short", sort_by="Value #B",
            description="Ranks the analyzer found went wrong first, with confidence and lead time"
                        " (seconds before the cluster onset)."),
        table("Findings by kind and severity", [
            (f"sum by ({schema.ATTR_JOB_ID}, {schema.ANALYZER_LABEL_KIND},"
             f" {schema.ANALYZER_LABEL_SEVERITY}) ({promql.series(schema.AN_FINDINGS, j)})",
             "{{kind}} {{severity}}"),
        ], "short", description="How many findings the last analyzer run reported."),
        timeseries("Analyzer: gap drift slope", [
            (promql.series(schema.AN_GAP_DRIFT_SLOPE, jr), rank_job),
        ], "Bps", width=8, description="Per-rank persistent gap drift the analyzer measured."),
        timeseries("Analyzer: time until full", [
            (promql.series(schema.AN_GAP_TIME_TO_FULL, jr), rank_job),
        ], "s", width=8, min_value=0,
            description="The analyzer's time until the device is full at the drift slope."),
        timeseries("Analyzer: collective confidence", [
            (promql.series(schema.AN_COLLECTIVE_CONFIDENCE, jr), rank_job),
        ], "percentunit", width=8, min_value=0,
            description="Confidence that gap spikes line up with collectives across ranks."),
        timeseries("Analyzer: actual / estimate", [
            (promql.series(schema.AN_ESTIMATE_RATIO, jr), rank_job),
        ], "percentunit", width=8, min_value=0,
            description="Actual peak over the estimate, per rank, as the analyzer computed it."),
        timeseries("Analyzer: stall findings", [
            (promql.series(schema.AN_STALL, jr), "{{kind}} rank {{rank}}"),
        ], "short", width=8, draw="bars", min_value=0,
            description="Stalled collectives (stragglers, ranks that never joined, mismatches)."),
        stat("Since last analyzer success", [
            (f"time() - max by ({schema.ATTR_JOB_ID}) (last_over_time("
             f"{promql.series(schema.AN_LAST_SUCCESS, j)}[{cfg.analyzer_stale_lookback}]))",
             "{{job_id}}"),
        ], "s", width=4, thresholds=[{"color": "green", "value": None},
                                     {"color": "red", "value": cfg.analyzer_stale_seconds}],
            no_value="never",
            description="Time since the analyzer last completed for this job (it writes one"
                        " sample per run, read back over"
                        f" {cfg.analyzer_stale_lookback}); \"never\" when it has not succeeded"
                        " for the job in that time."),
        stat("Missing ranks", [
            (f"max by ({schema.ATTR_JOB_ID}) ({promql.series(schema.AN_MISSING_RANKS, j)})",
             "{{job_id}}"),
        ], "short", width=4, thresholds=[{"color": "green", "value": None},
                                         {"color": "red", "value": 1}],
            description="Ranks the analyzer expected (world size) but found no telemetry for."),
    ]
