"""The human summary: the lines an on-call engineer reads first."""

from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.summary import fmt_bytes, fmt_duration, render_summary

from tests.analyzers.synth import (
    GIB,
    INTERVAL,
    MIB,
    healthy,
    plant_gap_drift,
    plant_gap_spike,
    plant_rise,
    to_timeline,
)


def test_summary_names_everything():
    data = healthy(4, 1200, seed=12, reserved_bytes=2 * GIB, gap_bytes=256 * MIB)
    plant_rise(data[1], 100, 1 * GIB)  # before rank 3's drift crosses its own threshold
    plant_gap_drift(data[3], 4 * GIB)
    for d in data:
        plant_gap_spike(d, 800, 2, 700 * MIB)
        t = int(d.t_ns[799])
        d.markers = [(t, t + 4 * INTERVAL, "nccl:reduce_scatter", "collective")]
    data.pop(2)  # rank 2 never reported
    text = render_summary(analyze(to_timeline(data, world_size=4)))
    assert "Participating ranks: 0-1,3" in text and "Missing ranks: 2" in text
    assert "Top first-cause suspect: rank 1" in text
    assert "rank 3    persistent_drift  critical" in text and "device full in" in text
    assert "ranks 0-1,3  collective_confident" in text
    verdict = text.splitlines()[-1]
    # first-cause rank first (medium: rank 2 is missing), then the critical one
    assert verdict.startswith("Verdict: FINDINGS — rank 1: first cause (medium)")
    assert "; rank 3: persistent_drift (critical)" in verdict
    assert "collective spikes on ranks 0-1,3" in verdict


def test_units():
    assert fmt_bytes(384 * MIB) == "384.0 MiB" and fmt_bytes(512) == "512 B"
    assert fmt_duration(0.1) == "100.0 ms" and fmt_duration(5400) == "90.0 min"


def test_long_sections_are_capped_with_a_count_of_the_rest():
    from stormotel.analyzers.report import (
        CollectiveAttribution,
        GapFinding,
        Report,
        StallFinding,
    )
    from stormotel.analyzers.stalls.render import MAX_TABLE_RANKS
    from stormotel.analyzers.summary import MAX_COLLECTIVE_LINES, MAX_GAP_LINES, MAX_NOTES

    t0, s = 1_795_000_000_000_000_000, 1_000_000_000
    table = [{"rank": r, "role": "waiting", "seq": 7, "op": "ALLREDUCE", "enqueued": 7,
              "completed": 6} for r in range(MAX_TABLE_RANKS + 4)]
    report = Report(
        job_id="j", world_size=64, participating_ranks=list(range(64)), missing_ranks=[],
        gap_findings=[GapFinding(r, "transient_spike", "info", 0.5)
                      for r in range(MAX_GAP_LINES + 3)],
        collective_attributions=[
            CollectiveAttribution(0, "collective_likely", 0.6, t0 + i * s, t0 + i * s + s // 10,
                                  ["sync"], {"group": i}) for i in range(MAX_COLLECTIVE_LINES + 2)],
        stall_findings=[StallFinding("straggler", [3], "0", 7, "ALLREDUCE", "logs", "medium",
                                     evidence={"state_table": table})],
        notes=[f"note {i}" for i in range(MAX_NOTES + 5)], window_start_ns=t0)
    lines = render_summary(report).splitlines()
    assert "  ... 3 more in the JSON report" in lines
    assert "  ... 2 more interval(s) in the JSON report" in lines
    assert "  - ... 5 more in the JSON report" in lines
    assert "        ... 4 more ranks like the last ones (JSON report has all)" in lines
    assert sum(line.startswith("  rank ") for line in lines) == MAX_GAP_LINES
    assert f"  - note {MAX_NOTES - 1}" in lines and f"  - note {MAX_NOTES}" not in lines
