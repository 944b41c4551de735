"""The forked runs of :mod:`tests.prefork` are what a fresh ``python -m stormotel`` prints and
exits with, and a run past its time is killed, as :func:`subprocess.run` kills one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from stormotel import exitcodes
from tests.hostile.corpus import healthy_folder
from tests.hostile.harness import run_bounded, run_fresh


def test_a_forked_run_prints_and_exits_as_a_fresh_interpreter_does(tmp_path: Path) -> None:
    folder = str(healthy_folder(tmp_path / "job"))
    for args in (("analyze", folder), ("analyze", folder, "--align", "nope"),
                 ("analyze", str(tmp_path / "none.json"))):
        forked, fresh = run_bounded(*args), run_fresh(*args)
        assert (forked.code, forked.stdout, forked.stderr) == \
            (fresh.code, fresh.stdout, fresh.stderr), args
    assert {run_bounded(*a).code for a in (("analyze", folder), ("analyze", "--align", "x"))} \
        == {exitcodes.OK, exitcodes.USAGE}


def test_a_forked_run_past_its_time_is_killed(tmp_path: Path) -> None:
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)  # opening it for reading blocks until a writer comes: none will
    with pytest.raises(subprocess.TimeoutExpired):
        run_bounded("analyze", str(fifo), timeout=2)
    after = run_bounded("analyze", str(healthy_folder(tmp_path / "job")))  # the server goes on
    assert after.code == exitcodes.OK, after.stderr
