# privfl: every target installs what it needs into .venv, so `make test` works from a clean clone.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev,flower,audit]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/privfl demo

test: $(STAMP)
	$(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/fhauc_semi_honest.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
