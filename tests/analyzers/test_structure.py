"""The analyzer's shape, checked on its source with ``ast`` (issue 28): no function over 80
lines, no private name imported from another module, and no callable parameter anywhere in the
run path (sources, the run, the scheduled job, the sinks get objects, not functions)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ANALYZERS = Path(__file__).resolve().parents[2] / "analyzers"
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
    return sorted(ANALYZERS.rglob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def long_functions(path: Path) -> list[str]:
    return [f"{path.relative_to(ANALYZERS)}:{f.lineno} {f.name} "
            f"({(f.end_lineno or f.lineno) - f.lineno + 1} lines)"
            for f in _functions(_tree(path))
            if (f.end_lineno or f.lineno) - f.lineno + 1 > MAX_LINES]


def private_imports(path: Path) -> list[str]:
    """``from x import _name`` where x is another module of the project."""
    out = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("stormotel"):
            out += [f"{path.relative_to(ANALYZERS)}:{node.lineno} {node.module}.{a.name}"
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
                out.append(f"{path.relative_to(ANALYZERS)}:{f.lineno} {f.name}({a.arg}: {text})")
    return out


def test_no_function_is_over_80_lines() -> None:
    found = [hit for p in _modules() for hit in long_functions(p)]
    assert found == []


def test_no_private_name_is_imported_across_modules() -> None:
    found = [hit for p in _modules() for hit in private_imports(p)]
    assert found == []


@pytest.mark.parametrize("module", RUN_PATH)
def test_no_callable_is_handed_down_the_run_path(module: str) -> None:
    assert callable_parameters(ANALYZERS / module) == []


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """Each check finds what it looks for (a check that cannot fail checks nothing)."""
    global ANALYZERS
    bad = tmp_path / "bad.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    bad.write_text("from collections.abc import Callable\n"
                   "from stormotel.analyzers.x import _hidden\n"
                   f"def run(fn: Callable[[int], int]) -> None:\n{body}\n")
    saved, ANALYZERS = ANALYZERS, tmp_path
    try:
        assert long_functions(bad) and private_imports(bad) and callable_parameters(bad)
    finally:
        ANALYZERS = saved
