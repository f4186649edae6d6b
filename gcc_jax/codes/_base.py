"""Shared plumbing of the codes: input checks, flattening, the ``Decoded`` result."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from .._status import GCCValueError, is_concrete
from .._types import Array, Int


class Decoded(NamedTuple):
    """A decoded estimate and its :class:`gcc_jax.Status` flags (0 = valid).

    Attributes:
        value: estimates of ``f(x_k)``, shape ``(k, *out)``; NaN where ``status != 0``.
        status: int32 scalar (one per pattern under ``vmap``).
    """

    value: Array
    status: Int[Array, ""]


def check_inputs(x, k: int, name: str = "x") -> Array:
    """``x`` must have one leading row per input; NaN/Inf is rejected in eager calls."""
    x = jnp.asarray(x)
    if x.ndim < 1 or x.shape[0] != k:
        raise ValueError(f"`{name}` must have shape ({k}, ...), one row per input; got {x.shape}")
    if is_concrete(x) and jnp.issubdtype(x.dtype, jnp.inexact):
        if not np.all(np.isfinite(np.asarray(x))):
            raise GCCValueError(f"`{name}` contains NaN or Inf")
    return x


def check_outputs(y, mask, n: int, name: str = "y") -> tuple[Array, Array]:
    """``y`` must have one row per worker and ``mask`` be boolean of shape ``(n,)``."""
    y = jnp.asarray(y)
    if y.ndim < 1 or y.shape[0] != n:
        raise ValueError(f"`{name}` must have one row per worker (n={n}); got shape {y.shape}")
    mask = jnp.asarray(mask)
    if mask.dtype != jnp.bool_:
        raise TypeError(
            f"`mask` must be boolean (True = the worker returned in time); got dtype {mask.dtype}"
        )
    if mask.shape != (n,):
        raise ValueError(
            f"`mask` must have shape ({n},), one entry per worker; got {mask.shape} "
            "(use jax.vmap over decode for a batch of masks)"
        )
    return y, mask


def apply_rows(matrix: Array, x: Array) -> Array:
    """``matrix @ x`` over the leading axis of ``x`` of any trailing shape."""
    flat = x.reshape(x.shape[0], -1)
    return (matrix @ flat).reshape((matrix.shape[0], *x.shape[1:]))
