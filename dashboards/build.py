"""``stormotel dashboards``: write the Grafana dashboards, the Prometheus rules and their promtool
tests as files, and copy the dashboards and rules into the Helm chart byte for byte.

The committed files under ``dashboards/`` and ``helm/stormotel/files/`` are this command's output;
``--check`` regenerates in memory and exits 1 naming every stale file, so CI catches a hand edit
or a code change that was not rebuilt.

Everything is generated from code, so an installed wheel needs no data files: ``--out DIR`` works
anywhere. Only a checkout has a ``dashboards/`` folder to regenerate by default and a
``helm/stormotel`` chart beside the package; an installed package has neither, so there ``--out``
is required and the chart is touched only when ``--chart`` names one.
"""

from __future__ import annotations

import dataclasses
import sys
from importlib import resources
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

from stormotel.dashboards import promql
from stormotel.dashboards.common import to_json
from stormotel.dashboards.overview import overview_dashboard
from stormotel.dashboards.rank import rank_dashboard
from stormotel.dashboards.rule_tests import TESTS_FILE, rule_tests_yaml
from stormotel.dashboards.rules import DEFAULT_RUNBOOK_URL, RULES_FILE, rules_yaml
from stormotel.dashboards.settings import Settings

from stormotel import exitcodes, schema
from stormotel.streams import StreamParser, resolve

#: The package's folder: ``dashboards/`` of a checkout (editable install), or site-packages.
PACKAGE_DIR = Path(str(resources.files(__name__.rpartition(".")[0])))
#: The chart of a checkout; absent from an installed wheel.
REPO_CHART = PACKAGE_DIR.parent / "helm" / "stormotel"


def _is_checkout() -> bool:
    """True when the package runs from a source checkout (its chart lies beside it)."""
    return (REPO_CHART / "Chart.yaml").is_file()
RULES_DIR = Path("rules")
CHART_DASHBOARDS = Path("files") / "dashboards"
CHART_RULES = Path("files") / "rules"
#: The chart's copies for Prometheus 3's other OTLP name translations, one folder per strategy
#: (``files/name-translation/<Strategy>/{dashboards,rules}``), picked by ``nameTranslation``.
CHART_TRANSLATIONS = Path("files") / "name-translation"


def generate(cfg: Settings, runbook_url: str = DEFAULT_RUNBOOK_URL,
             report_base_url: str | None = None) -> dict[Path, str]:
    """Every generated file, relative to the output directory."""
    files: dict[Path, str] = {}
    with promql.naming(cfg.name_translation):
        boards = (overview_dashboard(cfg), rank_dashboard(cfg))
    for board in boards:
        files[Path(f"{board.uid}.json")] = to_json(board)
    files[RULES_DIR / RULES_FILE] = rules_yaml(cfg, runbook_url, report_base_url)
    files[RULES_DIR / "tests" / TESTS_FILE] = rule_tests_yaml(cfg, runbook_url,
                                                              report_base_url)
    return files


def chart_files(files: dict[Path, str], root: Path = Path("files")) -> dict[Path, str]:
    """The subset the Helm chart ships, relative to the chart directory (same bytes)."""
    out: dict[Path, str] = {}
    for path, text in files.items():
        if path.suffix == ".json":
            out[root / CHART_DASHBOARDS.name / path.name] = text
        elif path == RULES_DIR / RULES_FILE:
            out[root / CHART_RULES.name / RULES_FILE] = text
    return out


def chart_files_all(cfg: Settings, runbook_url: str = DEFAULT_RUNBOOK_URL,
                    report_base_url: str | None = None) -> dict[Path, str]:
    """What the chart ships: the default naming under ``files/``, each other OTLP name
    translation under ``files/name-translation/<Strategy>/`` (the chart's ``nameTranslation``)."""
    out: dict[Path, str] = {}
    for strategy in schema.NAME_TRANSLATIONS:
        variant = dataclasses.replace(cfg, name_translation=strategy)
        root = Path("files") if strategy == schema.DEFAULT_NAME_TRANSLATION \
            else CHART_TRANSLATIONS / strategy
        out.update(chart_files(generate(variant, runbook_url, report_base_url), root))
    return out


def _stale(root: Path, files: dict[Path, str]) -> list[Path]:
    stale = []
    for rel, text in files.items():
        path = root / rel
        if not path.is_file() or path.read_bytes() != text.encode():
            stale.append(path)
    return stale


def _write(root: Path, files: dict[Path, str]) -> int:
    changed = 0
    for rel, text in files.items():
        path = root / rel
        if path.is_file() and path.read_bytes() == text.encode():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
        changed += 1
    return changed


def _parser() -> StreamParser:
    defaults = Settings()
    p = StreamParser(
        prog="stormotel dashboards",
        description="Write the Grafana dashboards (JSON), the Prometheus recording/alerting rules"
                    " and their promtool tests (YAML), and copy dashboards and rules into the"
                    " Helm chart's files/ so the chart ships the same bytes.")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="output directory (default in a checkout: its dashboards/ folder;"
                        " required for an installed package)")
    p.add_argument("--chart", type=Path, default=None, metavar="DIR",
                   help="Helm chart directory to copy dashboards and rules into (default:"
                        " helm/stormotel of this checkout when --out is not given)")
    p.add_argument("--no-chart", action="store_true", help="do not touch the Helm chart")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 and list the files that differ from what would"
                        " be generated")
    p.add_argument("--warning-percent", type=float, default=defaults.warning_percent,
                   help="device memory percent for the warning alert and the orange line"
                        " (default: %(default)s)")
    p.add_argument("--critical-percent", type=float, default=defaults.critical_percent,
                   help="device memory percent for the critical alert and the red line"
                        " (default: %(default)s)")
    p.add_argument("--estimate-margin", type=float, default=defaults.estimate_margin,
                   help="alert when the actual peak exceeds the estimate times this factor"
                        " (default: %(default)s)")
    p.add_argument("--name-translation", choices=schema.NAME_TRANSLATIONS,
                   default=defaults.name_translation,
                   help="series names the rules and dashboards select: Prometheus 3's OTLP"
                        " translation_strategy the tracker's data went through (default:"
                        " %(default)s, also right for the pull exporter and a collector;"
                        " docs/prometheus3.md). The chart always gets every strategy"
                        " (its nameTranslation value picks one)")
    p.add_argument("--runbook-url", default=DEFAULT_RUNBOOK_URL,
                   help="base URL of docs/runbook.md for the alerts' runbook_url annotations"
                        " (default: %(default)s)")
    p.add_argument("--report-base-url", default=None, metavar="URL",
                   help="the URL of `stormotel serve` as people reach it: every alert with a"
                        " job_id gets a report_url annotation, URL/jobs/<job_id>/ (docs/serve.md;"
                        " default: no link)")
    return p


def main(argv: list[str] | None = None, *, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    """``stormotel dashboards ARGV``; its lines go to ``out``/``err`` (the process's streams
    when None: :mod:`stormotel.streams`)."""
    out, err = resolve(out, err)
    args = _parser().use(out, err).parse_args(argv)
    try:
        cfg = Settings(warning_percent=args.warning_percent,
                       critical_percent=args.critical_percent,
                       estimate_margin=args.estimate_margin,
                       name_translation=args.name_translation)
    except ValueError as e:
        print(f"stormotel dashboards: {e}", file=err)
        return exitcodes.USAGE
    root = args.out or (PACKAGE_DIR if _is_checkout() else None)
    if root is None:
        print("stormotel dashboards: give --out DIR (an installed package has no dashboards/"
              " folder to regenerate)", file=err)
        return exitcodes.USAGE
    base = args.report_base_url
    if base is not None and urlsplit(base).scheme not in ("http", "https"):
        print(f"stormotel dashboards: --report-base-url {base!r} is not an http(s) URL",
              file=err)
        return exitcodes.USAGE
    files = generate(cfg, args.runbook_url, base)
    targets: list[tuple[Path, dict[Path, str]]] = [(root, files)]
    # The checkout's chart is regenerated with its dashboards/ folder (no --out): files written
    # elsewhere (custom thresholds for one cluster) must not rewrite the committed chart.
    default_chart = REPO_CHART if (_is_checkout() and args.out is None) else None
    chart = None if args.no_chart else (args.chart or default_chart)
    if chart is not None:
        if not (chart / "Chart.yaml").is_file():
            print(f"stormotel dashboards: {chart} is not a Helm chart (no Chart.yaml)",
                  file=err)
            return exitcodes.USAGE
        targets.append((chart, chart_files_all(cfg, args.runbook_url, base)))

    if args.check:
        stale = [path for root, group in targets for path in _stale(root, group)]
        for path in stale:
            print(f"stale: {path} (run `stormotel dashboards` and commit)", file=err)
        if not stale:
            print(f"up to date: {sum(len(g) for _, g in targets)} files", file=err)
        return exitcodes.FINDINGS if stale else exitcodes.OK

    try:
        changed = sum(_write(root, group) for root, group in targets)
    except OSError as e:
        print(f"stormotel dashboards: cannot write {e.filename}: {e.strerror}", file=err)
        return exitcodes.SINK_FAILURE
    print(f"wrote {changed} changed of {sum(len(g) for _, g in targets)} files under "
          + ", ".join(str(root) for root, _ in targets), file=err)
    return exitcodes.OK


if __name__ == "__main__":
    sys.exit(main())
