# One Makefile for humans and CI. Every target bootstraps .venv from a clean clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test test-types notebooks bench lint format docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,ray,docs]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/gcc-jax run

# 4 pytest-xdist workers; each test module stays on one worker (tests/conftest.py). A process that
# has compiled and freed a few hundred XLA programs was seen to crash inside libgcc's unwinder
# (jaxlib 0.10.2, CPU): each worker runs about a quarter of the suite (~3 GB peak each).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 4 --dist loadgroup --durations=20

# The same suite with every gcc_jax annotation checked at call time (jaxtyping + beartype).
test-types: $(STAMP)
	$(BIN)/python -m pytest -q -n 4 --dist loadgroup --jaxtyping-packages=gcc_jax,beartype.beartype

bench: $(STAMP)
	$(BIN)/python bench/monte_carlo.py
	$(BIN)/python bench/sweep.py

# Every notebook executed at toy sizes (documentation that runs; CI runs it after make test).
notebooks: $(STAMP)
	$(BIN)/python -m pytest -q notebooks/test_notebooks.py

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
