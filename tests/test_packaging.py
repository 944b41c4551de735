"""Packaging at the boundaries a user touches: a tracker-only install imports without the
analyzer's libraries, and a command whose extra is missing says which one to install."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from stormotel import exitcodes

REPO = Path(__file__).resolve().parents[1]
#: What the `analyzer` and `dashboards` extras bring; a tracker-only install has none of them.
EXTRA_ONLY = ("httpx", "grafanalib", "cramjam", "yaml", "orjson")


def _python_without(modules: tuple[str, ...], code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter where importing any of ``modules`` fails as it does
    when the package is not installed (``None`` in ``sys.modules`` raises ModuleNotFoundError)."""
    blocked = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules)
    return subprocess.run([sys.executable, "-c", blocked + code], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


def test_tracker_imports_without_the_extras() -> None:
    p = _python_without(EXTRA_ONLY, "import stormotel\nprint(stormotel.MemoryTracker.__name__)")
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "MemoryTracker"


@pytest.mark.parametrize(("blocked", "argv", "extra"), [
    ("grafanalib", ["dashboards", "--out", "{tmp}"], "dashboards"),
    ("yaml", ["dashboards", "--out", "{tmp}"], "dashboards"),
    ("httpx", ["analyze", "--prometheus", "http://127.0.0.1:9", "--job-id", "j"], "analyzer"),
])
def test_missing_extra_is_one_line_naming_it(tmp_path: Path, blocked: str, argv: list[str],
                                             extra: str) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    p = _python_without((blocked,),
                        f"from stormotel.cli import main\nraise SystemExit(main({args!r}))")
    assert p.returncode == exitcodes.USAGE, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr
    assert p.stderr.strip() == (f"stormotel {argv[0]}: error: needs the optional dependency"
                                f" {blocked!r}, which this install lacks:"
                                f" pip install 'stormotel[{extra}]'")


def test_unknown_missing_module_is_still_a_bug() -> None:
    p = _python_without(("stormotel.track_cli",),
                        "from stormotel.cli import main\nraise SystemExit(main(['track']))")
    assert p.returncode == exitcodes.INTERNAL, p.stderr[-2000:]
    assert "internal error: ModuleNotFoundError" in p.stderr and "Traceback" not in p.stderr


def test_runtime_dependencies_are_ranges_without_the_extras() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = project["dependencies"]
    assert not [d for d in core if "==" in d], core
    names = {d.split(">")[0].split("<")[0].split("[")[0].strip().lower() for d in core}
    assert not names & {"httpx", "grafanalib", "cramjam", "pyyaml", "orjson"}, names
    extras = project["optional-dependencies"]
    assert {"analyzer", "dashboards", "all"} <= set(extras)
    assert any(d.startswith("httpx") for d in extras["analyzer"])


def test_typed_marker_ships() -> None:
    assert (REPO / "stormotel" / "py.typed").is_file()


def test_no_module_imports_the_checkout_folder_names() -> None:
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "rename_imports.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


def test_package_list_matches_the_folders() -> None:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {".".join([name, *init.parent.relative_to(REPO / folder).parts])
             for name, folder in setuptools["package-dir"].items()
             for init in (REPO / folder).rglob("__init__.py")}
    assert sorted(found) == sorted(setuptools["packages"])


def test_installed_names_are_the_folders() -> None:
    import stormotel.analyzers.timeline
    import stormotel.dashboards.build

    assert Path(stormotel.analyzers.timeline.__file__).resolve() == \
        REPO / "analyzers" / "timeline.py"
    assert stormotel.dashboards.build.PACKAGE_DIR.resolve() == REPO / "dashboards"
    checkout_name = "analyzers"  # the folder name, which tests/conftest.py refuses to import
    with pytest.raises(ModuleNotFoundError, match=r"stormotel\.analyzers"):
        importlib.import_module(f"{checkout_name}.timeline")


@pytest.mark.slow  # builds a wheel
def test_wheel_installs_one_import_package(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(tmp_path), str(REPO)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    [wheel] = tmp_path.glob("stormotel-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"stormotel"}, tops
    for data in ("stormotel/py.typed", "stormotel/analyzers/sinks/html/assets/uPlot.iife.min.js",
                 "stormotel/dashboards/stormotel-overview.json",
                 "stormotel/dashboards/rules/stormotel-rules.yml",
                 "stormotel/analyzers/cli/command.py"):
        assert data in names, data
