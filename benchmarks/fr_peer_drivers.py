"""Run one peer Flight Recorder analyzer on one dump folder; print its answer as one JSON line.

    PEER_PYTHON benchmarks/fr_peer_drivers.py fr_trace DIR
    PEER_PYTHON benchmarks/fr_peer_drivers.py nvrx DIR

Runs inside the *peer* interpreter (the separate venv of docs/benchmarks.md, "Flight Recorder
analyzers side by side"), never stormotel's: it imports only the standard library and the peer
it drives, so stormotel and the peers never share an environment. ``compare_fr_peers.py`` calls
it once per tool and folder and scores what it prints.

- ``fr_trace``: torch's ``torch.distributed.flight_recorder.fr_trace.main([DIR])``, its log
  captured from the ``Flight Recorder`` logger and cut into its problem blocks ("Not all ranks
  joining collective", "Collective sequence number: N has errors", "Input/output mismatch");
  each block's ranks are its ``missing ranks`` and ``Culprit rank`` names. When it refuses a
  folder for "Missing dump files from ranks {..}", it is run again with
  ``--allow-incomplete-ranks`` (its best-effort mode) and that is its answer.
- ``nvrx``: NVIDIA Resiliency Extension's ``CollectiveAnalyzer`` (attribution/trace_analyzer/
  fr_attribution.py), driven the way its own ``analyze_fr_dump`` does it (deterministic table
  analysis, no LLM), with ``fr_path`` = the folder plus the files' common prefix (its
  ``TORCH_FR_DUMP_TEMP_FILE`` prefix mode, so any file naming works). Its answer is its
  ``hanging ranks`` list; files it could not read ("Error processing …") are reported.

Output: ``{"tool", "version", "status": ok|crash|unavailable, "error", "blocks": [{"what",
"seq", "group", "op", "ranks"}], "ranks", "notes"}``; ``ranks`` is the tool's answer (fr_trace:
the first block's ranks, as a user reads its log top-down; nvrx: its hanging ranks).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import sys
import traceback
from typing import Any

_BLOCK = re.compile(r"^(Not all ranks joining collective, sequence number: (\d+)"
                    r"|Collective sequence number: (\d+) has errors"
                    r"|Input/output mismatch in the collective sequence number: (\d+))")
_RANKS = re.compile(r"\{([\d, ]*)\}")
_CULPRIT = re.compile(r"Culprit rank (\d+)")
_DUMP_NAME = re.compile(r"^(.*?)(\d+)(\.json)?$")


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def parse_fr_trace_log(text: str) -> list[dict[str, Any]]:
    """The problem blocks of fr_trace's log, in the order it printed them."""
    blocks: list[dict[str, Any]] = []
    for line in text.splitlines():
        m = _BLOCK.match(line)
        if m:
            what = ("not_joined" if m.group(2) else "errors" if m.group(3) else "io_mismatch")
            seq = int(m.group(2) or m.group(3) or m.group(4))
            blocks.append({"what": what, "seq": seq, "group": None, "op": None, "ranks": []})
            continue
        if not blocks:
            continue
        b = blocks[-1]
        if line.startswith("group info: "):
            b["group"] = line.split(": ", 1)[1]
        elif line.startswith("collective: ") and b["op"] is None:
            b["op"] = line.split(": ", 1)[1]
        elif line.startswith("missing ranks: "):
            m2 = _RANKS.search(line)
            if m2:
                b["ranks"] += [int(x) for x in m2.group(1).split(",") if x.strip()]
        elif line.startswith("error msg: "):
            b["ranks"] += [int(x) for x in _CULPRIT.findall(line)]
    for b in blocks:
        b["ranks"] = sorted(set(b["ranks"]))
    return blocks


def run_fr_trace(folder: str) -> dict[str, Any]:
    out: dict[str, Any] = {"tool": "fr_trace", "version": None, "status": "ok", "error": None,
                           "blocks": [], "ranks": [], "notes": []}
    try:
        import torch
        from torch.distributed.flight_recorder.fr_trace import main
    except Exception as exc:  # no torch in the peer venv
        return {**out, "status": "unavailable", "error": _error(exc)}
    out["version"] = torch.__version__
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log = logging.getLogger("Flight Recorder")

    def attempt(argv: list[str]) -> BaseException | None:
        buf.seek(0)
        buf.truncate()
        saved, log.handlers = log.handlers, [handler]  # its own stderr handler stays quiet
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                main(argv)
            return None
        except BaseException as exc:
            return exc
        finally:
            log.handlers = saved

    failure = attempt([folder])
    if failure is not None and "Missing dump files from ranks" in str(failure):
        out["notes"].append(f"refused ({_error(failure)}); rerun with --allow-incomplete-ranks")
        failure = attempt([folder, "--allow-incomplete-ranks"])
    out["blocks"] = parse_fr_trace_log(buf.getvalue())
    if failure is not None:
        out["status"], out["error"] = "crash", _error(failure)
        out["notes"].append(traceback.format_exception(failure)[-2].strip()[-300:])
    elif out["blocks"]:
        out["ranks"] = out["blocks"][0]["ranks"]
    return out


def _common_prefix(folder: str) -> str | None:
    names = [n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n))]
    prefixes = {m.group(1) for n in names if (m := _DUMP_NAME.match(n))}
    return prefixes.pop() if len(prefixes) == 1 else None


def run_nvrx(folder: str) -> dict[str, Any]:
    out: dict[str, Any] = {"tool": "nvrx", "version": None, "status": "ok", "error": None,
                           "blocks": [], "ranks": [], "notes": []}
    try:
        from importlib.metadata import version

        from nvidia_resiliency_ext.attribution.base import NVRxAttribution
        from nvidia_resiliency_ext.attribution.trace_analyzer.fr_attribution import (
            CollectiveAnalyzer,
        )
    except Exception as exc:
        return {**out, "status": "unavailable", "error": _error(exc)}
    out["version"] = version("nvidia-resiliency-ext")
    prefix = _common_prefix(folder)
    fr_path = os.path.join(folder, prefix) if prefix else folder
    args = {"fr_path": fr_path, "pattern": "*", "verbose": False, "health_check": False,
            "threshold": None}
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                analyzer = CollectiveAnalyzer(args)
                loop = analyzer._loop
                text = loop.run_until_complete(analyzer.preprocess_FR_dumps())
                packed, _ = loop.run_until_complete(analyzer.print_output(text))
            finally:
                NVRxAttribution.reset_thread_event_loop()
    except BaseException as exc:
        out["status"], out["error"] = "crash", _error(exc)
        out["notes"].append(traceback.format_exception(exc)[-2].strip()[-300:])
    else:
        hanging = str(packed.get("hanging_ranks", "")) if isinstance(packed, dict) else ""
        m = re.search(r"\[([\d, ]*)\]", hanging)
        out["ranks"] = sorted({int(x) for x in m.group(1).split(",") if x.strip()}) if m else []
        for line in str(packed.get("analysis_text", "")).splitlines()[1:]:
            cols = [c.strip() for c in line.split("|")]
            if len(cols) >= 6:
                out["blocks"].append({"what": "missing", "seq": None, "group":
                                      f"{cols[0]}:{cols[1]}", "op": cols[2], "ranks":
                                      [int(x) for x in cols[-1].split(",") if x.strip()]})
    skipped = [ln.strip() for ln in err.getvalue().splitlines()
               if ln.startswith("Error processing")]
    if skipped:
        out["notes"].append(f"{len(skipped)} file(s) not read: {skipped[0][:200]}")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("fr_trace", "nvrx"):
        print("usage: fr_peer_drivers.py {fr_trace|nvrx} DIR", file=sys.stderr)
        return 2
    tool, folder = argv
    result = run_fr_trace(folder) if tool == "fr_trace" else run_nvrx(folder)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
