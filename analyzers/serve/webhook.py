"""Alertmanager's webhook payload (version 4) → the jobs it asks about.

Alertmanager sends one JSON document per notification of a group (``groupKey``), carrying every
alert of the group with its ``status``, ``labels`` and ``fingerprint``. Delivery is
at-least-once: a failed POST is retried, and ``repeat_interval`` re-sends the same group while it
keeps firing. :func:`parse` therefore gives, per ``job_id`` label, what a run needs (is anything
still firing, which alerts and ranks) and a **delivery key** that is equal for two deliveries of
the same state of the group, so the queue can tell a retry from news.

Alerts without a ``job_id`` label (the analyzer's own failure alerts, other teams' alerts routed
here by mistake) are counted and ignored: there is no job to analyse.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import msgspec

from stormotel import schema

#: The payload version this receiver reads (Alertmanager 0.x has sent "4" since 2017).
VERSION = "4"
#: Longest job id taken from a label (a label value is input).
MAX_JOB_ID_CHARS = 512
#: Alerts kept per job in one delivery (a storm of ranks collapses into one job anyway).
MAX_ALERTS_PER_JOB = 64


class PayloadError(ValueError):
    """The body is not an Alertmanager webhook payload (answered 400: not retried)."""


class _Alert(msgspec.Struct):
    status: str = "firing"
    labels: dict[str, str] = {}
    fingerprint: str = ""
    startsAt: str = ""


class _Payload(msgspec.Struct):
    version: str = ""
    groupKey: str = ""
    status: str = "firing"
    receiver: str = ""
    alerts: list[_Alert] = []


@dataclass
class JobNotice:
    """What one delivery says about one job."""

    job_id: str
    #: True when any of the job's alerts in this delivery is still firing.
    firing: bool
    alertnames: list[str] = field(default_factory=list)
    ranks: list[str] = field(default_factory=list)
    #: Equal for two deliveries of the same state of the group (retries, repeat_interval).
    delivery_key: str = ""


@dataclass
class Delivery:
    """One parsed POST: the jobs it names, and how many alerts carried no job."""

    jobs: dict[str, JobNotice]
    without_job: int
    group_key: str


def parse(body: bytes) -> Delivery:
    """The jobs a webhook body names; raises :class:`PayloadError` for a body that is not a
    version-4 payload (a wrong version is refused too: its fields may mean something else)."""
    try:
        payload = msgspec.json.decode(body, type=_Payload)
    except (msgspec.DecodeError, UnicodeDecodeError) as e:  # msgspec: bad UTF-8 in a string
        raise PayloadError(f"not an Alertmanager webhook payload: {e}") from None
    if payload.version != VERSION:
        raise PayloadError(f"payload version {payload.version!r} is not {VERSION!r}")
    jobs: dict[str, JobNotice] = {}
    parts: dict[str, list[str]] = {}
    without = 0
    for alert in payload.alerts:
        job_id = alert.labels.get(schema.ATTR_JOB_ID, "")
        if not job_id or len(job_id) > MAX_JOB_ID_CHARS:
            without += 1
            continue
        notice = jobs.setdefault(job_id, JobNotice(job_id, firing=False))
        firing = alert.status == "firing"
        notice.firing = notice.firing or firing
        name = alert.labels.get("alertname", "")
        if name and name not in notice.alertnames and len(notice.alertnames) < MAX_ALERTS_PER_JOB:
            notice.alertnames.append(name)
        rank = alert.labels.get(schema.ATTR_RANK, "")
        if rank and rank not in notice.ranks and len(notice.ranks) < MAX_ALERTS_PER_JOB:
            notice.ranks.append(rank)
        parts.setdefault(job_id, []).append(
            f"{alert.fingerprint or sorted(alert.labels.items())}:{alert.status}:{alert.startsAt}")
    for job_id, notice in jobs.items():
        notice.delivery_key = delivery_key(payload.groupKey, parts[job_id])
    return Delivery(jobs, without, payload.groupKey)


def delivery_key(group_key: str, alert_parts: list[str]) -> str:
    """A short stable hash of the group and its alerts' fingerprints, statuses and starts: the
    same for a retry or a repeat of one state of the group, different when an alert joins,
    leaves, resolves or fires anew."""
    h = hashlib.sha256(group_key.encode())
    for part in sorted(alert_parts):
        h.update(b"\0" + part.encode())
    return h.hexdigest()[:32]
