"""Findings as Grafana annotations, and the per-job incident dashboard, over Grafana's HTTP API.

Idempotent by construction, because a cron job re-runs and may re-analyse a window: each
annotation carries a deterministic key tag (``stormotel-key=<hash>``). The key names the
*finding*, not the window that saw it: a persistent gap finding is one per job, kind and rank (a
later run widens its region), the first-cause verdict one per job and suspect position (a later
run that names another rank replaces the text), a transient event one per job, kind, ranks and
start. Before posting, the sink lists the job's existing annotations (far enough back to find
earlier runs' findings) and skips those whose key exists unchanged, or patches them. A POST is
sent without blind retries: after a 5xx or a timeout (which the server may have stored anyway)
the sink looks the key up again and only re-posts when it is really missing. The incident
dashboard has a deterministic UID per job and is only saved when its JSON differs from what
Grafana already holds, so re-runs do not pile up dashboard versions either.

The token comes from a file or ``$GRAFANA_TOKEN`` and lives only inside the HTTP client's auth;
it is never logged or written into a report.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
from stormotel.analyzers.http import Deadline, EndpointError, HttpSettings, request
from stormotel.analyzers.options import ENV_GRAFANA_TOKEN as ENV_GRAFANA_TOKEN
from stormotel.analyzers.report import Report

from stormotel import schema
from stormotel.textsafe import redact

KEY_TAG_PREFIX = "stormotel-key="
#: How many existing annotations one listing may return (Grafana caps at its own limit too).
LIST_LIMIT = 5000
#: How far before the new findings the listing looks for earlier runs' annotations.
LOOKBACK_MS = 7 * 86_400_000


@dataclass(frozen=True)
class Annotation:
    """One region (or instant, ``end_ms == start_ms``) annotation to create."""

    kind: str
    ranks: tuple[int, ...]
    start_ms: int
    end_ms: int
    text: str
    tags: tuple[str, ...]
    key: str
    #: A lasting finding: a later run widens the region it already covers.
    widen: bool = False

    def payload(self, dashboard_uid: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"time": self.start_ms, "timeEnd": self.end_ms,
                                "tags": list(self.tags), "text": redact(self.text)}
        if dashboard_uid:
            body["dashboardUID"] = dashboard_uid
        return body


@dataclass
class SyncResult:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    planned: list[dict[str, Any]] = field(default_factory=list)

    def __str__(self) -> str:
        return f"created={self.created} updated={self.updated} unchanged={self.unchanged}"


def _key(job_id: str, kind: str, ranks: Sequence[int], start_ms: int, extra: str = "") -> str:
    """Stable across re-runs: job, kind, ranks and the start to the second."""
    raw = f"{job_id}|{kind}|{','.join(map(str, sorted(ranks)))}|{start_ms // 1000}|{extra}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def annotations_for(report: Report, job_id: str | None = None) -> list[Annotation]:
    """One annotation per finding with a place on the time axis (the first-cause lead window,
    gap findings, collective intervals, stalls, …): where it sits and what keys it is the
    finding family's word (:meth:`FindingFamily.annotation
    <stormotel.analyzers.findings.FindingFamily.annotation>`). OOM forensics has its own edge
    markers on the dashboards and no annotation."""
    jid = job_id or report.job_id or "unknown"
    out: list[Annotation] = []
    for f in report.findings():
        span = f.of.annotation(f, report)
        if span is None:
            continue
        located = f.where  # which machine/pod to look at, for the ranks it names
        text = f"{f.text} [{'; '.join(located)}]" if located else f.text
        key = _key(jid, f.kind, f.ranks if span.by_ranks else (),
                   span.start_ms if span.by_start else 0, span.identity)
        tags = (schema.ANNOTATION_TAG, f.kind,
                *(schema.annotation_tag(schema.ATTR_RANK, r) for r in f.ranks),
                schema.annotation_tag(schema.ATTR_JOB_ID, jid), *span.tags,
                f"{KEY_TAG_PREFIX}{key}")
        out.append(Annotation(f.kind, f.ranks, span.start_ms, max(span.start_ms, span.end_ms),
                              text, tags, key, span.widen))
    return out


class GrafanaAPI:
    """The few Grafana HTTP API calls the job needs."""

    def __init__(self, url: str, client: httpx.Client, settings: HttpSettings,
                 deadline: Deadline | None = None) -> None:
        self.url = url.rstrip("/")
        self.client = client
        self.settings = settings
        self.deadline = deadline

    def _req(self, method: str, path: str, **kw: Any) -> httpx.Response:
        return request(self.client, method, self.url + path, settings=self.settings,
                       deadline=self.deadline, **kw)

    def _json(self, resp: httpx.Response, path: str) -> Any:
        try:
            return resp.json()
        except ValueError:
            raise EndpointError(self.url + path, "malformed JSON response") from None

    def list_annotations(self, tags: Sequence[str], from_ms: int, to_ms: int
                         ) -> list[dict[str, Any]]:
        params: list[tuple[str, str | int]] = [("tags", t) for t in tags]
        params += [("from", from_ms), ("to", to_ms), ("limit", LIST_LIMIT),
                   ("type", "annotation"), ("matchAny", "false")]
        path = "/api/annotations"
        doc = self._json(self._req("GET", path, params=params), path)
        if not isinstance(doc, list):
            raise EndpointError(self.url + path, "annotation listing is not a list")
        return [a for a in doc if isinstance(a, dict)]

    def create_annotation(self, body: dict[str, Any]) -> None:
        """One POST, never retried blindly: a POST that timed out or got a 5xx may have been
        stored (see :func:`create_once`)."""
        request(self.client, "POST", self.url + "/api/annotations",
                settings=replace(self.settings, retries=0), deadline=self.deadline, json=body)

    def patch_annotation(self, ann_id: int, body: dict[str, Any]) -> None:
        self._req("PATCH", f"/api/annotations/{ann_id}", json=body)

    def get_dashboard(self, uid: str) -> dict[str, Any] | None:
        path = f"/api/dashboards/uid/{uid}"
        try:
            resp = self._req("GET", path)
        except EndpointError as e:
            if e.status == 404:
                return None
            raise
        doc = self._json(resp, path)
        board = doc.get("dashboard") if isinstance(doc, dict) else None
        return board if isinstance(board, dict) else None

    def save_dashboard(self, board: dict[str, Any], message: str,
                       folder_uid: str | None = None) -> None:
        body: dict[str, Any] = {"dashboard": board, "overwrite": True, "message": message}
        if folder_uid:  # without it Grafana saves into General
            body["folderUid"] = folder_uid
        self._req("POST", "/api/dashboards/db", json=body)


def _key_of(existing: dict[str, Any]) -> str | None:
    for t in existing.get("tags") or []:
        if isinstance(t, str) and t.startswith(KEY_TAG_PREFIX):
            return t[len(KEY_TAG_PREFIX):]
    return None


def _same(existing: dict[str, Any], body: dict[str, Any]) -> bool:
    return (existing.get("text") == body["text"] and existing.get("time") == body["time"]
            and existing.get("timeEnd", existing.get("time")) == body["timeEnd"]
            and sorted(existing.get("tags") or []) == sorted(body["tags"]))


def sync_annotations(api: GrafanaAPI | None, annotations: Sequence[Annotation], job_id: str,
                     *, dashboard_uid: str | None = None, dry_run: bool = False
                     ) -> SyncResult:
    """Create what is missing, patch what changed, leave the rest. ``api=None`` needs dry_run."""
    result = SyncResult()
    if not annotations:
        return result
    bodies = [(a, a.payload(dashboard_uid)) for a in annotations]
    if dry_run or api is None:
        result.planned = [b for _, b in bodies]
        return result
    lo = min(a.start_ms for a in annotations) - LOOKBACK_MS
    hi = max(a.end_ms for a in annotations) + 1
    existing = {}
    job_tag = schema.annotation_tag(schema.ATTR_JOB_ID, job_id)
    for e in api.list_annotations([schema.ANNOTATION_TAG, job_tag], lo, hi):
        k = _key_of(e)
        if k:
            if not isinstance(e.get("id"), int) or isinstance(e.get("id"), bool):
                raise EndpointError(api.url + "/api/annotations",
                                    f"listed annotation {k!r} has no numeric id; cannot "
                                    "update it without creating a duplicate")
            existing[k] = e
    for ann, body in bodies:
        old = existing.get(ann.key)
        if old is None:
            create_once(api, ann, body)
            result.created += 1
            continue
        if ann.widen:  # widen the region the finding already covers
            body = {**body, "time": min(body["time"], int(old.get("time", body["time"]))),
                    "timeEnd": max(body["timeEnd"], int(old.get("timeEnd", body["timeEnd"])))}
        if _same(old, body):
            result.unchanged += 1
        else:
            api.patch_annotation(int(old["id"]), body)
            result.updated += 1
    return result


def create_once(api: GrafanaAPI, ann: Annotation, body: dict[str, Any]) -> None:
    """POST an annotation exactly once under 5xx answers and timeouts: after a failed POST, look
    its key up (the server may have stored it before failing) and re-post only when missing."""
    attempts = max(1, api.settings.retries + 1)
    for attempt in range(attempts):
        try:
            api.create_annotation(body)
            return
        except EndpointError as e:
            if e.status is not None and e.status < 500 and e.status != 429:
                raise
            stored = api.list_annotations([f"{KEY_TAG_PREFIX}{ann.key}"], ann.start_ms - 1,
                                          ann.end_ms + 1)
            if any(_key_of(a) == ann.key for a in stored):
                return
            if attempt == attempts - 1:
                raise


def _comparable(board: dict[str, Any]) -> str:
    trimmed = {k: v for k, v in board.items() if k not in ("id", "version")}
    return json.dumps(trimmed, sort_keys=True)


def save_dashboard_if_changed(api: GrafanaAPI, board: dict[str, Any], message: str,
                              folder_uid: str | None = None) -> bool:
    """Save through the dashboard API (into ``folder_uid``) unless Grafana already holds the
    same JSON."""
    uid = board.get("uid")
    current = api.get_dashboard(str(uid)) if uid else None
    if current is not None and _comparable(current) == _comparable(board):
        return False
    api.save_dashboard(board, message, folder_uid)
    return True
