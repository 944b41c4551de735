"""Log lines that judge no rank are "no evidence" (exit 3), never "healthy" (exit 0): lines that
name no rank and that no rule reads as a finding, and torchelastic's launch table (what was
started, like the world size) — at the CLI boundary, with and without a stated world size, and
on the report the verdict is written from. fresh8 measured three failing jobs read "healthy"
this way (a rank-less ``torch.OutOfMemoryError`` line twice, torchelastic's launch table beside
a pod table). Each line is built from its emitter's format (named in each builder), not copied
from a case.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from stormotel.analyzers.report import Report
from stormotel.analyzers.summary import has_evidence
from stormotel.analyzers.summary import verdict as verdict_of

from tests.stalls.helpers import run_cli


def elastic_launch_table() -> str:
    """torch/distributed/launcher/api.py launch_agent: logger.info("Starting elastic_operator
    with launch configs:\\n  entrypoint       : %s\\n  min_nodes        : %s ...") — the
    agent's launch configuration, before any rendezvous; it names no rank."""
    return ("[INFO] 2021-12-08 12:28:26,098 api: Starting elastic_operator with launch "
            "configs:\n  entrypoint       : train.py\n  min_nodes        : 2\n"
            "  max_nodes        : 4\n  nproc_per_node   : 1\n  run_id           : job-1\n"
            "  rdzv_backend     : c10d\n  rdzv_endpoint    : job-1-worker-0:23456\n"
            "  rdzv_configs     : {'timeout': 900}\n  max_restarts     : 100\n"
            "  monitor_interval : 5\n  log_dir          : None\n  metrics_cfg      : {}\n")


def rankless_oom() -> str:
    """c10/cuda/CUDACachingAllocator.cpp (torch >= 2.1): "CUDA out of memory. Tried to
    allocate %s. GPU %d has a total capacity of %s of which %s is free. ..." raised as
    torch.OutOfMemoryError, printed here without torchrun's "[rankN]:" prefix: the GPU index
    is a device of the process, not its rank."""
    return ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 30.00 MiB. GPU 0 "
            "has a total capacity of 79.10 GiB of which 15.19 MiB is free. Of the allocated "
            "memory 19.60 GiB is allocated by PyTorch, and 225.59 MiB is reserved by PyTorch "
            "but unallocated.\n")


def verdict(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("Verdict:"))


@pytest.mark.parametrize("world", [[], ["--world-size", "4"]], ids=["no-world", "world-4"])
def test_a_launch_table_is_no_evidence_not_healthy(tmp_path: Path, world: list[str]) -> None:
    """Even in a file whose name gives it a rank (worker-0.log): the table says what was
    started, not how it went."""
    log = tmp_path / "worker-0.log"
    log.write_text(elastic_launch_table())
    proc = run_cli("--logs", str(log), *world)
    assert proc.returncode == 3, proc.stdout
    assert verdict(proc.stdout).startswith("Verdict: no evidence"), proc.stdout
    assert "not a healthy verdict" in proc.stderr


def log_report(participating: list[int]) -> Report:
    """The report of a log-only run (stall evidence alone): no samples, one evidence event."""
    return Report(job_id=None, world_size=4, participating_ranks=participating,
                  missing_ranks=[r for r in range(4) if r not in participating],
                  extra={"samples": 0, "stalls": {"logs": {"events": 1, "evidence_events": 1}}})


def test_evidence_that_names_no_rank_judges_no_rank() -> None:
    """The rule itself, on the report: an evidence event with no rank in the run and no finding
    is no evidence about any rank (the CLI exits 3 on it); one rank named is evidence, and the
    verdict is the "no findings in rank(s) …" line that exits 0 as before."""
    assert not has_evidence(log_report([]))
    assert verdict_of(log_report([])).startswith("Verdict: no evidence about any rank")
    assert has_evidence(log_report([2]))
    assert verdict_of(log_report([2])).startswith("Verdict: no findings in rank(s) 2;")


@pytest.mark.parametrize("world", [[], ["--world-size", "4"]], ids=["no-world", "world-4"])
def test_a_rankless_oom_is_never_healthy(tmp_path: Path, world: list[str]) -> None:
    """An OOM the tool cannot pin on a rank is a failure: a finding (exit 1) once a rule reads
    it, "no evidence about any rank" (exit 3) until then — never "healthy"."""
    log = tmp_path / "job.log"
    log.write_text(rankless_oom())
    proc = run_cli("--logs", str(log), *world)
    assert proc.returncode in (1, 3), proc.stdout
    assert verdict(proc.stdout) != "Verdict: healthy"
    if proc.returncode == 3:
        assert verdict(proc.stdout).startswith("Verdict: no evidence about any rank")


def test_lines_that_name_a_rank_are_still_judged(tmp_path: Path) -> None:
    """The guard is about ranks, not about logs: the same launch table beside a rank-named
    NCCL teardown line (ProcessGroupNCCL.cpp WorkNCCL::handleException, "[Rank 1] Some NCCL
    operations have failed or timed out...") is judged — a finding, exit 1."""
    log = tmp_path / "worker-0.log"
    log.write_text(elastic_launch_table()
                   + "[rank1]:[E220 01:25:08.728702337 ProcessGroupNCCL.cpp:681] [Rank 1] "
                   "Some NCCL operations have failed or timed out. Due to the asynchronous "
                   "nature of CUDA kernels, subsequent GPU operations might run on "
                   "corrupted/incomplete data.\n")
    proc = run_cli("--logs", str(log), "--world-size", "4")
    assert proc.returncode == 1, proc.stdout
    assert verdict(proc.stdout).startswith("Verdict: FINDINGS"), proc.stdout
