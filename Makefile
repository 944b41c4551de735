# The README's two commands. Both install what they need themselves and are idempotent.
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_OUT ?= demo-out

.PHONY: demo test test-fast typecheck setup servers lint dashboards bench clean

demo: setup
	$(PY) -m stormotel demo --out $(DEMO_OUT)

test: setup servers
	$(PY) -m ruff check .
	$(PY) scripts/typecheck.py
	$(PY) -m pytest

# The edit loop (under a minute): everything except tests marked slow (multi-process torch jobs,
# a subprocess per test, headless Chromium) or servers (real Prometheus-family servers);
# tests/conftest.py marks them.
test-fast: setup
	$(PY) -m pytest -q -m "not slow and not servers"

typecheck: setup
	$(PY) scripts/typecheck.py

setup:
	@scripts/bootstrap.sh python

servers:
	@scripts/bootstrap.sh servers

lint: setup
	$(PY) -m ruff check .

dashboards: setup
	$(PY) -m stormotel dashboards --out dashboards/

clean:
	rm -rf $(DEMO_OUT) .pytest_cache
