"""Test session set-up for ``tests/`` and the doctests in ``gcc_jax/`` (``make test``).

CPU, float64 (reference comparisons) and toy sizes. Nothing here imports gcc_jax: jaxtyping's
import hook (``--jaxtyping-packages`` in pyproject.toml) must see it imported first.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("GCC_JAX_TOY", "1")


def _xla_flags():
    # gcc_jax/_core/xla_flags.py: XLA's classic CPU emitters (the command line's setting: about half
    # the compile time and memory on our graphs) and one code-generation thread per compilation
    # (the suite keeps every core busy with compilations; splitting each one adds ~15% CPU). The
    # file is loaded by path, since gcc_jax itself must be imported after jaxtyping's import
    # hook is in place.
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parent / "gcc_jax" / "_core" / "xla_flags.py"
    spec = importlib.util.spec_from_file_location("_gcc_jax_test_xla_flags", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.add_xla_flags(module.FLAG, module.SERIAL_CODEGEN)


_xla_flags()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
# Tests compile hundreds of small programs and run each a few times: LLVM's optimisation level 0
# (JAX's switch for it) cuts the suite's compile time by about a quarter. It changes code
# generation only; XLA's HLO passes, and so the arithmetic the tests check, are the same.
jax.config.update("jax_disable_most_optimizations", True)
# Source locations are attached to every lowered operation, with up to 100 Python frames each
# (pytest's frames included): the suite never reads them, and building them costs ~2% of its CPU.
jax.config.update("jax_traceback_in_locations_limit", 0)


def pytest_unconfigure(config):
    """pytest-xdist workers leave without tearing the interpreter down.

    A worker that has compiled a few thousand XLA programs spends seconds at exit freeing them
    (JAX's exit handlers, then the interpreter's own teardown), and the controller waits for it
    before it reports. By the time this hook runs, the worker has sent every result and its
    exit status to the controller, so skipping the teardown loses nothing.
    """
    # only a worker has `workerinput`: PYTEST_XDIST_WORKER is inherited by any pytest a test runs
    if hasattr(config, "workerinput"):
        import atexit
        import sys

        def leave_now():  # registered last, so it runs before JAX's exit handlers
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

        atexit.register(leave_now)
