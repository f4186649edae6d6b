"""O(n) smoothing spline: a Hermite-form block-tridiagonal solve with 0/1 weights.

Same objective and convention as :mod:`gcc_jax._spline` (DESIGN §1): minimise
``Σ_i w_i (y_i − s(t_i))² + λ' ∫ s''²`` with ``λ' = n_live λ``. The minimiser is a natural cubic
spline with knots at the live nodes; as such a spline is also a natural cubic spline with knots
at *all* ``n`` nodes, we solve over the latter, which keeps every shape static. A spline on all
nodes is fixed by its values ``g_i = s(t_i)`` and slopes ``σ_i = s'(t_i)`` (cubic Hermite form).
Writing ``s''(t_i±)`` and ``s'''(t_i±)`` for one-sided derivatives (zero beyond the end nodes,
where the natural spline is linear), the optimality conditions are, for every node ``i``,

    s''(t_i−) − s''(t_i+) = 0                          (C² continuity; natural ends)
    w_i g_i + c_i (s'''(t_i+) − s'''(t_i−)) = w_i y_i,  c_i = w_i λ' + (1 − w_i)

the second being the Euler–Lagrange jump condition of the smoothing spline (a dead node has no
jump: it is not a knot). With ``λ = 0`` live rows become ``g_i = y_i`` (natural interpolation),
and dead end nodes are handled like any other node (the spline is then linear up to the first
live node). In ``z_i = (g_i, σ_i)`` the system is block tridiagonal with 2×2 blocks whose
diagonal blocks are nonsingular for every mask (determinant ``−4(a+b)w − 12c(a+b)⁴`` with
``a = 1/h_{i−1}``, ``b = 1/h_i``), so block Gaussian elimination needs no pivoting. It runs as
one forward and one backward ``lax.scan``: O(n · m) work and memory per straggler pattern,
static shapes, vmappable over masks, differentiable with respect to ``y``, ``λ`` and ``t``.
Rows are scaled to O(1) entries, which keeps float32 accurate.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from ._types import Array

__all__ = ["solve_banded", "evaluate"]


def _inv2(m: Array) -> Array:
    """Inverse of a 2×2 matrix (closed form)."""
    det = m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]
    return jnp.stack([jnp.stack([m[1, 1], -m[0, 1]]), jnp.stack([-m[1, 0], m[0, 0]])]) / det


def _blocks(t: Array, w: Array, lam_eff: Array):
    """Lower, diagonal, upper 2×2 blocks ``(n, 2, 2)`` and the data-row scale ``(n,)``."""
    h = jnp.diff(t)
    zero1 = jnp.zeros((1,), t.dtype)
    a = jnp.concatenate([zero1, 1.0 / h])  # 1/h_{i-1}; 0 at i = 0 (linear to the left)
    b = jnp.concatenate([1.0 / h, zero1])  # 1/h_i; 0 at i = n-1 (linear to the right)
    c = w * lam_eff + (1.0 - w)
    # C² row: s''(t_i−) − s''(t_i+) = 0, in (g, σ) of nodes i−1, i, i+1
    k_lower = jnp.stack([6 * a * a, 2 * a], axis=-1)
    k_diag = jnp.stack([6 * (b * b - a * a), 4 * (a + b)], axis=-1)
    k_upper = jnp.stack([-6 * b * b, 2 * b], axis=-1)
    k_scale = (1.0 / (6 * (a * a + b * b) + 4 * (a + b)))[:, None]
    # jump J_i = s'''(t_i+) − s'''(t_i−)
    j_lower = jnp.stack([-12 * a**3, -6 * a * a], axis=-1)
    j_diag = jnp.stack([12 * (a**3 + b**3), 6 * (b * b - a * a)], axis=-1)
    j_upper = jnp.stack([-12 * b**3, 6 * b * b], axis=-1)
    d_scale = 1.0 / (w + c * 12 * (a**3 + b**3))
    cs = (c * d_scale)[:, None]
    unit = jnp.stack([w * d_scale, jnp.zeros_like(w)], axis=-1)
    lower = jnp.stack([k_lower * k_scale, cs * j_lower], axis=1)
    diag = jnp.stack([k_diag * k_scale, unit + cs * j_diag], axis=1)
    upper = jnp.stack([k_upper * k_scale, cs * j_upper], axis=1)
    return lower, diag, upper, d_scale


def _line_fit(t: Array, w: Array, y: Array) -> tuple[Array, Array]:
    """Weighted least-squares line ``y ≈ α + β t`` over the live points; ``α, β`` of shape (r,)."""
    n_live = jnp.sum(w)
    tbar = jnp.sum(w * t) / n_live
    dt = (t - tbar) * w
    beta = (dt @ y) / jnp.sum(dt * (t - tbar))
    alpha = (w @ y) / n_live - beta * tbar
    return alpha, beta


def solve_banded(t: Array, mask: Array, lam: Array, y: Array) -> tuple[Array, Array]:
    """Values ``g`` and slopes ``σ`` of the fitted spline at all nodes, each ``(n, r)``.

    Args:
        t: strictly increasing nodes ``(n,)``.
        mask: boolean ``(n,)``; True = live.
        lam: ``λ ≥ 0`` (the mean-data-term convention; ``λ' = n_live λ`` is formed here).
        y: data ``(n, r)``; dead rows must be finite (they are multiplied by 0).
    """
    w = mask.astype(t.dtype)
    # The smoother reproduces lines and its output for line-free data is W-orthogonal to lines.
    # Fit the least-squares line first and smooth the residual; afterwards project the solve's
    # error out of the line directions, which are the ill-conditioned ones when λ' is large.
    alpha, beta = _line_fit(t, w, y)
    resid = (y - alpha[None, :] - t[:, None] * beta[None, :]) * w[:, None]
    lower, diag, upper, d_scale = _blocks(t, w, jnp.sum(w) * lam)
    rhs = jnp.stack([jnp.zeros_like(y), (w * d_scale)[:, None] * resid], axis=1)  # (n, 2, r)

    def forward(carry, inputs):
        dinv_prev, upper_prev, r_prev = carry
        lo, di, up, r = inputs
        x = lo @ dinv_prev
        dinv = _inv2(di - x @ upper_prev)
        r_new = r - x @ r_prev
        return (dinv, up, r_new), (dinv, r_new)

    zeros22 = jnp.zeros((2, 2), t.dtype)
    init = (zeros22, zeros22, jnp.zeros(rhs.shape[1:], t.dtype))
    _, (dinvs, rs) = lax.scan(forward, init, (lower, diag, upper, rhs))

    def backward(z_next, inputs):
        dinv, up, r = inputs
        z = dinv @ (r - up @ z_next)
        return z, z

    zr = jnp.zeros(rhs.shape[1:], t.dtype)
    _, z = lax.scan(backward, zr, (dinvs, upper, rs), reverse=True)
    g, sigma = z[:, 0], z[:, 1]
    alpha_err, beta_err = _line_fit(t, w, g)
    g = g + (alpha - alpha_err)[None, :] + t[:, None] * (beta - beta_err)[None, :]
    sigma = sigma + (beta - beta_err)[None, :]
    return g, sigma


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
