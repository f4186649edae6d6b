"""Test session set-up for ``tests/`` and the doctests in ``gcc_jax/`` (``make test``).

CPU, float64 (reference comparisons) and toy sizes. Nothing here imports gcc_jax: jaxtyping's
import hook (``--jaxtyping-packages`` in pyproject.toml) must see it imported first.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("GCC_JAX_TOY", "1")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
# Tests compile hundreds of small programs and run each a few times: LLVM's optimisation level 0
# (JAX's switch for it) cuts the suite's compile time by about a quarter. It changes code
# generation only; XLA's HLO passes, and so the arithmetic the tests check, are the same.
jax.config.update("jax_disable_most_optimizations", True)
