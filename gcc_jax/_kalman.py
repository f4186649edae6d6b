"""O(n) smoothing spline at all nodes (``solver="kalman"``): values and slopes for :class:`Spline`.

Same objective and convention as :mod:`gcc_jax._spline` (DESIGN §1): minimise
``Σ_i w_i (y_i − s(t_i))² + λ' ∫ s''²`` with weights ``w_i ≥ 0`` and ``λ' = (Σw) λ``. The
minimiser is a natural cubic spline with knots at the live (``w_i > 0``) nodes;
:func:`solve_kalman` returns its values ``s(t_i)`` and slopes ``s'(t_i)`` at *all* ``n`` nodes
(static shapes), from which :func:`evaluate` rebuilds it exactly (cubic Hermite pieces between
nodes, linear beyond the end nodes).

The solve is the scale-free Kalman filter and de Jong smoother of :mod:`gcc_jax._kalman_batch`
(integrated-Wiener-process prior observed with variance ``λ'/w_i``, diffuse start by
augmentation, time, slope, covariance and
data rescaled so that float32 holds for any node spacing, ``λ ≥ 0`` and ``|y|``), emitting the
smoothed state at every node; the batched decoder uses the same recursion emitting only at the
query points.
"""

import jax
import jax.numpy as jnp

from ._kalman_batch import smooth_nodes
from ._types import Array

__all__ = ["solve_kalman", "evaluate"]


def solve_kalman(t: Array, w: Array, lam: Array, y: Array) -> tuple[Array, Array]:
    """Values and slopes of the fitted spline at all nodes, each of shape ``(n, r)``.

    Args:
        t: strictly increasing nodes ``(n,)``.
        w: weights ``(n,)``, ``≥ 0`` (a boolean mask is the 0/1 case); 0 = not observed.
        lam: ``λ ≥ 0`` (mean-data-term convention; ``λ' = (Σw) λ`` is formed here).
        y: data ``(n, r)``; zero-weight rows must be finite (they are never used).
    """
    return smooth_nodes(t, w, lam, y)


@jax.jit  # one program per shape: an eager spline(tq) call would dispatch ~20 operations
def evaluate(t: Array, g: Array, sigma: Array, tq: Array) -> Array:
    """Evaluate the cubic Hermite interpolant of values ``g`` and slopes ``σ`` at ``tq``.

    Cubic between nodes; linear beyond ``t_1`` and ``t_n`` with the end slopes (the natural
    spline's extension). ``g`` and ``σ`` have shape ``(n, r)``; returns ``(q, r)``.
    """
    n = t.shape[0]
    j = jnp.clip(jnp.searchsorted(t, tq, side="right") - 1, 0, n - 2)
    t0 = t[j]
    h = (t[j + 1] - t0)[:, None]
    u = (jnp.clip(tq, t[0], t[-1])[:, None] - t0[:, None]) / h
    u2 = u * u
    u3 = u2 * u
    inside = (
        (2 * u3 - 3 * u2 + 1) * g[j]
        + (u3 - 2 * u2 + u) * h * sigma[j]
        + (3 * u2 - 2 * u3) * g[j + 1]
        + (u3 - u2) * h * sigma[j + 1]
    )
    below = jnp.minimum(tq - t[0], 0.0)[:, None]
    above = jnp.maximum(tq - t[-1], 0.0)[:, None]
    return inside + below * sigma[0][None, :] + above * sigma[-1][None, :]
