"""One table of the stateful log scanners: a new kind of stall log is its module + one row here.

Every file of ``--logs`` is read once, line by line (``logs_parser._parse_file``); besides the
one-line catalogue patterns, each kind of log that spans lines or needs state (a torchelastic
summary, an NCCL RAS report, Horovod's stall report, torch's fr_trace report, the MPI launcher's
last words, the init-time barriers and store waits) has a *scanner*: it sees every segment with
the global rank the parser read for it, and at the end of the file hands back its evidence as
:class:`~.log_failures.Found` records, which the parser turns into events. A kind may also
bring the rule that reads its events into findings (``findings``); the triage calls every row's
rule. So adding a kind never touches the parser or the triage (issue 35 item 2: at most two
files per kind — its module and its row in :data:`KINDS`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import (
    log_absent_zero,
    log_busy,
    log_busy_unstated,
    log_c10d_reporter,
    log_composer,
    log_cut_traceback,
    log_ddp_unused,
    log_device_oom,
    log_frtrace,
    log_gpu_lost,
    log_hccl,
    log_horovod,
    log_k8s_events,
    log_lightning,
    log_main_first,
    log_megatron_nan,
    log_megatron_rerun,
    log_monitored,
    log_mp_spawn,
    log_mpi_signal,
    log_mpirun,
    log_msrun,
    log_ncclwarn_ranks,
    log_oom_kill,
    log_paddle_endpoints,
    log_paddle_launch,
    log_pg_error,
    log_pod_describe,
    log_pod_table,
    log_rankless,
    log_ras,
    log_ras_health,
    log_ras_verdicts,
    log_ray_pids,
    log_ray_train,
    log_ray_train_v2,
    log_serving,
    log_srun,
    log_srun_exit,
    log_store_barrier,
    log_store_rankless,
    log_store_wait,
    log_xla_coord,
    log_xla_health,
)
from stormotel.analyzers.stalls import log_failures as lf


@dataclass(frozen=True)
class ScanContext:
    """What a scanner may know about the file before its first line."""

    file_rank: int | None  #: the rank the file's name carries, if any
    stamp: Callable[[str], int | None]  #: a line's timestamp (ns), or None


class LogScanner(Protocol):
    """Reads one file's segments in order; :meth:`finish` gives its evidence."""

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        """One segment (``low``: the same, lower-cased) and the global rank read for it."""

    def finish(self, text: str) -> list[lf.Found]:
        """Every piece of evidence of the file (``text``: the whole file, for JSON forms)."""


#: a rule over every file's events (``known``: the world size when the evidence states it)
Findings = Callable[[list[Any], int | None], list[StallFinding]]


@dataclass(frozen=True)
class LogKind:
    """One kind of stall log: how its lines are scanned, and how its events are judged."""

    name: str
    scanner: Callable[[ScanContext], LogScanner]
    findings: Findings | None = None  #: None: judged by the watchdog triage / shared rules
    #: its findings show a stall but name no culprit: read only when no other rule answers
    fallback: bool = False


# --- adapters: the older scanners keep their own small interfaces --------------------------
class _Failures:
    """torch's own errors, desync reports, fingerprints, torchelastic's summary (log_failures)."""

    def __init__(self, ctx: ScanContext) -> None:
        self.s = lf.FailureScanner(ctx.file_rank, ctx.stamp)
        self.n = 0

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        self.n += 1
        self.s.feed(no, seg, low, rank)

    def finish(self, text: str) -> list[lf.Found]:
        self.s.close(self.n)
        return self.s.found


class _Closing(Protocol):
    """The older scanners' own interface: fed without the rank, closed, then read."""

    def feed(self, no: int, seg: str, low: str, /) -> None: ...

    def close(self) -> None: ...


_S = TypeVar("_S", bound=_Closing)


class _Adapted(Generic[_S]):
    """One older scanner behind :class:`LogScanner`: feeds drop the rank, ``finish`` closes it
    and reads its evidence with the kind's own ``evidence`` function."""

    def __init__(self, scanner: _S, evidence: Callable[[_S, str], list[lf.Found]]) -> None:
        self.s = scanner
        self.evidence = evidence

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        self.s.feed(no, seg, low)

    def finish(self, text: str) -> list[lf.Found]:
        self.s.close()
        return self.evidence(self.s, text)


def _adapted(make: Callable[[], _S],
             evidence: Callable[[_S, str], list[lf.Found]]) -> Callable[[ScanContext], LogScanner]:
    """A table row's scanner for an older scanner class and the way its evidence is read."""

    def scanner(ctx: ScanContext) -> LogScanner:
        return _Adapted(make(), evidence)

    return scanner


def _mpi_evidence(s: log_mpirun.MpiLauncherScanner, text: str) -> list[lf.Found]:
    """The MPI launchers' last words (log_mpirun)."""
    return s.found


def _ras_evidence(s: log_ras.RasScanner, text: str) -> list[lf.Found]:
    """NCCL RAS reports, text and JSON (log_ras)."""
    if '"collective_counts"' in text:  # NCCL RAS's JSON form (ncclras -f json, 2.28.7+)
        s.blocks.extend(log_ras.blocks_from_json(text))
    return [lf.Found(log_ras.RAS_SPLIT, b.line, None, None, b.text, b.as_detail(),
                     b.pattern) for b in s.blocks]


def _horovod_evidence(s: log_horovod.HorovodScanner, text: str) -> list[lf.Found]:
    """Horovod's stall inspector (log_horovod)."""
    return [lf.Found(log_horovod.HOROVOD, r.line, None, None, r.text, r.as_detail(),
                     "horovod.stall_report") for r in s.reports] + [
        lf.Found(log_horovod.HOROVOD, r.line, None, None, r.text, {"cut": True},
                 "horovod.stall_report") for r in s.cut] + [
        lf.Found(log_horovod.HOROVOD, r.line, None, None, r.text,
                 {"orphan": True, "ranks": sorted(set().union(*r.missing.values()))},
                 "horovod.stall_report") for r in s.orphans]


_FR_PATTERNS = {"not_joined": "torch.fr_trace.not_joined", "errors": "torch.fr_trace.culprit"}


def _frtrace_evidence(s: log_frtrace.FrTraceScanner, text: str) -> list[lf.Found]:
    """torch's fr_trace report pasted in the logs (log_frtrace)."""
    return [lf.Found(log_frtrace.FR_TRACE, b.line, None, None, b.text, b.as_detail(),
                     _FR_PATTERNS.get(b.kind, "torch.fr_trace.missing_dumps"))
            for b in s.blocks]


def _ras_findings(events: list[Any], known: int | None) -> list[StallFinding]:
    return log_ras_verdicts.ras_findings(events, known)


def _frtrace_findings(events: list[Any], known: int | None) -> list[StallFinding]:
    return log_frtrace.frtrace_findings(events)


#: every stateful kind of stall log, in the order its evidence is listed
KINDS: tuple[LogKind, ...] = (
    LogKind("failures", _Failures),
    LogKind("mpi_launcher", _adapted(log_mpirun.MpiLauncherScanner, _mpi_evidence)),
    LogKind("nccl_ras", _adapted(log_ras.RasScanner, _ras_evidence), _ras_findings),
    LogKind("horovod", _adapted(log_horovod.HorovodScanner, _horovod_evidence),
            log_horovod.horovod_findings),
    LogKind("fr_trace", _adapted(log_frtrace.FrTraceScanner, _frtrace_evidence),
            _frtrace_findings),
    LogKind("store_barrier", log_store_barrier.Scanner, log_store_barrier.findings),
    LogKind("store_wait", log_store_wait.Scanner, log_store_wait.findings),
    LogKind("monitored_barrier", log_monitored.Scanner, log_monitored.findings),
    LogKind("busy_rank", log_busy.Scanner, log_busy.findings),
    LogKind("busy_rank_unstated", log_busy_unstated.Scanner, log_busy_unstated.findings),
    LogKind("rank0_absent", log_busy_unstated.Scanner, log_absent_zero.findings),
    LogKind("mpi_signal", log_mpi_signal.Scanner),
    LogKind("srun_launch", log_srun.Scanner),
    LogKind("rankless", log_rankless.Scanner, log_rankless.findings),
    LogKind("c10d_reporter", log_c10d_reporter.Scanner, log_c10d_reporter.findings,
            fallback=True),
    LogKind("c10d_reference", log_c10d_reporter.RefScanner, log_c10d_reporter.reference_findings),
    LogKind("nccl_warn_ranks", log_ncclwarn_ranks.Scanner, log_ncclwarn_ranks.findings,
            fallback=True),
    LogKind("nccl_ras_health", log_ras_health.Scanner, log_ras_health.findings, fallback=True),
    LogKind("main_first_wait", log_main_first.Scanner, log_main_first.findings, fallback=True),
    LogKind("store_rankless", log_store_rankless.Scanner, log_store_rankless.findings,
            fallback=True),
    # read by the watchdog triage: a line at the watchdog-timeout call site is not "silent"
    LogKind("pg_nccl_error", log_pg_error.Scanner),
    # inference / RL frameworks' own wait and death lines (vLLM shm_broadcast, Ray): no rank
    LogKind("serving_rankless", log_serving.Scanner, log_serving.findings, fallback=True),
    # a GPU that stopped answering (NVRM Xid 79 / fallen off the bus, nvidia-smi): no rank
    LogKind("gpu_lost", log_gpu_lost.Scanner, log_gpu_lost.findings, fallback=True),
    # the XLA / TSL coordination service's barrier timeout: the tasks that never arrived (JAX)
    LogKind("xla_barrier", log_xla_coord.Scanner, log_xla_coord.findings),
    # MindSpore msrun's "Time out nodes are [...]": the worker its scheduler lost first
    LogKind("msrun_timeout_nodes", log_msrun.Scanner, log_msrun.findings),
    # Ascend HCCL's EI0002 / EI0006 waits: a group rank, not a global one — nobody named
    LogKind("hccl_wait", log_hccl.Scanner, log_hccl.findings, fallback=True),
    # srun's per-task exit lines: the first task to end, and how (OOM, its own signal, a code)
    LogKind("srun_task_exit", log_srun_exit.Scanner),
    # the coordination service's heartbeat timeout: the JAX process(es) it lost
    LogKind("xla_heartbeat", log_xla_health.Scanner, log_xla_health.findings),
    # a kubectl pod table: the failed pod, a PyTorchJob's master-0 / worker-i as its RANK
    LogKind("pod_table", log_pod_table.Scanner),
    # a kubectl describe pod block: the container that ended, how, and the pod's RANK
    LogKind("pod_describe", log_pod_describe.Scanner),
    # Kubernetes events (Evicted, Preempted, BackOff, …) and the operators' Failed condition:
    # the pods stopped from outside, as suspects (after the pods' own terminations)
    LogKind("k8s_events", log_k8s_events.Scanner, log_k8s_events.findings, fallback=True),
    # an OOM naming a local CUDA device, no rank: nobody named, how to map it
    LogKind("device_oom", log_device_oom.Scanner, log_device_oom.findings, fallback=True),
    # a rank's traceback cut before its exception line: read by the rank-failure rule
    LogKind("cut_traceback", log_cut_traceback.Scanner),
    # torch.multiprocessing.spawn's parent: the first child it found failed (a spawn index)
    LogKind("mp_spawn", log_mp_spawn.Scanner, log_mp_spawn.findings),
    # Ray Train's driver: the world rank of a worker whose actor died
    LogKind("ray_train_failed", log_ray_train.Scanner, log_ray_train.findings),
    # Ray Train v2's WorkerGroupError: the world ranks failed at the controller's last poll
    LogKind("ray_train_v2", log_ray_train_v2.Scanner, log_ray_train_v2.findings, fallback=True),
    # MosaicML Composer's launcher: the first rank of its node it found crashed, and how
    LogKind("composer_launcher", log_composer.Scanner, log_composer.findings),
    # Ray Train's pid -> world_rank list joined with a dead worker's pid (ActorDiedError, raylet)
    LogKind("ray_pid_rank", log_ray_pids.Scanner, log_ray_pids.findings),
    # Lightning / Fabric's DDP process observer: the first child (a LOCAL rank) it found dead
    LogKind("lightning_child", log_lightning.Scanner, log_lightning.findings),
    # the kernel's OOM killer's victim pid joined with DeepSpeed's / Ray Train's pid -> rank map
    LogKind("oom_killer", log_oom_kill.Scanner, log_oom_kill.findings),
    # DDP's reducer: the rank whose own backward left parameters without a gradient
    LogKind("ddp_unused", log_ddp_unused.Scanner, log_ddp_unused.findings),
    # Paddle's launch controller: the LOCAL container its poll found failed (a suspect)
    # Megatron's NaN / Inf checks: the (global) rank whose own grads / loss were not finite
    LogKind("megatron_nan", log_megatron_nan.Scanner, log_megatron_nan.findings),
    # Megatron's rerun state machine: its verdict (transient / persistent / correct) on a rank
    LogKind("megatron_rerun", log_megatron_rerun.Scanner, log_megatron_rerun.findings),
    LogKind("paddle_container", log_paddle_launch.Scanner, log_paddle_launch.findings,
            fallback=True),
    # Paddle's wait_server_ready: the trainers' endpoints nothing listened at (their ids by
    # PADDLE_TRAINER_ENDPOINTS)
    LogKind("paddle_endpoints", log_paddle_endpoints.Scanner, log_paddle_endpoints.findings,
            fallback=True),
)
