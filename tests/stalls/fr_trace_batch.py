"""torch's own Flight Recorder report (``python -m torch.distributed.flight_recorder.fr_trace
DIR``) for several dump folders from one interpreter: torch is imported once, not once per
folder (~2.8 s of CPU each). What each run writes to fds 1 and 2 (the logging module's output
and anything written below Python too) goes to its own files, with the traceback a fresh
interpreter would print where the report fails; what the import writes goes to its own files,
so a folder's output as a fresh interpreter prints it is the import's then the run's, per
stream (:func:`printed`).

Usage: ``python -m tests.stalls.fr_trace_batch OUT_DIR FOLDER...``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def _fds_to(out: Path, name: str) -> Iterator[None]:
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(out / f"{name}.out", "wb") as fo, open(out / f"{name}.err", "wb") as fe:
        os.dup2(fo.fileno(), 1)
        os.dup2(fe.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, keep in zip((1, 2), saved, strict=True):
                os.dup2(keep, fd)
                os.close(keep)


def printed(out: Path, i: int) -> str:
    """Folder ``i``'s stdout then stderr, as ``subprocess.run`` of a fresh interpreter gives
    them (each stream: the import's output, then the run's)."""
    def read(name: str) -> str:
        return (out / name).read_text(errors="replace")
    return (read("import.out") + read(f"{i}.out")) + (read("import.err") + read(f"{i}.err"))


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    with _fds_to(out, "import"):
        from torch.distributed.flight_recorder import fr_trace
    for i, folder in enumerate(argv[1:]):
        with _fds_to(out, str(i)):
            try:
                fr_trace.main([folder])
            except BaseException:  # printed as the interpreter would, per folder
                traceback.print_exc()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
