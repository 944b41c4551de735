"""Several real torchrun launches from one launcher interpreter, each captured as its own process.

``python -m tests.tracker.torchrun_batch OUT`` reads ``OUT/jobs.json`` (``{name: {"argv": [...],
"env": {...}}}``) and, in that order, calls ``torch.distributed.run.main(argv)`` — the function
the ``torchrun`` command runs — once per job with ``env`` added to the environment the launcher
passes to its ranks (and removed again after), fds 1 and 2 pointed at ``OUT/<name>.out`` and
``.err`` (:func:`tests.estimate.cli_batch.run_captured`) and the exit code in ``OUT/<name>.code``:
0 when every rank exited 0, 1 when the launcher raised (a failed rank: its traceback is in the
``.err`` file).

Why: the launcher imports torch, ~3-4 s of CPU, and tests/tracker/test_launchers.py launched
five jobs. The ranks are still separate processes that the real launcher starts (its rendezvous,
its store, its ``RANK``/``TORCHELASTIC_RUN_ID`` variables), which is what those tests check.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from tests.estimate.cli_batch import run_captured


def _launch(argv: list[str]) -> int:
    from torch.distributed.run import main

    try:
        main(argv)
    except Exception:  # a failed rank (ChildFailedError) or launcher error: what torchrun prints
        traceback.print_exc()
        return 1
    return 0


def run_job(out: Path, name: str, argv: list[str], env: dict[str, str]) -> int:
    before = dict(os.environ)
    os.environ.update(env)
    try:
        return run_captured(out, name, lambda: _launch(argv))
    finally:
        os.environ.clear()
        os.environ.update(before)


if __name__ == "__main__":
    target = Path(sys.argv[1])
    for job_name, job in json.loads((target / "jobs.json").read_text()).items():
        run_job(target, job_name, job["argv"], job["env"])
