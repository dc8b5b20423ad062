# The two commands a new user needs:  make demo  (runs the main job end to end)
#                                      make test  (installs everything, runs every test)
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export PYSPARK_PYTHON := $(abspath $(PY))

.PHONY: setup setup-test demo test test-fast test-soak lint lint-only bench bench-quick bench-report clean

setup:                ## venv + package + JVM jars (idempotent)
	bash scripts/setup.sh

setup-test:           ## setup + the Debian services the tests start (PostgreSQL, Chromium)
	bash scripts/setup.sh --test-services

demo: setup           ## the main job end to end on embedded defaults
	$(VENV)/bin/reckon demo

# Test workers: each is one pytest session with its own SparkSession; module fixtures stay on
# one worker (--dist loadgroup, tests/conftest.py). 2 fits a 2-core, 8 GiB machine or more; 3
# on 2 cores made the suite 72 minutes (2026-11-29: the tests are CPU-bound, and three JVMs
# thrash two cores).
TEST_WORKERS ?= 2
# Each test's CPU seconds (its JVMs and subprocesses included; tests/cpu_profile.py): the 30
# hungriest are printed after the 30 slowest, which on a shared machine say less.
TEST_CPU_DIR ?= .cache/test-cpu

test: setup-test      ## every test: fast tier, then the Spark tier, on $(TEST_WORKERS) workers
	rm -rf $(TEST_CPU_DIR)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --cpu-profile $(TEST_CPU_DIR) $(PYTEST_ARGS)

test-fast: setup      ## pure logic only, seconds
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "not spark and not soak and not lint" $(PYTEST_ARGS)

test-soak: setup-test ## the long reliability runs (random kills, standalone cluster), ~30 min
	$(PY) -m pytest -q -m soak $(PYTEST_ARGS)

lint: setup lint-only

lint-only:            ## ruff and mypy (the core strict), no setup; make test runs it (tests/test_lint.py)
	$(VENV)/bin/ruff check reckon storage spark audits reports workbench app dags bench plugins tests scripts
	$(VENV)/bin/mypy reckon storage spark audits reports workbench app dags bench plugins

bench-quick: setup
	$(PY) -m bench --quick

bench: setup
	$(PY) -m bench

bench-report:         ## BENCHMARKS.md from bench/results and bench/notes, running nothing
	$(PY) -m bench --report-only

clean:
	rm -rf warehouse .pytest_cache .hypothesis
