"""What a job generator imports once before it forks its ranks, so no rank pays it again.

The ranks of the Flight Recorder jobs are forked from one parent that has imported torch. The
first ``_dump_fr_trace()`` of a process that recorded a collective reads the lazy attribute
``torch._inductor`` (torch 2.13), which imports dynamo and inductor: about 1.7 s of CPU, paid by
every forked rank at its dump (24 ranks in ``fr_jobs``, 20 in ``fr_scale_jobs``). Imported in
the parent, it is shared copy-on-write and the dump itself costs milliseconds. The dumps are the
same bytes either way: this moves an import, not what is recorded.
"""

from __future__ import annotations

import importlib


def import_torch_before_fork() -> None:
    """Import torch and the modules its first Flight Recorder dump would import lazily."""
    import torch._inductor  # noqa: F401


def import_tracker_before_fork() -> None:
    """Import torch, the tracker and what its start and first archive write import lazily.

    Every rank of the tracker jobs (``stack_jobs``: 20 ranks, ``user_hang_jobs``: 34) made a
    ``MemoryTracker``; importing it and its archive writer took ~0.35 s of CPU per rank. Nothing
    in these modules reads the environment or installs a handler at import, so importing them
    before the fork changes no rank's behaviour. (Not ``torch._inductor``: the tracker's own
    Flight Recorder dump leaves the recorder's stack traces out, which is what imports it.)
    """
    for name in ("torch", "stormotel.tracker", "stormotel.archive_writer",
                 "stormotel.samplers.simulated"):
        importlib.import_module(name)
