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

.PHONY: help install demo test lint docs bench bench-quick clean

# Times measured on 2 cores shared with other jobs (load average in brackets); README.md has
# the same table.
help:
	@echo "make install          .venv with every extra (network-bound: 13 min wall, 69 s CPU, fresh clone)"
	@echo "make demo             FHAUC with 15 parties on breast-cancer data (40 s wall, load 15)"
	@echo "make test             the whole test suite, 6 workers (about 500 s CPU as time counts it, about 750 s with Flower's own processes; 5:49 to 6:26 wall on an idle 2-core machine with an installed .venv; 14 min on a host twice as slow)"
	@echo "make lint             ruff and mypy --strict"
	@echo "make docs             the documentation site into site/, warnings as errors (4.1 s CPU, 16 s wall, load 13)"
	@echo "make bench            FHAUC's cost table, a line per row (63 s CPU, 7.7 min wall at load 15-33)"
	@echo "make bench QUICK=1    15 and 100 parties, one run each (5.5 s CPU, 19 s wall, load 15)"
	@echo "make clean            remove .venv, caches and site/"

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(FIND_LINKS) -e ".[$(EXTRAS)]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/privfl demo

# Six workers on two cores: the real-process Flower tests spend most of their time waiting
# (a fresh ClientApp process per message, Flower's 3 s SuperNode poll), so tests/conftest.py
# starts them at the heads of four workers and the CPU-bound long tests at the heads of the
# other two, which keep the cores busy meanwhile (with four workers all starting on a Flower
# test, main's run kept 1.38 of 2 cores busy). Each extra worker costs its own start and
# collection (about 7 s of CPU).
# Time bounds in tests use CPU time (time.process_time), which parallel workers do not inflate.
# One OpenMP thread for torch and BLAS in the parallel workers (their CPU-time bounds count
# every thread). OpenFHE needs nothing: privfl chooses its threads itself, and
# tests/test_threshold_threads.py checks that choice in a clean environment, as users get it.
# tests/test_docs.py runs every code block of README.md and docs/ and builds the site (`make docs`).
# Last measured (issue 31 item 5, 1,431 tests, an installed .venv, an idle machine): 5:49 to
# 6:26 wall, about 500 s CPU as `time` counts it, the six workers busy alike (CPU-bound); an
# earlier cgroup run that also counts the Flower processes no test waits for counted 829 s
# (benchmarks/suite_cpu.py; docs/reproducing.md, "Fifth pass"). `--cpu-report FILE`
# (tests/_cpu_report.py) writes each test's CPU; docs/reproducing.md has the figures per test.
# Python's default of writing bytecode caches (PYTHONDONTWRITEBYTECODE empty): an environment
# that sets it (this machine's shell does) makes every worker recompile and every test
# module be assertion-rewritten again (collection 5.8 s of CPU instead of 3.5 s per worker),
# and every CLI, Flower and ClientApp process compile privfl's modules again.
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= OMP_NUM_THREADS=1 $(BIN)/pytest -q -n 6 --dist worksteal

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

# The documentation site, warnings as errors; `$(BIN)/mkdocs serve` previews it. 4.1 s CPU,
# 16 s wall at load 13 (43 s wall the first time on a fresh clone at load 15).
# NO_MKDOCS_2_WARNING: mkdocs-material's end-of-life banner is not a problem of this build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# FHAUC's cost table, one line per row as it goes: 463.5 s wall, 62.6 s CPU on a fresh clone
# (nice -n 19 next to other jobs, load 15-33; the 1000-party row 45 s, the N = 50 and N = 1000
# rows 2-3 min each under that load; an earlier version measured over 23 min).
# QUICK=1 (or bench-quick): 15 and 100 parties, one run each, about 20 s (16.4 s wall, 9.4 s
# CPU at load average 6.6; 18.6 s wall, 5.5 s CPU at load 15 on a fresh clone).
bench: $(STAMP)
	$(BIN)/python benchmarks/fhauc_semi_honest.py $(if $(QUICK),--quick)

bench-quick: $(STAMP)
	$(BIN)/python benchmarks/fhauc_semi_honest.py --quick

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
