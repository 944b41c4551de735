"""The command line becomes typed options in one place: every flag combination the analyzer
refuses is refused there (one line, exit 2, before anything is read), and below that edge no
module sees argparse."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from stormotel.analyzers.cli import main
from stormotel.analyzers.cli.args import options_from_args
from stormotel.analyzers.cli.flags import build_parser

from stormotel import exitcodes

ANALYZERS = Path(__file__).resolve().parents[2] / "analyzers"
#: The modules that declare flags or turn them into options; nothing else may import argparse.
FLAG_MODULES = {"cli/command.py", "cli/flags.py", "cli/args.py", "cli/job_flags.py",
                "http_flags.py", "serve/cli.py", "serve/options.py"}  # serve: its own flags
PROM = ["--prometheus", "http://127.0.0.1:1"]


@pytest.mark.parametrize(("argv", "message"), [
    ([*PROM], "--prometheus needs --job-id (or --scheduled to analyse every job found)"),
    ([*PROM, "--job-id", "j", "--job-selector", 'ns="a"'],
     "--job-selector needs --scheduled (and no --job-id)"),
    ([*PROM, "--dcgm", "--job-id", "j", "--gpu-rank-map", "m.csv", "--rank-label", "pod"],
     "--dcgm takes --gpu-rank-map FILE or --rank-label LABEL, not both"),
    ([*PROM, "--dcgm", "--scheduled"],
     "--dcgm needs --job-id (the name findings are reported under)"),
    ([*PROM, "--job-id", "j", "--end", "1700000000"], "--end needs --start"),
    ([*PROM, "--job-id", "j", "--start", "1700000000", "--since", "1h"],
     "give --since or --start/--end, not both"),
    ([*PROM, "--scheduled", "--now", "9000000000"],
     "--now must not be later than the clock: a run stores its window's end, and a stored end "
     "in the future is ignored by the next run"),
    ([*PROM, "--job-id", "j", "--start", "1700000000", "--now", "1700000600"],
     "give --now or --start/--end, not both (--start/--end is the window)"),
    (["x.jsonl", "--state-file", "s.json"], "--dcgm and --state-file need --prometheus URL"),
    (["x.jsonl", "--grafana-folder", "f"],
     "--grafana-dashboard/--grafana-dashboard-uid/--grafana-folder need --grafana-url"),
    (["x.jsonl", "--concurrency", "0"], "--concurrency must be at least 1"),
    (["x.jsonl", *PROM, "--job-id", "j"], "give PATHs or --prometheus, not both"),
    (["--logs", "x.log", "--world-size", "0"],
     "--world-size must be between 1 and 1000000, got 0"),
    (["x.jsonl", "--ranks", "0-x"], "bad rank filter '0-x'"),
    (["x.jsonl", "--set", "spike_z=-1"], "spike_z"),
    ([], "no telemetry given: pass one or more PATHs"),
])
def test_refused_flag_combinations_are_one_line_and_exit_2(argv, message, capsys, tmp_path,
                                                           monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing named exists: the refusal comes before any read
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == exitcodes.USAGE, err
    assert err.startswith("stormotel analyze: error: ") and message in err, err
    assert err.count("\n") == 1, err


def test_options_carry_parsed_values_and_cannot_be_changed():
    args = build_parser().parse_args([
        *PROM, "--job-id", "j", "--since", "15m", "--max-window", "2h", "--ranks", "0,4-6",
        "--set", "spike_z=5", "--http-header", "X-Scope-OrgID: team-a", "--remote-write",
        "http://a/w", "--remote-write", "http://b/w", "--dry-run", "-q"])
    opts = options_from_args(args)
    assert opts.job.tsdb.prometheus == ("http://127.0.0.1:1",) and opts.job.tsdb.wanted
    assert opts.job.schedule.since == 900.0 and opts.job.schedule.max_window == 7200.0
    assert opts.analysis.ranks == frozenset({0, 4, 5, 6})
    assert opts.analysis.settings.spike_z == 5 and opts.analysis.settings.sensitivity == "medium"
    assert opts.job.http.headers == (("X-Scope-OrgID", "team-a"),)
    assert opts.job.sinks.remote_write == ("http://a/w", "http://b/w") and opts.job.sinks.wanted
    assert opts.job.sinks.dry_run and opts.job.quiet and opts.output.quiet
    assert not opts.stalls.wanted and not opts.source.paths
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.job.job_id = "other"  # type: ignore[misc]


def test_no_module_below_the_command_line_imports_argparse():
    importers = sorted(str(p.relative_to(ANALYZERS)) for p in ANALYZERS.rglob("*.py")
                       if re.search(r"^\s*(import argparse|from argparse )", p.read_text(),
                                    re.MULTILINE))
    assert importers and set(importers) <= FLAG_MODULES, importers
