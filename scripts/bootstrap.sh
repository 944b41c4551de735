#!/usr/bin/env bash
# Idempotent set-up for `make demo` / `make test` on a fresh Debian machine with Python 3.11.
#   scripts/bootstrap.sh python   - virtualenv with CPU torch and stormotel[all,dev,nvml,torch]
#   scripts/bootstrap.sh servers  - Debian packages: Prometheus (+promtool), VictoriaMetrics,
#                                   Pushgateway (tests start them on loopback themselves),
#                                   Chromium (headless checks of the HTML report)
# Each step is skipped when its stamp says it is already done for the current inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
export PIP_DISABLE_PIP_VERSION_CHECK=1

need_root() { if [ "$(id -u)" != 0 ]; then echo "bootstrap: $1 needs root (apt-get)" >&2; exit 2; fi; }

apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  need_root "installing ${missing[*]}"
  echo "bootstrap: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

python_env() {
  if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then apt_install python3-venv; fi
  local stamp="$VENV/.stormotel-stamp"
  local want
  want=$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$VENV/bin/python" ]; then return 0; fi
  echo "bootstrap: creating virtualenv $VENV (CPU torch + stormotel[all,dev,nvml,torch])"
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  # torch first, pinned, so nothing later resolves a CUDA build from the registry.
  # pip runs quietly, so each step says what it waits for: a fresh clone's set-up took 11 min
  # of a 12.5 min `make demo` on a busy 2-core machine, silent after the line above.
  local t0=$SECONDS
  echo "bootstrap: [1/2] pip install torch==2.13.0 (CPU build) numpy — the big download; minutes"
  "$VENV/bin/pip" install -q torch==2.13.0 numpy 2>&1 | grep -v "is ignored: it is neither" || true
  "$VENV/bin/python" -c 'import torch' # fail loudly if torch did not install
  echo "bootstrap: [2/2] pip install -e '.[all,dev,nvml,torch]' (stormotel and its test tools)"
  "$VENV/bin/pip" install -q -e '.[all,dev,nvml,torch]' 2>&1 | grep -v "is ignored: it is neither" || true
  "$VENV/bin/python" -c 'import stormotel, opentelemetry.sdk, grafanalib' # fail loudly
  echo "$want" > "$stamp"
  echo "bootstrap: $VENV ready in $((SECONDS - t0)) s"
}

servers() {
  apt_install prometheus victoria-metrics prometheus-pushgateway ca-certificates openssl chromium
  apt_install prometheus-alertmanager   # amtool (runbook route check), stormotel serve's live tests
  # The Debian packages start system services on install; tests run their own instances on
  # free loopback ports, so the system ones are stopped to keep ports and CPU free.
  for svc in prometheus victoria-metrics prometheus-pushgateway prometheus-node-exporter prometheus-alertmanager; do
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
      systemctl stop "$svc" || true
    fi
  done
}

case "${1:-python}" in
  python) python_env ;;
  servers) servers ;;
  all) python_env; servers ;;
  *) echo "usage: $0 python|servers|all" >&2; exit 2 ;;
esac
