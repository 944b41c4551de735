#!/usr/bin/env python3
"""The inventory of rank-bearing messages, read from the emitters' own source at released tags.

Why: the stuck-job grammar (``analyzers/stalls/grammar.py``) was written message by message
from pasted logs and the source the authors happened to read; this script lists *every* message
an emitter can print that names or implies a rank, so what the parser does not read yet is
counted instead of discovered by a user. Two steps:

``--extract`` (needs the sources) reads the emitters at the tags below and writes
``docs/data/stall_inventory.json`` (checked in, so the suite needs no network):

- git mirrors made by the ``fetch`` tool (``/work/.mirror/<owner>+<name>/repo``, or
  ``--mirrors DIR``): NCCL, Horovod, Open MPI, PRRTE, Slurm, DeepSpeed, Accelerate, Lightning;
- PyTorch, whose repository is too large to mirror here: the released wheels' Python sources
  (``torch/distributed``) and the printable strings of ``libtorch_cpu.so`` / ``libtorch_cuda.so``
  (the C++ messages, as the fragments ``c10::str`` joins), unpacked per version under
  ``--torch-src DIR/torch-<version>/`` (``--prepare-torch`` downloads them with pip).

``--render`` (offline) builds one concrete line per template, runs it through the real log
parser and analysis, and writes the table between the inventory markers of docs/stalls.md
(:mod:`stormotel.analyzers.stalls.inventory`). ``--update-expected`` marks every entry handled
now as ``expected: handled`` in the data file, so the test fails when a later change loses it.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DATA = REPO / "docs" / "data" / "stall_inventory.json"
DOC = REPO / "docs" / "stalls.md"

#: words that make a message rank-bearing: it names a rank, a peer, a world, a task or process;
#: srun's task-exit lines (``_task_finish``) pass the word "task"/"tasks" itself as an argument:
#: "%s: %s %s: …" is (hosts, task_str, task ids)
RANK_WORDS = re.compile(
    r"\brank|ranks\b|\bpeer|world[_ ]?size|\bworld\b|nranks|nRanks|\bvpid\b|\[%d\]|"
    r"\btask[s]? ?(?:%|\{)|\bprocess(?:es)? (?:rank|name)|local_rank|global_rank|"
    r"\btrainer|\bworker|\bmissing ranks|\bstalled|^%s: %s %s: ", re.IGNORECASE)

#: 1.8-1.12 (helper inv2): the releases of the 2020-2022 threads users paste; torchelastic
#: entered torch/distributed at 1.9 (1.8 has none of its files: nothing read, nothing kept)
TORCH_VERSIONS = ("1.8.0", "1.9.0", "1.10.0", "1.11.0", "1.12.0", "1.13.0", "2.0.0", "2.2.0",
                  "2.4.0", "2.6.0", "2.8.0", "2.13.0")


@dataclass(frozen=True)
class GitSource:
    """One emitter in one git mirror: which tags, which files, which calls."""

    emitter: str
    mirror: str
    tags: tuple[str, ...]
    paths: tuple[str, ...]  #: git pathspecs
    style: str  #: "c" (printf/stream calls), "py" (AST), "help" (Open MPI help topics)
    calls: str = ""  #: regex of call starters for style "c"; function names for style "py"


PY_CALLS = ("warning|warn|error|exception|critical|info|rank_zero_warn|rank_zero_info|"
            "rank_zero_debug|log_dist|print")

GIT_SOURCES = (
    GitSource("nccl", "NVIDIA+nccl", ("v2.7.8-1", "v2.8.4-1", "v2.10.3-1", "v2.11.4-1",
                                      "v2.12.12-1", "v2.14.3-1", "v2.16.5-1",
                                      "v2.18.3-1", "v2.20.5-1", "v2.22.3-1", "v2.24.3-1",
                                      "v2.26.2-1", "v2.28.7-1", "v2.30.7-1"),
              ("src/*.cc", "src/*.h", "src/**/*.cc", "src/**/*.h", "src/**/*.cu"), "c",
              r"\bWARN\s*\(|\bINFO\s*\(\s*NCCL_(?:INIT|COLL|NET|ALL|BOOTSTRAP|P2P|PROXY)"),
    GitSource("nccl-ras", "NVIDIA+nccl", ("v2.24.3-1", "v2.26.2-1", "v2.28.7-1", "v2.30.7-1"),
              ("src/ras/client_support.cc",), "c",
              r"\brasOutAppend\s*\(|\bsnprintf\s*\(\s*\w+\s*,\s*[^,]+,|"
              r"\brasOutJson\w*\s*\(|\bjson\w*\s*\("),
    GitSource("nccl-inspector", "NVIDIA+nccl", ("v2.28.7-1", "v2.30.7-1"),
              ("plugins/profiler/inspector/*.cc", "plugins/profiler/inspector/*.h",
               "ext-profiler/inspector/*.cc", "ext-profiler/inspector/*.h"), "c",
              r"\bINFO_INSPECTOR\s*\(|\bWARN\w*\s*\(|\bjsonKey\w*\s*\(|\bfprintf\s*\("),
    GitSource("horovod", "horovod+horovod", ("v0.16.4", "v0.20.3", "v0.22.1", "v0.25.0",
                                             "v0.28.1"),
              ("horovod/common/*.cc", "horovod/common/*.h", "horovod/common/ops/*.cc",
               "horovod/common/*.py", "horovod/torch/*.py", "horovod/runner/**/*.py",
               "horovod/run/**/*.py"), "c",
              r"\bLOG\s*\(\s*(?:WARNING|ERROR|FATAL|INFO)|\b\w*(?:message|msg|ss)\s*<<|"
              r"\bStatus::\w+Error\s*\(|"
              r"\bthrow\s+std::\w+\s*\(|\bSHUT_DOWN_ERROR\b|\bstd::runtime_error\s*\("),
    GitSource("openmpi", "open-mpi+ompi", ("v4.1.6", "v5.0.10"),
              ("orte/tools/orterun/*.txt", "orte/mca/errmgr/**/*.txt",
               "orte/mca/plm/*/*.txt", "ompi/mpi/help-mpi-api.txt",
               "ompi/runtime/help-mpi-runtime.txt"), "help"),
    GitSource("prrte", "openpmix+prrte", ("v3.0.13", "v4.0.0"),
              ("src/tools/prun/*.txt", "src/tools/prte/*.txt", "src/mca/errmgr/*.txt",
               "src/mca/state/*.txt", "src/docs/show-help-files/help-prun.txt",
               "src/docs/show-help-files/help-prte.txt",
               "src/docs/show-help-files/help-errmgr-base.txt",
               "src/mca/schizo/prte/help-prun.txt", "src/mca/schizo/prte/help-prte.txt"),
              "help"),
    GitSource("slurm-srun", "SchedMD+slurm", ("slurm-23-02-7-1", "slurm-24-05-4-1",
                                              "slurm-26-05-3-1"),
              ("src/srun/*.c", "src/srun/**/*.c", "src/api/step_launch.c"), "c",
              r"\b(?:error|info|fatal|verbose)\s*\("),
    GitSource("deepspeed", "microsoft+DeepSpeed", ("v0.9.5", "v0.12.6", "v0.14.4", "v0.16.4"),
              ("deepspeed/launcher/*.py", "deepspeed/comm/*.py", "deepspeed/utils/dist.py",
               "deepspeed/runtime/engine.py", "deepspeed/elasticity/*.py"), "py", PY_CALLS),
    GitSource("accelerate", "huggingface+accelerate", ("v0.20.3", "v0.30.1", "v1.0.0",
                                                       "v1.14.0"),
              ("src/accelerate/state.py", "src/accelerate/utils/operations.py",
               "src/accelerate/utils/launch.py", "src/accelerate/commands/launch.py",
               "src/accelerate/accelerator.py"), "py", PY_CALLS),
    GitSource("lightning", "Lightning-AI+pytorch-lightning", ("2.0.0", "2.2.0", "2.4.0",
                                                              "2.6.5"),
              ("src/lightning/fabric/strategies/*.py", "src/lightning/fabric/utilities/*.py",
               "src/lightning/pytorch/strategies/*.py",
               "src/lightning/pytorch/trainer/connectors/*.py",
               "src/lightning/fabric/plugins/environments/*.py"), "py", PY_CALLS),
)

#: PyTorch's Python emitters inside torch/distributed of a wheel, by emitter
TORCH_PY = (("pytorch.c10d", ("distributed_c10d.py", "rendezvous.py", "utils.py")),
            ("torchelastic", ("elastic/agent/server/api.py",
                              "elastic/agent/server/local_elastic_agent.py",
                              "elastic/multiprocessing/api.py",
                              "elastic/multiprocessing/errors/__init__.py",
                              "elastic/multiprocessing/errors/error_handler.py",
                              "elastic/multiprocessing/errors/handlers.py",
                              "elastic/rendezvous/dynamic_rendezvous.py",
                              "elastic/rendezvous/c10d_rendezvous_backend.py",
                              "elastic/rendezvous/static_tcp_rendezvous.py",
                              "launcher/api.py", "run.py")))
#: printable strings of the C++ libraries that c10d's messages are built from
TORCH_CPP_WORDS = re.compile(
    r"ProcessGroup|Watchdog|watchdog|heartbeat|Heartbeat|monitoredBarrier|TCPStore|"
    r"ncclUniqueId|NCCL|[Ss]ocket|[Ss]tore|Flight|[Dd]ump|timed out|Timed out|barrier|"
    r"collective|Gloo|gloo|\bPG\b|communicator|send/recv|ProcessGroup")
#: a C++ fragment without a rank word still belongs when it reads as a failure (the rank is
#: the argument ``c10::str`` puts beside it: ``"Rank ", rank_, " timed out in monitoredBarrier"``)
CPP_STALL_WORDS = re.compile(
    r"timed out|timing out|[Tt]imeout|failed|missing|abort|stuck|hang|dump|signal|caught|"
    r"exception|lagging|desync|mismatch|not joined|never joined|terminat")


# --- C-like sources: printf formats and stream / c10::str chains ---------------------------
_LIT = re.compile(r'"((?:\\.|[^"\\])*)"')
_CHAR = re.compile(r"'(?:\\.|[^'\\])'")
_PRI = re.compile(r"\bPRI([diouxX])(?:8|16|32|64|PTR|MAX)\b")


def _unescape(s: str) -> str:
    return s.replace("\\n", "\n").replace('\\"', '"').replace("\\t", " ").replace("\\\\", "\\")


def _statement(text: str, start: int) -> str:
    """The call or statement from ``start`` to its closing parenthesis or ``;``."""
    depth, i, n = 0, start, len(text)
    while i < n and i - start < 4000:
        c = text[i]
        if c == '"':
            m = _LIT.match(text, i)
            i = m.end() if m else i + 1
            continue
        if c == "'":
            m = _CHAR.match(text, i)
            i = m.end() if m else i + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0 and "<<" not in text[start:i]:
                return text[start:i + 1]
        elif c == ";" and depth <= 0:
            return text[start:i]
        i += 1
    return text[start:i]


def c_template(stmt: str) -> str | None:
    """The message a C/C++ call prints: a printf format, or literals joined with ``{expr}``."""
    stmt = re.sub(r"//[^\n]*", "", _PRI.sub(r'"%l\1"', stmt))
    lits = list(_LIT.finditer(stmt))
    if not lits:
        return None
    head = stmt[:lits[0].start()]
    if not (re.fullmatch(r"[\w:.\->\s]*\(\s*(?:[\w|\s]+,\s*)?(?:[^,()\"]+,\s*)?", head)
            or head.rstrip().endswith("<<")):
        return None  # the format is not a literal (a variable, a macro): nothing to read
    if "%" in lits[0].group(1):  # printf style: the first run of adjacent literals
        parts = [lits[0].group(1)]
        for prev, cur in itertools.pairwise(lits):
            if stmt[prev.end():cur.start()].strip():
                break
            parts.append(cur.group(1))
        return _unescape("".join(parts))
    out: list[str] = []
    pos = lits[0].start()
    for m in lits:
        between = stmt[pos:m.start()]
        expr = re.sub(r"<<|,|\s+", " ", between).strip(" ()")
        if expr and out:
            out.append("{" + re.sub(r"\s+", "", expr)[:40] + "}")
        out.append(m.group(1))
        pos = m.end()
    tail = re.sub(r"<<|,|\s+|\)|;", " ", stmt[pos:]).strip()
    if tail:
        out.append("{" + re.sub(r"\s+", "", tail)[:40] + "}")
    return _unescape("".join(out))


def c_messages(text: str, calls: str) -> Iterator[tuple[str, str]]:
    for m in re.finditer(calls, text):
        tmpl = c_template(_statement(text, m.start()))
        if tmpl:
            yield m.group(0).split("(")[0].strip(), tmpl


# --- Python sources -----------------------------------------------------------------------
def _py_text(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                out.append("{" + ast.unparse(v.value)[:40] + "}")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        left = _py_text(node.left)
        right = _py_text(node.right)
        if isinstance(node.op, ast.Mod):
            return left
        if left is None and right is None:
            return None
        return (left if left is not None else "{" + ast.unparse(node.left)[:40] + "}") + \
            (right if right is not None else "{" + ast.unparse(node.right)[:40] + "}")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "format":
        return _py_text(node.func.value)
    return None


def py_messages(text: str, calls: str) -> Iterator[tuple[str, str]]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return
    names = set(calls.split("|"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            t = _py_text(node.exc.args[0])
            if t:
                yield "raise " + ast.unparse(node.exc.func)[:40], t
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) \
                else ""
            if name in names:
                t = _py_text(node.args[0])
                if t:
                    yield name, t


# --- Open MPI / PRRTE help files: [topic] then the text ------------------------------------
def help_messages(text: str) -> Iterator[tuple[str, str]]:
    for m in re.finditer(r"^\[([^\]\n]+)\]\n(.*?)(?=^\[[^\]\n]+\]\n|\Z)", text, re.M | re.S):
        body = "\n".join(x for x in m.group(2).strip().splitlines() if not x.startswith("#"))
        if body:
            yield f"help [{m.group(1)}]", body.strip()


def level_of(call: str, template: str) -> str:
    c = call.lower()
    if c.startswith("info") or c in ("info", "rank_zero_info", "verbose", "print", "log_dist",
                                     "rank_zero_debug", "fprintf", "jsonkey") \
            or c.startswith(("rasout", "snprintf", "json")):
        return "info"
    if c in ("warning", "warn", "rank_zero_warn") or c.startswith("warn"):
        return "warning"
    return "error"


def _keep(template: str) -> bool:
    return bool(RANK_WORDS.search(template)) and len(template.strip()) >= 8


def _git(mirror: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(mirror), *args], check=False, capture_output=True,
                          text=True, errors="replace").stdout


def _blobs(repo: Path, tag: str, paths: list[str]) -> Iterator[tuple[str, str]]:
    """The files at one tag, read by one ``git cat-file --batch`` (one process, not one per
    file)."""
    proc = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch"], check=False,
                          input="".join(f"{tag}:{p}\n" for p in paths).encode(),
                          capture_output=True)
    out, pos = proc.stdout, 0
    for path in paths:
        nl = out.index(b"\n", pos)
        head = out[pos:nl].split()
        pos = nl + 1
        if len(head) < 3 or head[1] != b"blob":
            continue
        size = int(head[2])
        yield path, out[pos:pos + size].decode(errors="replace")
        pos += size + 1


def extract_git(src: GitSource, mirrors: Path) -> Iterator[dict[str, str]]:
    repo = mirrors / src.mirror / "repo"
    if not repo.is_dir():
        print(f"skip {src.emitter}: no mirror at {repo}", file=sys.stderr)
        return
    have = set(_git(repo, "tag").split())
    for tag in src.tags:
        if tag not in have:
            print(f"skip {src.emitter} {tag}: tag not in the mirror", file=sys.stderr)
            continue
        files = _git(repo, "ls-tree", "-r", "--name-only", tag).split("\n")
        wanted = [f for f in files if any(fnmatch.fnmatch(f, p) for p in src.paths)]
        for path, text in _blobs(repo, tag, wanted):
            if src.style == "py" or path.endswith(".py"):
                msgs = py_messages(text, src.calls if src.style == "py" else PY_CALLS)
            elif src.style == "help":
                msgs = help_messages(text)
            else:
                msgs = c_messages(text, src.calls)
            for call, tmpl in msgs:
                if _keep(tmpl):
                    yield {"emitter": src.emitter, "file": path, "call": call,
                           "level": level_of(call, tmpl), "template": tmpl, "tag": tag}


def extract_torch(root: Path) -> Iterator[dict[str, str]]:
    for version in TORCH_VERSIONS:
        base = root / f"torch-{version}"
        if not (base / "done").exists():
            print(f"skip torch {version}: not unpacked under {base}", file=sys.stderr)
            continue
        tag = f"v{version}"
        for emitter, files in TORCH_PY:
            for rel in files:
                path = base / "torch" / "distributed" / rel
                if path.is_file():
                    for call, tmpl in py_messages(path.read_text(errors="replace"), PY_CALLS):
                        if _keep(tmpl):
                            yield {"emitter": emitter, "file": f"torch/distributed/{rel}",
                                   "call": call, "level": level_of(call, tmpl),
                                   "template": tmpl, "tag": tag}
        for strings in sorted(base.glob("*.strings")):
            lib = strings.name.removesuffix(".strings")
            for s in strings.read_text(errors="replace").splitlines():
                if _cpp_message(s) and not (lib == "libtorch_python.so" and _pybind_doc(s)):
                    yield {"emitter": "pytorch.c10d-cpp", "file": lib, "call": "c10::str",
                           "level": "error",
                           "template": s, "tag": tag}


#: a line of a pybind docstring (torch/csrc/distributed/c10d/init.cpp): indented, reST markup,
#: a parameter entry, a lower-case continuation, prose wrapped mid-sentence ("… and in"), or a
#: method's summary line ("Gets the timeout of the store.")
_PYBIND_DOC = re.compile(
    r"^\s{2,}|``|:(?:meth|class|func|attr):|>>>|^\s*\w+ \([\w.]+\):|^[a-z]+[ ,]|"
    r"\b(?:in|the|and|of|to|a|an|for|or|is|be|by|with)$|"
    r"^(?:Gets|Sets|Returns|Waits|Creates|Inserts|Deletes|Retrieves|Checks) ")


def _pybind_doc(s: str) -> bool:
    """Only for libtorch_python.so, read at 1.8/1.9 because c10d's C++ was linked into it then:
    it also holds the Python bindings' docstrings (the same library is not read from 1.10 on,
    so its docstrings were never read at the later tags); their lines are not messages."""
    return bool(_PYBIND_DOC.search(s))


def _cpp_message(s: str) -> bool:
    """A printable string of the library that reads as a rank-bearing c10d message."""
    if len(s) < 20 or not TORCH_CPP_WORDS.search(s) or not (
            RANK_WORDS.search(s) or CPP_STALL_WORDS.search(s)):
        return False
    if re.search(r"NCCL (?:WARN|INFO|TRACE)|NET/|warp|protobuf|alignment|terminator|"
                 r"%[-+ #0-9.]*(?:l|ll|z)?[dsuxp]", s):
        return False  # NCCL's own strings (linked statically into 1.13-2.0), CUPTI, protobuf
    if re.search(r"tensor|[_A-Za-z0-9]{30,}|\(\)|::|\b_Z|\.(?:cpp|hpp|h|py)\b|^[\w.]+$", s):
        return False  # mangled names, signatures, file names, fmt/printf of other code
    return " " in s.strip()


def merge(rows: Iterator[dict[str, str]], old: dict[tuple[str, str, str], dict[str, object]],
          keep_old: bool = False) -> list[dict[str, object]]:
    """One entry per (emitter, file, template), its tags the union of where it was read.

    ``keep_old`` (``--extend``) starts from the data file's entries, so tags added to the lists
    above are read without the sources of the tags already read being on this machine (the
    mirrors and wheels are deleted after each run): the same rules, only more tags."""
    out: dict[tuple[str, str, str], dict[str, object]] = {}
    if keep_old:
        for key, e in old.items():
            out[key] = dict(e, tags=list(e["tags"]))  # type: ignore[call-overload]
    for r in rows:
        key = (r["emitter"], r["file"], r["template"])
        e = out.setdefault(key, {"emitter": r["emitter"], "file": r["file"], "call": r["call"],
                                 "level": r["level"], "template": r["template"], "tags": []})
        tags = e["tags"]
        assert isinstance(tags, list)
        if r["tag"] not in tags:
            tags.append(r["tag"])
    for key, e in out.items():
        if key in old and old[key].get("expected"):
            e["expected"] = old[key]["expected"]
    return sorted(out.values(), key=lambda e: (str(e["emitter"]), str(e["file"]),
                                               str(e["template"])))


def load(path: Path = DATA) -> list[dict[str, object]]:
    data = json.loads(path.read_text())
    entries = data["entries"]
    assert isinstance(entries, list)
    return entries


def save(entries: list[dict[str, object]], path: Path = DATA) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"about": "rank-bearing messages read from the emitters' source at released tags; "
                    "written by scripts/stall_inventory.py --extract, judged by --render",
           "entries": entries}
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


def prepare_torch(root: Path, versions: list[str]) -> None:
    """Download the torch wheels with pip and keep torch/distributed and the libraries' strings."""
    for v in versions:
        subprocess.run(["bash", str(REPO / "scripts" / "stall_inventory_torch.sh"), str(root), v],
                       check=True, env={**os.environ, "PYTHON": sys.executable})


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--extract", action="store_true", help="read the sources, write the data")
    ap.add_argument("--extend", action="store_true",
                    help="with --extract: keep the data file's entries and add what the sources "
                         "on this machine give (new tags), instead of replacing the file")
    ap.add_argument("--render", action="store_true", help="judge and write docs/stalls.md")
    ap.add_argument("--update-expected", action="store_true",
                    help="mark every entry handled now as expected: handled")
    ap.add_argument("--prepare-torch", nargs="*", metavar="VERSION")
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--torch-src", type=Path, default=REPO / ".src")
    ap.add_argument("--data", type=Path, default=DATA, help="the inventory data file")
    ap.add_argument("--doc", type=Path, default=DOC, help="the markdown file to render into")
    args = ap.parse_args(argv)
    data, doc = args.data, args.doc
    if args.prepare_torch is not None:
        prepare_torch(args.torch_src, args.prepare_torch or list(TORCH_VERSIONS))
    if args.extract:
        old = {}
        if data.exists():
            old = {(str(e["emitter"]), str(e["file"]), str(e["template"])): e
                   for e in load(data)}

        def rows() -> Iterator[dict[str, str]]:
            yield from extract_torch(args.torch_src)
            for src in GIT_SOURCES:
                yield from extract_git(src, args.mirrors)

        entries = merge(rows(), old, keep_old=args.extend)
        save(entries, data)
        print(f"{len(entries)} entries -> {data}")
    if args.render or args.update_expected:
        from stormotel.analyzers.stalls import inventory as inv

        entries = load(data)
        judged = inv.judge_all(entries)
        if args.update_expected:
            n = 0
            for e, j in zip(entries, judged, strict=True):
                if j.handled and e.get("expected") != "handled":
                    e["expected"] = "handled"
                    n += 1
            save(entries, data)
            print(f"{n} entries newly marked expected: handled")
        if args.render:
            doc.write_text(inv.replace_block(doc.read_text(), inv.render(entries, judged)))
            print(inv.summary_line(entries, judged))
    if not (args.extract or args.render or args.update_expected or args.prepare_torch):
        ap.print_help()
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
