# One Makefile for humans and CI. Every target bootstraps .venv from a clean clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test notebooks bench lint format docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,ray,docs,experiments]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/gcc-jax run

# Every test and every `>>>` example. Two parts run at once:
#  - the Ray tests (-m ray, all in $(RAY_TESTS): tests/conftest.py refuses a ray test elsewhere, so
#    this process collects one file): one process, one local Ray cluster, mostly waiting on actors;
#    without the jaxtyping checks of pyproject's addopts (instrumented closures cannot be pickled);
#  - the rest on $(WORKERS) pytest-xdist workers (work stealing keeps each module's tests together).
# jaxlib 0.10.2 on CPU sometimes segfaults inside libgcc's unwinder during an XLA compile, in a
# process that has already compiled and freed a few hundred programs (not ours to fix; see
# docs/testing.md). A test whose worker crashes is rerun, at most twice, on a fresh worker; a failing
# test is never rerun. Any test running over $(TEST_TIMEOUT) s fails (a hang cannot stall CI).
WORKERS      ?= 2
RAY_TESTS    := tests/test_distributed_ray.py
TEST_TIMEOUT ?= 600
PYTEST       := $(BIN)/python -m pytest -q -p no:cacheprovider --timeout=$(TEST_TIMEOUT)
XDIST        := -n $(WORKERS) --dist worksteal --reruns 2 --only-rerun 'never rerun a failing test'
test: $(STAMP)
	@rm -f .ray-tests.log; \
	$(PYTEST) -o addopts=-ra -m ray $(RAY_TESTS) $(TEST_ARGS) > .ray-tests.log 2>&1 & ray=$$!; \
	$(PYTEST) -m "not ray" $(XDIST) --durations=15 $(TEST_ARGS); main=$$?; \
	wait $$ray; rayrc=$$?; echo "--- Ray tests (pytest -m ray, exit $$rayrc) ---"; cat .ray-tests.log; \
	test $$main -eq 0 && { test $$rayrc -eq 0 || test $$rayrc -eq 5; }

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
