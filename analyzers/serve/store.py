"""The receiver's files under ``--out``: where each job's latest report lives, how a file is
written so that a crash never leaves half of it (and a 2xx never precedes it), and retention.

Layout::

    OUT/queue/<job>.json         pending work of one job (:mod:`.queue`)
    OUT/jobs/<job>/report.json   the latest analysis, as ``stormotel analyze --format json``
    OUT/jobs/<job>/index.html    the same analysis as the HTML report
    OUT/jobs/<job>/meta.json     what triggered it, when, its verdict (the index page's row)
    OUT/jobs/<job>/failed.json   the last run that wrote no report: when, outcome, exit, why
                                 (said on the job's 404; removed by the next report)

``<job>`` is :func:`~stormotel.analyzers.sinks.outputs.safe_job_id`: one path component of
``[A-Za-z0-9._-]`` with a hash when the id had to change, so ``../../etc`` or ``<script>`` can
never name a path outside ``OUT`` and two ids never share a folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from stormotel.analyzers.sinks.outputs import safe_job_id

REPORT_JSON = "report.json"
REPORT_HTML = "index.html"
META_JSON = "meta.json"
FAILED_JSON = "failed.json"
STAGING = ".staging"


def write_atomic(path: Path, data: bytes) -> None:
    """``data`` at ``path`` or nothing: a temporary file beside it, flushed to disk, renamed
    over ``path``, and the folder's entry flushed too (so the rename survives a power cut)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Store:
    """The reports under ``OUT/jobs``."""

    def __init__(self, out: Path) -> None:
        self.root = out / "jobs"
        self.root.mkdir(parents=True, exist_ok=True)

    def job_dir(self, job_id: str) -> Path:
        """The job's folder; always a direct child of ``OUT/jobs``."""
        path = self.root / safe_job_id(job_id)
        if path.parent != self.root:  # safe_job_id makes one component; a guard all the same
            raise ValueError("job path outside the store")
        return path

    def staging(self, job_id: str) -> Path:
        """A clean folder the run writes into before :meth:`publish` moves its files."""
        path = self.job_dir(job_id) / STAGING
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def publish(self, job_id: str, meta: dict[str, Any]) -> None:
        """Move the staged report files over the job's current ones (each rename atomic), then
        write ``meta.json`` last: the index never points at a report not yet in place."""
        folder = self.job_dir(job_id)
        staged = folder / STAGING
        for name in (REPORT_JSON, REPORT_HTML):
            src = staged / name
            if src.exists():
                with open(src, "rb") as f:
                    os.fsync(f.fileno())
                os.replace(src, folder / name)
        fsync_dir(folder)
        shutil.rmtree(staged, ignore_errors=True)
        write_atomic(folder / META_JSON, json.dumps(meta, sort_keys=True).encode())
        with contextlib.suppress(FileNotFoundError):
            (folder / FAILED_JSON).unlink()

    def record_failure(self, job_id: str, failure: dict[str, Any]) -> None:
        """A run that wrote no report: kept so the job's URL (the page's ``report_url``) says
        why there is nothing to show, not only the receiver's log. The published report, if
        any, is left as it was."""
        folder = self.job_dir(job_id)
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / FAILED_JSON, json.dumps(failure, sort_keys=True).encode())

    def failure(self, job_id: str) -> dict[str, Any] | None:
        """The last run without a report, since the last one with a report (or None)."""
        return _read_meta(self.job_dir(job_id) / FAILED_JSON)

    def file(self, job_id: str, name: str) -> Path | None:
        """One of the job's published files, or None (never analysed, or not that file)."""
        if name not in (REPORT_JSON, REPORT_HTML):
            return None
        path = self.job_dir(job_id) / name
        return path if path.is_file() else None

    def meta(self, job_id: str) -> dict[str, Any] | None:
        return _read_meta(self.job_dir(job_id) / META_JSON)

    def recent(self, limit: int = 200) -> list[dict[str, Any]]:
        """The published analyses, newest first (at most ``limit``)."""
        metas = []
        for folder in self.root.iterdir():
            meta = _read_meta(folder / META_JSON)
            if meta is not None:
                metas.append(meta)
        metas.sort(key=lambda m: m.get("analysed_at_ns", 0), reverse=True)
        return metas[:limit]

    def sweep(self, retention_s: float, now: float | None = None) -> int:
        """Remove jobs whose latest analysis is older than ``retention_s``; how many."""
        now = time.time() if now is None else now
        removed = 0
        for folder in self.root.iterdir():
            stamps = []
            for name in (META_JSON, FAILED_JSON):  # a job that only ever failed ages too
                with contextlib.suppress(OSError):
                    stamps.append((folder / name).stat().st_mtime)
            if not stamps:
                continue
            age = now - max(stamps)
            if age > retention_s:
                shutil.rmtree(folder, ignore_errors=True)
                removed += 1
        return removed


def _read_meta(path: Path) -> dict[str, Any] | None:
    with contextlib.suppress(OSError, ValueError):
        meta = json.loads(path.read_bytes())
        if isinstance(meta, dict):
            return meta
    return None
