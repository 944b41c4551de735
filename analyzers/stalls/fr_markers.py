"""Flight Recorder entries as per-rank Timeline markers (kind ``collective``).

Each recorded collective becomes one marker on its rank: start = ``time_created_ns``, end = the
completion time where the recorder saw one (NCCL with timing), else the start (gloo never sets
it). The name is the profiling name plus the anchor, ``gloo:all_reduce [0:default_pg#5]``:
``<group>#<seq>`` names the same collective on every rank, so ``--align markers`` (which matches
markers by name and occurrence) pairs exactly the same collective across ranks whatever the
ring buffer dropped, and sub-group collectives only pair within their group. ``attrs`` carry
op, group, sequence id, sizes, dtypes, state and the anchor. On gloo the recorder sets no
completion time, so the anchor instant is the issue time (skewed by how late each rank issued).
"""

from __future__ import annotations

from stormotel.analyzers.sources.markers import MarkerAccumulator
from stormotel.analyzers.stalls.fr_types import DumpSet, group_label
from stormotel.analyzers.timeline import KIND_COLLECTIVE, Markers

ATTR_ANCHOR = "anchor"


def markers_from_dumps(ds: DumpSet) -> dict[int, Markers]:
    acc = MarkerAccumulator()
    for rank, dump in ds.dumps.items():
        for e in dump.entries:
            if not e.time_created_ns:
                continue
            end = e.time_completed_ns or e.time_started_ns or e.time_created_ns
            group = group_label(e.group)
            anchor = f"{group}#{'p2p' if e.is_p2p else ''}{e.seq_id}"
            acc.add(rank, e.time_created_ns, end, f"{e.profiling_name} [{anchor}]",
                    KIND_COLLECTIVE, {
                "op": e.op, "group": group, "seq": e.seq_id, "p2p": e.is_p2p,
                "input_sizes": [list(s) for s in e.input_sizes],
                "output_sizes": [list(s) for s in e.output_sizes],
                "input_dtypes": list(e.input_dtypes), "output_dtypes": list(e.output_dtypes),
                "state": e.state, "retired": e.retired,
                ATTR_ANCHOR: anchor,
                "source": "flight_recorder"})
    return acc.build()
