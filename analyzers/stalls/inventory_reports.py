"""Realistic reports around the inventory's report fragments (NCCL RAS text and JSON, Horovod).

Why: an NCCL RAS status report and Horovod's stall-inspector warning are ONE message printed in
pieces (``rasOutAppend`` calls in ``src/ras/client_support.cc``; one ``std::stringstream`` in
``horovod/common/stall_inspector.cc``); the log readers (:mod:`.log_ras`, :mod:`.log_horovod`)
read the whole report. Judging one fragment alone measures nothing. So each fragment is put in
the place its emitter prints it, inside a report laid out as the source at the inventory's tags
lays it out, around the same ranks as the rest of the inventory (the rank the fragment is about
is 5, the world 8; RAS reports are read by a client, Horovod's by the coordinator, rank 0).

A fragment is HANDLED when (a) the report holding it is read to the right verdict and (b) the
same report WITHOUT the fragment reads differently (different events or findings) — the reader
used the fragment, not only its neighbours. A fragment with no place here (a line that carries
no rank, count or status, e.g. the summary table's column header) is judged alone, as before.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

NAMED = 5
WORLD = 8
_HASH = "27a079b828ff1a75"
_HEADER = ("NCCL version 2.28.7 compiled with CUDA 12.8\n"
           "CUDA runtime version 12080, driver version 12080\n\n"
           "Job summary\n===========\n\n"
           "  Nodes  Processes         GPUs  Processes     GPUs\n"
           "(total)   per node  per process    (total)  (total)\n"
           f"      1          {WORLD}            1          {WORLD}        {WORLD}\n\n"
           "Communicators... (0.00s)\n=============\n\n"
           "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
           "    #  in group  per comm  per node  per comm  in group\n"
           f"    0         1         1         {WORLD}         {WORLD}         {WORLD}   RUNNING  "
           "MISMATCH\n\nErrors\n======\n\n")


def _gpu(rank: int) -> str:
    return f"GPU {rank} managed by process {4240 + rank} on node 10.0.0.1"


@dataclass(frozen=True)
class Report:
    """A report holding the fragment, and the same report without it."""

    text: str
    without: str
    where: str  #: which part of the report the fragment is (said in the table)


def _text(lines: list[str], i: int, where: str) -> Report:
    body = "\n".join(lines)
    rest = "\n".join(line for k, line in enumerate(lines) if k != i)
    return Report(_HEADER + body + "\n\n", _HEADER + rest + "\n\n", where)


def _ras_text(template: str) -> Report | None:
    t = template.strip("\n").strip()
    head = f"#0-0 ({_HASH}) MISMATCH"
    op = "  Communicator ranks have different AllReduce operation counts"
    if t.startswith("Communicator ranks have different") and "operation counts" in t:
        # the groups below name the ranks, so in a whole report the heading adds nothing; its
        # own proof (a split exists: it is printed only then) is what a report cut after it
        # keeps
        line = "  " + t.replace("%s", "AllReduce")
        return _text([head, line], 1, "the heading of a count split (MISMATCH), the report "
                     "cut after it")
    if t.startswith("%d ranks have launched up to operation"):
        return _text([head, op, "  6 ranks have launched up to operation 6650",
                      "  2 ranks have launched up to operation 6649",
                      f"  Rank {NAMED} -- {_gpu(NAMED)}", f"  Rank 6 -- {_gpu(6)}"], 3,
                     "the count of the outlier group, whose members follow")
    if t.startswith("%d ranks have not launched any operations"):
        return _text([head, op, "  6 ranks have launched up to operation 2",
                      "  2 ranks have not launched any operations",
                      f"  Rank {NAMED} -- {_gpu(NAMED)}", f"  Rank 6 -- {_gpu(6)}"], 3,
                     "the outlier group that launched nothing, whose members follow")
    m = re.match(r"Rank %d has (launched up to operation %ld|not launched any operations) -- "
                 r"(GPU|\[process)", t)
    if m:
        what = ("launched up to operation 6649" if m.group(1).startswith("launched")
                else "not launched any operations")
        where = _gpu(NAMED) if m.group(2) == "GPU" else "[process information not found]"
        majority = "6650" if m.group(1).startswith("launched") else "2"
        return _text([head, op, f"  7 ranks have launched up to operation {majority}",
                      f"  Rank {NAMED} has {what} -- {where}"], 3,
                     "a one-rank outlier group of a count split")
    if t.startswith("Rank %d -- "):
        where = _gpu(NAMED) if "GPU" in t else "[process information not found]"
        return _text([f"#0-0 ({_HASH}) INCOMPLETE", "  Missing communicator data from 1 rank",
                      f"  Rank {NAMED} -- {where}"], 2,
                     "a missing rank under INCOMPLETE (2.26+; the same line lists the members "
                     "of a count, status or error group)")
    if t.startswith("#%d-%d (%016lx) INCOMPLETE"):
        return _text([f"#0-0 ({_HASH}) INCOMPLETE\n  Missing communicator data from 1 rank",
                      f"  Rank {NAMED} -- {_gpu(NAMED)}"], 0,
                     "the heading of a communicator some ranks did not answer for")
    if t.startswith("The missing rank%s"):
        return _text([f"#0-0 ({_HASH}) INCOMPLETE", "  Missing communicator data from 1 rank",
                      f"  The missing rank: {NAMED}"], 2, "the missing ranks (2.24)")
    if t.startswith("Communicator ranks have different status"):
        return _text([head, "  Communicator ranks have different status",
                      "  7 ranks have status RUNNING", f"  Rank {NAMED} has status ABORT -- "
                      f"{_gpu(NAMED)}"], 1, "the heading of a status split")
    if t.startswith("%d ranks have status"):
        return _text([head, "  Communicator ranks have different status",
                      "  6 ranks have status RUNNING", "  2 ranks have status ABORT",
                      f"  Rank {NAMED} -- {_gpu(NAMED)}", f"  Rank 6 -- {_gpu(6)}"], 3,
                     "the status of an outlier group, whose members follow")
    m = re.match(r"Rank %[ds] has status %s(?: -- (GPU|\[process))?", t)
    if m:
        where = "" if m.group(1) is None else (
            f" -- {_gpu(NAMED)}" if m.group(1) == "GPU" else " -- [process information not "
            "found]")
        return _text([head, "  Communicator ranks have different status",
                      "  7 ranks have status RUNNING", f"  Rank {NAMED} has status ABORT{where}"],
                     3, "a one-rank outlier of a status split")
    if t.startswith("%d ranks reported %s"):
        return _text([f"#0-0 ({_HASH}) ERROR", "  Asynchronous errors on 2 ranks",
                      "  2 ranks reported unhandled cuda error (run with NCCL_DEBUG=INFO for "
                      "details)",
                      f"  Rank {NAMED} -- {_gpu(NAMED)}", f"  Rank 6 -- {_gpu(6)}"], 2,
                     "the error of an outlier group, whose members follow (an error of their own; "
                     "a remote error would make them witnesses)")
    m = re.match(r"Rank %d reported %s -- (GPU|\[process)", t)
    if m:
        where = _gpu(NAMED) if m.group(1) == "GPU" else "[process information not found]"
        return _text([f"#0-0 ({_HASH}) ERROR", "  Asynchronous error on 1 rank",
                      f"  Rank {NAMED} reported unhandled cuda error -- {where}"], 2,
                     "the one rank that reported an NCCL error")
    return None


def _ras_json_doc(missing: bool = True, behind: bool = False) -> dict[str, Any]:
    """A ``ncclras -f json`` document (2.28.7 ``rasClientRunCommsJson`` keys and order)."""
    funcs = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
    ranks = [{"rank": r, "host": "10.0.0.1", "pid": 4240 + r, "cuda_dev": r, "nvml_dev": r,
              "status": {"init_state": 0, "async_error": 0, "finalize_called": False,
                         "destroy_flag": False, "abort_flag": False},
              "collective_counts": {f: (6649 if behind and r == NAMED else 6650)
                                    if f == "AllReduce" else 0 for f in funcs}}
             for r in range(WORLD) if not (missing and r == NAMED)]
    miss = [{"rank": NAMED, "host": "10.0.0.1", "pid": 4240 + NAMED, "cuda_dev": NAMED,
             "nvml_dev": NAMED, "status": {"unresponsive": True, "considered_dead": False}}
            ] if missing else []
    return {"nccl_version": "2.28.7", "cuda_runtime_version": 12080,
            "cuda_driver_version": 12080, "timestamp": "2026-11-28 23:40:00",
            "communicators_count": 1,
            "communicators": [{"hash": f"0x{_HASH}", "secondary_hash": "0x1a2b:0x3c4d",
                               "size": WORLD, "ranks_count": len(ranks),
                               "missing_ranks_count": len(miss), "ranks": ranks,
                               "missing_ranks": miss}],
            "ras": {"collection_time_sec": 0.012, "timeouts_count": 0}}


def _drop_key(doc: Any, key: str) -> Any:
    if isinstance(doc, dict):
        return {k: _drop_key(v, key) for k, v in doc.items() if k != key}
    if isinstance(doc, list):
        return [_drop_key(v, key) for v in doc]
    return doc


def _ras_json(template: str) -> Report | None:
    m = re.match(r'\s*"(\w+)"\s*:', template)
    if m is None:
        return None
    key = m.group(1)
    doc = _ras_json_doc(missing=key != "collective_counts", behind=key == "collective_counts")
    if not _has_key(doc, key):
        return None
    return Report(json.dumps(doc, indent=2) + "\n", json.dumps(_drop_key(doc, key), indent=2)
                  + "\n", f'the key "{key}" of the JSON document (2.28.7+)')


def _has_key(doc: Any, key: str) -> bool:
    if isinstance(doc, dict):
        return key in doc or any(_has_key(v, key) for v in doc.values())
    if isinstance(doc, list):
        return any(_has_key(v, key) for v in doc)
    return False


_HVD_HEAD = ("One or more tensors were submitted to be reduced, gathered or broadcasted by "
             "subset of ranks and are waiting for remainder of ranks for more than 60 seconds. "
             "This may indicate that different ranks are trying to submit different tensors or "
             "that only subset of ranks is submitting tensors, which will cause deadlock. ")
_HVD_SHUT = ('One or more rank (marked by "!") is stalled for longer than 120 seconds. '
             'Will shutdown.')


def _horovod(template: str, tags: list[str]) -> Report | None:
    """The coordinator's stall warning as ``StallInspector::CheckForStalledTensors`` (0.17+;
    0.16.x's ``operations.cc`` says "Stalled ranks:") builds it, logged by rank 0 under
    mpirun's ``--tag-output`` tag (every line of the message carries it)."""
    old = all(t.startswith("v0.16") for t in tags)
    shut = "Will shutdown" in template
    if "subset of ranks" not in template and not shut:
        return None
    tag = "[1,0]<stderr>:"
    mark = "!" if shut else ""
    lines = [f"{tag}[2026-11-28 23:40:00.123456: {'E' if shut else 'W'} "
             f"/tmp/pip/horovod/common/stall_inspector.cc:107] {_HVD_HEAD}",
             f"{tag}{'Stalled ranks:' if old else 'Missing ranks:'}",
             f"{tag}{NAMED}{mark}: [DistributedAdamOptimizer_Allreduce/HorovodAllreduce_grads_7_0]"]
    if shut:
        lines.append(f"{tag}{_HVD_SHUT}")
    i = len(lines) - 1 if shut else 0
    rest = [line for k, line in enumerate(lines) if k != i]
    return Report("\n".join(lines) + "\n", "\n".join(rest) + "\n",
                  "the shutdown line closing the stall warning" if shut else
                  "the head of the stall warning (its rank lines follow)")


def report_for(entry: dict[str, Any]) -> Report | None:
    """The realistic report around an inventory entry of a report emitter, or None."""
    emitter, template = str(entry["emitter"]), str(entry["template"])
    if emitter == "nccl-ras":
        return _ras_json(template) if template.lstrip().startswith('"') else \
            _ras_text(template)
    if emitter == "horovod":
        return _horovod(template, [str(t) for t in entry["tags"]])
    return None
