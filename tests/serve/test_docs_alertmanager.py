"""The Alertmanager configuration docs/serve.md shows is valid for Alertmanager 0.25
(``amtool check-config``), and its Slack text shows the report link."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests import servers

DOC = Path(__file__).resolve().parents[2] / "docs" / "serve.md"


def _yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)


def test_route_and_receiver_example_passes_amtool(tmp_path: Path) -> None:
    amtool = servers.require_binary("amtool")
    config = next(b for b in _yaml_blocks() if b.startswith("route:"))
    assert "report_url" in config and "/alertmanager" in config
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "stormotel-token").write_text("t")
    (secrets / "slack-url").write_text("https://hooks.slack.example/x")
    path = tmp_path / "alertmanager.yml"
    path.write_text(config.replace("/etc/alertmanager/secrets", str(secrets)))
    r = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout
    broken = path.read_text().replace("webhook_configs", "webhook_confs")
    path.write_text(broken)
    assert subprocess.run([amtool, "check-config", str(path)], capture_output=True,
                          timeout=60).returncode != 0
