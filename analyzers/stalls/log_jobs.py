"""Which job (run) each log file belongs to: logs of different run ids are different jobs.

A folder of logs can hold two jobs' files (a restart under a new run id, a neighbour's job on
the same node, logs copied together for a ticket). Judged as one world, the first job's
timeout and the second job's exception become one causal chain — a culprit that is not there.
torchelastic states the run id in lines of its own (from torch's source):

* ``torch/distributed/launcher/api.py`` (``launch_agent``): "Starting elastic_operator with
  launch configs: ... ``run_id : <id>``";
* ``torch/distributed/elastic/rendezvous/dynamic_rendezvous.py``: "The node '<node>' has joined
  round <n> of the '<id>' rendezvous as rank ..." (torch 1.9–2.0) and "... of the rendezvous
  '<id>' as rank ..." (later);
* torchelastic events (``torch/distributed/elastic/events``): JSON whose ``name`` starts with
  ``torchelastic`` and whose metadata holds ``"run_id": "<id>"``;
* the environment it sets, ``TORCHELASTIC_RUN_ID=<id>`` (printed by scripts that dump it).

Files are grouped by the run id they state (the most frequent one when a file names several);
with two or more ids each group is analysed as its own job, and files that state none form a
group of their own (never merged into a stated one). ``--job-id`` naming one of the ids keeps
that run's files only; the others are a counted skip with a note.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

#: How much of each file is searched for a run id (the launcher states it at the start).
SCAN_BYTES = 4 << 20
#: Only torchelastic's own spellings: a bare ``run_id=`` is also what experiment trackers
#: (W&B, MLflow) print, per rank, and one job's ranks must never be split by it.
_STATED = re.compile(rb"(?m)^[ \t]*run_id[ \t]*:[ \t]*([A-Za-z0-9][\w.:@-]{0,127})[ \t]*\r?$|"
                     rb"TORCHELASTIC_RUN_ID[ \t]*[:=][ \t]*[\"']?([A-Za-z0-9][\w.:@-]{0,127})|"
                     rb"\"torchelastic[^\n]{0,2000}?\"run_id\": \"([A-Za-z0-9][\w.:@-]{0,127})\"")
_RDZV = re.compile(rb"of the (?:rendezvous '([^'\s]{1,128})'|'([^'\s]{1,128})' rendezvous) "
                   rb"as rank")


@dataclass
class RunGroup:
    run_id: str | None  #: None: files that state no run id
    files: list[Path] = field(default_factory=list)


def run_id_of(path: Path) -> str | None:
    """The run id a log file states (most frequent), or None."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(SCAN_BYTES)
    except OSError:
        return None  # the parser reports the unreadable file itself
    found: Counter[bytes] = Counter()
    if b"run_id" in data or b"RUN_ID" in data:
        found.update(m.group(1) or m.group(2) or m.group(3) for m in _STATED.finditer(data))
    if b"rendezvous" in data:
        found.update(m.group(1) or m.group(2) for m in _RDZV.finditer(data))
    return found.most_common(1)[0][0].decode("ascii", "replace") if found else None


def group_by_run(files: list[Path]) -> list[RunGroup]:
    """Files grouped by the run id they state, in the order first seen; one group when at most
    one id is stated (files stating none join it: nothing says they are another job's)."""
    groups: dict[str | None, RunGroup] = {}
    for path in files:
        rid = run_id_of(path)
        groups.setdefault(rid, RunGroup(rid)).files.append(path)
    stated = [g for g in groups.values() if g.run_id is not None]
    if len(stated) <= 1:
        return [RunGroup(stated[0].run_id if stated else None, list(files))]
    return list(groups.values())
