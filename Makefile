# privfl: every target installs what it needs into .venv, so `make test` works from a clean clone.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# OpenFHE for Python 3.11 is a local wheel (the registry's openfhe wheels load only on Ubuntu's
# Python 3.10/3.12): when the folder WHEELS holds it, pip installs openfhe from there (the
# [threshold] extra pins exactly that build on 3.11) and the extra is installed with the rest.
# `make install WHEELS=/path/to/wheelhouse` points elsewhere.
WHEELS ?= ../shared/wheels
HAVE_WHEELS := $(wildcard $(WHEELS)/openfhe-*.whl)
comma := ,
EXTRAS := dev,docs,flower,audit$(if $(HAVE_WHEELS),$(comma)threshold)
FIND_LINKS := $(if $(HAVE_WHEELS),--find-links $(WHEELS))

.PHONY: install demo test lint docs bench bench-quick clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(FIND_LINKS) -e ".[$(EXTRAS)]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/privfl demo

# Four workers on two cores: the Flower tests spend most of their time waiting for processes
# (a fresh ClientApp process per message, Flower's heartbeat), so they overlap with the rest.
# Time bounds in tests use CPU time (time.process_time), which parallel workers do not inflate.
# One OpenMP thread for torch and BLAS in four parallel workers (their CPU-time bounds count
# every thread). OpenFHE needs nothing: privfl chooses its threads itself, and
# tests/test_threshold_threads.py checks that choice in a clean environment, as users get it.
# tests/test_docs.py runs every code block of README.md and docs/ and builds the site (`make docs`).
# tests/conftest.py starts the longest tests first, one at the head of each worker's share.
# Last measured (issue 31): 640 s user + 87 s system CPU, 18 min 23 s wall on 2 cores shared
# with other jobs (load average up to 34); the real-process Flower tests and the training
# pages hold half of it: docs/reproducing.md has the figures per test.
test: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/pytest -q -n 4 --dist worksteal

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

# The documentation site, warnings as errors; `$(BIN)/mkdocs serve` previews it.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

# FHAUC's cost table: over 23 min on 2 cores (the 1000-party row most of it), one line per
# row as it goes; QUICK=1 (or bench-quick): 15 and 100 parties, one run each, about 20 s
# (16.4 s wall, 9.4 s CPU at load average 6.6).
bench: $(STAMP)
	$(BIN)/python benchmarks/fhauc_semi_honest.py $(if $(QUICK),--quick)

bench-quick: $(STAMP)
	$(BIN)/python benchmarks/fhauc_semi_honest.py --quick

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
