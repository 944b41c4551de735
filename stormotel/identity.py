"""Who a sample came from: job, rank, local rank, world size, host and GPU.

Explicit values win; otherwise the launcher's environment is read (torchrun, then SLURM, then
Open MPI). Every value is validated here, once, so a wrong ``RANK`` fails at start-up with the
name of the variable that was wrong instead of producing series nobody can join.

The identity becomes both the OTel Resource and data-point attributes on every series, so
``{job_id="run-7", rank="2"}`` works in PromQL with no collector configuration.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass

from stormotel import schema

__all__ = ["LAUNCHERS", "Identity", "IdentityError", "resolve_identity"]


class IdentityError(ValueError):
    """A rank/world-size/job id that cannot be used; the message names where it came from."""


@dataclass(frozen=True)
class _Launcher:
    name: str
    rank: str
    local_rank: str
    world_size: str
    job_id: str


#: Launcher environment variables, in the order they are consulted.
LAUNCHERS: tuple[_Launcher, ...] = (
    _Launcher("torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID"),
    _Launcher("slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_ID"),
    _Launcher("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
              "OMPI_COMM_WORLD_SIZE", ""),
)


@dataclass(frozen=True)
class Identity:
    """The training identity of one tracked GPU. ``source`` says where rank/world came from."""

    job_id: str
    rank: int
    local_rank: int
    world_size: int
    host: str
    gpu: str = "0"
    gpu_uuid: str | None = None
    source: str = "default"

    @property
    def instance_id(self) -> str:
        """``service.instance.id``: unique per rank within a job."""
        return f"{self.job_id}/{schema.ARCHIVE_RANK_PREFIX}{self.rank}"

    def labels(self) -> dict[str, str]:
        """Data-point attributes put on every series (all valid Prometheus label names)."""
        return {schema.ATTR_JOB_ID: self.job_id, schema.ATTR_RANK: str(self.rank),
                schema.ATTR_LOCAL_RANK: str(self.local_rank),
                schema.ATTR_WORLD_SIZE: str(self.world_size), schema.ATTR_HOST: self.host,
                schema.ATTR_GPU: self.gpu}

    def resource_attributes(self, env: Mapping[str, str] | None = None,
                            extra: Mapping[str, str] | None = None) -> dict[str, str | int]:
        """OTel Resource attributes: service.*, host.name, k8s.* from the downward API, identity."""
        env = os.environ if env is None else env
        from importlib.metadata import PackageNotFoundError, version

        try:
            svc_version = version("stormotel")
        except PackageNotFoundError:  # running from a source tree without install
            svc_version = "0+unknown"
        attrs: dict[str, str | int] = {
            schema.RES_SERVICE_NAME: schema.SERVICE_NAME,
            schema.RES_SERVICE_INSTANCE_ID: self.instance_id,
            schema.RES_SERVICE_VERSION: svc_version,
            schema.RES_HOST_NAME: self.host,
            schema.RES_SCHEMA_VERSION: schema.SCHEMA_VERSION,
            **self.labels(),
        }
        if self.gpu_uuid:
            attrs[schema.ATTR_GPU_UUID] = self.gpu_uuid
        for var, key in schema.RES_K8S.items():
            if env.get(var):
                attrs[key] = env[var]
        attrs.update(extra or {})
        return attrs


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


def resolve_identity(job_id: str | None = None, rank: int | None = None,
                     local_rank: int | None = None, world_size: int | None = None,
                     host: str | None = None, gpu: int | str | None = None,
                     gpu_uuid: str | None = None,
                     env: Mapping[str, str] | None = None) -> Identity:
    """Build and validate an :class:`Identity`.

    Explicit arguments win. Missing ones come from the first launcher whose rank variable is set
    (torchrun ``RANK``, SLURM ``SLURM_PROCID``, Open MPI ``OMPI_COMM_WORLD_RANK``); with no
    launcher a single-process identity (rank 0 of 1) and a generated job id are used.

    Raises :class:`IdentityError` naming the argument or variable that was wrong.
    """
    env = os.environ if env is None else env
    names = {"rank": "rank", "local_rank": "local_rank", "world_size": "world_size"}
    values: dict[str, object] = {"rank": rank, "local_rank": local_rank,
                                 "world_size": world_size}
    source = "explicit" if rank is not None else "default"
    launcher = next((lch for lch in LAUNCHERS if env.get(lch.rank, "").strip() != ""), None)
    if launcher is not None:
        for field in values:
            var = getattr(launcher, field)
            if values[field] is None and env.get(var, "").strip() != "":
                values[field] = env[var]
                names[field] = var
        if rank is None:
            source = launcher.name
        if job_id is None and launcher.job_id and env.get(launcher.job_id):
            job_id = env[launcher.job_id]
            names["job_id"] = launcher.job_id
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
    job = (job_id if job_id is not None else _default_job_id()).strip()
    if not job or any(c in job for c in "/\\\n\r\t"):
        raise IdentityError(f"{names.get('job_id', 'job_id')}={job_id!r} must be non-empty and "
                            "contain no slashes, backslashes or control characters")
    gpu_str = str(lr if gpu is None else gpu)
    return Identity(job_id=job, rank=r, local_rank=lr, world_size=ws,
                    host=host or socket.gethostname(), gpu=gpu_str, gpu_uuid=gpu_uuid,
                    source=source)
