"""Fill rules: the estimate a code without coding reports for an input with no result.

Uncoded computation, replication and grouped ParM (a group that lost two or more workers) can
lose an input outright. Given the estimates ``v`` (``(K, m)``) and which of them exist
(``have``, ``(K,)``), a fill rule replaces every missing row:

* ``"zero"``: the constant ``fill_value`` (``0`` unless set) — "no answer";
* ``"mean"``: the mean of the existing estimates of the batch, ``(1/|A|) Σ_{j ∈ A} v_j``
  (``A`` = the inputs with a result); ``fill_value`` when none exists;
* ``"interpolate"``: linear interpolation, in the encoding order of the inputs, between the
  nearest existing estimates on either side: for ``l < k < r`` with ``l``, ``r`` the nearest
  indices with a result, ``v_l + (k − l)/(r − l) · (v_r − v_l)``; the nearest one when only one
  side has a result; ``fill_value`` when none exists. It is a good guess when neighbouring
  inputs have neighbouring outputs — inputs put in order first
  (:func:`gcc_jax.input_order`) — and a poor one for inputs in arbitrary order.

The rules use only what the master holds (the returned outputs), never ``f`` of a lost input.
"""

import jax
import jax.numpy as jnp
import numpy as np

from .._core.scalars import as_choice
from .._core.types import Array, Bool, Float

__all__ = ["FILLS", "check_fill", "check_fill_value", "fill_missing"]

FILLS = ("zero", "mean", "interpolate")
"""Fill rules for a missing result (module docstring)."""


def check_fill(fill) -> str:
    """``fill`` must be one of :data:`FILLS`."""
    return as_choice(fill, "fill", FILLS)


def check_fill_value(value) -> float:
    """``fill_value`` must be a finite Python float (it enters the loss)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise TypeError(f"`fill_value` must be a Python float; got {type(value).__name__}")
    if not np.isfinite(value):
        raise ValueError(f"`fill_value` must be finite (it enters the loss); got {value}")
    return float(value)


def fill_missing(
    value: Float[Array, "k m"], have: Bool[Array, " k"], fill: str, fill_value: float
) -> Float[Array, "k m"]:
    """``value`` with every row where ``have`` is False replaced by the rule ``fill``.

    Missing rows of ``value`` may hold anything finite (they are never read). Pure and
    differentiable in ``value``; ``fill`` and ``fill_value`` are static.

    Example:
        >>> import jax.numpy as jnp
        >>> v = jnp.array([[1.0], [9.0], [3.0], [9.0]])
        >>> have = jnp.array([True, False, True, False])
        >>> [fill_missing(v, have, r, 0.0).ravel().tolist() for r in FILLS]
        [[1.0, 0.0, 3.0, 0.0], [1.0, 2.0, 3.0, 2.0], [1.0, 2.0, 3.0, 3.0]]
    """
    k = value.shape[0]
    const = jnp.asarray(fill_value, value.dtype)
    safe = jnp.where(have[:, None], value, 0.0)
    if fill == "zero":
        est = jnp.broadcast_to(const, value.shape)
    elif fill == "mean":
        count = jnp.sum(have)
        mean = jnp.sum(safe, axis=0) / jnp.maximum(count, 1).astype(value.dtype)
        est = jnp.broadcast_to(jnp.where(count > 0, mean, const), value.shape)
    else:
        idx = jnp.arange(k)
        left = jax.lax.cummax(jnp.where(have, idx, -1))  # nearest index ≤ k with a result
        right = jax.lax.cummin(jnp.where(have, idx, k), reverse=True)  # nearest ≥ k
        has_l, has_r = left >= 0, right < k
        vl = safe[jnp.clip(left, 0, k - 1)]
        vr = safe[jnp.clip(right, 0, k - 1)]
        inner = has_l & has_r & (right > left)  # a missing input between two results
        gap = jnp.where(inner, right - left, 1).astype(value.dtype)
        w = jnp.where(inner, (idx - left).astype(value.dtype) / gap, 0.0)[:, None]
        both = vl + w * (vr - vl)
        est = jnp.where(
            (has_l & has_r)[:, None],
            both,
            jnp.where(has_l[:, None], vl, jnp.where(has_r[:, None], vr, const)),
        )
    return jnp.where(have[:, None], value, est)
