"""Identity resolution from explicit arguments and each launcher's variables, and its errors."""

from __future__ import annotations

import pytest

from stormotel import schema
from stormotel.identity import IdentityError, resolve_identity


def test_explicit_arguments_win_over_launcher_env() -> None:
    env = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "TORCHELASTIC_RUN_ID": "tr"}
    ident = resolve_identity("mine", rank=1, local_rank=0, world_size=2, host="h", env=env)
    assert (ident.job_id, ident.rank, ident.local_rank, ident.world_size) == ("mine", 1, 0, 2)
    assert ident.source == "explicit"


@pytest.mark.parametrize(("env", "expected", "source"), [
    ({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "TORCHELASTIC_RUN_ID": "elastic-7"},
     ("elastic-7", 3, 1, 8), "torchrun"),
    ({"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "16", "SLURM_JOB_ID": "4242"},
     ("4242", 5, 1, 16), "slurm"),
    ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
      "OMPI_COMM_WORLD_SIZE": "4"}, (None, 2, 0, 4), "openmpi"),
])
def test_each_launcher(env: dict[str, str], expected: tuple, source: str) -> None:
    ident = resolve_identity(host="node1", env=env)
    job, rank, local, world = expected
    if job is not None:
        assert ident.job_id == job
    else:
        assert ident.job_id.startswith("local-")
    assert (ident.rank, ident.local_rank, ident.world_size, ident.source) == \
        (rank, local, world, source)


def test_torchrun_is_preferred_over_slurm_when_both_are_set() -> None:
    env = {"RANK": "1", "WORLD_SIZE": "2", "SLURM_PROCID": "7", "SLURM_NTASKS": "9"}
    ident = resolve_identity(env=env)
    assert (ident.rank, ident.world_size, ident.source) == (1, 2, "torchrun")


def test_no_launcher_is_a_single_process_job() -> None:
    ident = resolve_identity(env={})
    assert (ident.rank, ident.local_rank, ident.world_size) == (0, 0, 1)


@pytest.mark.parametrize(("kwargs", "env", "message"), [
    ({}, {"RANK": "4", "WORLD_SIZE": "4"}, "RANK=4 must satisfy 0 <= rank < world_size "
                                           "(WORLD_SIZE=4)"),
    ({}, {"SLURM_PROCID": "two", "SLURM_NTASKS": "4"}, "SLURM_PROCID='two' is not an integer"),
    ({}, {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "0"},
     "OMPI_COMM_WORLD_SIZE=0 must be >= 1"),
    ({"rank": -1, "world_size": 2}, {}, "rank=-1 must satisfy"),
    ({"rank": 0, "world_size": 2, "local_rank": -2}, {}, "local_rank=-2 must be >= 0"),
    ({"rank": 2}, {"WORLD_SIZE": "2", "RANK": "0"}, "rank=2 must satisfy 0 <= rank < world_size "
                                                    "(WORLD_SIZE=2)"),
    ({"job_id": "a/b"}, {}, "job_id='a/b' must be non-empty"),
])
def test_validation_errors_name_the_culprit(kwargs: dict, env: dict, message: str) -> None:
    with pytest.raises(IdentityError) as err:
        resolve_identity(env=env, **kwargs)
    assert message in str(err.value)


def test_resource_and_labels() -> None:
    ident = resolve_identity("run-7", 2, 0, 4, host="node3", gpu=0, gpu_uuid="GPU-abc", env={})
    labels = ident.labels()
    assert tuple(labels) == schema.IDENTITY_LABELS
    assert labels == {"job_id": "run-7", "rank": "2", "local_rank": "0", "world_size": "4",
                      "host": "node3", "gpu": "0"}
    res = ident.resource_attributes(env={"K8S_POD_NAME": "trainer-2", "K8S_NAMESPACE": "ml"})
    assert res[schema.RES_SERVICE_NAME] == "stormotel"
    assert res[schema.RES_SERVICE_INSTANCE_ID] == "run-7/rank-2"
    assert res[schema.RES_HOST_NAME] == "node3"
    assert res["k8s.pod.name"] == "trainer-2" and res["k8s.namespace.name"] == "ml"
    assert "k8s.node.name" not in res
    assert res[schema.ATTR_GPU_UUID] == "GPU-abc"
    assert all(res[k] == v for k, v in labels.items())
