"""The DCGM row: the driver's, the allocator's and dcgm-exporter's view of each rank's GPU.

Three numbers that should agree and often do not: ``hw.gpu.memory.usage`` (the driver, read by
the tracker inside the rank), ``stormotel.allocator.reserved`` (PyTorch's caching allocator) and
``DCGM_FI_DEV_FB_USED`` (the node's dcgm-exporter), joined to job/rank by GPU UUID through the
trackers' ``stormotel_rank_info`` series. Driver above reserved is memory outside the allocator
(NCCL, cuDNN, CUDA context); DCGM above the driver is another process on the same GPU.
"""

from __future__ import annotations

from stormotel.dashboards import promql
from stormotel.dashboards.common import Cell, row, table, timeseries
from stormotel.dashboards.panels import RANK_LEGEND, Selection

from stormotel import schema


def dcgm(sel: Selection) -> list[Cell]:
    m = sel.tracker
    return [
        row("GPU ownership and DCGM"),
        timeseries("Driver used vs allocator reserved vs DCGM", [
            (promql.gauge(schema.DEVICE_USED, m), f"{RANK_LEGEND} driver used"),
            (promql.gauge(schema.ALLOC_RESERVED, m), f"{RANK_LEGEND} allocator reserved"),
            (promql.dcgm_by_rank(m), f"{RANK_LEGEND} DCGM FB used"),
        ], "bytes", width=16,
            description="Per rank: device memory as the driver reports it inside the rank, what"
                        " PyTorch's allocator reserved, and dcgm-exporter's DCGM_FI_DEV_FB_USED"
                        " for the same GPU (joined by GPU UUID via stormotel_rank_info). No DCGM"
                        " line: no dcgm-exporter in this Prometheus, a MIG GPU without FB"
                        " fields, or a GPU two ranks share."),
        table("Who owns which GPU", [
            (promql.of(schema.RANK_INFO, m), "owner"),
        ], "none", width=8,
            description="stormotel_rank_info: job, rank, host, GPU UUID and, when known, the"
                        " Kubernetes pod/namespace/node and Slurm job of every rank."),
    ]
