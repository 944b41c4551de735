"""The product's shape, checked on its source with ``ast`` (issue 28, extended by issue 35 from
``analyzers/`` to ``stormotel/`` and ``dashboards/``): no function over 80 lines and no private
name imported from another module anywhere in the product; no callable parameter anywhere in
the analyzer's run path (sources, the run, the scheduled job, the sinks get objects, not
functions); and the analyzer and the dashboards read only the tracker's leaf modules."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ANALYZERS = ROOT / "analyzers"
#: The product: the three folders the wheel installs as ``stormotel``.
PRODUCT = ("stormotel", "analyzers", "dashboards")
#: The tracker's modules the analyzer and the dashboards may import: names, exit codes,
#: errors, units, atomic writes, text safety and the archive's layout — leaves that import no
#: other tracker module but ``schema`` (never the tracker itself, its SDK wiring or writers).
#: (``lazy_exports``: the PEP 562 lazy ``__getattr__`` both public faces share; ``streams``:
#: the parser printing to the streams an in-process command's ``main`` is handed.)
TRACKER_LEAVES = frozenset({"schema", "exitcodes", "errors", "units", "atomic", "textsafe",
                            "archive_format", "lazy_exports", "streams"})
MAX_LINES = 80
#: The modules a run goes through, from the CLI to the sinks.
RUN_PATH = ("cli/command.py", "run.py", "sinks/dispatch.py", "sinks/base.py",
            "sinks/report_sink.py",
            "scheduled/job.py", "scheduled/run.py",
            "sources/protocol.py", "sources/files.py", "sources/tsdb.py",
            "sources/prometheus_tsdb.py", "sources/dcgm_tsdb.py", "stalls/cli_support.py",
            "sinks/html_sink.py", "sinks/grafana_sink.py", "sinks/incident_dashboard.py",
            "sinks/perfetto_sink.py", "sinks/remote_write_sink.py", "sinks/pushgateway_sink.py")


def _modules() -> list[Path]:
    return sorted(p for top in PRODUCT for p in (ROOT / top).rglob("*.py"))


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


@functools.cache
def _tree(path: Path) -> ast.Module:
    """Each file parsed once per test process: the whole-product checks below walk the same
    ~270 trees (read only), and parsing them was most of each check's ~2 s."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def long_functions(path: Path) -> list[str]:
    return [f"{_name(path)}:{f.lineno} {f.name} "
            f"({(f.end_lineno or f.lineno) - f.lineno + 1} lines)"
            for f in _functions(_tree(path))
            if (f.end_lineno or f.lineno) - f.lineno + 1 > MAX_LINES]


def private_imports(path: Path) -> list[str]:
    """``from x import _name`` where x is another module of the project."""
    out = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("stormotel"):
            out += [f"{_name(path)}:{node.lineno} {node.module}.{a.name}"
                    for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def callable_parameters(path: Path) -> list[str]:
    """Parameters annotated ``Callable[...]`` (or a ``*Fn`` alias of one)."""
    out = []
    for f in _functions(_tree(path)):
        args = [*f.args.posonlyargs, *f.args.args, *f.args.kwonlyargs]
        for a in args:
            text = ast.unparse(a.annotation) if a.annotation is not None else ""
            if "Callable" in text or text.endswith("Fn") or "Fn |" in text:
                out.append(f"{_name(path)}:{f.lineno} {f.name}({a.arg}: {text})")
    return out


def tracker_imports(path: Path) -> list[str]:
    """Imports of a tracker module that is not one of :data:`TRACKER_LEAVES` (top level or
    lazy, ``from stormotel import x`` and ``import stormotel.x`` alike)."""
    out = []
    for node in ast.walk(_tree(path)):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module == "stormotel":
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("stormotel."):
            names = [(node.module or "").split(".")[1]]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".")[1] for a in node.names
                     if a.name.startswith("stormotel.")]
        out += [f"{_name(path)}:{node.lineno} stormotel.{n}" for n in names
                if n not in TRACKER_LEAVES and n not in ("analyzers", "dashboards")]
    return out


def leaf_imports(path: Path) -> list[str]:
    """A tracker leaf that imports a tracker module other than ``schema``."""
    return [hit for hit in tracker_imports(path) if not hit.endswith(".schema")]


def test_no_function_is_over_80_lines() -> None:
    found = [hit for p in _modules() for hit in long_functions(p)]
    assert found == []


def test_no_private_name_is_imported_across_modules() -> None:
    found = [hit for p in _modules() for hit in private_imports(p)]
    assert found == []


def test_the_analyzer_and_dashboards_read_only_the_trackers_leaves() -> None:
    found = [hit for top in ("analyzers", "dashboards") for p in sorted((ROOT / top).rglob("*.py"))
             for hit in tracker_imports(p)]
    assert found == []


@pytest.mark.parametrize("leaf", sorted(TRACKER_LEAVES))
def test_the_trackers_leaves_are_leaves(leaf: str) -> None:
    """What the analyzer may import stays a leaf: it pulls in no other tracker module (and so
    neither the OTel SDK wiring nor the writer)."""
    assert leaf_imports(ROOT / "stormotel" / f"{leaf}.py") == []


@pytest.mark.parametrize("module", RUN_PATH)
def test_no_callable_is_handed_down_the_run_path(module: str) -> None:
    assert callable_parameters(ANALYZERS / module) == []


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """Each check finds what it looks for (a check that cannot fail checks nothing)."""
    bad = tmp_path / "bad.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    bad.write_text("from collections.abc import Callable\n"
                   "from stormotel.analyzers.x import _hidden\n"
                   "from stormotel.archive_cols import ColumnsFile\n"
                   "from stormotel import schema, telemetry\n"
                   "import stormotel.tracker\n"
                   f"def run(fn: Callable[[int], int]) -> None:\n{body}\n")
    assert long_functions(bad) and private_imports(bad) and callable_parameters(bad)
    assert [hit.split()[-1] for hit in tracker_imports(bad)] == [
        "stormotel.archive_cols", "stormotel.telemetry", "stormotel.tracker"]
