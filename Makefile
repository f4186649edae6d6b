# One Makefile for humans and CI. Every target bootstraps .venv from a clean clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test test-integration test-gpu notebooks bench lint format docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,ray,docs,experiments,serving]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/gcc-jax run

# Every unit test and every `>>>` example, on $(WORKERS) pytest-xdist workers (work stealing keeps
# each module's tests together). The slow suites are `make test-integration` (CI runs both):
#  - the experiments' toy runs end to end, the sharding tests (a subprocess with four CPU devices)
#    and the harness tests (pytest in subprocesses): the files of $(INTEGRATION), which `make test`
#    does not even collect;
#  - the tests marked `slow` in the other files (reverse mode through a whole decode, float32 at
#    N = 10^5, the documentation site's build and examples);
#  - the Ray tests (-m ray, all in $(RAY_TESTS): tests/conftest.py refuses a ray test elsewhere, so
#    that process collects one file): one process, one local Ray cluster, mostly waiting on actors;
#    without the jaxtyping checks of pyproject's addopts (instrumented closures cannot be pickled);
#    after the others, alone, because its serving tests compare measured latencies with the
#    serving model.
# jaxlib 0.10.2 on CPU sometimes segfaults inside libgcc's unwinder during an XLA compile, in a
# process that has already compiled and freed a few hundred programs (not ours to fix; see
# docs/testing.md). A test whose worker crashes is rerun, at most twice, on a fresh worker; a failing
# test is never rerun. Any test running over $(TEST_TIMEOUT) s fails (a hang cannot stall CI).
WORKERS      ?= 2
RAY_TESTS    := tests/test_distributed_ray.py
INTEGRATION  := tests/test_dnn.py tests/test_regimes.py tests/test_rates.py \
                tests/test_tune_experiment.py tests/test_adversarial_experiment.py \
                tests/test_compare_learned.py tests/test_sharding.py tests/test_harness.py \
                tests/test_serve_sim_toy.py tests/test_toy_outputs.py
TEST_TIMEOUT ?= 600
PYTEST       := $(BIN)/python -m pytest -q -p no:cacheprovider --timeout=$(TEST_TIMEOUT)
XDIST        := -n $(WORKERS) --dist worksteal --reruns 2 --only-rerun 'never rerun a failing test'
test: $(STAMP)
	$(PYTEST) -m "not ray and not slow" $(XDIST) --durations=15 \
	    $(addprefix --ignore=,$(INTEGRATION) $(RAY_TESTS)) $(TEST_ARGS)

test-integration: $(STAMP)
	@$(PYTEST) -m "not ray" $(XDIST) --durations=10 $(INTEGRATION) $(TEST_ARGS); main=$$?; \
	echo "--- tests marked slow (pytest -m slow) ---"; \
	$(PYTEST) -m "slow and not ray" $(XDIST) --durations=10 \
	    $(addprefix --ignore=,$(INTEGRATION) $(RAY_TESTS)) $(TEST_ARGS); slow=$$?; \
	echo "--- Ray tests (pytest -m ray, after the others: their latency checks need the cores) ---"; \
	$(PYTEST) -o addopts=-ra -m ray $(RAY_TESTS) $(TEST_ARGS); rayrc=$$?; \
	test $$main -eq 0 && test $$slow -eq 0 && { test $$rayrc -eq 0 || test $$rayrc -eq 5; }

# The suite on one GPU (JAX_PLATFORMS=cuda), with the tests' CPU-only parts skipped with their
# reasons (tests/conftest.py: markers cpu_only and ray). Needs no .venv: with none it runs the
# machine's own $(PYTHON) from the repository root (`make test-gpu PYTHON=python`), without
# jaxtyping's beartype checks (pyproject's addopts). $(GPU_WORKERS) xdist workers share the GPU,
# each allocating as it goes, up to $(GPU_MEM_FRACTION) of its memory; a test over
# $(GPU_TEST_TIMEOUT) s fails, and the whole run is interrupted after $(GPU_BUDGET) s (pytest then
# reports what ran). A module that cannot be imported on the machine (a missing optional
# package) is an error, not the end of the run. Log and junit XML in $$OUT when set, else in
# .test-gpu/. XLA's deterministic GPU operations stay off: with jax 0.11.2 they leave XLA without a
# float64 GEMM fusion config for the downdate's gradients (INTERNAL: no supported config).
GPU_PYTHON       ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))
GPU_PLATFORM     ?= cuda
GPU_WORKERS      ?= 8
GPU_MEM_FRACTION ?= 0.1
GPU_TEST_TIMEOUT ?= 240
GPU_BUDGET       ?= 420
# The command-line layer's tests (they need the `experiments` extra, run toy experiments whose
# numbers the CPU suite checks, and test no kernel) stay on the CPU.
GPU_IGNORE       ?= gcc_jax/experiments tests/test_adversarial_experiment.py tests/test_cli.py \
                    tests/test_cli_args.py tests/test_compare_learned.py tests/test_dnn.py \
                    tests/test_docs.py tests/test_extras.py tests/test_harness.py tests/test_io.py \
                    tests/test_rates.py tests/test_readme.py tests/test_regimes.py \
                    tests/test_tune_experiment.py tests/test_distributed_ray.py
test-gpu:
	@out=$${OUT:-.test-gpu}; mkdir -p "$$out"; \
	{ JAX_PLATFORMS=$(GPU_PLATFORM) XLA_PYTHON_CLIENT_PREALLOCATE=false \
	  XLA_PYTHON_CLIENT_MEM_FRACTION=$(GPU_MEM_FRACTION) PYTHONPATH=.$${PYTHONPATH:+:$$PYTHONPATH} \
	  timeout -s INT -k 30 $(GPU_BUDGET) $(GPU_PYTHON) -m pytest -q -p no:cacheprovider \
	    -o addopts= -ra --doctest-modules --doctest-ignore-import-errors \
	    --continue-on-collection-errors --timeout=$(GPU_TEST_TIMEOUT) \
	    -n $(GPU_WORKERS) --dist worksteal --durations=25 \
	    $(addprefix --ignore=,$(GPU_IGNORE)) \
	    --junitxml="$$out/pytest-gpu.xml" $(TEST_ARGS); echo $$? > "$$out/pytest-gpu.rc"; } \
	  2>&1 | tee "$$out/pytest-gpu.log"; \
	rc=$$(cat "$$out/pytest-gpu.rc"); echo "make test-gpu: pytest exit $$rc (log in $$out)"; \
	test "$$rc" -eq 0

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
