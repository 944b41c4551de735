"""Rules written from the emitters' source (helper rp), at the CLI (``stormotel analyze --logs``).

Every line below is SYNTHETIC: built from the emitter's format string at the versions its
module's docstring names — PyTorch's ``torch/csrc/distributed/c10d/reducer.cpp``
(``Reducer::ensure_prior_reduction_finished``) — not copied from any collected case; paths,
indices and parameter names are invented.

- DDP's unused-parameter error (log_ddp_unused): one rank's own unmarked set names that rank at
  low; several ranks are suspects; a message rank other than the line's own (a sub-group) names
  nobody;
"""

from __future__ import annotations

from pathlib import Path

from tests.stalls.helpers import root_findings as _run
from tests.stalls.test_rules_from_source_rs9 import _by, _suspects

DDP = "torch.ddp.unused_parameters"


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
