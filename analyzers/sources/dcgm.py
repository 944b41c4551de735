"""dcgm-exporter mode: device memory per GPU from NVIDIA's exporter, mapped to training ranks.

Many clusters run only dcgm-exporter. Its ``DCGM_FI_DEV_FB_USED/FREE/RESERVED`` gauges (MiB)
carry GPU identity (``gpu``, ``UUID``, ``Hostname``, and the pod/namespace of the workload, as
``pod``/``namespace`` or ``exported_*`` after a scrape renamed them) but no rank. Ranks come
from the trackers' ``stormotel_rank_info`` series when they are in the same TSDB (joined by GPU
UUID, no configuration), else from one label whose value is (or ends in) the rank
(``--rank-label``), or from a mapping file (``--gpu-rank-map``). DCGM's "no value" sentinels
(``DCGM_INT64_NOT_SUPPORTED`` and friends) are dropped as no data, never read as MiB; a GPU
whose series repeat once per pod sharing it is one GPU, never summed. The Timeline holds
device-level fields only, so the analyzer runs
the analyses that need no allocator data (first cause on device memory) and says which ones it
skipped and why.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import numpy as np
from stormotel.analyzers.http import Deadline, EndpointError, HttpSettings, make_client
from stormotel.analyzers.sources.prometheus import (
    DEFAULT_CONCURRENCY,
    LoadOutcome,
    QueryWindow,
    choose_step,
    clean_byte_series,
    matrix_series,
    step_range,
)
from stormotel.analyzers.sources.prometheus_api import (
    PrometheusAPI,
    label_selector,
    parse_matrix_values,
)
from stormotel.analyzers.sources.rank_info import merge_identity, read_rank_info, uuid_to_rank
from stormotel.analyzers.timeline import RankIdentity, RankSeries, Timeline, TimelineBuilder

from stormotel import schema
from stormotel.errors import SourceFailureError, UsageError

#: dcgm metric → Timeline field it feeds (device_total is derived: used + free + reserved),
#: for the legacy names; other generations' names are found by role (schema.dcgm_role_of).
DCGM_FIELDS = {schema.DCGM_FB_USED: "device_used", schema.DCGM_FB_FREE: "device_free",
               schema.DCGM_FB_RESERVED: "_reserved_by_driver"}
#: Framebuffer role → Timeline field (``total`` replaces the derived sum when exported).
ROLE_FIELDS = {"used": "device_used", "free": "device_free", "reserved": "_reserved_by_driver",
               "total": "_total_by_driver"}
#: Map-file column → dcgm labels that may carry it (first present wins).
MAP_COLUMNS: dict[str, tuple[str, ...]] = {
    "uuid": ("UUID",),
    "hostname": ("Hostname", "hostname"),
    "gpu": ("gpu",),
    "pod": ("exported_pod", "pod"),
    "namespace": ("exported_namespace", "namespace"),
}
#: Analyses that need allocator data, skipped in this mode (reason shown to the user).
SKIPPED_ANALYSES = {
    "gap_analysis": "dcgm-exporter reports device memory only; the gap (device used - "
                    "allocator reserved) needs allocator series from the stormotel tracker",
    "collective_attribution": "works on the gap, which needs allocator data",
}
_TRAILING_INT = re.compile(r"(\d+)$")


class MapError(UsageError):
    """A mapping-file problem; the message names file, line and what was wrong."""


@dataclass(frozen=True)
class GpuRankMap:
    """Rows of ``rank`` plus label values that identify one GPU."""

    rows: tuple[tuple[int, tuple[tuple[str, str], ...]], ...]
    path: str = ""

    @staticmethod
    def load(path: Path) -> GpuRankMap:
        """CSV with a header (``rank`` and any of uuid, hostname, gpu, pod, namespace) or JSON
        (a list of such objects)."""
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise MapError(f"{path}: cannot read GPU→rank map: {e.strerror or e}") from None
        if text.lstrip().startswith(("[", "{")):
            try:
                doc = json.loads(text)
            except json.JSONDecodeError as e:
                raise MapError(f"{path} line {e.lineno}: invalid JSON: {e.msg}") from None
            except RecursionError:
                raise MapError(f"{path}: JSON nested too deeply") from None
            if not isinstance(doc, list):
                raise MapError(f"{path}: expected a JSON list of objects")
            raw = [(i + 1, d) for i, d in enumerate(doc)]
            where = "entry"
        else:
            reader = csv.DictReader(text.splitlines())
            raw = [(reader.line_num, d) for d in reader]
            where = "line"
        rows = []
        seen: dict[int, int] = {}
        for n, d in raw:
            if not isinstance(d, dict):
                raise MapError(f"{path} {where} {n}: not an object")
            d = {str(k).strip().lower(): str(v).strip() for k, v in d.items() if k is not None
                 and v not in (None, "")}
            try:
                rank = int(d.pop("rank"))
            except KeyError:
                raise MapError(f"{path} {where} {n}: no 'rank' value") from None
            except ValueError:
                raise MapError(f"{path} {where} {n}: rank is not an integer") from None
            if rank < 0:
                raise MapError(f"{path} {where} {n}: rank {rank} is negative")
            unknown = set(d) - set(MAP_COLUMNS)
            if unknown:
                raise MapError(f"{path} {where} {n}: unknown column(s) {sorted(unknown)}; "
                               f"use {sorted(MAP_COLUMNS)}")
            if not d:
                raise MapError(f"{path} {where} {n}: rank {rank} has nothing to match a GPU by")
            if rank in seen:
                raise MapError(f"{path} {where} {n}: rank {rank} already mapped on "
                               f"{where} {seen[rank]}")
            seen[rank] = n
            rows.append((rank, tuple(sorted(d.items()))))
        if not rows:
            raise MapError(f"{path}: no mappings")
        return GpuRankMap(tuple(rows), str(path))

    def rank_of(self, labels: dict[str, str]) -> int | None:
        for rank, conds in self.rows:
            if all(_label(labels, col) == value for col, value in conds):
                return rank
        return None

    def uuids(self) -> list[str] | None:
        """UUIDs when every row has one (lets the query select just those GPUs)."""
        got = [dict(c).get("uuid") for _, c in self.rows]
        return None if any(u is None for u in got) else [u for u in got if u]


def _label(labels: dict[str, str], column: str) -> str | None:
    for key in MAP_COLUMNS[column]:
        if key in labels:
            return labels[key]
    return None


def rank_from_label(labels: dict[str, str], label: str) -> int | None:
    """The rank in ``label``: an integer value, or a trailing integer (``trainer-worker-3``)."""
    value = labels.get(label)
    if value is None:
        return None
    m = _TRAILING_INT.search(value)
    return int(m.group(1)) if m else None


@dataclass
class DcgmOptions:
    """How GPUs become ranks: a map file, a rank label, or (neither given) the info series."""

    rank_map: GpuRankMap | None = None
    rank_label: str | None = None
    #: Extra PromQL matchers selecting the job's GPUs, e.g. ``namespace="train"``.
    selector: str = ""
    #: Filled by :func:`load_dcgm` in info-series mode: GPU UUID → rank, rank → identity.
    uuid_ranks: dict[str, int] | None = None
    identities: dict[int, RankIdentity] | None = None
    #: ``--dcgm-field`` / $STORMOTEL_DCGM_FIELDS: role → (metric, bytes per unit or None).
    fields: dict[str, tuple[str, int | None]] | None = None

    @property
    def uses_rank_info(self) -> bool:
        return self.rank_map is None and self.rank_label is None

    def rank_of(self, labels: dict[str, str]) -> int | None:
        if self.rank_map is not None:
            return self.rank_map.rank_of(labels)
        if self.rank_label is not None:
            return rank_from_label(labels, self.rank_label)
        return (self.uuid_ranks or {}).get(labels.get(schema.DCGM_LABEL_UUID, ""))




def _gpu_key(labels: dict[str, str], physical: bool = False) -> tuple[tuple[str, str], ...]:
    """The series' GPU. ``physical``: the UUID and MIG instance only, so the copies
    dcgm-exporter serves once per pod sharing a GPU (pod, container, vgpu differ) are one GPU."""
    if physical:
        return tuple((k, labels.get(k, "")) for k in (schema.DCGM_LABEL_UUID,
                                                      schema.DCGM_LABEL_GPU_INSTANCE))
    return tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"))


def load_dcgm(urls: Sequence[str], window: QueryWindow, options: DcgmOptions, *,
              settings: HttpSettings | None = None, client: httpx.Client | None = None,
              deadline: Deadline | None = None, concurrency: int = DEFAULT_CONCURRENCY,
              progress: Callable[[str], None] | None = None) -> tuple[Timeline, LoadOutcome]:
    """Device memory of the job's GPUs as a Timeline (device_used/free/total, bytes)."""
    if options.rank_map is not None and options.rank_label is not None:
        raise ValueError("dcgm mode takes a GPU→rank map or a rank label, not both")
    settings = settings or HttpSettings()
    own = client is None
    http = client or make_client(settings)
    builder = TimelineBuilder()
    outcome = LoadOutcome()
    selector = options.selector
    uuids = options.rank_map.uuids() if options.rank_map else None
    try:
        apis = [PrometheusAPI(u, http, settings, deadline) for u in urls]
        if options.uses_rank_info:
            uuids = _ranks_from_info(apis, window, options, builder)
        regex = {schema.DCGM_LABEL_UUID: "|".join(re.escape(u) for u in uuids)} if uuids else {}
        step = window.step_s
        if step is None:
            probe_sel = label_selector({"__name__": schema.DCGM_FB_USED}, regex, selector)
            natives = [n for n in (_probe(api, probe_sel, window) for api in apis) if n]
            step = choose_step(window, max(natives) if natives else None)
        outcome.step_s = step
        names = _field_names(apis, window, options, builder)
        tasks = [(api, name) for api in apis for name in names]
        if progress:
            progress(f"dcgm: {len(tasks)} range queries at step {step:g}s")

        def one(task: tuple[PrometheusAPI, str]) -> list[dict[str, object]] | EndpointError:
            api, name = task
            sel = label_selector({"__name__": name}, regex, selector)
            start_s = math.floor(window.start_ns / 1e9 / step) * step
            try:
                return api.query_range(f"last_over_time({sel}[{step_range(step)}])", start_s,
                                       window.end_ns / 1e9, step)
            except EndpointError as e:
                return e

        ranks_by_gpu: dict[tuple[tuple[str, str], ...], int] = {}
        unmapped: set[tuple[tuple[str, str], ...]] = set()
        driver_reserved: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        answered: list[tuple[str, list[dict[str, object]]]] = []
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            for (api, name), res in zip(tasks, pool.map(one, tasks), strict=True):
                outcome.queries += 1
                if isinstance(res, EndpointError):
                    outcome.endpoints_failed.setdefault(api.url, str(res))
                    builder.notes.append(f"dcgm: {name} from {api.url} failed: {res}")
                    builder.skipped["query_failed"] += 1
                    continue
                answered.append((name, res))
        units = _units_by_gpu(answered, names, builder)
        for name, res in answered:
            _add(res, name, names[name], options, builder, ranks_by_gpu, unmapped,
                 window.job_id, driver_reserved, units)
        for api in apis:
            if api.url not in outcome.endpoints_failed:
                outcome.endpoints_ok.append(api.url)
    finally:
        if own:
            http.close()
    timeline = _finish(builder, outcome, urls, step, options, window.job_id, unmapped,
                       driver_reserved)
    return timeline, outcome


def _finish(builder: TimelineBuilder, outcome: LoadOutcome, urls: Sequence[str], step: float,
            options: DcgmOptions, job_id: str, unmapped: set[tuple[tuple[str, str], ...]],
            driver_reserved: dict[int, list[tuple[np.ndarray, np.ndarray]]]) -> Timeline:
    """What every dcgm read ends with: a failure when no endpoint answered, the notes that say
    what this mode cannot judge, and the world (the mapped ranks, else the rank-info series)."""
    if not outcome.endpoints_ok:
        reasons = "; ".join(f"{u}: {r}" for u, r in outcome.endpoints_failed.items())
        raise SourceFailureError(f"no endpoint answered the dcgm queries: {reasons}")
    if unmapped:
        builder.skipped["gpu_without_rank"] += len(unmapped)
        builder.notes.append(f"dcgm: {len(unmapped)} GPU series matched no rank (not in the "
                             f"map / no usable rank label) and were ignored")
    builder.sources.extend(f"dcgm:{u.rstrip('/')}" for u in urls)
    builder.notes.append(f"dcgm mode: device memory only, queried at step {step:g}s; skipped: "
                         + "; ".join(f"{k} ({v})" for k, v in SKIPPED_ANALYSES.items()))
    builder.meta["mode"] = "dcgm"
    builder.meta["skipped_analyses"] = dict(SKIPPED_ANALYSES)
    # With a map, the job is the mapped ranks: a mapped GPU without data is a missing rank.
    world = max(r for r, _ in options.rank_map.rows) + 1 if options.rank_map else None
    if options.identities:
        sizes = [i.world_size for i in options.identities.values() if i.world_size]
        world = max(sizes) if sizes else max(options.identities) + 1
        builder.meta["gpu_rank_source"] = schema.RANK_INFO.prom
    timeline = builder.build(job_id=job_id, world_size=world)
    timeline.ranks = {r: _with_total(s, driver_reserved.get(r, []))
                      for r, s in timeline.ranks.items()}
    return timeline


def _probe(api: PrometheusAPI, sel: str, window: QueryWindow) -> float | None:
    secs = max(1, math.ceil(min(window.seconds, 3600.0)))
    try:
        result = api.query(f"{sel}[{secs}s]", window.end_ns)
    except EndpointError:
        return None  # the range queries will report the endpoint properly
    for r in result[:1]:
        values = r.get("values")
        if isinstance(values, list) and len(values) >= 3:
            try:
                t_ns, _ = parse_matrix_values(values)
            except ValueError:  # not [time, "number"] pairs: the server's answer is input
                return None
            spacing = float(np.median(np.diff(t_ns))) / 1e9
            return spacing if spacing > 0 else None
    return None


def _field_names(apis: list[PrometheusAPI], window: QueryWindow, options: DcgmOptions,
                 builder: TimelineBuilder) -> dict[str, tuple[str, int | None]]:
    """The framebuffer metrics to read: name → (role, bytes per unit when the name or the
    configuration says it). Every generation's names present in the window are found by their
    role (``schema.DCGM_FB_NAME_RE``); configured names are read whether found or not; with
    nothing found, the legacy names (their absence is then reported as no data)."""
    names: dict[str, tuple[str, int | None]] = {}
    for role, (metric, unit) in (options.fields or {}).items():
        names[metric] = (role, unit)
    sel = f'{{__name__=~"(?i){schema.DCGM_FB_NAME_RE}"}}'
    for api in apis:
        try:  # /api/v1/series: label values answers GET only on some servers
            listed = api.series(sel, window.start_ns, window.end_ns)
        except EndpointError:
            continue  # the range queries report the endpoint
        # a damaged listing (a null or numeric name, an entry that is no object) names nothing
        found = {n for s in listed if isinstance(s, dict)
                 for n in (s.get("__name__"),) if isinstance(n, str)}
        for name in sorted(found):
            found_role = schema.dcgm_role_of(name)
            if found_role is not None and name not in names:
                names[name] = (found_role, schema.dcgm_unit_of_name(name))
    if not names:
        names = {n: (schema.dcgm_role_of(n) or "used", None) for n in DCGM_FIELDS}
    generations = sorted(n for n in names if n not in DCGM_FIELDS)
    if generations:
        builder.notes.append("dcgm: framebuffer series read under "
                             + ", ".join(sorted(names)) + " (units told apart by the series)")
    return names


def _is_sentinel(v: np.ndarray) -> np.ndarray:
    """DCGM's exact "no value" codes, in any unit: 0x7ffffff0.. (32-bit) and 0x7ff…f0.. (64)."""
    return ((v >= schema.DCGM_INT32_BLANK) & (v < schema.DCGM_INT32_BLANK + 16)) | \
        (v >= float(schema.DCGM_INT64_BLANK))


def _units_by_gpu(answered: list[tuple[str, list[dict[str, object]]]],
                  names: dict[str, tuple[str, int | None]],
                  builder: TimelineBuilder) -> dict[tuple[tuple[str, str], ...], int]:
    """Bytes per unit for each GPU (UUID, MIG instance) whose series do not spell their unit:
    bytes when any of its framebuffer values (sentinels aside) reaches 2**24 — 16 TiB read as
    MiB, which no GPU has; 16 MiB read as bytes, which every GPU's total or free exceeds."""
    peak: dict[tuple[tuple[str, str], ...], float] = {}
    for name, results in answered:
        if names[name][1] is not None:
            continue
        for r in results:
            labels, values = r.get("metric"), r.get("values")
            if not isinstance(labels, dict) or not isinstance(values, list) or not values:
                continue
            try:
                v = np.array([float(x[1]) for x in values if isinstance(x, list) and len(x) == 2])
            except (TypeError, ValueError):
                continue
            v = v[np.isfinite(v) & ~_is_sentinel(v)]
            if len(v):
                key = _gpu_key({str(k): str(x) for k, x in labels.items()}, physical=True)
                peak[key] = max(peak.get(key, 0.0), float(v.max()))
    units = {k: 1 if m >= schema.DCGM_BYTES_FLOOR else schema.DCGM_UNIT_BYTES
             for k, m in peak.items()}
    if any(u == 1 for u in units.values()):
        builder.notes.append("dcgm: framebuffer values in bytes (dcgm-exporter 4.9 / DCGM 4.7 "
                             "and later) on some GPUs, MiB on the others" if len(set(
                                 units.values())) > 1 else "dcgm: framebuffer values in bytes "
                             "(dcgm-exporter 4.9 / DCGM 4.7 and later)")
    return units


def _add(results: list[dict[str, object]], name: str, spec: tuple[str, int | None],
         options: DcgmOptions, builder: TimelineBuilder,
         ranks_by_gpu: dict[tuple[tuple[str, str], ...], int],
         unmapped: set[tuple[tuple[str, str], ...]], job_id: str,
         driver_reserved: dict[int, list[tuple[np.ndarray, np.ndarray]]],
         units: dict[tuple[tuple[str, str], ...], int]) -> None:
    role, named_unit = spec
    field_name = ROLE_FIELDS[role]
    for labels, values in matrix_series(results, builder):
        key = _gpu_key(labels, physical=options.uses_rank_info)
        rank = ranks_by_gpu.get(key)
        if rank is None:
            rank = options.rank_of(labels)
            if rank is None:
                unmapped.add(key)
                continue
            clash = [k for k, v in ranks_by_gpu.items() if v == rank and k != key]
            if clash:
                builder.skipped["rank_mapped_twice"] += 1
                builder.notes.append(f"dcgm: rank {rank} matches two GPUs "
                                     f"({_describe(clash[0])} and {_describe(key)}); "
                                     "kept the first")
                unmapped.discard(key)
                continue
            ranks_by_gpu[key] = rank
            seen = RankIdentity(
                rank=rank, job_id=job_id, host=_label(labels, "hostname"),
                gpu=labels.get("gpu"), gpu_uuid=labels.get("UUID"),
                pod=_label(labels, "pod"), namespace=_label(labels, "namespace"))
            known = (options.identities or {}).get(rank)
            builder.set_identity(merge_identity(known, seen) if known else seen)
        cleaned = clean_byte_series(values, builder)
        if cleaned is None:
            continue
        unit = named_unit or units.get(_gpu_key(labels, physical=True), schema.DCGM_UNIT_BYTES)
        t_ns, v = _drop_sentinels(*cleaned, builder, in_mib=unit != 1)
        v = v * unit
        if field_name == "_reserved_by_driver":
            # Not a Timeline field; it is device_total's third term (see _with_total).
            driver_reserved.setdefault(rank, []).append((t_ns, v))
        elif field_name == "_total_by_driver":
            # DCGM's own total (a generation that exports it): device_total as it says.
            builder.add_samples(rank, t_ns, device_total=v)
        else:
            builder.add_samples(rank, t_ns, **{field_name: v})


def _ranks_from_info(apis: list[PrometheusAPI], window: QueryWindow, options: DcgmOptions,
                     builder: TimelineBuilder) -> list[str]:
    """Fill ``options`` from the trackers' info series; the UUIDs to query.

    Raises SourceFailureError when there is none: with no map, no label and no info series
    there is no honest way to say which GPU is which rank.
    """
    info_window = replace(window, extra_matchers="")  # the dcgm selector is for DCGM series
    identities, notes = read_rank_info(apis, info_window)
    builder.notes.extend(f"dcgm: {n}" for n in notes)
    mapping, shared = uuid_to_rank(identities)
    builder.notes.extend(f"dcgm: {n}" for n in shared)
    if shared:
        builder.skipped["gpu_shared_by_ranks"] += len(shared)
    if not mapping:
        raise SourceFailureError(
            f"dcgm mode: no {schema.RANK_INFO.prom} series with a {schema.ATTR_GPU_UUID} for "
            f"job_id={window.job_id!r} in the window, so GPUs cannot be mapped to ranks; give "
            "--gpu-rank-map FILE or --rank-label LABEL")
    options.uuid_ranks = mapping
    options.identities = identities
    return sorted(mapping)


def _drop_sentinels(t_ns: np.ndarray, values: np.ndarray, builder: TimelineBuilder, *,
                    in_mib: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """DCGM's BLANK/NOT_FOUND/NOT_SUPPORTED/NOT_PERMISSIONED values are no data, not memory. In
    MiB anything from the 32-bit blank up is one (no GPU holds 2**31 MiB); in bytes only the
    exact codes are (an 80 GB GPU's bytes pass 0x7ffffff0)."""
    bad = values >= schema.DCGM_FB_SENTINEL_FLOOR_MIB if in_mib else _is_sentinel(values)
    if not bad.any():
        return t_ns, values
    builder.skipped["dcgm_not_supported_sentinel"] += int(bad.sum())
    note = ("dcgm: some FB values were DCGM 'no value' sentinels (e.g. DCGM_INT64_NOT_SUPPORTED)"
            " and were dropped as no data")
    if note not in builder.notes:
        builder.notes.append(note)
    return t_ns[~bad], values[~bad]


def _describe(key: tuple[tuple[str, str], ...]) -> str:
    d = dict(key)
    return "/".join(d[k] for k in ("Hostname", "hostname", "gpu", "UUID") if k in d) or str(d)


def _with_total(series: RankSeries, reserved: list[tuple[np.ndarray, np.ndarray]]
                ) -> RankSeries:
    """device_total = FB used + FB free + FB reserved (the driver's own share, when exported)."""
    total = series.values["device_used"] + series.values["device_free"]
    if reserved:
        t = np.concatenate([c[0] for c in reserved])
        v = np.concatenate([c[1] for c in reserved])
        extra = np.zeros(len(series))
        idx = np.searchsorted(series.t_ns, t)
        hit = (idx < len(series)) & (series.t_ns[np.minimum(idx, len(series) - 1)] == t)
        extra[idx[hit]] = v[hit]
        total = total + extra
    given = series.values.get("device_total")
    if given is not None:  # DCGM's own total where a generation exports one
        total = np.where(np.isfinite(given), given, total)
    return replace(series, values={**series.values, "device_total": total})
