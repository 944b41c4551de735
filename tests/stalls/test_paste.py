"""Logs as users paste them: each wrapper's format (from its source) undone before any pattern.

Each test wraps a log the analyzer reads right when it is plain — a Horovod stall report
(horovod/common/stall_inspector.cc's wording), a four-rank watchdog log of PyTorch 2.2 — the
way one launcher, collector, terminal or issue tracker writes it, and asserts the verdict is
the plain log's, with the normalisation counted. The wrappers are built from their emitters'
code: Open MPI's ``orte/mca/iof/base/iof_base_output.c`` (a tag in front of each chunk read
from a rank and after each newline in it), PMIx's ``src/common/pmix_iof.c``, Slurm's
``write_labelled_message.c`` (``"%*d: "``), ``kubectl logs --prefix --timestamps``, Ray's
driver-side prefixes, Polyaxon's replica prefix, tqdm's default bar format.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from stormotel.analyzers.stalls import logs_parser as lp
from stormotel.analyzers.stalls import paste
from stormotel.analyzers.stalls.log_analysis import LogAnalysis, analyze_logs

from tests.stalls.helpers import run_cli

DATA = Path(__file__).parent / "data" / "logs"
#: horovod/common/stall_inspector.cc's report (0.20+): rank 0 names rank 2 as missing
HOROVOD = [
    "[2024-05-02 10:00:00.000000: W /tmp/horovod/common/stall_inspector.cc:107] One or more "
    "tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are "
    "waiting for remainder of ranks for more than 60 seconds. This may indicate that different "
    "ranks are trying to submit different tensors or that only subset of ranks is submitting "
    "tensors, which will cause deadlock.",
    "Missing ranks:",
    "2: [DistributedAdamOptimizer_Allreduce/HorovodAllreduce_gradients_dense_BiasAdd_grad_0, "
    "DistributedAdamOptimizer_Allreduce/HorovodAllreduce_gradients_dense_MatMul_grad_0]",
]
#: four ranks of PyTorch 2.2 in one file; rank 3 joined the all-gather with twice the size
V22 = [ln for ln in (DATA / "interleaved_v22.log").read_text().splitlines()
       if ln.startswith("[rank")]
V22_RANKS = [int(ln[5]) for ln in V22]  # "[rankN]:" prefix of each line
V22_BARE = [ln.split("]:", 1)[1] for ln in V22]  # the lines without torch's own rank prefix


def _verdict(tmp_path: Path, text: str, name: str = "worker.log"
             ) -> tuple[tuple[str, list[int]], lp.ParsedLogs]:
    (tmp_path / name).write_text(text)
    parsed = lp.parse_logs([str(tmp_path / name)])
    result: LogAnalysis = analyze_logs(parsed)
    roots = [f for f in result.findings if f.consequence_of is None]
    assert roots, "no finding"
    return (roots[0].kind, sorted(roots[0].ranks)), parsed


def _plain(tmp_path: Path, lines: list[str]) -> tuple[str, list[int]]:
    plain = tmp_path / "plain"
    plain.mkdir()
    return _verdict(plain, "\n".join(lines) + "\n")[0]


# --- Open MPI --tag-output ---------------------------------------------------------------------
def orte_chunk(data: str, rank: int, *, job: int = 1, stream: str = "stderr",
               stamp: str = "") -> str:
    """What ORTE's iof_base_output writes for one chunk read from a rank: the start tag, then
    the data with the tag again after every newline except a final one (no newline added)."""
    tag = f"{stamp}[{job},{rank}]<{stream}>:"
    out = [tag]
    for i, ch in enumerate(data):
        out.append(ch)
        if ch == "\n" and i < len(data) - 1:
            out.append(tag)
    return "".join(out)


def test_mpirun_fragments_of_one_message_are_glued_back(tmp_path: Path) -> None:
    """One Horovod report written by rank 0 in chunks cut mid-word, rank 1's output read in
    between (so its tags land mid-line), ctime() in front of every tag (--timestamp-output)."""
    report = "\n".join(HOROVOD) + "\n"
    cuts = [0, 57, 130, len(HOROVOD[0]) + 5, len(HOROVOD[0]) + 17, len(report) - 40, len(report)]
    stamp = "Thu May  2 10:00:00 2024"
    noise = ["Epoch 3/10\n", "step 120 loss 0.31", " lr 1e-4\n", "step 121\n", "ok\n", "x\n"]
    text = "".join(orte_chunk(report[a:b], 0, stamp=stamp) + orte_chunk(n, 1, stamp=stamp)
                   for (a, b), n in zip(itertools.pairwise(cuts), noise, strict=False))
    assert text.count("\n") < len(HOROVOD) + len(noise)  # tags do land mid-line
    verdict, parsed = _verdict(tmp_path, text)
    assert verdict == _plain(tmp_path, HOROVOD) == ("straggler", [2])
    assert parsed.normalised["mpi_fragment"] >= 5 and parsed.normalised["mpi_tag"] >= 12


def test_mpirun_rank_in_the_tag_names_the_process(tmp_path: Path) -> None:
    """The watchdog log without torch's own ``[rankN]:``: only the MPI rank in the tag says
    which process printed each line; a launcher's time and host stand in front of the tag."""
    lines = [f"2024-05-02 10:00:0{i % 10} node-{r // 2}: "
             + orte_chunk(body + "\n", r).rstrip("\n")
             for i, (r, body) in enumerate(zip(V22_RANKS, V22_BARE, strict=True))]
    verdict, parsed = _verdict(tmp_path, "\n".join(lines) + "\n")
    assert verdict == _plain(tmp_path, V22) == ("size_mismatch", [3])
    assert parsed.ranks_seen == {0, 1, 2, 3}
    assert parsed.normalised["mpi_tag"] == len(V22)


@pytest.mark.parametrize("tag", [
    "[1,{r}]<stderr>: ",  # PMIx --tag-output (Open MPI 5, prterun)
    "[prterun-node-0-21012@1,{r}]<stderr>: ",  # --tag-output fullname
    "[1,{r}][node-{r}:4123{r}]<stderr>: ",  # --tag-output detailed
    "[Thu May  2 10:00:00 2024][1,{r}]<stddiag>: ",  # --timestamp-output with the tag
])
def test_pmix_tag_shapes(tmp_path: Path, tag: str) -> None:
    text = "".join(tag.format(r=r) + body + "\n"
                   for r, body in zip(V22_RANKS, V22_BARE, strict=True))
    verdict, parsed = _verdict(tmp_path, text)
    assert verdict == ("size_mismatch", [3]) and parsed.ranks_seen == {0, 1, 2, 3}


# --- launchers and collectors ------------------------------------------------------------------
def _srun(lines: list[str], tasks: list[int], width: int) -> str:
    return "".join(f"{t:>{width}}: {ln}\n" for t, ln in zip(tasks, lines, strict=True))


def _k8s(lines: list[str], pods: list[int]) -> str:
    return "".join(f"[pod/trainer-worker-{p}/pytorch] 2024-05-02T10:00:0{i % 10}.12345678{p}Z "
                   f"{ln}\n" for i, (p, ln) in enumerate(zip(pods, lines, strict=True)))


WRAPPERS: dict[str, tuple[Callable[[list[str]], str], str]] = {
    # srun --label, 12 tasks: the id right-aligned to two columns; task 0 prints the report
    "srun": (lambda ls: _srun(["starting", *ls, "done"], [4, *[0] * len(ls), 11], 2),
             "srun_label"),
    "kubectl": (lambda ls: _k8s(ls, [0] * len(ls)), "k8s_prefix"),
    "ray": (lambda ls: "".join(f"(RayTrainWorker pid=3121, ip=10.0.0.7) {ln}\n" for ln in ls)
            + "(RayTrainWorker pid=3122, ip=10.0.0.8) waiting [repeated 3x across cluster]\n",
            "ray_prefix"),
    # the raylet's own lines (print_worker_logs: no "pid=" prefix, pid "raylet") interleaved
    "ray-raylet": (lambda ls: "(raylet, ip=10.0.0.8) A worker died or was killed while executing a "
                   "task by an unexpected system error.\n"
                   + "".join(f"(raylet) {ln}\n" for ln in ls), "ray_prefix"),
    # polyaxon ops logs --all-info: local time | node | pod | container | line
    "polyaxon": (lambda ls: "".join(
        f"2024-05-02 10:00:0{i}.123456+00:00 | gke-pool-1-a1b2 | plx-operation-3f2a-master-0 | "
        f"polyaxon-main | {ln}\n" for i, ln in enumerate(ls)), "polyaxon_prefix"),
    "github-actions": (lambda ls: "2024-05-02T10:00:00.1234567Z ##[group]Run python train.py\n"
                       + "".join(f"2024-05-02T10:00:01.1234567Z {ln}\n" for ln in ls)
                       + "2024-05-02T10:00:02.1234567Z ##[endgroup]\n", "ci_marker"),
    "markdown-quote": (lambda ls: "> ```\n" + "".join(f"> {ln}\n" for ln in ls) + "> ```\n",
                       "quote"),
    "markdown-fence": (lambda ls: "Here is the log:\n```text\n" + "\n".join(ls) + "\n```\n",
                       "markdown"),
    # pdsh (src/pdsh/dsh.c: "%s: " host, then the line), two nodes: DeepSpeed's PDSH runner
    "pdsh": (lambda ls: "c000002: starting\n" + "".join(f"c000001: {ln}\n" for ln in ls)
             + "c000002: done\n", "pdsh_host"),
    # accelerate's execute_subprocess_async echo: print("stderr:", line) per line of the child
    "accelerate-echo": (lambda ls: "".join(f"stderr: {ln}\n" for ln in ls), "stream_label"),
    # the same echo pasted with its newlines lost: every line of the child on one line
    "accelerate-echo-flattened": (lambda ls: " ".join(f"stderr: {ln}" for ln in ls) + "\n",
                                  "stream_label"),
}


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_wrapped_horovod_report_reads_like_the_plain_one(tmp_path: Path, wrapper: str) -> None:
    wrap, counter = WRAPPERS[wrapper]
    verdict, parsed = _verdict(tmp_path, wrap(HOROVOD))
    assert verdict == _plain(tmp_path, HOROVOD) == ("straggler", [2])
    assert parsed.normalised[counter] > 0


def test_horovod_rank_lines_are_no_srun_labels() -> None:
    """A report alone is mostly ``N: [tensor]`` lines: they must not be read as srun labels."""
    lines = [*HOROVOD, *(f"{r}: [HorovodAllreduce_grad_{r}_0]" for r in (3, 4, 5))]
    p = paste.Paste()
    assert [t for _, t in p.lines("\n".join(lines))] == lines and not p.counts


def test_kubectl_timestamps_keep_the_time(tmp_path: Path) -> None:
    verdict, parsed = _verdict(tmp_path, _k8s(V22, V22_RANKS))
    assert verdict == ("size_mismatch", [3])
    assert parsed.normalised["rfc3339"] == len(V22)
    assert all(e.ts_ns is not None for e in parsed.events if e.kind == lp.TIMEOUT)


# --- progress bars, hard wraps ------------------------------------------------------------------
def test_progress_bar_glued_in_front_of_the_report(tmp_path: Path) -> None:
    """tqdm's default meter (``{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining},
    {rate_fmt}]``) with the next write glued behind it on the same line."""
    bar = "Map:  80%|████████  | 8000/10000 [00:01<00:00, 5333.33 examples/s]"
    lines = [HOROVOD[0], bar + HOROVOD[1], bar.replace("80%", "90%") + HOROVOD[2]]
    verdict, parsed = _verdict(tmp_path, "\n".join(lines) + "\n")
    assert verdict == ("straggler", [2]) and parsed.normalised["progress_bar"] == 2


@pytest.mark.parametrize("width", [80, 120])
def test_hard_wrap_at_a_fixed_width_mid_word(tmp_path: Path, width: int) -> None:
    """A terminal (or a tracker) cut every line at ``width`` characters, mid-word."""
    cut = [ln[i:i + width] for ln in HOROVOD for i in range(0, len(ln), width)]
    assert sum(len(c) == width for c in cut) >= 3
    verdict, parsed = _verdict(tmp_path, "\n".join(cut) + "\n")
    assert verdict == ("straggler", [2]) and parsed.normalised["fixed_wrap"] > 0


def test_equal_length_lines_of_many_ranks_are_no_wrap() -> None:
    """Eight ranks printing the same message have lines of the same, longest length: each starts
    its own record, so no width is inferred and nothing is glued."""
    lines = [f"[rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective "
             "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)" for r in range(8)]
    p = paste.Paste()
    out = list(p.lines("\n".join(lines) + "\n"))
    assert [t for _, t in out if t] == lines and not p.counts["fixed_wrap"]


@pytest.mark.parametrize("lines", [
    # the store-based barrier's line, repeated every 10 s: the longest line of the log
    ["Added key: store_based_barrier_key:1 to store for rank: 0",
     *["Waiting in store based barrier to initialize process group for rank: 0, key: "
       "store_based_barrier_key:1 (world_size=4, worker_count=8, timeout=0:30:00)"] * 6],
    # tqdm redrawn on new lines (no \r): equal lengths, no word cut
    [f"Epoch 0:  {p}%|████▌     | {p}0/1000 [00:10<00:20, 45.00it/s, loss=0.{p}1]"
     for p in range(10, 90, 10)],
])
def test_repeated_lines_of_equal_length_are_no_wrap(lines: list[str]) -> None:
    p = paste.Paste()
    assert [t for _, t in p.lines("\n".join(lines))] == lines and not p.counts["fixed_wrap"]


def test_notes_name_each_normalisation_on_the_cli(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    log.write_text(WRAPPERS["kubectl"][0](HOROVOD))
    proc = run_cli("--logs", str(log))
    assert proc.returncode == 1, proc.stderr
    assert "straggler" in proc.stdout
    assert "normalised: 3 × kubectl --prefix" in proc.stdout + proc.stderr


@pytest.mark.parametrize("lines", [
    # Python's own "Name: text" lines, a logging level, prose: no pdsh host among them
    ["RuntimeError: NCCL error", "ValueError: bad", "RuntimeError: again", "INFO: x",
     "INFO: y", "Note: z"],
    # one word repeated in front of every line, but each line a different "host": no pdsh
    [f"step{i}: loss=0.{i}" for i in range(8)],
])
def test_prose_and_exceptions_are_no_pdsh_hosts(lines: list[str]) -> None:
    p = paste.Paste()
    assert [t for _, t in p.lines("\n".join(lines))] == lines and not p.counts["pdsh_host"]


def test_stream_labels_inside_prose_are_no_split() -> None:
    """Two mentions of "stderr: " in a file are no accelerate echo (three labels are)."""
    lines = ["redirecting stderr: to a file", "see stdout: above", "plain line"]
    p = paste.Paste()
    assert [t for _, t in p.lines("\n".join(lines))] == lines and not p.counts["stream_label"]
