"""One job id per job, a different one per job, under real launchers and their variables.

torchrun is run for real (2 CPU ranks, gloo; five launches from one launcher interpreter,
tests/tracker/torchrun_batch.py): without a run id (``TORCHELASTIC_RUN_ID=none``,
the default of a plain ``torchrun``), with ``--rdzv-id``, with a process group initialised
first, and inside a SLURM step (``srun torchrun``: SLURM variables inherited). Open MPI and
plain ``srun`` are not installed here; their ranks are built from the variables each launcher
documents, one environment per rank.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stormotel import environment, schema
from stormotel.identity import resolve_identity
from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
NPROC = 2


#: The torchrun jobs the tests below check, one launch each: (extra torchrun flags, extra
#: environment, worker flags). One launcher interpreter launches them in turn (tests/tracker/
#: torchrun_batch.py: torch imported once, not five times, ~15 s of CPU); each is still its own
#: torchrun launch (``torch.distributed.run.main``, what the command runs) with its own ranks,
#: rendezvous, store and variables.
JOBS: dict[str, tuple[tuple[str, ...], dict[str, str], tuple[str, ...]]] = {
    "plain-a": ((), {}, ()),
    "plain-b": ((), {}, ()),
    "named": (("--rdzv-id", "exp-42"), {}, ()),
    "pg": ((), {}, ("--init-pg",)),
    # srun torchrun: SLURM's variables inherited by the launcher and its ranks
    "slurm": ((), {"SLURM_JOB_ID": "73019", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0",
                   "SLURM_NTASKS": "1", "SLURM_LOCALID": "0"}, ()),
}


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every job of :data:`JOBS` launched, in order, by one ``python -m
    tests.tracker.torchrun_batch``; each job's ranks write ``<job>/rank-N.json``."""
    out = tmp_path_factory.mktemp("launchers")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMIX_", "TORCHELASTIC_", "STORMOTEL_"))}
    env.update({"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    jobs = {}
    for name, (extra, env_extra, worker_args) in JOBS.items():
        (out / name).mkdir()
        argv = ["--nnodes", "1", "--nproc-per-node", str(NPROC), "--master-addr", "127.0.0.1",
                "--master-port", str(free_port()), *extra,
                "-m", "tests.tracker.launcher_worker", str(out / name), *worker_args]
        jobs[name] = {"argv": argv, "env": env_extra}
    (out / "jobs.json").write_text(json.dumps(jobs))
    subprocess.run([sys.executable, "-m", "tests.tracker.torchrun_batch", str(out)], env=env,
                   cwd=ROOT, capture_output=True, text=True, timeout=180 * len(JOBS))
    return out


def _torchrun(launched: Path, name: str) -> list[dict]:
    """One job's rank records, once its launch exited 0."""
    code = launched / f"{name}.code"
    assert code.exists() and code.read_text() == "0", \
        (launched / f"{name}.err").read_text()[-3000:]
    records = [json.loads((launched / name / f"rank-{r}.json").read_text())
               for r in range(NPROC)]
    assert [r["rank"] for r in records] == list(range(NPROC))
    return records


def _one_id(records: list[dict]) -> str:
    ids = {r["job_id"] for r in records}
    assert len(ids) == 1, f"ranks of one job disagree: {records}"
    return ids.pop()


@pytest.mark.slow
def test_plain_torchrun_jobs_get_one_id_each_and_never_none(launched: Path) -> None:
    first = _torchrun(launched, "plain-a")
    second = _torchrun(launched, "plain-b")
    assert all(r["run_id"] == "none" for r in first + second)  # what plain torchrun sets
    a, b = _one_id(first), _one_id(second)
    assert a != b and "none" not in (a, b)
    assert {r["job_source"] for r in first + second} == {"store"}
    # Each job's archive lands in its own folder.
    assert a.startswith("job-") and b.startswith("job-")


@pytest.mark.slow
def test_torchrun_with_run_id_and_with_a_process_group(launched: Path) -> None:
    named = _torchrun(launched, "named")
    assert _one_id(named) == "exp-42"
    assert {r["job_source"] for r in named} == {"TORCHELASTIC_RUN_ID"}
    grouped = _torchrun(launched, "pg")
    assert _one_id(grouped) != "none" and {r["job_source"] for r in grouped} == {"store"}


@pytest.mark.slow
def test_srun_torchrun_uses_the_slurm_job(launched: Path) -> None:
    records = _torchrun(launched, "slurm")
    assert _one_id(records) == "73019.0"
    assert {r["slurm_job_id"] for r in records} == {"73019"}
    assert {r["world_size"] for r in records} == {NPROC}  # torchrun's RANK/WORLD_SIZE win


def _ranks(world: int, per_rank: callable) -> list[str]:  # type: ignore[valid-type]
    return [resolve_identity(host="h", env=per_rank(r)).job_id for r in range(world)]


@pytest.mark.parametrize("job_vars", [
    # Open MPI 5 / PRRTE (PMIx namespace), Open MPI 4 (ess jobid and the HNP URI).
    ({"PMIX_NAMESPACE": "prterun-node1-40213@1"}, {"PMIX_NAMESPACE": "prterun-node1-40377@1"}),
    ({"OMPI_MCA_ess_base_jobid": "3452370945"}, {"OMPI_MCA_ess_base_jobid": "3452436481"}),
    ({"OMPI_MCA_orte_hnp_uri": "2964520960.0;tcp://10.0.0.5:39255"},
     {"OMPI_MCA_orte_hnp_uri": "2964586496.0;tcp://10.0.0.5:41873"}),
])
def test_open_mpi_ranks_agree_and_jobs_differ(job_vars: tuple[dict, dict]) -> None:
    jobs = []
    for job in job_vars:
        def env(r: int, job: dict = job) -> dict[str, str]:
            return {"OMPI_COMM_WORLD_RANK": str(r), "OMPI_COMM_WORLD_LOCAL_RANK": str(r % 2),
                    "OMPI_COMM_WORLD_SIZE": "4", **job}
        ids = _ranks(4, env)
        assert len(set(ids)) == 1, ids
        assert "/" not in ids[0] and ids[0].startswith("mpi-")
        jobs.append(ids[0])
    assert jobs[0] != jobs[1]


def test_slurm_ranks_agree_and_steps_differ() -> None:
    def step(step_id: str) -> list[str]:
        return _ranks(4, lambda r: {"SLURM_PROCID": str(r), "SLURM_LOCALID": str(r % 2),
                                    "SLURM_NTASKS": "4", "SLURM_JOB_ID": "5120",
                                    "SLURM_STEP_ID": step_id})
    first, second = step("0"), step("1")
    assert set(first) == {"5120.0"} and set(second) == {"5120.1"}


def test_job_id_source_order() -> None:
    env = {"RANK": "0", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "tr-1", "SLURM_JOB_ID": "9",
           "PMIX_NAMESPACE": "ns"}
    assert resolve_identity(env={**env, environment.JOB_ID: "mine"}).job_id == "mine"
    assert resolve_identity(env=env).job_id == "tr-1"
    assert resolve_identity(env={**env, "TORCHELASTIC_RUN_ID": "none"}).job_id == "9"
    no_slurm = {k: v for k, v in env.items() if k != "SLURM_JOB_ID"}
    assert resolve_identity(env={**no_slurm, "TORCHELASTIC_RUN_ID": "none"}).job_id == "mpi-ns"
    assert resolve_identity("explicit", env=env).job_id == "explicit"


def test_no_shared_source_falls_back_per_process_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    ident = resolve_identity(env={"RANK": "1", "WORLD_SIZE": "2"}, agree=lambda _e, _c: None)
    assert ident.job_id.startswith("local-") and ident.job_source == "default"
    assert "each rank gets its own id" in caplog.text


def test_store_agreement_is_used_when_nothing_else_names_the_job() -> None:
    stored: dict[str, str] = {}

    def fake_store(_env: object, candidate: str) -> str:  # compare_set semantics
        return stored.setdefault(schema.STORE_JOB_ID_KEY, candidate)

    ids = {resolve_identity(env={"RANK": str(r), "WORLD_SIZE": "3",
                                 "TORCHELASTIC_RUN_ID": "none"}, agree=fake_store).job_id
           for r in range(3)}
    assert len(ids) == 1 and ids.pop().startswith("job-")


@pytest.mark.parametrize("bad", ["..", ".", "a/b", "../escape", "x\\y", "tab\there"])
def test_job_ids_that_would_leave_the_archive_directory_are_refused(bad: str) -> None:
    from stormotel.identity import IdentityError

    with pytest.raises(IdentityError, match="must be non-empty"):
        resolve_identity(bad, env={})


@pytest.mark.parametrize("value", ["..", "../../etc", "a/b"])
def test_env_job_ids_are_made_safe(value: str, tmp_path: Path) -> None:
    from stormotel.tracker import MemoryTracker

    tracker = MemoryTracker(sampler="simulated", archive_dir=tmp_path / "archive",
                            env={environment.JOB_ID: value, "RANK": "0", "WORLD_SIZE": "1"})
    with tracker:
        pass
    metrics, _ = tracker.archive_files or (None, None)
    assert metrics is not None and metrics.exists()
    assert metrics.resolve().is_relative_to((tmp_path / "archive").resolve())
    assert metrics.parent.parent == tmp_path / "archive"


def test_local_rank_beyond_world_size_is_refused() -> None:
    from stormotel.identity import IdentityError

    with pytest.raises(IdentityError, match="LOCAL_RANK=4 must be < world_size"):
        resolve_identity(env={"RANK": "1", "LOCAL_RANK": "4", "WORLD_SIZE": "4"})


def test_attribution_from_downward_api_otel_resource_and_slurm() -> None:
    env = {"RANK": "0", "WORLD_SIZE": "1", "POD_NAMESPACE": "ml", "NODE_NAME": "gpu-node-3",
           "OTEL_RESOURCE_ATTRIBUTES": "k8s.pod.name=trainer-0,k8s.namespace.name=ignored",
           "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "2"}
    ident = resolve_identity(host="h", env=env)
    assert (ident.pod, ident.namespace, ident.node) == ("trainer-0", "ml", "gpu-node-3")
    assert (ident.slurm_job_id, ident.slurm_step_id) == ("77", "2")
    labels = ident.labels()
    assert labels[schema.ATTR_POD] == "trainer-0" and labels[schema.ATTR_NODE] == "gpu-node-3"
    assert labels[schema.ATTR_SLURM_JOB_ID] == "77"
    res = ident.resource_attributes(env=env)
    assert res[schema.RES_K8S_POD] == "trainer-0" and res[schema.RES_K8S_NAMESPACE] == "ml"
    assert res[schema.RES_SLURM_STEP_ID] == "2"
    bare = resolve_identity(host="h", env={})
    assert not set(schema.ATTRIBUTION_LABELS) & set(bare.labels())  # unset: omitted
