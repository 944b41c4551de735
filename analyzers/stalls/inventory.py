"""Judge the rank-bearing message inventory with the real log parser, and render its table.

Why: the share of an emitter's rank-bearing error/warning messages that the analysis reads
right is the measure of reach that pasted cases cannot give. Each inventory entry (a format
string read from the emitter's source, ``docs/data/stall_inventory.json``) becomes one concrete
line — placeholders filled with plausible values (reporter rank 3, the rank it names 5, world
8), the prefix the emitter's process carries (torchrun's ``[rank3]:``, NCCL's
``host:pid:tid [dev] NCCL WARN``, mpirun's and srun's words) — and goes through
:func:`logs_parser.parse_logs` and :func:`log_analysis.analyze_logs`, exactly as a user's log
does. HANDLED means the line was read as stall evidence and the findings name the right rank
for its family (:mod:`.inventory_families`): the named rank for ``names``, the failing rank for
``own``, and for ``waits`` a finding that does not blame the reporter.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stormotel.analyzers.stalls import logs_parser as lp
from stormotel.analyzers.stalls.inventory_families import Family, family_of
from stormotel.analyzers.stalls.inventory_reports import report_for
from stormotel.analyzers.stalls.log_analysis import analyze_logs
from stormotel.analyzers.stalls.log_failures import NORMAL_SHUTDOWN

START = "<!-- inventory:start -->"
END = "<!-- inventory:end -->"
REPORTER = 3  #: the rank that prints the line
NAMED = 5  #: the rank a line names (waited on, failed, missing)
WORLD = 8
#: event kinds that only give context (who is who, how many): not stall evidence on their own
CONTEXT = frozenset({lp.WORLD_HINT, NORMAL_SHUTDOWN, lp.NCCL_INIT, lp.NCCL_CHANNEL,
                     lp.ELASTIC_LAYOUT, lp.DETAIL_TRACE,
                     "pg_nccl_error"})  # log_pg_error: which LOG statement printed a line

#: families whose lines are read only inside their multi-line report (log_ras, log_horovod)
REPORT_FAMILIES = frozenset({"nccl.ras", "nccl.ras.split_head", "horovod.stall"})

_PRINTF = re.compile(r"%[-+ #0]*(?:\d+|\*)?(?:\.\d+)?(?:hh|h|ll|l|z|j|t|L|q)?[diouxXeEfgGcsp%]")
_BRACE = re.compile(r"\{([^{}]{0,60})\}")
_NAMED_CTX = re.compile(r"(?:from|to|check|missing|lagging|peer|remote|root|waiting for)"
                        r"\W{0,3}(?:rank\W{0,3})?\[?$", re.I)
_SELF_CTX = re.compile(r"(?:^|\[)\s*(?:PG \S+ )?Rank\s*$|^\[$", re.I)


@dataclass(frozen=True)
class Judgement:
    handled: bool
    family: Family
    reason: str  #: "handled" or the reason class when not
    line: str


def _value(before: str, spec: str, role: str, ranks_used: list[int]) -> str:
    """A plausible value for one placeholder, by the words in front of it and its name."""
    b = before[-40:]
    s = spec.lower().strip("{}")
    text_spec = spec == "%s" or spec.startswith("{")
    if text_spec:
        if re.search(r"critical communication path was lost", before, re.I) and re.search(
                r"(?:my|process) name:\s*$", b, re.I):
            # proc-comm-failed: both names are launcher daemons (job 0), never MPI ranks
            return "[[4242,0],0]" if re.search(r"my name:\s*$", b, re.I) else "[[4242,0],1]"
        if re.search(r"(?:process name|Proc):\s*$", b, re.I):
            return f"[[4242,1],{_rank(b, s, role, ranks_used)}]"
        if re.search(r"^Process\s*$", before):  # torchelastic's "Process %s did not exit": a pid
            return "4242"
        if re.search(r"did not exit after\s*$", b):
            return "Signals.SIGKILL"
        if re.search(r"in communicator\s*$", b, re.I):
            return "MPI_COMM_WORLD"
        if re.search(r"^\[$", before) and role == "unnamed":
            return "default"  # torchelastic 2.13's "[%s] Worker pid=…": the worker group's role
        if not b.strip():
            return "mpirun"
        if re.search(r"ranks\W{0,3}$", b, re.I) or re.search(r"ranks\b", s):
            return f"{NAMED}, 6"
        if re.search(r"signal\W{0,3}$", b, re.I) or "sig" in s:
            return "9 (SIGKILL)"
        if re.search(r"node\W{0,3}$|host\W{0,3}$|on\s*$", b, re.I):
            return "node-1"
        numeric = re.search(r"(?:rank|peer|pid|exitcode|exit code|code|status|size|world|count|"
                            r"nodes|seq\w*|task|id|timeout|ms|seconds|after|=|\[)\W{0,3}$", b,
                            re.I) \
            or re.search(r"rank|peer|src|dst|root|size|world|count|pid|code|seq|timeout", s)
        if not numeric:
            if re.search(r"err|exc|reason|msg|what", s):
                return "RuntimeError"
            return "x"
    elif spec.endswith("p"):
        return "0x55d1c0a0"
    elif spec.endswith(("x", "X")):
        return "1c"
    elif spec.endswith(("f", "g", "e")):
        return "1.5"
    elif spec.endswith("c"):
        return "x"
    if (re.search(r"(?:world|size|nranks|of|/)\W{0,3}$", b, re.I) and not re.search(
            r"rank\W{0,3}$", b, re.I)) or re.search(r"world|size|nranks|count", s):
        return str(WORLD)
    if re.search(r"(?:rank|peer|\[|task|vpid)\W{0,3}$", b, re.I) or re.search(
            r"rank|peer|src|dst|root", s):
        return str(_rank(b, s, role, ranks_used))
    if re.search(r"pid\W{0,3}$", b, re.I) or "pid" in s:
        return "4242"
    if re.search(r"(?:code|status)\W{0,3}$", b, re.I) or "code" in s:
        return "1"
    if re.search(r"timeout|ms\W{0,3}$|seconds", b[-20:] + s, re.I):
        return "600000"
    return "17"


def _rank(before: str, spec: str, role: str, used: list[int]) -> int:
    """Which rank a rank placeholder gets: the named one after words that point at another
    rank (from, check, missing, waiting for, peer, root), else the reporter — and for a
    ``names`` family whose words do not say, the named one first."""
    if _NAMED_CTX.search(before) or re.search(r"peer|src|dst|root|other|remote", spec):
        r = NAMED
    elif _SELF_CTX.search(before) or role != "names":
        r = REPORTER if REPORTER not in used or role != "names" else 6
    else:
        r = NAMED if NAMED not in used else 6
    used.append(r)
    return r


def fill(template: str, role: str) -> tuple[str, list[int]]:
    """The template with every placeholder replaced; the ranks it put in, in order."""
    out: list[str] = []
    used: list[int] = []
    pos = 0
    spots = sorted([(m.start(), m.end(), m.group(0)) for m in _PRINTF.finditer(template)]
                   + [(m.start(), m.end(), m.group(0)) for m in _BRACE.finditer(template)])
    for start, end, spec in spots:
        if start < pos:
            continue
        out.append(template[pos:start])
        if spec == "%%":
            out.append("%")
        elif template[end:end + 13] == " death signal":  # torchelastic: a signal.Signals member
            out.append("Signals.SIGTERM")
        else:
            out.append(_value("".join(out), spec, role, used))
        pos = end
    out.append(template[pos:])
    return "".join(out), used


_FP = ("CollectiveFingerPrint(SequenceNumber=12, OpType={op}, TensorShape=[1024], "
       "TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, "
       "layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), "
       "memory_format=(nullopt)))")


def _whole_c10d(text: str) -> tuple[str, list[int]] | None:
    """The whole message around a wheel-string fragment whose neighbours the string alone does
    not give, as its source builds it (None: the fragment is filled the generic way).

    - ``ProcessGroupWrapper.cpp`` (``CollectiveFingerPrint::verify``, 1.13–2.13): ``"Detected
      mismatch between collectives on ranks. Rank " << backend->getRank() << " is running
      collective: " << *this << ", but Rank " << rank << " is running collective: " <<
      rank_fingerprint << "."`` then the diff — the first rank is the REPORTER, the second the
      first rank of the all-gather whose fingerprint differs from the reporter's own;
    - ``ProcessGroupNCCL::broadcastSignal`` (2.8): ``"Broadcasting signal " << signal << " to
      other ranks via TCPStore."``, called with ``EXCEPTION_DUMP`` ("exception_dump") once the
      reporter's watchdog caught the error."""
    if text.startswith("Detected mismatch between collectives on ranks. Rank ") and \
            text.endswith("Rank "):
        return (f"{text}{REPORTER} is running collective: {_FP.format(op='ALLREDUCE')}, but Rank "
                f"{NAMED} is running collective: {_FP.format(op='BROADCAST')}.Collectives "
                "differ in the following aspects:   Op type: ALLREDUCEvs BROADCAST",
                [REPORTER, NAMED])
    if text == " to other ranks via TCPStore.":
        return f"[PG ID 0 PG GUID 0(default_pg) Rank {REPORTER}] Broadcasting signal " \
               f"exception_dump{text}", [REPORTER]
    return None


def concrete(entry: dict[str, Any], family: Family) -> tuple[str, list[int]]:
    """One line (or block) as the emitter's process prints it."""
    text, used = fill(str(entry["template"]), family.role)
    text = text.rstrip("\n")
    emitter, call = str(entry["emitter"]), str(entry["call"])
    rp = f"[rank{REPORTER}]:"
    if emitter.startswith("nccl"):
        if emitter == "nccl-ras":
            return text, used
        word = "WARN" if entry["level"] == "warning" else "INFO"
        return f"{rp}node-1:4242:4301 [{REPORTER}] NCCL {word} {text}", used
    if emitter == "pytorch.c10d-cpp":  # a fragment that c10::str joins with its arguments
        whole = _whole_c10d(text)
        if whole is not None:
            return f"{rp}[E1128 23:40:00.123456789 ProcessGroup.cpp:1] {whole[0]}", whole[1]
        if re.search(r"\b(?:rank|Rank|ranks:|rank:|rank ID)\s*$", text):
            text += f"{NAMED if family.role == 'names' else REPORTER}"
            used.append(NAMED if family.role == "names" else REPORTER)
        if text.startswith("] are the lagging ranks"):  # TraceUtils.h: its head is a literal
            text = f"To our best knowledge, ranks [{NAMED}" + text
            used.append(NAMED)
        elif text.startswith("]"):
            text = f"[Rank {REPORTER}" + text
        elif text.startswith(" ") and text.strip():  # it follows an argument: the rank
            r = NAMED if family.role == "names" else REPORTER
            text = f"Rank {r}{text}"
            used.insert(0, r)
        if re.search(r" (?:in|after)\s*$", text):
            text = text.rstrip() + " 30000 ms"
        return f"{rp}[E1128 23:40:00.123456789 ProcessGroup.cpp:1] {text}", used
    if emitter in ("pytorch.c10d", "deepspeed", "accelerate", "lightning"):
        if call.startswith("raise "):
            exc = call.removeprefix("raise ").split(".")[-1]
            return f"{rp}{exc}: {text}", used
        return f"{rp}[2026-11-28 23:40:00,123] {call.upper()} {text}", used
    if emitter == "torchelastic":
        if call.startswith("raise "):
            return f"{call.removeprefix('raise ').split('.')[-1]}: {text}", used
        return f"[2026-11-28 23:40:00,123] torch.distributed.elastic: [{entry['level'].upper()}] " \
               f"{text}", used
    if emitter == "horovod":
        return f"[1,{REPORTER}]<stderr>:[2026-11-28 23:40:00.123456: E common.cc:1] {text}", used
    if emitter == "slurm-srun":
        if str(entry["template"]).startswith("%s: %s %s: "):
            # _task_finish: (hosts, "task"|"tasks", the task ids), then the outcome
            rest = str(entry["template"])[len("%s: %s %s: "):]
            rest = fill(rest.replace("%s%s", "Killed"), family.role)[0]
            return f"srun: error: node-1: task {REPORTER}: {rest}", [REPORTER]
        return f"srun: error: {text}", used
    return text, used  # Open MPI / PRRTE help text: printed as is by the launcher


def _named(findings: list[Any]) -> tuple[set[int], set[int]]:
    culprits: set[int] = set()
    suspects: set[int] = set()
    for f in findings:
        culprits.update(int(r) for r in f.ranks)
        for key in ("suspects", "candidates", "ahead_ranks"):
            v = f.evidence.get(key)
            if isinstance(v, list):
                suspects.update(int(r) for r in v if isinstance(r, int))
    return culprits, suspects


def _read(text: str, workdir: Path) -> tuple[list[Any], list[Any]]:
    """The stall evidence (events that are not context) and the findings of one log text."""
    log = workdir / "job.log"
    log.write_text(text)
    parsed = lp.parse_logs([str(log)])
    evidence = [e for e in parsed.events if e.kind not in CONTEXT]
    return evidence, (analyze_logs(parsed).findings if evidence else [])


def _signature(evidence: list[Any], findings: list[Any]) -> tuple[Any, ...]:
    return (tuple(sorted((e.kind, e.rank, repr(e.detail)) for e in evidence)),
            tuple((f.kind, tuple(f.ranks), repr(sorted(_named([f])[1]))) for f in findings))


def _role_check(family: Family, findings: list[Any], used: list[int],
                reporter: int | None = REPORTER) -> str | None:
    """Why the findings are not the right reading for the family's role (None: they are)."""
    culprits, suspects = _named(findings)
    if family.role == "names":
        want = NAMED if NAMED in used else None
        if want is not None and want not in culprits | suspects:
            return "read, but not the rank it names"
        if reporter is not None and reporter in culprits and want != reporter:
            return "blames the reporter"
    elif family.role == "own":
        want = used[0] if used else REPORTER
        if want not in culprits | suspects:
            return "read, but not the failing rank"
    elif family.role == "waits" and reporter is not None and reporter in culprits:
        return "blames the reporter"
    elif family.role == "unnamed" and culprits:
        return "names a culprit the line does not give"
    return None


def _judge_report(entry: dict[str, Any], family: Family, rep: Any, workdir: Path
                  ) -> Judgement:
    """A fragment of a multi-line report, judged inside the report (:mod:`.inventory_reports`)."""
    line = rep.text
    evidence, findings = _read(rep.text, workdir)
    if not evidence:
        return Judgement(False, family, f"not read inside the report ({rep.where})", line)
    if not findings:
        return Judgement(False, family, f"read inside the report ({rep.where}), but no finding",
                         line)
    without = _read(rep.without, workdir)
    if _signature(evidence, findings) == _signature(*without):
        return Judgement(False, family, f"inside the report ({rep.where}): the report reads "
                         "the same without it", line)
    why = _role_check(family, findings, [NAMED] if family.role == "names" else [], None)
    if why is not None:
        return Judgement(False, family, f"{why} (inside the report: {rep.where})", line)
    return Judgement(True, family, "handled", line)


def judge(entry: dict[str, Any], workdir: Path) -> Judgement:
    family = family_of(str(entry["emitter"]), str(entry["level"]), str(entry["template"]))
    if family.id in REPORT_FAMILIES and family.relevance == "stall":
        rep = report_for(entry)
        if rep is not None:
            return _judge_report(entry, family, rep, workdir)
    line, used = concrete(entry, family)
    evidence, findings = _read(line + "\n", workdir)
    if not evidence:
        reason = {"info": "info-only", "config": "not stall evidence (usage/configuration)",
                  "unreachable": "unreachable at the tags read"}
        if family.id in REPORT_FAMILIES:
            return Judgement(False, family, "not read alone (a line of a multi-line report)",
                             line)
        return Judgement(False, family, reason.get(family.relevance, "not yet handled"), line)
    if not findings:
        return Judgement(False, family, "read, but no finding", line)
    why = _role_check(family, findings, used)
    if why is not None:
        return Judgement(False, family, why, line)
    return Judgement(True, family, "handled", line)


def judge_all(entries: list[dict[str, Any]]) -> list[Judgement]:
    with tempfile.TemporaryDirectory(prefix="stormotel-inventory-") as tmp:
        return [judge(e, Path(tmp)) for e in entries]


def _versions(tags: list[str], all_tags: list[str]) -> str:
    if len(tags) == len(all_tags):
        return f"all read ({all_tags[0]} – {all_tags[-1]})" if len(tags) > 1 else tags[0]
    if len(tags) == 1:
        return tags[0]
    return f"{tags[0]} – {tags[-1]} ({len(tags)} of {len(all_tags)})"


def _sort_key(tag: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", tag)]


def _cell(text: str, width: int = 140) -> str:
    t = re.sub(r"\s+", " ", text).strip().replace("|", "\\|").replace("`", "'")
    return t if len(t) <= width else t[:width - 1] + "…"


def shares(entries: list[dict[str, Any]], judged: list[Judgement]
           ) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = defaultdict(Counter)
    for e, j in zip(entries, judged, strict=True):
        c = out[str(e["emitter"])]
        c["messages"] += 1
        c[j.family.relevance] += 1
        if j.family.relevance == "stall" and j.handled:
            c["handled"] += 1
    return out


def summary_line(entries: list[dict[str, Any]], judged: list[Judgement]) -> str:
    parts = []
    for em, c in sorted(shares(entries, judged).items()):
        parts.append(f"{em} {c['handled']}/{c['stall']}")
    return "handled (stall-relevant): " + ", ".join(parts)


#: the verdict of a message a written criterion takes out of the share (by its relevance)
_EXCLUDED = {"info": "not counted: printed on the normal path too (criterion 1)",
             "unreachable": "not counted: unreachable at the tags read (criterion 2)"}


def render(entries: list[dict[str, Any]], judged: list[Judgement]) -> str:
    """The markdown between the inventory markers: shares, families, and each message."""
    tags_of: dict[str, set[str]] = defaultdict(set)
    for e in entries:
        tags_of[str(e["emitter"])].update(e["tags"])
    all_tags = {em: sorted(t, key=_sort_key) for em, t in tags_of.items()}
    lines = [
        "Generated by `scripts/stall_inventory.py --render` from `docs/data/stall_inventory.json`"
        " (the format strings `--extract` read from each emitter's source at the tags listed); "
        "do not edit by hand. Each message is filled with plausible values (reporter rank 3, "
        "named rank 5, world 8), given its emitter's prefix and run through the log parser and "
        "analysis: **handled** = read as stall evidence and the findings name the right rank "
        "(the rank it names, the failing rank, or — for a line that only shows its reporter "
        "waiting — a finding that does not blame the reporter; for a line that names no rank, "
        "a finding that names no culprit). Two written criteria take a message out of the "
        "share, for every emitter alike (`analyzers/stalls/inventory_families.py`, each family "
        "citing the source lines that prove it): **printed on the normal path** too (counted "
        "as info-only) and **unreachable at the tags read** (no code path of those releases "
        "sets the state that selects it).",
        "",
        "| emitter | tags read | rank-bearing messages | stall/failure evidence | handled | "
        "share | info-only | usage/config | unreachable |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    sh = shares(entries, judged)
    for em, c in sorted(sh.items()):
        share = f"{100 * c['handled'] / c['stall']:.0f} %" if c["stall"] else "–"
        tags = all_tags[em]
        lines.append(f"| {em} | {tags[0]} – {tags[-1]} ({len(tags)}) | {c['messages']} | "
                     f"{c['stall']} | {c['handled']} | {share} | {c['info']} | {c['config']} | "
                     f"{c['unreachable']} |")
    lines += ["", "What each family proves (read from the source; one row per family):", "",
              "| family | messages | handled | what it proves about which ranks |",
              "|---|---|---|---|"]
    fam_n: Counter[str] = Counter()
    fam_h: Counter[str] = Counter()
    fams: dict[str, Family] = {}
    for j in judged:
        fams[j.family.id] = j.family
        fam_n[j.family.id] += 1
        fam_h[j.family.id] += j.handled
    for fid in sorted(fams):
        f = fams[fid]
        lines.append(f"| `{fid}` ({f.relevance}) | {fam_n[fid]} | {fam_h[fid]} | {f.proves} |")
    lines += ["", "Each stall/failure message, and each one a written criterion takes out of the "
              "share (other info-only and usage/configuration messages are in the data file):",
              "", "| emitter | message | versions | family | handled / why not |",
              "|---|---|---|---|---|"]
    for e, j in zip(entries, judged, strict=True):
        excluded = _EXCLUDED.get(j.family.relevance) if j.family.relevance == "unreachable" \
            or j.family.id.endswith(".normal_path") else None
        if j.family.relevance != "stall" and excluded is None:
            continue
        em = str(e["emitter"])
        tags = sorted(e["tags"], key=_sort_key)
        verdict = excluded or ("**handled**" if j.handled else j.reason)
        lines.append(f"| {em} | `{_cell(str(e['template']))}` | {_versions(tags, all_tags[em])} "
                     f"| `{j.family.id}` | {verdict} |")
    return "\n".join(lines)


def replace_block(doc: str, block: str) -> str:
    """``doc`` with the text between the markers replaced (the markers appended if absent)."""
    new = f"{START}\n{block}\n{END}"
    if START in doc and END in doc:
        head, rest = doc.split(START, 1)
        return head + new + rest.split(END, 1)[1]
    return doc.rstrip("\n") + "\n\n## The inventory: every message that names a rank\n\n" + \
        new + "\n"
