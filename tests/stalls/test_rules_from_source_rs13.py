"""Rules written from the emitters' source (helper rs13), at the CLI (``stormotel analyze --logs``).

Every line below is SYNTHETIC: built from the emitter's format string at the versions its
module's docstring names, not copied from any collected case; hosts, ports, pods and ranks are
invented.

- Paddle's wait for its peers' endpoints (log_paddle_endpoints; ``wait_server_ready`` in the
  paddlepaddle 2.6.2 wheel, ``collective.py``'s PADDLE_TRAINER_ENDPOINTS in 2.6.2 / 3.0.0): the
  last not-ready list, mapped through the endpoints list, names the trainers that never joined;
  without the list nobody.
"""

from __future__ import annotations

from pathlib import Path

from tests.stalls.helpers import root_findings as _run
from tests.stalls.helpers import run_json
from tests.stalls.test_rules_from_source_rs9 import _by, _suspects

# --- Paddle (synthetic, from private_helper_function.wait_server_ready and collective.py) -------
NOT_READY = "paddle.wait_server_ready.not_ready"
_EPS = [f"10.2.0.{h}:{6170 + p}" for h in (11, 12, 13, 14) for p in range(2)]  # 4 nodes × 2


def _wait(missing: list[str], times: int) -> str:
    return ("server not ready, wait 3 sec to retry...\n"
            f"not ready endpoints:{missing!r}\n") * times


def _launch_env() -> str:
    # Container.__str__ with its " \nenv {…}" (2.6): container 0 of the first node
    env = {"PADDLE_GLOBAL_SIZE": "8", "PADDLE_LOCAL_SIZE": "2", "PADDLE_GLOBAL_RANK": "0",
           "PADDLE_CURRENT_ENDPOINT": _EPS[0], "PADDLE_TRAINER_ID": "0",
           "PADDLE_TRAINER_ENDPOINTS": ",".join(_EPS)}
    return ("LAUNCH INFO 2026-11-30 03:00:01,100 Run Pod: wzkvbc, replicas 2, status ready\n"
            "Container rank 0 status ready cmd ['python', '-u', 'train.py'] code -1 log "
            f"log/workerlog.0 \nenv {env!r}\n")


def test_paddle_not_ready_endpoints_with_the_list_are_the_trainers_that_never_joined(
        tmp_path: Path) -> None:
    for text, ids in (
            # the launcher's env print, then trainer 0's wait: node .13's trainers never came up
            (_launch_env() + _wait([_EPS[1], _EPS[4], _EPS[5]], 1) + _wait(_EPS[4:6], 5),
             [4, 5]),
            # the legacy launcher's endpoints.log pasted before the wait
            ("PADDLE_TRAINER_ENDPOINTS: \n" + "\n".join(_EPS) + "\n" + _wait([_EPS[7]], 3), [7])):
        code, roots = _run(tmp_path, text)
        assert code == 1, text  # was "no evidence"
        assert _by(roots, NOT_READY) == [("not_joined", ids, "low")], text
        assert "PADDLE_TRAINER_ENDPOINTS" in roots[0]["evidence"]["rank_from"]


def test_paddle_the_list_in_another_file_maps_the_wait(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "launch.log").write_text(_launch_env())
    (logs / "workerlog.0").write_text(_wait([_EPS[6]], 4))
    code, report = run_json("--logs", str(logs))
    assert code == 1
    roots = [f for f in report["stall_findings"] if f["consequence_of"] is None]
    assert _by(roots, NOT_READY) == [("not_joined", [6], "low")]


def test_paddle_not_ready_without_the_list_names_nobody(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, _wait(_EPS[4:6], 6))
    assert code == 1
    assert _by(roots, NOT_READY) == [("undecided", [], "low")]
    assert _suspects(roots) == []
    assert "10.2.0.13:6170" in roots[0]["evidence"]["reason"]
    assert "PADDLE_TRAINER_ENDPOINTS" in roots[0]["evidence"]["collect_next"][0]


def test_paddle_a_single_print_a_majority_or_an_unknown_endpoint_are_suspects_only(
        tmp_path: Path) -> None:
    for text, ids in (
            (_launch_env() + _wait(_EPS[4:6], 1), [4, 5]),  # one print: start-up in progress
            (_launch_env() + _wait(_EPS[1:], 4), [1, 2, 3, 4, 5, 6, 7]),  # every peer missing
            # a parameter server's endpoint is not a trainer's
            (_launch_env() + _wait([_EPS[3], "10.2.0.99:6000"], 4), [3])):
        code, roots = _run(tmp_path, text)
        assert code == 1, text
        assert _by(roots, NOT_READY) == [("undecided", [], "low")], text
        assert _suspects(roots) == ids, text
        assert not any(f["kind"] in ("not_joined", "rank_failure") for f in roots), text


def test_paddle_a_wait_before_an_error_leaves_the_answer_to_the_error(tmp_path: Path) -> None:
    # the wait ended, the job failed later on rank 2's own error: a fallback kind is not read
    text = (_launch_env() + _wait(_EPS[4:6], 3)
            + "[rank2]: Traceback (most recent call last):\n"
              '[rank2]:   File "train.py", line 40, in <module>\n'
              "[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    code, roots = _run(tmp_path, text)
    assert code == 1
    assert _by(roots, NOT_READY) == []
