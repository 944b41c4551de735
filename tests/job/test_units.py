"""Pure parts of the job: findings → series/annotations (stalls included), encoders, secrets."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from stormotel.analyzers import http
from stormotel.analyzers.report import (
    CollectiveAttribution,
    CrossRank,
    GapFinding,
    Report,
    StallFinding,
    Suspect,
)
from stormotel.analyzers.sinks import findings_series, grafana, perfetto, remote_write
from stormotel.analyzers.sources.prometheus import clean_byte_series
from stormotel.analyzers.sources.prometheus_api import label_selector, parse_matrix_values

from stormotel import schema

T0 = 1_795_000_000_000_000_000


def _report() -> Report:
    return Report(
        job_id="j", world_size=8, participating_ranks=list(range(7)), missing_ranks=[7],
        cross_rank=CrossRank(cluster_onset_ns=T0 + 2_000_000_000, first_cause_suspects=[
            Suspect(3, "high", T0, 2_000_000_000, 2**30)]),
        gap_findings=[GapFinding(1, "persistent_drift", "critical", 0.9,
                                 {"slope_bytes_per_s": 1e6, "time_to_full_s": 600.0},
                                 ["free NCCL buffers"], start_ns=T0 - 10**10, end_ns=T0)],
        collective_attributions=[
            CollectiveAttribution(2, "collective_likely", 0.6, T0, T0 + 10**8, ["sync"]),
            CollectiveAttribution(2, "collective_confident", 0.85, T0 + 10**9,
                                  T0 + 10**9 + 10**8, ["sync", "marker"])],
        stall_findings=[
            StallFinding("not_joined", [5], "0", 42, "allreduce", "flight_recorder", "high"),
            StallFinding("undecided", [], "0", 43, "allreduce", "flight_recorder", "low")],
        window_start_ns=T0 - 60 * 10**9, window_end_ns=T0 + 60 * 10**9)


def test_findings_series_cover_every_finding_kind() -> None:
    pts = findings_series.findings_samples(_report())
    by = {(p.name, p.labels.get("rank"), p.labels.get("kind")): p.value for p in pts}
    assert by[(schema.AN_FIRST_CAUSE, "3", None)] == 1.0
    assert by[(schema.AN_FIRST_CAUSE_LEAD, "3", None)] == 2.0
    assert by[(schema.AN_GAP_DRIFT_SLOPE, "1", None)] == 1e6
    assert by[(schema.AN_GAP_TIME_TO_FULL, "1", None)] == 600.0
    assert by[(schema.AN_COLLECTIVE_CONFIDENCE, "2", None)] == 0.85
    assert by[(schema.AN_STALL, "5", "not_joined")] == 1.0
    assert by[(schema.AN_STALL, findings_series.NO_RANK, "undecided")] == 1.0
    assert by[(schema.AN_MISSING_RANKS, None, None)] == 1.0
    assert {p.timestamp_ms for p in pts} == {(T0 + 60 * 10**9) // 10**6}
    assert all(p.labels[schema.ATTR_JOB_ID] == "j" for p in pts)


def test_annotations_are_deterministic_and_carry_stalls() -> None:
    a1, a2 = grafana.annotations_for(_report()), grafana.annotations_for(_report())
    assert [a.key for a in a1] == [a.key for a in a2] and len({a.key for a in a1}) == len(a1)
    kinds = [a.kind for a in a1]
    assert kinds == ["first_cause", "persistent_drift", "collective_likely",
                     "collective_confident", "not_joined", "undecided"]
    first = a1[0]
    assert (first.start_ms, first.end_ms) == (T0 // 10**6, (T0 + 2 * 10**9) // 10**6)
    stall = a1[4]
    assert "rank=5" in stall.tags and "stall" in stall.tags and "job_id=j" in stall.tags


def test_remote_write_roundtrip() -> None:
    pts = findings_series.findings_samples(_report())
    req = remote_write.decode(remote_write.encode(pts))
    assert sum(len(ts.samples) for ts in req.timeseries) == len(pts)
    names = {lbl.value for ts in req.timeseries for lbl in ts.labels if lbl.name == "__name__"}
    assert schema.AN_STALL in names
    for ts in req.timeseries:  # receivers require sorted label names
        keys = [lbl.name for lbl in ts.labels]
        assert keys == sorted(keys)


def test_thin_max_keeps_the_peak() -> None:
    t = np.arange(100_000, dtype=np.int64)
    v = np.zeros(100_000)
    v[77_777] = 5.0
    _, vv = perfetto.thin_max(t, v, limit=1000)
    assert len(vv) <= 1000 and vv.max() == 5.0


def test_matrix_parsing_and_selectors() -> None:
    t, v = parse_matrix_values([[1700000000.123, "1.5"], [1700000001, "NaN"]])
    assert t.tolist() == [1700000000123000000, 1700000001000000000]
    assert v[0] == 1.5 and np.isnan(v[1])
    assert label_selector({"job_id": 'a"b'}, {"rank": "1|2"}) == '{job_id="a\\"b",rank=~"1|2"}'


def test_byte_series_cleaning_counts_what_it_drops() -> None:
    from stormotel.analyzers.timeline import TimelineBuilder

    b = TimelineBuilder()
    t, v = clean_byte_series([[1, "5"], [2, "NaN"], [3, "-1"], [4, "+Inf"], [5, "7"]], b)
    assert t.tolist() == [1_000_000_000, 5_000_000_000] and v.tolist() == [5.0, 7.0]
    assert b.skipped["non_finite_or_negative_bytes"] == 3
    assert clean_byte_series([["x"]], b) is None and b.skipped["malformed_series"] == 1


def test_secrets_stay_secret(tmp_path, monkeypatch) -> None:
    token = tmp_path / "token"
    token.write_text("abc123\n")
    auth = http.auth_from_settings(http.HttpSettings(bearer_token_file=token))
    assert isinstance(auth, http.BearerAuth) and "abc123" not in repr(auth)
    monkeypatch.setenv(http.ENV_BEARER_TOKEN, "from-env")
    assert http.auth_from_settings(http.HttpSettings()) is not None
    with pytest.raises(http.ConfigError, match="empty"):
        (tmp_path / "empty").write_text("")
        http.read_secret(tmp_path / "empty", None, "bearer token")
    with pytest.raises(http.ConfigError, match=r"CA file .* does not exist"):
        http.make_client(http.HttpSettings(ca_file=tmp_path / "nope.pem"))
    assert http.redact_url("https://u:pw@host/x") == "https://host/x"


def test_tenant_header_goes_on_every_request() -> None:
    parser = argparse.ArgumentParser()
    http.add_http_arguments(parser)
    args = parser.parse_args(["--http-header", "X-Scope-OrgID: team-a"])
    with http.make_client(http.settings_from_args(args)) as client:
        assert client.headers["X-Scope-OrgID"] == "team-a"
    with pytest.raises(SystemExit):
        parser.parse_args(["--http-header", "no colon here"])


def test_tls_context_is_loaded_once_per_file_contents(tmp_path) -> None:
    """A scheduled run makes clients per job: they share one context while the TLS files stay
    as they were, and a rotated CA bundle (new contents) is loaded afresh, never the stale one."""
    import os
    from pathlib import Path

    import certifi

    system = http.HttpSettings()
    assert http.ssl_context(system) is http.ssl_context(system)
    bundle = Path(certifi.where()).read_text()
    certs = bundle.split("-----END CERTIFICATE-----\n")
    ca = tmp_path / "ca.pem"
    ca.write_text("-----END CERTIFICATE-----\n".join(certs[:3]) + "-----END CERTIFICATE-----\n")
    first = http.ssl_context(http.HttpSettings(ca_file=ca))
    assert first is http.ssl_context(http.HttpSettings(ca_file=ca))
    assert first.cert_store_stats()["x509_ca"] == 3
    rotated = tmp_path / "rotated.pem"  # written beside, then moved over: a new inode
    rotated.write_text("-----END CERTIFICATE-----\n".join(certs[:5]) +
                       "-----END CERTIFICATE-----\n")
    os.replace(rotated, ca)
    second = http.ssl_context(http.HttpSettings(ca_file=ca))
    assert second is not first and second.cert_store_stats()["x509_ca"] == 5
    ca.write_text("not a certificate\n")
    for _ in range(2):  # a failure is not remembered as a context: each call says it
        with pytest.raises(http.ConfigError, match="cannot load TLS files"):
            http.ssl_context(http.HttpSettings(ca_file=ca))
