"""The trackers' ``stormotel_rank_info`` series: which GPU (by UUID), pod and node each rank has.

Every tracked rank exports one info series (value 1) whose labels are its identity, its GPU UUID
in the form dcgm-exporter uses (``GPU-…``) and, where known, Kubernetes pod/namespace/node and the
Slurm job. The analyzer reads it once per window to (a) map dcgm-exporter GPUs to ranks with no
map file and (b) attach host/GPU/pod/namespace to the ranks its findings name.
"""

from __future__ import annotations

import math
from dataclasses import replace

import httpx
from stormotel.analyzers.http import Deadline, EndpointError, HttpSettings
from stormotel.analyzers.sources.prometheus_api import PrometheusAPI, label_selector
from stormotel.analyzers.sources.protocol import QueryWindow
from stormotel.analyzers.timeline import RankIdentity, Timeline

from stormotel import schema

#: Longest look-back for the info series (it is constant, so any sample in the window will do).
MAX_LOOKBACK_S = 7 * 86400


def info_query(window: QueryWindow) -> str:
    """The latest info series of the window's job (one per rank, scrape labels included)."""
    sel = label_selector({"__name__": schema.RANK_INFO.prom, schema.ATTR_JOB_ID: window.job_id},
                         None, window.extra_matchers)
    secs = max(1, min(MAX_LOOKBACK_S, math.ceil(window.seconds)))
    return f"last_over_time({sel}[{secs}s])"


def identity_from_info(labels: dict[str, str]) -> RankIdentity | None:
    """A RankIdentity from one info series' labels; ``None`` when the rank is unusable."""
    try:
        rank = int(labels[schema.ATTR_RANK])
    except (KeyError, ValueError):
        return None
    if rank < 0:
        return None

    def opt_int(key: str) -> int | None:
        try:
            return int(labels[key])
        except (KeyError, ValueError):
            return None

    def text(key: str) -> str | None:
        return labels.get(key) or None

    return RankIdentity(rank=rank, job_id=text(schema.ATTR_JOB_ID),
                        local_rank=opt_int(schema.ATTR_LOCAL_RANK),
                        world_size=opt_int(schema.ATTR_WORLD_SIZE), host=text(schema.ATTR_HOST),
                        gpu=text(schema.ATTR_GPU), gpu_uuid=text(schema.ATTR_GPU_UUID),
                        pod=text(schema.ATTR_POD), namespace=text(schema.ATTR_NAMESPACE),
                        node=text(schema.ATTR_NODE), slurm_job_id=text(schema.ATTR_SLURM_JOB_ID))


def read_rank_info(apis: list[PrometheusAPI], window: QueryWindow
                   ) -> tuple[dict[int, RankIdentity], list[str]]:
    """Identity per rank from every endpoint that answers; notes say what went wrong."""
    out: dict[int, RankIdentity] = {}
    notes: list[str] = []
    expr = info_query(window)
    for api in apis:
        try:
            result = api.query(expr, window.end_ns)
        except EndpointError as e:
            notes.append(f"rank info from {api.url} unavailable: {e}")
            continue
        for r in result:
            raw = r.get("metric")
            if not isinstance(raw, dict):
                continue
            ident = identity_from_info({str(k): str(v) for k, v in raw.items()})
            if ident is None:
                continue
            old = out.get(ident.rank)
            if old is not None and old.gpu_uuid and ident.gpu_uuid \
                    and old.gpu_uuid != ident.gpu_uuid:
                notes.append(f"rank {ident.rank} reported two GPUs ({old.gpu_uuid}, "
                             f"{ident.gpu_uuid}; a restart?); kept the first")
                continue
            out[ident.rank] = merge_identity(old, ident) if old else ident
    return out, notes


def merge_identity(base: RankIdentity, more: RankIdentity) -> RankIdentity:
    """``base`` with its unknown fields filled from ``more`` (known values are never replaced)."""
    fill = {k: getattr(more, k) for k in RankIdentity.__dataclass_fields__
            if getattr(base, k) is None and getattr(more, k) is not None}
    return replace(base, **fill) if fill else base


def attach_identities(timeline: Timeline, identities: dict[int, RankIdentity]) -> Timeline:
    """The timeline with each rank's identity completed from ``identities`` (in place)."""
    for rank, series in timeline.ranks.items():
        more = identities.get(rank)
        if more is not None:
            timeline.ranks[rank] = replace(series, identity=merge_identity(series.identity, more))
    return timeline


def with_rank_info(timeline: Timeline, urls: list[str], window: QueryWindow,
                   settings: HttpSettings, client: httpx.Client, deadline: Deadline | None
                   ) -> Timeline:
    """``timeline`` with host/GPU/pod/namespace from the info series (one instant query per
    endpoint); a missing or failing info series changes nothing but a note."""
    apis = [PrometheusAPI(u, client, settings, deadline) for u in urls]
    identities, notes = read_rank_info(apis, replace(window, extra_matchers=""))
    timeline.notes.extend(n for n in notes if n not in timeline.notes)
    return attach_identities(timeline, identities)


def uuid_to_rank(identities: dict[int, RankIdentity]) -> tuple[dict[str, int], list[str]]:
    """GPU UUID → rank; a UUID claimed by two ranks (a shared GPU) maps to neither, with a note:
    device memory of a shared GPU cannot be blamed on one rank."""
    owners: dict[str, list[int]] = {}
    for rank, ident in identities.items():
        if ident.gpu_uuid:
            owners.setdefault(ident.gpu_uuid, []).append(rank)
    mapping = {u: rs[0] for u, rs in owners.items() if len(rs) == 1}
    notes = [f"GPU {u} is shared by ranks {sorted(rs)}; its DCGM series were not attributed "
             "to any rank" for u, rs in owners.items() if len(rs) > 1]
    return mapping, notes
