"""TLS, mTLS and basic auth against a REAL Prometheus (``--web.config.file``).

Certificates come from the ``openssl`` command line (a throw-away CA, a server certificate for
127.0.0.1 and a client certificate); the basic-auth password is stored bcrypt-hashed as
Prometheus requires. The job must read and remote-write with the right CA, client certificate
and password — and fail with one clear line, never leaking the password, when one is wrong.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from stormotel.analyzers import http
from stormotel.analyzers.sinks import remote_write

from stormotel import exitcodes, schema
from tests import servers
from tests.job import planted
from tests.job.conftest import run_cli, summary_line

pytestmark = pytest.mark.servers
JOB = "tls-1"
USER, PASSWORD = "stormotel", "tls-test-password-do-not-log"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _make_pki(d: Path) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
             "ca.pem", "-days", "2", "-subj", "/CN=stormotel test CA", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in ("server", "client"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                 f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", "san.ext",
                 cwd=d)


def _bcrypt(password: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import crypt
        except ImportError:
            pytest.skip("no bcrypt hashing available (crypt module)")
    hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 4))
    if not hashed or not hashed.startswith("$2"):
        pytest.skip("libc crypt cannot do bcrypt")
    return hashed


@pytest.fixture(scope="module")
def secure_prom(tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[str, Path, planted.Planted]]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    binary = servers.require_binary("prometheus")
    d = tmp_path_factory.mktemp("tls")
    _make_pki(d)
    (d / "web.yml").write_text(
        "tls_server_config:\n"
        f"  cert_file: {d / 'server.pem'}\n  key_file: {d / 'server.key'}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {d / 'ca.pem'}\n"
        f"basic_auth_users:\n  {USER}: '{_bcrypt(PASSWORD)}'\n")
    (d / "prometheus.yml").write_text("global:\n  scrape_interval: 1s\n")
    (d / "password").write_text(PASSWORD + "\n")
    port = servers.free_port()
    url = f"https://127.0.0.1:{port}"
    log = d / "prometheus.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [binary, f"--config.file={d / 'prometheus.yml'}", f"--storage.tsdb.path={d / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", f"--web.config.file={d / 'web.yml'}",
             "--web.enable-remote-write-receiver"], stdout=fh, stderr=subprocess.STDOUT)
    settings = http.HttpSettings(ca_file=d / "ca.pem", client_cert=d / "client.pem",
                                 client_key=d / "client.key", basic_auth_user=USER,
                                 basic_auth_password_file=d / "password")
    try:
        with http.make_client(settings) as client:
            last = ""
            for _ in range(150):
                try:
                    if client.get(url + "/-/ready").status_code == 200:
                        break
                except httpx.HTTPError as e:
                    last = repr(e)
                assert proc.poll() is None, log.read_text()
                time.sleep(0.2)
            else:
                raise AssertionError(f"TLS Prometheus not ready ({last}): {log.read_text()}")
            p, data = planted.make(job_id=JOB, minutes=5)
            for (rank, fname), (t, v) in data.items():
                body = remote_write.encode_arrays(schema.FIELD_METRICS[fname].prom,
                                                  planted.labels_for(JOB, rank), t, v)
                remote_write.post(client, url + "/api/v1/write", body, settings=settings)
        yield url, d, p
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _args(url: str, p: planted.Planted) -> list[str]:
    return ["--prometheus", url, "--job-id", JOB, "--start", str(p.start_ms / 1000 - 2),
            "--end", str(p.end_ms / 1000 + 2), "--http-retries", "0"]


def test_mtls_and_basic_auth(secure_prom) -> None:
    url, d, p = secure_prom
    r = run_cli(*_args(url, p), "--ca-file", str(d / "ca.pem"), "--client-cert",
                str(d / "client.pem"), "--client-key", str(d / "client.key"),
                "--basic-auth-user", USER, "--basic-auth-password-file", str(d / "password"),
                "--remote-write", url + "/api/v1/write")
    assert r.returncode == exitcodes.FINDINGS, r.stderr
    s = summary_line(r.stderr)
    assert s["first_cause"] == "2" and s["sinks"] == "remote_write:ok"
    assert PASSWORD not in r.stderr + r.stdout


def test_unknown_ca_is_refused(secure_prom) -> None:
    url, d, p = secure_prom
    r = run_cli(*_args(url, p), "--client-cert", str(d / "client.pem"), "--client-key",
                str(d / "client.key"))
    assert r.returncode == exitcodes.SOURCE_FAILURE
    assert "CERTIFICATE_VERIFY_FAILED" in r.stderr and "Traceback" not in r.stderr


def test_wrong_password_is_refused_without_leaking_it(secure_prom, tmp_path: Path) -> None:
    url, d, p = secure_prom
    wrong = tmp_path / "pw"
    wrong.write_text("not-the-password-either\n")
    r = run_cli(*_args(url, p), "--ca-file", str(d / "ca.pem"), "--client-cert",
                str(d / "client.pem"), "--client-key", str(d / "client.key"),
                "--basic-auth-user", USER, "--basic-auth-password-file", str(wrong))
    assert r.returncode == exitcodes.SOURCE_FAILURE
    assert "HTTP 401" in r.stderr
    assert "not-the-password-either" not in r.stderr + r.stdout


def test_missing_secret_file_is_a_usage_error(secure_prom, tmp_path: Path) -> None:
    url, _, p = secure_prom
    r = run_cli(*_args(url, p), "--bearer-token-file", str(tmp_path / "absent"))
    assert r.returncode == exitcodes.USAGE
    assert f"cannot read bearer token file {tmp_path / 'absent'}" in r.stderr


def test_remote_read_over_mtls_and_basic_auth(secure_prom) -> None:
    """The bulk read path (remote read) goes through the same TLS client and credentials."""
    from stormotel.analyzers.sources.prometheus import QueryWindow, load_prometheus

    url, d, p = secure_prom
    settings = http.HttpSettings(ca_file=d / "ca.pem", client_cert=d / "client.pem",
                                 client_key=d / "client.key", basic_auth_user=USER,
                                 basic_auth_password_file=d / "password")
    window = QueryWindow(JOB, p.start_ns - 2 * 10**9, p.end_ns + 2 * 10**9)
    tl, outcome = load_prometheus([url], window, settings=settings)
    assert not outcome.partial
    assert tl.meta["prometheus"]["read_api"] == {url: "remote_read"}
    assert sorted(tl.rank_ids) == [0, 1, 2, 3]
    assert all(tl.ranks[r].t_ns.size == 300 for r in tl.rank_ids)
