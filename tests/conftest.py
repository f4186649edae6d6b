"""Tests run in float64 (reference comparisons), on the CPU."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("GCC_JAX_TOY", "1")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
