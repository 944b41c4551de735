"""The live stall sources of ``stormotel analyze`` (``--nccl-ras``, ``--fr-pipe``), joined
into the evidence the dumps and logs feed (:class:`.cli_support.StallResult`).

Kept apart from :mod:`.cli_support` so a run without live flags imports no socket code, and so
the join stays one call there.
"""

from __future__ import annotations

import os

from stormotel.analyzers.options import StallOptions
from stormotel.analyzers.sources.protocol import Progress
from stormotel.analyzers.stalls.cli_support import StallInputError, StallResult, extend_findings


def add_live_sources(result: StallResult, options: StallOptions, progress: Progress) -> None:
    if options.nccl_ras:
        _add_nccl_ras(result, options, progress)
    if options.fr_pipe:
        _add_fr_pipe(result, options, progress)


def _add_nccl_ras(result: StallResult, options: StallOptions, progress: Progress) -> None:
    """Every endpoint must answer: a RAS port that does not is an input error (exit 2) — a
    silent endpoint proves nothing about the job's ranks, and a report without it would look
    like RAS saw nothing."""
    from stormotel.analyzers.stalls.nccl_ras import RasQueryError, evidence_from_answers, query

    answers = []
    for spec in options.nccl_ras:
        progress.say(f"asking NCCL RAS at {spec} for its status")
        try:
            answers.append(query(spec, timeout_s=options.live_timeout_s))
        except RasQueryError as exc:
            raise StallInputError(f"--nccl-ras: {exc}") from None
    ev = evidence_from_answers(answers, options.world_size or result.world_size)
    extend_findings(result, ev.findings)
    result.notes.extend(f"nccl ras: {n}" for n in ev.notes)
    result.sources.extend(f"ncclras://{a.endpoint}" for a in answers)
    result.extra["nccl_ras"] = {"answers": ev.answers, "communicators": ev.communicators,
                                "findings": len(ev.findings)}


def _add_fr_pipe(result: StallResult, options: StallOptions, progress: Progress) -> None:
    from stormotel.analyzers.stalls.cli_support import add_flight_recorder
    from stormotel.analyzers.stalls.fr_trigger import trigger

    assert options.fr_pipe is not None
    progress.say(f"asking every rank with a pipe at {options.fr_pipe}<rank>.pipe for a "
                 "Flight Recorder dump")
    tr = trigger(options.fr_pipe, env=os.environ, timeout_s=options.live_timeout_s)
    result.notes.extend(f"flight recorder pipe: {n}" for n in tr.notes)
    result.extra["fr_pipe"] = {"prefix": options.fr_pipe, "pipes": tr.pipes,
                               "dumped": tr.dumped, "not_listening": tr.not_listening,
                               "no_dump": tr.no_dump,
                               "folder": str(tr.folder) if tr.folder else None}
    if tr.folder is None:
        if not (options.flight_recorder or options.logs or options.stacks or options.nccl_ras):
            raise StallInputError(f"--fr-pipe {options.fr_pipe}: no Flight Recorder dump came "
                                  "back; " + "; ".join(tr.notes))
        return
    result.notes.append(f"flight recorder pipe: fresh dumps of rank(s) {tr.dumped} kept in "
                        f"{tr.folder} (the next poke overwrites the job's own copies)")
    if options.flight_recorder is None:
        add_flight_recorder(result, tr.folder, options.world_size, progress)
    else:
        result.notes.append(f"flight recorder pipe: --flight-recorder was given too, so the "
                            f"fresh dumps were not read; analyse {tr.folder} on its own")
