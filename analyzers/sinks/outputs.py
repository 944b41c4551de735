"""One output path per job: a scheduled run over several discovered jobs must not write every
job's report, HTML page, Perfetto trace and incident dashboard to the same file (the last job
would win, and the others' results would be lost without a word).

A path may hold ``{job}``, replaced by the job id made safe as one file-name component
(``-o 'reports/{job}.json'``). When several jobs are analysed and a path has no ``{job}``, each
job's file goes into a folder named after the job beside it: ``--html report.html`` becomes
``<job>/report.html``. One job and no placeholder: the path as given.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path

from stormotel.analyzers.options import SinkOptions

PLACEHOLDER = "{job}"
#: Longest job-id component of a path (file systems allow 255 bytes).
MAX_COMPONENT = 100
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_job_id(job_id: str | None) -> str:
    """``job_id`` as one path component: only ``[A-Za-z0-9._-]``, no leading dot (a job id is
    input: no ``/``, no ``..``, no control characters); a changed or shortened id gets a short
    hash of the original so two ids never share a file."""
    raw = job_id or "job"
    safe = _UNSAFE.sub("_", raw)[:MAX_COMPONENT]
    safe = "_" * (len(safe) - len(safe.lstrip("."))) + safe.lstrip(".")  # no "..", no hidden
    if safe != raw:
        safe = f"{safe}-{hashlib.sha256(raw.encode()).hexdigest()[:8]}"
    return safe


def job_path(path: Path | str, job_id: str | None, *, several: bool) -> Path:
    """``path`` for ``job_id``: its ``{job}`` replaced, else a folder per job when
    ``several`` jobs are analysed, else unchanged."""
    text = str(path)
    if PLACEHOLDER in text:
        return Path(text.replace(PLACEHOLDER, safe_job_id(job_id)))
    if several:
        p = Path(text)
        return p.parent / safe_job_id(job_id) / p.name
    return Path(text)


def job_sinks(sinks: SinkOptions, job_id: str | None, *, several: bool) -> SinkOptions:
    """The file sinks (``--perfetto``, ``--incident-dashboard``) at ``job_id``'s paths."""
    return dataclasses.replace(
        sinks,
        perfetto=None if sinks.perfetto is None
        else job_path(sinks.perfetto, job_id, several=several),
        incident_dashboard=None if sinks.incident_dashboard is None
        else job_path(sinks.incident_dashboard, job_id, several=several))
