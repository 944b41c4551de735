"""Production-shaped jobs: real ``stormotel track`` processes per rank, started seconds apart,
faults planted at one absolute time, an archive and a Prometheus endpoint per rank, scraped by
real Prometheus servers at production intervals; then ``stormotel analyze`` from both paths.

Shared by the CI suite (tests/production) and the long benchmark (benchmarks/bench_first_cause_
production.py). A :class:`Scenario` carries its planted truth; :func:`judge` compares a report
with it and names the worst failure first: a wrong rank at high or medium confidence.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard

from stormotel import environment, schema
from tests import servers
from tests.cli import run_stormotel_here
from tests.tracker.otlp_util import archive_lines, metrics_files
from tests.tracker_forks import Forks, Rank

ROOT = Path(__file__).resolve().parents[2]
SURE = ("high", "medium")


@dataclass(frozen=True)
class Scenario:
    """One job: start offsets per rank (s after the shared epoch), faults (fault-spec language,
    times since the epoch) and the truth the analysis must not contradict."""

    name: str
    offsets_s: tuple[float, ...]
    faults: tuple[str, ...] = ()
    #: The rank that went wrong first (the only rank that may be named), or None.
    leader: int | None = None
    #: Whether the leader must be named at high/medium (False: naming it, or nobody, is right;
    #: a leak or fragmentation on one rank is a gap finding first).
    must_name: bool = True
    #: (rank, classification) gap findings that must be present.
    gap_truth: tuple[tuple[int, str], ...] = ()
    duration_s: float = 30.0  # from the epoch to the end of every rank
    #: (rank, from, to): that rank's tracker process is stopped (SIGSTOP … SIGCONT) between these
    #: times since the epoch — a tracker starved of CPU, whose next sample comes late.
    starve: tuple[int, float, float] | None = None

    @property
    def world(self) -> int:
        return len(self.offsets_s)


#: Seconds from the first rank's start to the shared epoch: every rank warmed up and with baseline
#: history (several 15 s scrapes) before anything is planted. Times in fault specs count from
#: it. Interpreter start-up is no longer in it: :func:`start_jobs` pays that before the clock
#: starts (on a loaded host 36 start-ups took more than the whole 60 s).
#: 60 s, not the 45 s the pre-started trackers allowed on their own: with 45 s, a clean-clone
#: suite (3 workers) saw VictoriaMetrics' own scraper (per-target offsets in its 15 s interval)
#: leave warm-up-then-incident's late rank 3 (it starts 22 s after rank 0) one or two scrapes
#: before the incident, and it was named at high/medium (a wrong rank) through the native
#: export — see docs/benchmarks.md, production section.
LEAD_IN_S = float(os.environ.get("STORMOTEL_TEST_LEAD_IN_S", "60"))

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("healthy", (0.0, 2.5, 4.0, 5.5)),
    Scenario("lead-400ms", (3.0, 0.0, 5.5, 1.5),
             ("rank=2:first_spike@t=10s,delta=1GiB,lead=400ms",), leader=2),
    Scenario("lead-1s", (0.0, 4.5, 2.0, 5.0),
             ("rank=1:first_spike@t=10s,delta=1GiB,lead=1s",), leader=1),
    Scenario("lead-2s", (1.0, 0.0, 5.0, 3.5),
             ("rank=3:first_spike@t=10s,delta=1GiB,lead=2s",), leader=3),
    Scenario("leak", (0.0, 3.0, 1.0, 5.0), ("rank=1:leak@t=5s,rate=40MiB/s",), leader=1,
             must_name=False, gap_truth=((1, "persistent_drift"),)),
    Scenario("leak+first-cause", (2.0, 0.0, 4.5, 1.0),
             ("rank=0:leak@t=5s,rate=20MiB/s", "rank=2:first_spike@t=12s,delta=1GiB,lead=1s"),
             leader=2, gap_truth=((0, "persistent_drift"),)),
    Scenario("fragmentation", (0.0, 1.5, 3.0, 4.5), ("rank=3:fragmentation@t=5s,factor=3",),
             leader=3, must_name=False, gap_truth=((3, "fragmentation"),)),
    # Ranks 2 and 3 start (and warm up) 20 s after the others, shortly before the incident.
    Scenario("warm-up-then-incident", (0.0, 1.0, 21.0, 22.0),
             ("rank=0:first_spike@t=12s,delta=1GiB,lead=1s",), leader=0),
    # The leader's tracker is starved from just before its rise until after the others rose:
    # its first sample above the baseline (and its edge) is stamped after theirs. The evidence
    # cannot order the ranks; naming a follower at high/medium would be the worst answer.
    Scenario("starved-leader", (0.0, 2.0, 1.0, 3.0),
             ("rank=1:first_spike@t=10s,delta=1GiB,lead=1s",), leader=1, must_name=False,
             starve=(1, 9.8, 11.4)),
)


@dataclass
class RunningJob:
    scenario: Scenario
    job_id: str
    archive: Path
    ports: list[int]
    procs: list[Rank] = field(default_factory=list)
    by_rank: dict[int, Rank] = field(default_factory=dict)
    epoch_ns: int = 0
    #: The fork server the ranks came from (shared by every job of one :func:`start_jobs`),
    #: closed by :func:`wait_jobs` once every rank has exited.
    forks: Forks | None = None


def tracker_argv(job: RunningJob, rank: int, duration_s: float) -> list[str]:
    """``stormotel track``'s arguments for one rank (after the command name)."""
    argv = ["--sampler", "simulated",
            "--interval", "0.1", "--duration", f"{duration_s:.3f}", "--job-id", job.job_id,
            "--rank", str(rank), "--world-size", str(job.scenario.world),
            "--archive", str(job.archive), "--prometheus-port", str(job.ports[rank]),
            "--prometheus-addr", "127.0.0.1", "--quiet"]
    for spec in job.scenario.faults:
        argv += ["--fault", spec]
    return argv


#: Seconds the trackers' fork server has to load (:mod:`tests.tracker_forks`) before the
#: fixture gives up (36 interpreters at once on a 2-core host beside CPU-bound neighbours took
#: ~60 s when each rank loaded its own).
READY_TIMEOUT_S = 300.0


def start_jobs(scenarios: list[Scenario], workdir: Path, tag: str = "",
               ports: dict[str, list[int]] | None = None) -> list[RunningJob]:
    """Start every scenario's ranks at ``epoch + offset`` (one shared epoch, so faults planted
    at one absolute time line up), concurrently; returns once the last rank has started.

    The ranks are forked from one interpreter that has imported the tracker
    (:mod:`tests.tracker_forks`: each rank a ``stormotel track`` process of its own, its own
    endpoint, archive, signals and exit code); the epoch is fixed only once that interpreter
    is loaded, and each rank is forked with its command at its offset. So a loaded host's slow
    interpreter start-up delays the run, never a rank's start relative to the others or to the
    planted faults, and the 36 ranks pay the imports (~0.8 s of CPU) once, not 36 times."""
    jobs = [RunningJob(s, f"prod-{s.name}{tag}", workdir / f"archive-{s.name}",
                       (ports or {}).get(s.name) or [servers.free_port() for _ in s.offsets_s])
            for s in scenarios]
    launches = sorted((off, j, r) for j in range(len(jobs))
                      for r, off in enumerate(jobs[j].scenario.offsets_s))
    forks = Forks(ready_timeout_s=READY_TIMEOUT_S)
    try:
        epoch = time.time_ns() + int(LEAD_IN_S * 1e9)
        first_launch = time.time()
        for job in jobs:
            job.epoch_ns = epoch
            job.forks = forks
        for off, j, r in launches:
            job = jobs[j]
            delay = first_launch + off - time.time()
            if delay > 0:
                time.sleep(delay)
            remaining = epoch / 1e9 + job.scenario.duration_s - time.time()
            # The epoch is handed over with the command, once it is fixed (it replaces any
            # the server inherited).
            rank = forks.track(tracker_argv(job, r, remaining),
                               {environment.SIM_EPOCH_NS: str(epoch)})
            job.procs.append(rank)
            job.by_rank[r] = rank
            if job.scenario.starve is not None and job.scenario.starve[0] == r:
                _starve(job, *job.scenario.starve)
    except BaseException:
        for job in jobs:
            for p in job.procs:
                p.kill()
        forks.close()
        raise
    return jobs


def _starve(job: RunningJob, rank: int, from_s: float, to_s: float) -> None:
    """Stop one rank's tracker between two times since the epoch (timers, so the caller goes on
    launching and waiting); scheduled as soon as the rank has started."""
    proc = job.by_rank[rank]
    if time.time() > job.epoch_ns / 1e9 + from_s:
        raise AssertionError(f"{job.job_id}: rank {rank} started after its planted starve at "
                             f"t={from_s:g}s (lead-in {LEAD_IN_S:g} s too short)")

    def send(sig: signal.Signals) -> None:
        if proc.poll() is None:
            proc.send_signal(sig)

    for at_s, sig in ((from_s, signal.SIGSTOP), (to_s, signal.SIGCONT)):
        delay = job.epoch_ns / 1e9 + at_s - time.time()
        timer = threading.Timer(max(delay, 0.0), send, args=(sig,))
        timer.daemon = True
        timer.start()


def late_ranks(jobs: list[RunningJob], margin_s: float = 3.0) -> list[str]:
    """Ranks whose first archived sample came less than ``margin_s`` before the job's first
    planted fault (a host too loaded to start them in time): the planted truth would not hold
    for them, so the caller must say so rather than judge the analysis by it."""
    late = []
    for job in jobs:
        for rank in range(job.scenario.world):
            starts = [float(m.group(2)) for spec in job.scenario.faults
                      if (m := re.search(r"rank=([0-9*-]+):\w+@t=([0-9.]+)s", spec))
                      and (_owns(m.group(1), rank) or "first_spike" in spec)]
            if not starts:
                continue
            limit = job.epoch_ns + int((min(starts) - margin_s) * 1e9)
            first = _first_time_ns(job.archive / job.job_id, rank)
            if first is None or first > limit:
                late.append(f"{job.job_id} rank {rank}")
    return late


def _owns(spec: str, rank: int) -> bool:
    if spec == "*":
        return True
    lo, _, hi = spec.partition("-")
    return int(lo) <= rank <= int(hi or lo)


def _first_time_ns(folder: Path, rank: int) -> int | None:
    """Time of the rank's first archived point, in either archive format."""
    try:
        files = metrics_files(folder, rank)
        line = archive_lines(files[0])[0] if files and files[0].exists() else b""
    except (OSError, IndexError, zstandard.ZstdError):
        return None
    m = re.search(rb'"timeUnixNano":\s*"?([0-9]+)', line)
    return int(m.group(1)) if m else None


def sample_times_ns(job: RunningJob, rank: int) -> list[int]:
    """Every archived sample's time (the device-used point of each sample), in order."""
    times: list[int] = []
    try:
        files = metrics_files(job.archive / job.job_id, rank)
        lines = [ln for f in files if f.exists() for ln in archive_lines(f)]
    except (OSError, zstandard.ZstdError):
        return times
    for line in lines:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        for rm in req.get("resourceMetrics", ()):
            for sm in rm.get("scopeMetrics", ()):
                for m in sm.get("metrics", ()):
                    if m.get("name") != schema.DEVICE_USED.name:
                        continue
                    data = m.get("gauge") or m.get("sum") or {}
                    times += [int(p["timeUnixNano"]) for p in data.get("dataPoints", ())]
    return sorted(times)


#: The tracker interval the scenarios sample at (``--interval`` in :func:`tracker_argv`).
SAMPLE_INTERVAL_S = 0.1


def _onsets(s: Scenario) -> list[tuple[float, float]]:
    """(time since the epoch, time the truth orders ranks by) for each planted fault: a
    first_spike's leader onset and its followers' ``lead`` later; other faults alone."""
    out = []
    for spec in s.faults:
        m = re.search(r"@t=([0-9.]+)s", spec)
        if not m:
            continue
        lead = re.search(r"lead=([0-9.]+)(ms|s)", spec)
        lead_s = float(lead.group(1)) / (1000.0 if lead.group(2) == "ms" else 1.0) if lead \
            else 0.0
        out.append((float(m.group(1)), lead_s))
    return out


def off_schedule(job: RunningJob) -> list[str]:
    """Ranks whose tracker did not sample on the schedule the scenario assumes while the planted
    truth was playing out: the largest gap between two archived samples, from a second before
    the first planted onset to :data:`TIMING_MARGIN_S` after the last (a planted ``starve``
    excepted: that gap is the scenario). The bound is half the smallest planted ``lead`` (two
    ranks' rise intervals can then no longer be told apart: a tie is the honest answer), and
    never less than 5 sampling intervals; a scenario with nothing planted is checked over its
    whole run at 2 s (its steps and samples keep time). This reads only the input the analysis
    was given, never its answer, so it tells a starved host (``environment too loaded``) from
    a wrong verdict on good evidence."""
    s = job.scenario
    onsets = _onsets(s)
    leads = [lead for _, lead in onsets if lead > 0]
    if onsets:
        lo = min(t for t, _ in onsets) - 1.0
        hi = max(t + lead for t, lead in onsets) + TIMING_MARGIN_S
        bound = max(min(leads) / 2 if leads else 1.0, 5 * SAMPLE_INTERVAL_S)
    else:
        lo, hi, bound = -LEAD_IN_S, s.duration_s, 2.0
    lo_ns, hi_ns = job.epoch_ns + int(lo * 1e9), job.epoch_ns + int(hi * 1e9)
    out = []
    for rank in range(s.world):
        t = [x for x in sample_times_ns(job, rank) if lo_ns <= x <= hi_ns]
        gaps = [(b - a, a) for a, b in itertools.pairwise(t)
                if not (s.starve and s.starve[0] == rank
                        and a <= job.epoch_ns + s.starve[2] * 1e9
                        and b >= job.epoch_ns + s.starve[1] * 1e9)]
        if len(t) < 2:
            out.append(f"rank {rank} archived {len(t)} samples between t={lo:g}s and "
                       f"t={hi:g}s (every {SAMPLE_INTERVAL_S:g} s planted)")
            continue
        worst, at = max(gaps, default=(0, t[0]))
        if worst / 1e9 > bound:
            out.append(f"rank {rank} sampled every {SAMPLE_INTERVAL_S:g} s planted, but went "
                       f"{worst / 1e9:.2f} s without a sample at t={(at - job.epoch_ns) / 1e9:.1f}s"
                       f" (the scenario's resolution needs <= {bound:g} s)")
    return out


#: Seconds after the last planted onset (a follower's ``lead`` later, a starved tracker's resume)
#: until the ranks' relative timing no longer matters: every rank has sampled its rise by then.
TIMING_MARGIN_S = 3.0


def timing_settled_at(jobs: list[RunningJob]) -> float:
    """Wall time (s since the Unix epoch) after which nothing the planted truth orders ranks by
    is still to come: every fault has started on every rank (a first_spike's followers ``lead``
    after its ``t``), every starved tracker has resumed, plus :data:`TIMING_MARGIN_S`. Later, a
    busy host only delays samples, whose values follow the pure simulated clock (a leak's slope
    is the same), and the 15 s scrapes' timeout is 10 s; so a caller holding other CPU-heavy work
    off while the jobs run need not hold it through their last 15-30 s and their linger."""
    ends = []
    for job in jobs:
        last = 0.0
        for spec in job.scenario.faults:
            m = re.search(r"@t=([0-9.]+)s", spec)
            lead = re.search(r"lead=([0-9.]+)(ms|s)", spec)
            at = float(m.group(1)) if m else job.scenario.duration_s
            if lead:
                at += float(lead.group(1)) / (1000.0 if lead.group(2) == "ms" else 1.0)
            last = max(last, at)
        if job.scenario.starve is not None:
            last = max(last, job.scenario.starve[2])
        ends.append(job.epoch_ns / 1e9 + last + TIMING_MARGIN_S)
    return max(ends, default=time.time())


def wait_until(wall_s: float, jobs: list[RunningJob]) -> None:
    """Sleep until ``wall_s`` (or until every tracker has exited, whichever comes first)."""
    while time.time() < wall_s and any(p.poll() is None for j in jobs for p in j.procs):
        time.sleep(min(0.5, max(0.0, wall_s - time.time())))


def wait_jobs(jobs: list[RunningJob], timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    for job in jobs:
        for p in job.procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
            assert p.returncode == 0, (f"{job.job_id}: tracker exited {p.returncode}: "
                                       f"{p.stderr_text()}")
    for forks in {id(j.forks): j.forks for j in jobs if j.forks is not None}.values():
        forks.close()  # every rank has exited: reaps the server (and with it their CPU)


def analyze(args: list[str], out: Path, timeout: float = 120.0, *,
            in_process: bool = False) -> tuple[int, dict[str, Any]]:
    """``stormotel analyze … --format json -o out``; returns (exit code, report).
    ``in_process``: through the same entry point in this process (tests.cli.run_stormotel_here),
    for the suite's dozens of analyses; the benchmark times real command runs."""
    argv = ["analyze", *args, "--format", "json", "-o", str(out)]
    if in_process:
        r = run_stormotel_here(*argv)
    else:
        r = subprocess.run([sys.executable, "-m", "stormotel", *argv], cwd=ROOT,
                           capture_output=True, text=True, timeout=timeout)
    if not out.exists():
        raise AssertionError(f"analyze {args} exit {r.returncode}: {r.stderr[-2000:]}")
    return r.returncode, json.loads(out.read_text())


def analyze_archive(job: RunningJob, out: Path, *, in_process: bool = False
                    ) -> tuple[int, dict[str, Any]]:
    return analyze([str(job.archive), "--job-id", job.job_id], out, in_process=in_process)


def analyze_prometheus(job: RunningJob, urls: list[str], out: Path,
                       extra: list[str] | None = None, *, in_process: bool = False
                       ) -> tuple[int, dict[str, Any]]:
    start = job.epoch_ns / 1e9 - LEAD_IN_S - 5
    end = job.epoch_ns / 1e9 + job.scenario.duration_s + 40
    args = []
    for u in urls:
        args += ["--prometheus", u]
    return analyze([*args, "--job-id", job.job_id, "--start", f"{start:.3f}",
                    "--end", f"{end:.3f}", *(extra or [])], out, in_process=in_process)


@dataclass
class Verdict:
    """How one analysis compares with the planted truth."""

    wrong_sure: bool  # a wrong rank named at high/medium: the worst failure
    named: bool  # the planted leader named (any confidence)
    named_sure: bool  # ... at high/medium
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def judge(s: Scenario, code: int, report: dict[str, Any], *, must_name: bool,
          check_gaps: bool = True) -> Verdict:
    """Compare one report with the truth; ``problems`` lists every contradiction.
    ``check_gaps=False`` when the path holds too few samples for gap analysis (a 15 s scrape of
    a short job): the report must then not invent gap findings, but need not find them."""
    problems: list[str] = []
    cross = report["cross_rank"]
    suspects = cross["first_cause_suspects"]
    sure = [x for x in suspects if x["confidence"] in SURE]
    incidents = cross.get("incidents", [])
    # A rank rising on its own is only wrong where nothing was planted on it (a leak or
    # fragmentation raises device memory on its rank alone, which is true).
    planted_on = {s.leader, *(r for r, _ in s.gap_truth)}
    sure_leaders = [i["leader"] for i in incidents
                    if i.get("leader") is not None and i.get("confidence") in SURE
                    and not (i.get("kind") == "single_rank" and i["leader"] in planted_on)]
    wrong = [x["rank"] for x in sure if x["rank"] != s.leader] + \
        [r for r in sure_leaders if r != s.leader]
    if wrong:
        problems.append(f"wrong rank(s) {sorted(set(wrong))} named at high/medium "
                        f"(truth: {s.leader})")
    named = any(x["rank"] == s.leader for x in suspects)
    named_sure = any(x["rank"] == s.leader for x in sure)
    if s.leader is not None and must_name and s.must_name and not named_sure:
        problems.append(f"leader {s.leader} not named at high/medium: "
                        f"{[(x['rank'], x['confidence']) for x in suspects]}")
    if s.leader is None and sure:
        named_now = [(x["rank"], x["confidence"]) for x in suspects]
        problems.append(f"no first cause planted, got {named_now}")
    gaps = {(g["rank"], g["classification"]) for g in report["gap_findings"]}
    for want in s.gap_truth if check_gaps else ():
        if want not in gaps:
            problems.append(f"missing gap finding {want}; got {sorted(gaps)}")
    planted = {r for r, _ in s.gap_truth}
    stray = sorted(g for g in gaps if g[0] not in planted and g[1] != "transient_spike")
    if stray:
        problems.append(f"gap findings on ranks nothing was planted on: {stray}")
    if not s.faults and code != 0:
        problems.append(f"healthy job exited {code}, not 0")
    return Verdict(bool(wrong), named, named_sure, problems)
