"""Barycentric (rational and polynomial) interpolation matrices over masked nodes.

Both BACC (Berrut) and LCC (Lagrange) interpolate in the barycentric form

    r(z) = Σ_i' w_i y_i / (z − t_i)  /  Σ_i' w_i / (z − t_i),

the sums running over the *live* nodes only. Berrut's first-form rational interpolant takes
``w_i = (−1)^{rank(i)}`` (signs alternating over the live nodes in ascending order); the
interpolating polynomial takes the true barycentric weights ``w_i = 1 / Π_{j≠i} (t_i − t_j)``
(products over live nodes). Both are interpolatory: ``r(t_j) = y_j`` at a live node, which is
handled exactly (no division by zero) with the double-``where`` trick, so values *and*
gradients stay finite when a query point coincides with a node.

Everything is a fixed-shape matrix over all ``n`` nodes (dead columns are zero), so one
compilation serves every straggler pattern.
"""

from __future__ import annotations

import abc

import jax.numpy as jnp

from .._core.checks import float_dtype, node_status
from .._core.types import Array, Bool, Float, Int
from ._base import AbstractNodeCode, jit_method


def live_ranks(mask: Bool[Array, " n"]) -> Int[Array, " n"]:
    """0-based rank of each live node among the live nodes (masked cumulative sum)."""
    return jnp.cumsum(mask.astype(jnp.int32)) - 1


def berrut_weights(mask: Bool[Array, " n"], dtype) -> Float[Array, " n"]:
    """Berrut's weights ``(−1)^{rank}`` over the live nodes (ascending), 0 at dead nodes."""
    rank = live_ranks(mask)
    sign = jnp.where(rank % 2 == 0, 1.0, -1.0).astype(dtype)
    return jnp.where(mask, sign, 0.0)


def lagrange_weights(t: Float[Array, " n"], mask: Bool[Array, " n"]) -> Float[Array, " n"]:
    """Barycentric weights ``w_i ∝ 1 / Π_{j live, j≠i} (t_i − t_j)`` of the live nodes.

    Computed as ``sign · exp(log|w| − max log|w|)`` so that a common scale (which cancels in the
    barycentric formula) never under- or overflows, even for hundreds of nodes in float32.
    Dead nodes get weight 0. Needs distinct live nodes.
    """
    n = t.shape[0]
    diff = t[:, None] - t[None, :]
    use = mask[None, :] & ~jnp.eye(n, dtype=bool)
    safe = jnp.where(use, diff, 1.0)
    log_abs = -jnp.sum(jnp.log(jnp.abs(safe)), axis=1)
    sign = jnp.prod(jnp.sign(safe), axis=1)
    top = jnp.max(jnp.where(mask, log_abs, -jnp.inf))
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    log_ok = jnp.where(mask, log_abs, top)
    return jnp.where(mask, sign * jnp.exp(log_ok - top), 0.0)


def barycentric_matrix(
    t: Float[Array, " n"],
    w: Float[Array, " n"],
    mask: Bool[Array, " n"],
    tq: Float[Array, " q"],
) -> Float[Array, "q n"]:
    """``H`` with ``(H y)_q = Σ_i' w_i y_i/(tq_q − t_i) / Σ_i' w_i/(tq_q − t_i)`` over live ``i``.

    Where ``tq_q`` equals a live node ``t_j`` the row is the unit vector ``e_j`` (the limit of
    the formula). Dead columns are zero. Values and gradients are finite for any query point
    as long as the denominator does not vanish (it never does for Berrut's weights, nor for
    Lagrange weights off the nodes).
    """
    diff = tq[:, None] - t[None, :]
    live = mask[None, :]
    hit = live & (diff == 0)
    any_hit = jnp.any(hit, axis=1, keepdims=True)
    safe = jnp.where(hit | ~live, 1.0, diff)
    c = jnp.where(live & ~hit, w[None, :] / safe, 0.0)
    den = jnp.sum(c, axis=1, keepdims=True)
    den_ok = jnp.where(any_hit | (den == 0), 1.0, den)
    return jnp.where(any_hit, hit.astype(t.dtype), c / den_ok)


class AbstractBarycentricCode(AbstractNodeCode):
    """A node code whose encoder is the barycentric interpolant through ``(alpha_k, x_k)``.

    Shared by BACC and LCC: a subclass gives its weights (:meth:`node_weights`, Berrut's
    alternating signs or the polynomial's barycentric weights) and its decoder.
    """

    @staticmethod
    @abc.abstractmethod
    def node_weights(t: Float[Array, " n"], mask: Bool[Array, " n"]) -> Float[Array, " n"]:
        """The barycentric weights of the live nodes ``t[mask]`` (0 at dead nodes)."""

    @jit_method
    def encoder_matrix_with_status(self) -> tuple[Float[Array, "n k"], Int[Array, ""]]:
        """``E`` with ``X~ = E X``: the interpolant on ``alpha`` evaluated at ``beta``."""
        dtype = float_dtype(self.alpha, self.beta)
        alpha, beta = self.alpha.astype(dtype), self.beta.astype(dtype)
        live = jnp.ones(alpha.shape, bool)
        matrix = barycentric_matrix(alpha, self.node_weights(alpha, live), live, beta)
        return matrix, node_status(alpha) | node_status(beta)
