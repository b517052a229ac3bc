# The commands the README names and CI runs are these targets; nothing else.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint typecheck contracts unit integration bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,anthropic]'
	touch $(STAMP)

install: $(STAMP)

## The main job: the weather agent answering with its tool, on the embedded store.
demo: install
	$(BIN)/python scripts/demo.py

## Everything CI checks: lint, types, import contracts, then every test tier.
test: lint typecheck contracts
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

contracts: install
	$(BIN)/lint-imports

unit: install
	$(BIN)/python -m pytest tests/unit

integration: install
	$(BIN)/python -m pytest tests/integration

bench: install
	$(BIN)/pip install --quiet -e '.[dev,anthropic,bench]'
	$(BIN)/python bench/turn_overhead.py
	$(BIN)/python bench/provider_overhead.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
