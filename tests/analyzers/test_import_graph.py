"""The analyzer's import graph, read with ``ast`` from the package as a wheel installs it
(``analyzers/`` is ``stormotel.analyzers``, pyproject's ``package-dir``), checked against the
layers the code is built in (issue 35).

**The flow and the layers.** Data flows command line → sources → Timeline → algorithms / stalls
→ Report → sinks. Imports cannot follow that order (an algorithm imports the Timeline it reads,
a sink the Report it writes), so the rule is the flow read as *who drives whom*: each layer
below may be imported by the layers above it, never the other way round. :data:`LAYERS` writes
the order down, top first:

* the **command line** drives a run (flags, options, the run, the cron job, the receiver);
* **sinks** write what a run found (and the summary text the report sink prints);
* the **analysis** judges (the facade, clock alignment, algorithms, stall evidence);
* **sources** read telemetry into a Timeline;
* the **Report** (and its findings) is what the analysis produces and the sinks read;
* the **Timeline** is what every stage shares;
* **shared** modules (HTTP client, typed options, the window, small text helpers) serve every
  layer and import none above them.

What is measured (issue 35's table; "top-level" means the module body, ``if TYPE_CHECKING``
blocks included, never a function's lazy import):

* imports running back up the layers: only :data:`ALLOWED_UP`, by name;
* no package cycle (sub-packages and top-level modules as units) made of top-level imports that
  run (``TYPE_CHECKING`` blocks left out: they never execute);
* import circles (strongly connected modules, counting every import that can run, a function's
  lazy one included): at most :data:`MAX_CIRCLES`;
* the tracker → analyzer one-way flow: the analyzer imports only the tracker's leaf modules.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # imported where a graph is built: every pytest worker collects this file,
    import networkx as nx  # one runs it (networkx is ~0.3 s of CPU to import)

REPO = Path(__file__).resolve().parents[2]
ANALYZERS = "stormotel.analyzers"

#: The layers, top first; a unit is a sub-package of ``analyzers/`` or one of its top-level
#: modules (``<init>`` is the package's ``__init__``, its public face).
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("command line", frozenset({"<init>", "cli", "run", "scheduled", "serve"})),
    ("sinks", frozenset({"sinks", "summary", "headline"})),
    ("analysis", frozenset({"analyze", "align", "attribution", "algorithms", "stalls"})),
    ("sources", frozenset({"sources"})),
    ("report", frozenset({"report", "findings", "families", "locations"})),
    ("timeline", frozenset({"timeline", "alignments"})),
    ("shared", frozenset({"http", "http_flags", "options", "window", "rankspec", "gcpause", "cpus",
                          "textlines", "jsontext", "messages", "protodesc"})),
)

#: The imports back up the layers that stay, each with why (issue 35: at most two).
ALLOWED_UP: dict[tuple[str, str], str] = {
    # The typed options hold the analysis thresholds (``Settings``, a leaf module of
    # algorithms/ that imports nothing): the options are shared, the thresholds algorithms'.
    ("options", "algorithms"): "options.AnalysisOptions.settings is algorithms.settings.Settings",
}
MAX_UP = 2
MAX_CIRCLES = 2

#: The tracker modules the analyzer may import: leaves that import nothing of the tracker's
#: machinery (names, exit codes, errors, units, atomic writes, text safety, the archive format).
TRACKER_LEAVES = frozenset({"stormotel.schema", "stormotel.exitcodes", "stormotel.errors",
                            "stormotel.units", "stormotel.atomic", "stormotel.textsafe",
                            "stormotel.archive_format",
                            # the PEP 562 lazy __getattr__ both public faces share
                            "stormotel.lazy_exports",
                            # a command's streams handed down its run (argparse printing there)
                            "stormotel.streams"})
#: Not the tracker: the dashboards package the incident-dashboard sink renders with.
NOT_TRACKER = ("stormotel.analyzers", "stormotel.dashboards")


# --- the graph --------------------------------------------------------------------------------
def installed_modules(repo: Path = REPO) -> dict[str, Path]:
    """Every module of the installed package, by its import name."""
    project = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    out: dict[str, Path] = {}
    for package, folder in project["tool"]["setuptools"]["package-dir"].items():
        root = repo / folder
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            out.setdefault(name, path)
    return out


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.Module, where: str) -> Iterable[ast.stmt]:
    """Import statements: ``top`` (module body, ``if``/``try`` blocks included); ``runtime``
    (``top`` less ``if TYPE_CHECKING`` blocks); ``anywhere`` (every import that can run,
    functions' lazy ones included; ``if TYPE_CHECKING`` blocks left out)."""
    if where == "anywhere":
        checking = {id(x) for n in ast.walk(tree) if isinstance(n, ast.If)
                    and _type_checking(n.test) for x in ast.walk(n)}
        yield from (n for n in ast.walk(tree)
                    if isinstance(n, ast.Import | ast.ImportFrom) and id(n) not in checking)
        return

    def walk(body: list[ast.stmt]) -> Iterable[ast.stmt]:
        for n in body:
            if isinstance(n, ast.Import | ast.ImportFrom):
                yield n
            elif isinstance(n, ast.If):
                if where == "top" or not _type_checking(n.test):
                    yield from walk(n.body)
                    yield from walk(n.orelse)
            elif isinstance(n, ast.Try):
                for block in (n.body, n.orelse, n.finalbody, *(h.body for h in n.handlers)):
                    yield from walk(block)

    yield from walk(tree.body)


@functools.cache
def _parsed(path: Path) -> ast.Module:
    """One parse per file for the whole module (each check walks every file's tree; parsing
    the package five times was most of this file's time)."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def imported(path: Path, modules: dict[str, Path], where: str) -> set[str]:
    """The project modules ``path`` imports (``from a import b`` names ``a.b`` when that is a
    module, else ``a``)."""
    out: set[str] = set()
    for n in _statements(_parsed(path), where):
        if isinstance(n, ast.Import):
            names = [a.name for a in n.names]
        elif n.level == 0 and n.module:
            names = [f"{n.module}.{a.name}" if f"{n.module}.{a.name}" in modules else n.module
                     for a in n.names]
        else:
            names = []
        out |= {m for m in names if m in modules}
    return out


def graph(where: str, modules: dict[str, Path] | None = None) -> nx.DiGraph:
    """The analyzer's module graph (edges into the rest of the package kept)."""
    import networkx as nx

    modules = modules or installed_modules()
    g = nx.DiGraph()
    for name, path in modules.items():
        if inside(name):
            g.add_node(name)
            g.add_edges_from((name, m) for m in imported(path, modules, where) if m != name)
    return g


def inside(module: str) -> bool:
    return module == ANALYZERS or module.startswith(ANALYZERS + ".")


def unit(module: str) -> str:
    rest = module.removeprefix(ANALYZERS).lstrip(".")
    return rest.split(".")[0] or "<init>"


def layer_of(u: str) -> int:
    for i, (_, units) in enumerate(LAYERS):
        if u in units:
            return i
    raise KeyError(u)


def analyzer_edges(g: nx.DiGraph) -> set[tuple[str, str]]:
    """Unit → unit edges inside the analyzer."""
    return {(unit(a), unit(b)) for a, b in g.edges if inside(b) and unit(a) != unit(b)}


def up_imports(g: nx.DiGraph) -> set[tuple[str, str]]:
    """Unit edges from a layer to one above it."""
    return {(a, b) for a, b in analyzer_edges(g) if layer_of(b) < layer_of(a)}


def package_cycles(g: nx.DiGraph) -> list[set[str]]:
    import networkx as nx

    units = nx.DiGraph(list(analyzer_edges(g)))
    return [c for c in nx.strongly_connected_components(units) if len(c) > 1]


def circles(g: nx.DiGraph) -> list[set[str]]:
    import networkx as nx

    inner = g.subgraph(n for n in g if inside(n))
    return [c for c in nx.strongly_connected_components(inner) if len(c) > 1]


def tracker_imports(g: nx.DiGraph) -> set[tuple[str, str]]:
    """(analyzer module, tracker module) for every tracker module that is no leaf."""
    return {(a, b) for a, b in g.edges
            if not b.startswith(NOT_TRACKER) and b not in TRACKER_LEAVES}


# --- the checks -------------------------------------------------------------------------------
def test_every_unit_has_a_layer() -> None:
    """A new sub-package or top-level module is placed in a layer before it is checked."""
    units = {unit(m) for m in graph("top") if inside(m)}
    placed = set().union(*(u for _, u in LAYERS))
    assert sorted(units - placed) == []


def test_imports_back_up_the_layers_are_the_named_few() -> None:
    found = up_imports(graph("top"))
    assert len(ALLOWED_UP) <= MAX_UP
    assert sorted(found - set(ALLOWED_UP)) == []
    assert sorted(set(ALLOWED_UP) - found) == []  # an allowance nothing uses goes


def test_no_package_cycle_of_top_level_imports() -> None:
    assert [sorted(c) for c in package_cycles(graph("runtime"))] == []


def test_import_circles_are_at_most_two() -> None:
    found = [sorted(c) for c in circles(graph("anywhere"))]
    assert len(found) <= MAX_CIRCLES, found


def test_the_analyzer_imports_only_the_trackers_leaf_modules() -> None:
    """The one-way flow: tracker → telemetry → analyzer; the analyzer never loads the tracker's
    machinery (lazy imports counted too)."""
    assert sorted(tracker_imports(graph("anywhere"))) == []


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """Each check finds what it looks for, on a small package laid out as the real one is."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools.package-dir]\nstormotel = "stormotel"\n'
        '"stormotel.analyzers" = "analyzers"\n')
    files = {
        "stormotel/__init__.py": "",
        "stormotel/tracker.py": "",
        "analyzers/__init__.py": "",
        "analyzers/timeline.py": "from stormotel.analyzers import run\n",
        "analyzers/run.py": "from stormotel.analyzers import timeline\n",
        "analyzers/sinks/__init__.py": "",
        "analyzers/sinks/a.py": ("def f():\n    from stormotel.analyzers.sinks import b\n"
                                 "    from stormotel import tracker\n"),
        "analyzers/sinks/b.py": "from stormotel.analyzers.sinks import a\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    modules = installed_modules(tmp_path)
    assert up_imports(graph("top", modules)) == {("timeline", "run")}
    assert package_cycles(graph("runtime", modules)) == [{"timeline", "run"}]
    assert {frozenset(c) for c in circles(graph("anywhere", modules))} == {
        frozenset({f"{ANALYZERS}.timeline", f"{ANALYZERS}.run"}),
        frozenset({f"{ANALYZERS}.sinks.a", f"{ANALYZERS}.sinks.b"})}
    assert tracker_imports(graph("anywhere", modules)) == {
        (f"{ANALYZERS}.sinks.a", "stormotel.tracker")}
    with pytest.raises(KeyError):
        layer_of("nowhere")
