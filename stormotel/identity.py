"""Who a sample came from: job, rank, local rank, world size, host and GPU, and where it runs.

Explicit values win; otherwise the launcher's environment is read (torchrun, then SLURM, then
Open MPI). Every value is validated here, once, so a wrong ``RANK`` fails at start-up with the
name of the variable that was wrong instead of producing series nobody can join.

The job id must be the same on every rank of one job and differ between jobs, or series and
archive files of different runs merge. Its sources, first match wins (docs/tracker.md):

1. ``job_id=`` / ``--job-id``, then ``STORMOTEL_JOB_ID``;
2. ``TORCHELASTIC_RUN_ID`` unless it is torchrun's placeholder ``none``;
3. ``SLURM_JOB_ID`` (``<job>.<step>`` inside an ``srun`` step, SLURM's own notation);
4. Open MPI's job-level variables (``PMIX_NAMESPACE``, ``OMPI_MCA_ess_base_jobid``,
   ``OMPI_MCA_orte_hnp_uri``), identical on every rank of one ``mpirun``;
5. agreement through the torch.distributed store: the default process group's store when one
   exists, else torchrun's agent store at ``MASTER_ADDR:MASTER_PORT``; the first rank to ask
   stores a fresh id and every other rank reads it;
6. ``local-<UTC time>-<pid>``, unique but per process (a warning says so when world_size > 1).

Attribution (Kubernetes pod/namespace/node, SLURM job/step) comes from the downward-API
variables, ``OTEL_RESOURCE_ATTRIBUTES`` and SLURM, and is exported only when known.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from stormotel import environment, schema
from stormotel.errors import UsageError

__all__ = ["LAUNCHERS", "Identity", "IdentityError", "parse_resource_attributes",
           "resolve_identity"]

log = logging.getLogger("stormotel.identity")


class IdentityError(UsageError, ValueError):
    """A rank/world-size/job id that cannot be used; the message names where it came from."""


@dataclass(frozen=True)
class _Launcher:
    name: str
    rank: str
    local_rank: str
    world_size: str


#: Launcher environment variables, in the order they are consulted.
LAUNCHERS: tuple[_Launcher, ...] = (
    _Launcher("torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE"),
    _Launcher("slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"),
    _Launcher("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
              "OMPI_COMM_WORLD_SIZE"),
)


@dataclass(frozen=True)
class Identity:
    """The training identity of one tracked GPU. ``source`` says where rank/world came from,
    ``job_source`` where the job id came from. ``pod`` ... ``slurm_step_id`` are attribution:
    ``None`` when the environment does not say."""

    job_id: str
    rank: int
    local_rank: int
    world_size: int
    host: str
    gpu: str = "0"
    gpu_uuid: str | None = None
    source: str = "default"
    job_source: str = "default"
    pod: str | None = None
    namespace: str | None = None
    node: str | None = None
    slurm_job_id: str | None = None
    slurm_step_id: str | None = None

    @property
    def instance_id(self) -> str:
        """``service.instance.id``: unique per rank within a job."""
        return f"{self.job_id}/{schema.ARCHIVE_RANK_PREFIX}{self.rank}"

    def attribution(self) -> dict[str, str]:
        """Pod/namespace/node/SLURM labels that are set (empty ones are left out)."""
        values = {schema.ATTR_POD: self.pod, schema.ATTR_NAMESPACE: self.namespace,
                  schema.ATTR_NODE: self.node, schema.ATTR_SLURM_JOB_ID: self.slurm_job_id,
                  schema.ATTR_SLURM_STEP_ID: self.slurm_step_id}
        return {k: v for k, v in values.items() if v}

    def labels(self) -> dict[str, str]:
        """Data-point attributes put on every series (all valid Prometheus label names)."""
        return {schema.ATTR_JOB_ID: self.job_id, schema.ATTR_RANK: str(self.rank),
                schema.ATTR_LOCAL_RANK: str(self.local_rank),
                schema.ATTR_WORLD_SIZE: str(self.world_size), schema.ATTR_HOST: self.host,
                schema.ATTR_GPU: self.gpu, **self.attribution()}

    def resource_attributes(self, env: Mapping[str, str] | None = None,
                            extra: Mapping[str, str] | None = None) -> dict[str, str | int]:
        """OTel Resource attributes: service.*, host.name, k8s.*, slurm.*, identity.

        ``service.name`` is ``OTEL_SERVICE_NAME`` (or ``service.name`` in
        ``OTEL_RESOURCE_ATTRIBUTES``) when set, as the OTel spec requires, else ``stormotel``.
        """
        env = os.environ if env is None else env
        from importlib.metadata import PackageNotFoundError, version

        try:
            svc_version = version("stormotel")
        except PackageNotFoundError:  # running from a source tree without install
            svc_version = "0+unknown"
        from_env = parse_resource_attributes(env.get("OTEL_RESOURCE_ATTRIBUTES", ""))
        service = (env.get("OTEL_SERVICE_NAME", "").strip()
                   or from_env.get(schema.RES_SERVICE_NAME) or schema.SERVICE_NAME)
        attrs: dict[str, str | int] = {
            schema.RES_SERVICE_NAME: service,
            schema.RES_SERVICE_INSTANCE_ID: self.instance_id,
            schema.RES_SERVICE_VERSION: svc_version,
            schema.RES_HOST_NAME: self.host,
            schema.RES_SCHEMA_VERSION: schema.SCHEMA_VERSION,
            **self.labels(),
        }
        if self.gpu_uuid:
            attrs[schema.ATTR_GPU_UUID] = self.gpu_uuid
        known = _attribution(env)  # fields resolved earlier win over this env's values
        resource_keys = {schema.RES_K8S_POD: self.pod or known["pod"],
                         schema.RES_K8S_NAMESPACE: self.namespace or known["namespace"],
                         schema.RES_K8S_NODE: self.node or known["node"],
                         schema.RES_SLURM_JOB_ID: self.slurm_job_id or known["slurm_job_id"],
                         schema.RES_SLURM_STEP_ID: self.slurm_step_id or known["slurm_step_id"]}
        attrs.update({k: v for k, v in resource_keys.items() if v})
        attrs.update(extra or {})
        return attrs


def parse_resource_attributes(text: str) -> dict[str, str]:
    """``OTEL_RESOURCE_ATTRIBUTES`` (``k=v,k2=v2``, values percent-encoded); bad pairs skipped."""
    out: dict[str, str] = {}
    for pair in text.split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip() and value.strip():
            out[key.strip()] = unquote(value.strip())
    return out


def _parse_int(value: object, name: str) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, int):
            return value
        return int(str(value).strip())
    except ValueError:
        raise IdentityError(f"{name}={value!r} is not an integer") from None


def _default_job_id() -> str:
    return f"local-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}"


def _fresh_job_id(prefix: str) -> str:
    return f"{prefix}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"


_UNSAFE = re.compile(r"[^A-Za-z0-9_.:@+=-]+")


def safe_job_id(raw: str) -> str:
    """An environment-provided id made safe as a folder name and a label value."""
    cleaned = _UNSAFE.sub("_", raw.strip()).strip("_")
    return "" if cleaned in ("", ".", "..") else cleaned


def check_job_id(job: str, name: str) -> str:
    """Reject ids that cannot be a folder name inside the archive directory."""
    job = job.strip()
    if not job or job in (".", "..") or any(c in job for c in "/\\") or \
            any(ord(c) < 32 or ord(c) == 127 for c in job):
        raise IdentityError(f"{name}={job!r} must be non-empty, not '.' or '..', and contain "
                            "no slashes, backslashes or control characters")
    return job


def _env(env: Mapping[str, str], var: str) -> str:
    return env.get(var, "").strip()


def _openmpi_job(env: Mapping[str, str]) -> tuple[str, str] | None:
    """A value every rank of one ``mpirun`` shares (and another ``mpirun`` does not)."""
    for var in schema.ENV_OPENMPI_JOB:
        value = _env(env, var)
        if var == "OMPI_MCA_orte_hnp_uri":  # "<jobfamily>.0;tcp://host:port": the whole URI
            value = value.replace(";", "-")
        if value and (safe := safe_job_id(value)):
            return f"mpi-{safe}", var
    return None


StoreAgreement = Callable[[Mapping[str, str], str], str | None]


def agree_through_store(env: Mapping[str, str], candidate: str) -> str | None:
    """The job id stored under ``schema.STORE_JOB_ID_KEY`` in the torch.distributed store.

    ``compare_set`` with an empty expected value stores ``candidate`` only if nothing is there
    and returns what is stored, so the first rank's id wins and no rank waits for another.
    Uses the default process group's store when one exists, else torchrun's agent store
    (``TORCHELASTIC_USE_AGENT_STORE=True``). ``None`` when neither is reachable.
    """
    torch = sys.modules.get("torch")
    try:
        store = None
        if torch is not None:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                from torch.distributed.distributed_c10d import _get_default_store

                store = _get_default_store()
        if store is None and _env(env, "TORCHELASTIC_USE_AGENT_STORE") == "True" and \
                _env(env, "MASTER_ADDR") and _env(env, "MASTER_PORT"):
            from datetime import timedelta

            import torch.distributed as dist

            store = dist.TCPStore(_env(env, "MASTER_ADDR"), int(_env(env, "MASTER_PORT")),
                                  is_master=False, timeout=timedelta(seconds=10))
        if store is None:
            return None
        value = store.compare_set(schema.STORE_JOB_ID_KEY, "", candidate)
        text = value.decode() if isinstance(value, bytes) else str(value)
        return text or None
    except Exception as e:  # no store: fall back, with a warning from the caller
        log.debug("stormotel: job id agreement through the store failed: %s", e)
        return None


def _job_id_from_env(env: Mapping[str, str], world_size: int,
                     agree: StoreAgreement) -> tuple[str, str]:
    """(job id, the variable or mechanism it came from) in the documented order."""
    if value := safe_job_id(_env(env, environment.JOB_ID)):
        return value, environment.JOB_ID
    run_id = _env(env, "TORCHELASTIC_RUN_ID")
    if run_id and run_id.lower() != "none" and (value := safe_job_id(run_id)):
        return value, "TORCHELASTIC_RUN_ID"
    if value := safe_job_id(_env(env, "SLURM_JOB_ID")):
        step = safe_job_id(_env(env, "SLURM_STEP_ID"))
        return (f"{value}.{step}" if step else value), "SLURM_JOB_ID"
    if (mpi := _openmpi_job(env)) is not None:
        return mpi
    if world_size > 1 or _env(env, "TORCHELASTIC_RUN_ID"):
        agreed = agree(env, _fresh_job_id("job"))
        if agreed and (value := safe_job_id(agreed)):
            return value, "store"
        log.warning("stormotel: no job id for this %d-rank job (set job_id=, --job-id or %s; "
                    "TORCHELASTIC_RUN_ID is %r and no torch.distributed store was reachable); "
                    "each rank gets its own id", world_size, environment.JOB_ID,
                    _env(env, "TORCHELASTIC_RUN_ID") or None)
    return _default_job_id(), "default"


def _attribution(env: Mapping[str, str]) -> dict[str, str | None]:
    res = parse_resource_attributes(env.get("OTEL_RESOURCE_ATTRIBUTES", ""))

    def first(*vars_: str, resource_key: str = "") -> str | None:
        for var in vars_:
            if value := _env(env, var):
                return value
        return res.get(resource_key) or None if resource_key else None

    return {"pod": first(*schema.ENV_K8S_POD, resource_key=schema.RES_K8S_POD),
            "namespace": first(*schema.ENV_K8S_NAMESPACE, resource_key=schema.RES_K8S_NAMESPACE),
            "node": first(*schema.ENV_K8S_NODE, resource_key=schema.RES_K8S_NODE),
            "slurm_job_id": first("SLURM_JOB_ID"), "slurm_step_id": first("SLURM_STEP_ID")}


def resolve_identity(job_id: str | None = None, rank: int | None = None,
                     local_rank: int | None = None, world_size: int | None = None,
                     host: str | None = None, gpu: int | str | None = None,
                     gpu_uuid: str | None = None,
                     env: Mapping[str, str] | None = None,
                     agree: StoreAgreement = agree_through_store) -> Identity:
    """Build and validate an :class:`Identity`.

    Explicit arguments win. Missing ones come from the first launcher whose rank variable is set
    (torchrun ``RANK``, SLURM ``SLURM_PROCID``, Open MPI ``OMPI_COMM_WORLD_RANK``); with no
    launcher a single-process identity (rank 0 of 1). The job id follows the module's order.

    Raises :class:`IdentityError` naming the argument or variable that was wrong.
    """
    env = os.environ if env is None else env
    names = {"rank": "rank", "local_rank": "local_rank", "world_size": "world_size"}
    values: dict[str, object] = {"rank": rank, "local_rank": local_rank,
                                 "world_size": world_size}
    source = "explicit" if rank is not None else "default"
    launcher = next((lch for lch in LAUNCHERS if _env(env, lch.rank) != ""), None)
    if launcher is not None:
        for field in values:
            var = getattr(launcher, field)
            if values[field] is None and _env(env, var) != "":
                values[field] = env[var]
                names[field] = var
        if rank is None:
            source = launcher.name
    r = _parse_int(values["rank"] if values["rank"] is not None else 0, names["rank"])
    ws = _parse_int(values["world_size"] if values["world_size"] is not None else 1,
                    names["world_size"])
    lr = (_parse_int(values["local_rank"], names["local_rank"])
          if values["local_rank"] is not None else r)
    if ws < 1:
        raise IdentityError(f"{names['world_size']}={ws} must be >= 1")
    if not 0 <= r < ws:
        raise IdentityError(f"{names['rank']}={r} must satisfy 0 <= rank < world_size "
                            f"({names['world_size']}={ws})")
    if lr < 0:
        raise IdentityError(f"{names['local_rank']}={lr} must be >= 0")
    if lr >= ws:
        raise IdentityError(f"{names['local_rank']}={lr} must be < world_size "
                            f"({names['world_size']}={ws}): a host cannot run more ranks "
                            "than the job has")
    if job_id is not None:
        job, job_source = check_job_id(str(job_id), "job_id"), "explicit"
    else:
        job, job_source = _job_id_from_env(env, ws, agree)
    gpu_str = str(lr if gpu is None else gpu)
    return Identity(job_id=job, rank=r, local_rank=lr, world_size=ws,
                    host=host or socket.gethostname(), gpu=gpu_str, gpu_uuid=gpu_uuid,
                    source=source, job_source=job_source, **_attribution(env))
