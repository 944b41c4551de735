"""Flight Recorder entries as per-rank Timeline markers (kind ``collective``).

Each recorded collective becomes one marker on its rank: start = ``time_created_ns``, end = the
completion time where the recorder saw one (NCCL with timing), else the start (gloo never sets
it). The name is the profiling name (``nccl:all_reduce``), the vocabulary ``tracker.mark`` uses,
and ``attrs`` carry op, group, sequence id, sizes, dtypes and state. ``attrs["anchor"]``
(``<group>#<seq>``) names the same collective on every rank, which is what ``--align markers``
needs: one shared instant per collective, independent of ring-buffer truncation.
"""

from __future__ import annotations

from analyzers.sources.markers import KIND_COLLECTIVE, MarkerAccumulator
from analyzers.stalls.fr_types import DumpSet, group_label
from analyzers.timeline import Markers

ATTR_ANCHOR = "anchor"


def markers_from_dumps(ds: DumpSet) -> dict[int, Markers]:
    acc = MarkerAccumulator()
    for rank, dump in ds.dumps.items():
        for e in dump.entries:
            if not e.time_created_ns:
                continue
            end = e.time_completed_ns or e.time_started_ns or e.time_created_ns
            group = group_label(e.group)
            acc.add(rank, e.time_created_ns, end, e.profiling_name, KIND_COLLECTIVE, {
                "op": e.op, "group": group, "seq": e.seq_id, "p2p": e.is_p2p,
                "input_sizes": [list(s) for s in e.input_sizes],
                "output_sizes": [list(s) for s in e.output_sizes],
                "input_dtypes": list(e.input_dtypes), "output_dtypes": list(e.output_dtypes),
                "state": e.state, "retired": e.retired,
                ATTR_ANCHOR: f"{group}#{'p2p' if e.is_p2p else ''}{e.seq_id}",
                "source": "flight_recorder"})
    return acc.build()
