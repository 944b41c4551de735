"""A rank that stops reporting while its peers go on is named, with when it stopped, in
``analyze`` (and so in every consumer); a staggered clean exit, two ranks, and a short gap at
the window's end name nobody."""

from __future__ import annotations

import dataclasses

from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.headline import headline
from stormotel.analyzers.summary import render_summary
from stormotel.analyzers.timeline import (
    KIND_OOM,
    KIND_STEP,
    KIND_TRACKER_STOP,
    META_STOP_REPORTED,
)

from tests.analyzers.synth import INTERVAL, healthy, to_timeline

N = 600  # 60 s at 100 ms


def _cut(data: list, rank: int, keep: int) -> None:
    d = data[rank]
    data[rank] = dataclasses.replace(d, t_ns=d.t_ns[:keep], allocated=d.allocated[:keep],
                                     reserved=d.reserved[:keep],
                                     device_used=d.device_used[:keep],
                                     device_total=d.device_total[:keep])


def test_a_rank_that_stops_while_its_peers_go_on_is_named_with_its_time() -> None:
    data = healthy(8, N)
    _cut(data, 5, 300)  # silent for the last 30 s
    report = analyze(to_timeline(data))
    roots = [s for s in report.stall_findings if s.consequence_of is None]
    assert [s.ranks for s in roots] == [[5]]
    f = roots[0]
    assert f.kind == "rank_failure" and f.source == "telemetry" and f.confidence == "medium"
    assert f.evidence["category"] == "stopped_reporting"
    assert f.evidence["last_sample_ns"] == int(data[5].t_ns[-1])
    assert f.evidence["peers_reporting_after"] == 7 and f.evidence["stopped_at"].endswith("Z")
    assert report.has_findings()
    lead = headline(report)
    assert lead.kind == "dead_rank" and lead.rank == 5 and "stopped reporting at" in lead.text
    text = render_summary(report)
    assert "Lead: dead rank: rank 5 stopped reporting" in text and "rank_failure" in text
    assert "Verdict: FINDINGS" in text


def test_staggered_exit_short_silence_and_two_ranks_name_nobody() -> None:
    data = healthy(4, N)
    for r in (1, 2, 3):  # the peers end, rank 0 writes its checkpoint for 30 s more
        _cut(data, r, 300)
    assert not analyze(to_timeline(data)).stall_findings
    data = healthy(4, N)
    _cut(data, 2, N - 30)  # 3 s behind at the window's end: under the 5 s floor
    assert not analyze(to_timeline(data)).stall_findings
    data = healthy(2, N)
    _cut(data, 1, 100)  # two ranks: one outliving the other is not a death
    assert not analyze(to_timeline(data)).stall_findings
    healthy_report = analyze(to_timeline(healthy(4, N)))
    assert not healthy_report.has_findings() and "Lead:" not in render_summary(healthy_report)


def test_several_dead_ranks_earliest_first_and_interval_scaled() -> None:
    data = healthy(6, N, interval=15 * INTERVAL * 10)  # 15 s scrapes, 2.5 h
    _cut(data, 4, 500)  # 100 scrapes (25 min) of silence
    _cut(data, 1, 550)
    _cut(data, 2, N - 3)  # 45 s: under 4 scrape intervals (60 s), not named
    report = analyze(to_timeline(data))
    named = [s.ranks[0] for s in report.stall_findings]
    assert named == [4, 1]


def _stop(data: list, rank: int, at_ns: int) -> None:
    """The tracker's clean-stop edge on ``rank`` at ``at_ns`` (what the sources read)."""
    data[rank] = dataclasses.replace(
        data[rank], markers=[*data[rank].markers, (at_ns, at_ns, "tracker stop",
                                                   KIND_TRACKER_STOP)])


def _steps(data: list, rank: int, until: int) -> None:
    """One step a second (every 10 samples) on ``rank`` up to sample ``until``."""
    t = data[rank].t_ns
    data[rank] = dataclasses.replace(data[rank], markers=[
        *data[rank].markers,
        *((int(t[i]), int(t[i + 9]), f"step {i // 10}", KIND_STEP)
          for i in range(0, until - 9, 10))])


def _stopped_early(peers_step_until: int | None) -> list:
    """Four ranks, rank 3 silent after sample 300 with its clean stop there; every rank steps
    until its own end, the peers until ``peers_step_until`` (None: no steps anywhere)."""
    data = healthy(4, N)
    _cut(data, 3, 300)
    _stop(data, 3, int(data[3].t_ns[-1]) - 50_000)  # stamped as the stop began, ms rounded
    if peers_step_until is not None:
        _steps(data, 3, 300)
        for r in (0, 1, 2):
            _steps(data, r, peers_step_until)
    return data


def test_a_clean_stop_at_the_last_sample_is_noted_not_named() -> None:
    report = analyze(to_timeline(_stopped_early(peers_step_until=N)))
    assert not report.stall_findings and not report.has_findings()
    [note] = [n for n in report.notes if "stopped cleanly" in n]
    assert note.startswith("1 rank(s)") and "rank 3 at" in note
    assert "Verdict: healthy" in render_summary(report)


def test_a_clean_stop_that_stalled_its_peers_or_cannot_be_judged_is_named() -> None:
    """A clean stop is also what an uncaught exception leaves: peers whose steps stop with
    it (one more step started, blocked) name it at medium; no step data at all, at low."""
    [f] = analyze(to_timeline(_stopped_early(peers_step_until=315))).stall_findings
    assert f.ranks == [3] and f.confidence == "medium"
    assert f.evidence["stop_edge"] == "clean_peers_stalled"
    assert "stopped cleanly" in str(f.evidence["reason"]) and "stalled them" in str(
        f.evidence["reason"])
    [f] = analyze(to_timeline(_stopped_early(peers_step_until=None))).stall_findings
    assert f.ranks == [3] and f.confidence == "low"
    assert f.evidence["stop_edge"] == "clean_no_progress_data"
    assert f.evidence["clean_stop_ns"] == int(str(f.evidence["last_sample_ns"])) - 50_000


def test_an_oom_before_a_clean_stop_keeps_the_rank_named() -> None:
    data = _stopped_early(peers_step_until=N)
    at = int(data[3].t_ns[-5])
    data[3] = dataclasses.replace(data[3], markers=[*data[3].markers,
                                                    (at, at, "oom", KIND_OOM)])
    [f] = analyze(to_timeline(data)).stall_findings
    assert f.ranks == [3] and "out-of-memory" in str(f.evidence["reason"])


def test_a_stop_that_does_not_explain_the_silence_keeps_the_rank_named() -> None:
    """A dead rank never disappears: a stop from an earlier run (the rank restarted, then died)
    or one long after the silence began (a hung rank stopped later) explains nothing."""
    for at in (lambda end: end - 60 * INTERVAL, lambda end: end + 20_000_000_000):
        data = healthy(4, N)
        _cut(data, 3, 300)
        _stop(data, 3, at(int(data[3].t_ns[-1])))
        report = analyze(to_timeline(data))
        assert [s.ranks for s in report.stall_findings] == [[3]]
        assert not [n for n in report.notes if "stopped cleanly" in n]


def test_a_tracker_that_promises_its_stop_and_sent_none_says_so() -> None:
    data = healthy(4, N)
    _cut(data, 3, 300)
    tl = to_timeline(data)
    [f] = analyze(tl).stall_findings
    assert f.evidence["stop_edge"] == "unknown" and f.confidence == "medium"
    tl.meta[META_STOP_REPORTED] = [0, 1, 2, 3]
    [f] = analyze(tl).stall_findings
    assert f.evidence["stop_edge"] == "expected_missing" and f.confidence == "medium"
    assert "delivers a clean stop and none came" in str(f.evidence["note"])


def _stop_at_end(data: list, rank: int) -> None:
    """``rank``'s tracker stopped cleanly at its last sample."""
    _stop(data, rank, int(data[rank].t_ns[-1]))


def test_ranks_that_stop_cleanly_close_together_name_nobody() -> None:
    """A job ending: every rank stops cleanly, rank 3 four seconds before the others (under the
    5 s silence floor at 100 ms sampling), no step data: nobody is named."""
    data = healthy(4, N)
    _cut(data, 3, N - 40)
    for r in range(4):
        _stop_at_end(data, r)
    report = analyze(to_timeline(data))
    assert not report.stall_findings and not report.has_findings()


def test_a_clean_stop_without_steps_is_undecided_and_says_how_its_peers_ended() -> None:
    """No peer has steps: rank 3 stopped cleanly 30 s before its peers. Whether they then
    stopped cleanly too (an early finish — or a launcher's SIGTERM after rank 3's exception)
    or their data ends without a stop (still running or blocked when read, or killed), it is
    named at low and the finding counts which."""
    data = _stopped_early(peers_step_until=None)
    for r in (0, 1):
        _stop_at_end(data, r)  # rank 2's data ends without a stop
    [f] = analyze(to_timeline(data)).stall_findings
    assert f.ranks == [3] and f.confidence == "low"
    assert f.evidence["stop_edge"] == "clean_no_progress_data"
    assert f.evidence["peers_after_stop"] == {"stopped_cleanly": 2, "no_clean_stop": 1}
    reason = str(f.evidence["reason"])
    assert "2 of the peers that went on stopped cleanly later too" in reason
    assert "1 of the peers that went on have no clean stop" in reason
    assert "tracker.step()" in str(f.evidence["note"])
    _stop_at_end(data, 2)
    [f] = analyze(to_timeline(data)).stall_findings
    assert f.confidence == "low"
    assert f.evidence["peers_after_stop"] == {"stopped_cleanly": 3, "no_clean_stop": 0}
    assert "no clean stop" not in str(f.evidence["reason"])


def test_a_rank_with_one_sample_whose_peers_go_on_is_undecided_not_healthy() -> None:
    """A rank SIGKILLed right after its first export leaves one sample (seen on a loaded host:
    the live test's killed rank). It used to be skipped — no finding, exit 0, "healthy" on a
    job that lost a rank — as the rule needed two samples for the rank's own interval. It is
    named at ``low`` (undecided: its own interval is unknown), its silence measured with the
    peers' interval; one sample among peers that end with it names nobody."""
    data = healthy(4, N)
    _cut(data, 3, 1)  # one sample, then 60 s of its peers
    report = analyze(to_timeline(data))
    [f] = report.stall_findings
    assert f.ranks == [3] and f.confidence == "low" and f.consequence_of is None
    assert f.evidence["category"] == "stopped_reporting"
    assert f.evidence["own_interval"] == "unknown" and "single sample" in f.evidence["note"]
    assert f.evidence["silence_threshold_s"] == 5.0  # the peers' 100 ms interval: the floor
    assert f.evidence["peers_reporting_after"] == 3 and report.has_findings()
    assert "Verdict: FINDINGS" in render_summary(report)

    data = healthy(4, N)
    _cut(data, 3, 1)
    for r in (0, 1, 2):  # the peers end 3 s after it: under the 5 s floor, a job ending
        _cut(data, r, 31)
    assert not analyze(to_timeline(data)).stall_findings


def test_a_rank_with_no_data_at_all_is_never_called_healthy() -> None:
    """The live test's killed rank, SIGKILLed on a loaded host before its first batch was
    written, left no sample (an empty archive file, or none): the summary said "Verdict:
    healthy" for a job that lost a rank. Partial data is not a failure (docs/exit-codes.md:
    exit 0 stays), but the verdict says which ranks it covers and that the others have none."""
    report = analyze(to_timeline(healthy(3, N), world_size=4))
    assert report.missing_ranks == [3] and not report.has_findings()
    last = render_summary(report).strip().splitlines()[-1]
    assert last.startswith("Verdict: no findings in rank(s) 0-2; no data from rank(s) 3 "), last
    assert "healthy" not in last
    assert render_summary(analyze(to_timeline(healthy(4, N)))).strip().splitlines()[-1] \
        == "Verdict: healthy"
