"""Rules written from the emitters' source (helper rp), at the CLI (``stormotel analyze --logs``).

Every line below is SYNTHETIC: built from the emitter's format string at the versions its
module's docstring names — PyTorch's ``torch/csrc/distributed/c10d/reducer.cpp``
(``Reducer::ensure_prior_reduction_finished``) and PaddlePaddle's
``python/paddle/distributed/launch/`` (``controllers/controller.py``, ``job/container.py``,
``job/pod.py`` in the 2.6.2 and 3.0.0 wheels) — not copied from any collected case; paths,
indices and parameter names are invented.

- DDP's unused-parameter error (log_ddp_unused): one rank's own unmarked set names that rank at
  low; several ranks are suspects; a message rank other than the line's own (a sub-group) names
  nobody;
- Paddle's launcher (log_paddle_launch): the failed container's LOCAL index is a suspect on one
  node, never a culprit (an exit-code report); a second node or different indices name nobody.
"""

from __future__ import annotations

from pathlib import Path

from tests.stalls.helpers import analyze_log_text
from tests.stalls.helpers import root_findings as _run
from tests.stalls.test_rules_from_source_rs9 import _by, _suspects

DDP = "torch.ddp.unused_parameters"
PADDLE = "paddle.launch.container_failed"


# --- DDP's reducer (synthetic, from ensure_prior_reduction_finished's c10::str pieces) ----------
def _ddp(rank: int, indices: str, *, prefix: str = "", debug: str | None = None) -> str:
    body = (
        "Traceback (most recent call last):\n"
        '  File "/srv/job/train.py", line 140, in <module>\n'
        "    out = model(batch)\n"
        '  File "/usr/lib/python3/site-packages/torch/nn/parallel/distributed.py", line 1589, '
        "in forward\n"
        "    inputs, kwargs = self._pre_forward(*inputs, **kwargs)\n"
        "RuntimeError: Expected to have finished reduction in the prior iteration before starting "
        "a new one. This error indicates that your module has parameters that were not used in "
        "producing loss. You can enable unused parameter detection by passing the keyword "
        "argument `find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, "
        "and by \n"
        "making sure all `forward` function outputs participate in calculating loss. \n"
        "If you already have done the above, then the distributed data parallel module wasn't "
        "able to locate the output tensors in the return value of your module's `forward` "
        "function. Please include the loss function and the structure of the return value of "
        "`forward` of your module when reporting this issue (e.g. list, dict, iterable).\n")
    if debug is not None:
        body += f"Parameters which did not receive grad for rank {rank}: {debug}\n"
    body += f"Parameter indices which did not receive grad for rank {rank}: {indices}\n"
    if debug is None:
        body += (" In addition, you can set the environment variable TORCH_DISTRIBUTED_DEBUG to "
                 "either INFO or DETAIL to print out information about which particular "
                 "parameters did not receive gradient on this rank as part of this error\n")
    return "".join(prefix + line + "\n" for line in body.splitlines())


def test_ddp_unused_parameters_name_the_reporting_rank_at_low(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _ddp(3, "41 42 43", prefix="[rank3]: "))
    assert code == 1
    assert _by(roots, DDP) == [("rank_failure", [3], "low")]
    assert "default" in roots[0]["evidence"]["rank_from"]


def test_ddp_debug_mode_names_and_indices_are_one_rank(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _ddp(1, "0", debug="experts.5.w1.weight, experts.5.w2.weight"))
    assert code == 1
    assert _by(roots, DDP) == [("rank_failure", [1], "low")]


def test_ddp_several_ranks_are_suspects_and_a_subgroup_rank_names_nobody(
        tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _ddp(0, "7", prefix="[rank0]: ")
                       + _ddp(2, "7", prefix="[rank2]: "))
    assert code == 1
    assert not any(f["kind"] == "rank_failure" for f in roots)
    assert _by(roots, DDP) == [("undecided", [], "low")]
    assert _suspects(roots) == [0, 2]
    # global rank 5 printing rank 1: DDP on a sub-group, whose rank is not global
    code, roots = _run(tmp_path, _ddp(1, "7", prefix="[rank5]: "))
    assert _by(roots, DDP) == [("undecided", [], "low")]
    assert _suspects(roots) == []
    assert "sub-group" in roots[0]["evidence"]["reason"]


# --- Paddle's launcher (synthetic, from controller.py's logger.error and Container.__str__) -----
def _launch(level: str, msg: str) -> str:
    return f"LAUNCH {level} 2026-11-30 01:20:33,120 {msg}\n"


def _failed(local: int, code: int, *, env: bool = True) -> str:
    cmd = "['/usr/bin/python3', '-u', 'tools/train.py', '-c', 'configs/run.yml']"
    line = (f"Container rank {local} status failed cmd {cmd} code {code} log "
            f"log/workerlog.{local}" + (" \nenv {'PADDLE_TRAINER_ID': '" + str(local) + "'}"
                                        if env else ""))
    return (_launch("INFO", "Pod failed") + _launch("ERROR", "Container failed !!!") + line
            + "\n" + _launch("INFO", "------------------------- ERROR LOG DETAIL "
                                     "-------------------------"))


def _job(nodes: int) -> str:
    return _launch("INFO", f"Job: default, mode collective, replicas {nodes}[{nodes}:{nodes}], "
                           "elastic False")


def test_paddle_failed_container_is_a_suspect_never_a_culprit(tmp_path: Path) -> None:
    for text in (_job(1) + _failed(6, -6), _failed(0, -9, env=False), _failed(2, 1)):
        code, roots = _run(tmp_path, text)
        assert code == 1
        assert not any(f["kind"] == "rank_failure" for f in roots), text
        assert _by(roots, PADDLE) == [("undecided", [], "low")], text
        assert _suspects(roots) == [int(text.split("Container rank ")[1].split()[0])], text
        # with the container's environment printed, its PADDLE_TRAINER_ID is global (rs12)
        assert ("GLOBAL" if "\nenv {" in text else "LOCAL") in roots[0]["evidence"]["reason"]


def test_paddle_second_node_or_different_containers_name_nobody(tmp_path: Path) -> None:
    # without the environment (3.0's default): the index stays local (rs12 reads the env's id)
    for text in (_job(2) + _failed(3, -9, env=False),
                 _failed(1, 1, env=False) + _failed(4, -6, env=False)):
        code, roots = _run(tmp_path, text)
        assert code == 1
        assert _by(roots, PADDLE) == [("undecided", [], "low")], text
        assert _suspects(roots) == [], text


def test_paddle_debug_container_line_is_not_a_failure(tmp_path: Path) -> None:
    # deploy_pod logs containers[0] at DEBUG before it runs: "status uninit … code -1"
    text = (_launch("DEBUG", "Container rank 0 status uninit cmd ['python', '-u', 'train.py'] "
                             "code -1 log log/workerlog.0"))
    code, report = analyze_log_text(tmp_path, "launch.log", text)
    assert code == 3  # no evidence: the line is not read as a failure
    assert not [f for f in report["stall_findings"] if f["evidence"].get("pattern") == PADDLE]
