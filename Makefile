# One Makefile for humans and CI. Every target bootstraps .venv from a clean clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test bench lint format docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,ray,docs]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/gcc-jax run

# Every core (pytest-xdist); each test module stays on one worker (tests/conftest.py).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --dist loadgroup --durations=20

# The same suite with every gcc_jax annotation checked at call time (jaxtyping + beartype).
test-types: $(STAMP)
	$(BIN)/python -m pytest -q --jaxtyping-packages=gcc_jax,beartype.beartype

bench: $(STAMP)
	$(BIN)/python bench/monte_carlo.py
	$(BIN)/python bench/sweep.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

docs: $(STAMP)
	$(BIN)/mkdocs build --strict

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
