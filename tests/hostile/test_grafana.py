"""A hostile Grafana (the documented annotation API, misbehaving): an annotation stored and then
answered with 500 is not created twice on retry, and a listing without ``id`` is a sink failure
(exit 4) in one line, not a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from stormotel import exitcodes
from tests.hostile.corpus import events, healthy_folder, write
from tests.hostile.harness import assert_clean, run_bounded
from tests.job.stubs import GrafanaStub, _GrafanaHandler

TOKEN = "grafana-token-for-hostile-tests"


class _StoredThen500(_GrafanaHandler):
    """Stores the first POSTed annotation, then answers 500 (a proxy timing out after the
    write); lists annotations without ``id`` when the stub says so."""

    def _json(self, status: int, doc: object) -> None:
        g = self.server.owner  # type: ignore[attr-defined]
        if self.command == "POST" and self.path == "/api/annotations" and not g.failed:
            g.failed = True
            return super()._json(500, {"message": "upstream timeout"})
        if self.command == "GET" and g.drop_ids and isinstance(doc, list):
            doc = [{k: v for k, v in a.items() if k != "id"} for a in doc]
        return super()._json(status, doc)


class HostileGrafana(GrafanaStub):
    def __init__(self, *, drop_ids: bool = False) -> None:
        super().__init__(TOKEN)
        self.httpd.RequestHandlerClass = _StoredThen500
        self.failed = False
        self.drop_ids = drop_ids


def _faulted(folder: Path) -> Path:
    healthy_folder(folder)
    write(folder / "rank2.json", events(2, 200, grow_at=100))
    return folder


def _run(folder: Path, url: str, fresh: bool = False) -> object:
    return run_bounded("analyze", str(folder), "-q", "--grafana-url", url,
                       "--http-retries", "2", env={"GRAFANA_TOKEN": TOKEN}, fresh=fresh)


def test_stored_then_500_annotation_is_not_duplicated(tmp_path):
    folder = _faulted(tmp_path / "job")
    with HostileGrafana() as g:
        run = _run(folder, g.url)
        assert_clean(run, exitcodes.FINDINGS)
        keys = [t for a in g.annotations for t in a["tags"] if t.startswith("stormotel-key=")]
        assert g.failed and keys and len(keys) == len(set(keys)), json.dumps(g.annotations)


def test_listing_without_id_is_a_sink_failure(tmp_path):
    folder = _faulted(tmp_path / "job")
    with HostileGrafana(drop_ids=True) as g:
        g.failed = True
        assert_clean(_run(folder, g.url), exitcodes.FINDINGS)  # first run creates
        before = len(g.annotations)
        write(folder / "rank3.json", events(3, 200, grow_at=150))  # the text changes
        run = _run(folder, g.url, fresh=True)  # exit 4 from a fresh interpreter
        assert run.code == exitcodes.SINK_FAILURE and "Traceback" not in run.stderr
        assert "no numeric id" in run.stderr and len(g.annotations) == before
