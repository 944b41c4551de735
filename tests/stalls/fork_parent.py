"""What a job generator imports once before it forks its ranks, so no rank pays it again.

The ranks of the Flight Recorder jobs are forked from one parent that has imported torch. The
first ``_dump_fr_trace()`` of a process that recorded a collective reads the lazy attribute
``torch._inductor`` (torch 2.13), which imports dynamo and inductor: about 1.7 s of CPU, paid by
every forked rank at its dump (24 ranks in ``fr_jobs``, 20 in ``fr_scale_jobs``). Imported in
the parent, it is shared copy-on-write and the dump itself costs milliseconds. The dumps are the
same bytes either way: this moves an import, not what is recorded.
"""

from __future__ import annotations


def import_torch_before_fork() -> None:
    """Import torch and the modules its first Flight Recorder dump would import lazily."""
    import torch._inductor  # noqa: F401
