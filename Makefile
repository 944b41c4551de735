# The README's two commands. Both install what they need themselves and are idempotent.
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_OUT ?= demo-out

.PHONY: demo test test-fast fuzz typecheck setup servers lint dashboards bench clean

demo: setup
	$(PY) -m stormotel demo --out $(DEMO_OUT)

# Three pytest workers (pytest-xdist) by default, on 2 cores: much of the suite waits on real
# servers, scrape intervals, hung jobs and tracked runs of seconds of real time (with two
# workers a run used 1.2 of the 2 cores), so the third fills that time. Not four: tests that
# bound a tracked run's wall time (tests/hostile, 12 s for a 3 s run) then share the cores with
# three CPU-bound neighbours (promtool, Prometheus evaluating 2,048 ranks). Each module
# stays on one worker (--dist loadscope), so its fixtures (a fleet of jobs, a Prometheus) run
# once, except tests/conftest.py's SPLIT_MODULES, handed out test by test. The timing-sensitive
# job fixtures take tests/cpu_lock.py. TEST_WORKERS=0 runs everything in one process.
# Bytecode is written (into the gitignored __pycache__/) even where the environment turns it
# off: the suite starts about a thousand interpreters, and without it each one compiled the
# stormotel modules it imports again (~0.2 s of CPU of a 0.7 s `stormotel analyze`) and every
# worker rewrote every test module's asserts again (half of a worker's 20 s of collection).
TEST_WORKERS ?= 3

# mypy (about a minute of one core from a clean clone) runs beside pytest at nice 10, not before
# it: on an idle machine it takes the time the tests spend waiting on servers and hung jobs, on a
# busy one what the neighbours leave, instead of adding its minute to the wall. Its output comes
# after the tests'; either one failing fails `make test`.
PYTEST_ARGS ?=

test: setup servers
	$(PY) -m ruff check .
	@log=$$(mktemp); nice -n 10 $(PY) scripts/typecheck.py > $$log 2>&1 & tc=$$!; \
	echo "env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder $(PYTEST_ARGS)  (scripts/typecheck.py beside it)"; \
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder $(PYTEST_ARGS); rc=$$?; \
	wait $$tc; tcrc=$$?; echo "$(PY) scripts/typecheck.py (exit $$tcrc):"; cat $$log; rm -f $$log; \
	test $$rc -eq 0 && test $$tcrc -eq 0

# The edit loop (under a minute): everything except tests marked slow (multi-process torch jobs,
# a subprocess per test, headless Chromium) or servers (real Prometheus-family servers);
# tests/conftest.py marks them.
test-fast: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder -m "not slow and not servers"

# Longer fuzzing of every reader and writer (tests/fuzz): the "long" hypothesis profile draws
# FUZZ_EXAMPLES fresh random examples per property (make test runs 25 fixed ones), the whole run
# bounded by FUZZ_SECONDS; a failure prints its @reproduce_failure blob. Last result:
# docs/security.md ("Fuzzing").
FUZZ_EXAMPLES ?= 400
FUZZ_SECONDS ?= 1800
fuzz: setup
	STORMOTEL_FUZZ=long STORMOTEL_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) timeout $(FUZZ_SECONDS) \
		$(PY) -m pytest -q -p no:cacheprovider -o timeout=0 tests/fuzz

typecheck: setup
	$(PY) scripts/typecheck.py

setup:
	@scripts/bootstrap.sh python

servers:
	@scripts/bootstrap.sh servers

lint: setup
	$(PY) -m ruff check .

dashboards: setup
	$(PY) -m stormotel dashboards   # dashboards/ and the chart's helm/stormotel/files/

clean:
	rm -rf $(DEMO_OUT) .pytest_cache
