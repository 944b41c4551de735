"""``stormotel estimate``: a training step's peak memory, predicted before the job runs.

Modules: :mod:`~stormotel.estimate.factory_spec` (the spec; is its module there — no torch),
:mod:`~stormotel.estimate.factory` (load and validate the user's model factory),
:mod:`~stormotel.estimate.core` (run the steps under PyTorch's MemTracker),
:mod:`~stormotel.estimate.report` (JSON contract, table, reading an estimate back — no torch),
:mod:`~stormotel.units` (``80GiB`` and friends), :mod:`~stormotel.estimate.cli`.

Importing this package does not import torch; only ``core`` and ``factory`` do.
"""
