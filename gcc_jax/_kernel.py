"""Gram-form (reproducing-kernel) smoothing spline: the O(n³) reference solver.

Same objective and convention as :mod:`gcc_jax._spline` (DESIGN §1); the default O(n) solver is
the Kalman smoother in :mod:`gcc_jax._kalman`.

Representation (reproducing kernel of ``{g : g(a) = g'(a) = 0}`` on ``[a, ∞)``):

    R(s, t) = (u − a)² (3v − u − 2a) / 6,   u = min(s, t), v = max(s, t),

anchored at ``a = t_1`` (the first node; ``a = −1`` for Chebyshev-2 workers, as in DESIGN §1),
and ``s(x) = d_0 + d_1 x + Σ_i c_i R(x, t_i)``. The coefficients solve the symmetric saddle-point
system of fixed size ``n + 2``

    [[W Σ W + λ' W + (I − W),  W T],   [c]   [W y]
     [Tᵀ W,                    0  ]] · [d] = [ 0 ],     Σ_ij = R(t_i, t_j), T = [1, t],

with ``W = diag(w)`` and ``λ' = n_live λ``. A dead row reduces to ``c_i = 0``, so a masked fit
is exactly the fit on the survivors while every shape stays ``n`` (no retrace per mask). The
``Tᵀc = 0`` side conditions make ``s`` linear left of the first live knot; the kernel is linear in
``x`` right of the last one. Cost O(n³) per fit (see :mod:`gcc_jax._kalman` for the O(n) path).
"""

import jax
import jax.numpy as jnp

from ._types import Array, Float

__all__ = ["kernel", "kernel_ds", "solve_kernel"]


def kernel(s: Float[Array, "*a"], t: Float[Array, "*a"], anchor) -> Float[Array, "*a"]:
    """Cubic-spline reproducing kernel ``R(s, t) = (u − a)²(3v − u − 2a)/6`` (broadcasting).

    ``u = min(s, t)``, ``v = max(s, t)``, ``a = anchor``. For ``s, t ≥ a`` this is
    ``∫_a^∞ (s − x)_+ (t − x)_+ dx``; as a function of ``s`` it is a cubic spline with one knot at
    ``t`` for every real ``s``.
    """
    u = jnp.minimum(s, t) - anchor
    v = jnp.maximum(s, t) - anchor
    return u * u * (3.0 * v - u) / 6.0


def kernel_ds(s: Array, t: Array, anchor) -> Array:
    """``∂R(s, t)/∂s = u (2(t − a) − u) / 2`` with ``u = min(s, t) − a``."""
    u = jnp.minimum(s, t) - anchor
    return u * (2.0 * (t - anchor) - u) / 2.0


def _householder(x: Array) -> Array:
    """Householder vector ``v`` with ``(I − 2vvᵀ/vᵀv) x = −sign(x_0) ‖x‖ e_0``."""
    norm = jnp.sqrt(jnp.sum(x * x))
    sign = jnp.where(x[0] >= 0, 1.0, -1.0).astype(x.dtype)
    return x.at[0].add(sign * norm)


def _reflect(v: Array, m: Array) -> Array:
    """Apply ``I − 2vvᵀ/vᵀv`` to the rows of ``m`` (shape ``(n, …)``)."""
    return m - jnp.outer(v, (2.0 / jnp.dot(v, v)) * (v @ m)).reshape(m.shape)


def _solve(t: Array, mask: Array, lam: Array, rhs: Array) -> tuple[Array, Array]:
    """Solve the masked kernel system for ``(c, d)`` with right-hand sides ``rhs`` of shape (n, r).

    The side conditions ``(WT)ᵀ c = 0`` are eliminated with the two Householder reflectors of
    ``WT = Q [R; 0]``: writing ``c = Q [0; θ]`` leaves the symmetric positive definite system
    ``(QᵀAQ)₂₂ θ = (Qᵀ W y)₂`` (Cholesky), then ``R d = (Qᵀ W y)₁ − (QᵀAQ)₁₂ θ``. This null-space
    form is markedly better conditioned than LU on the saddle-point matrix as ``λ → 0``.
    """
    w = mask.astype(t.dtype)
    n_live = jnp.sum(w)
    gram = kernel(t[:, None], t[None, :], t[0])
    a = (w[:, None] * w[None, :]) * gram + jnp.diag(w * (n_live * lam) + (1.0 - w))
    v1 = _householder(w)
    wt = _reflect(v1, w * t)
    v2 = _householder(wt[1:])
    v2 = jnp.concatenate([jnp.zeros((1,), t.dtype), v2])
    r = jnp.stack(
        [
            jnp.stack([-jnp.sqrt(n_live), wt[0]]),
            jnp.stack([jnp.zeros((), t.dtype), wt[1] - v2[1]]),
        ]
    ).astype(t.dtype)

    def qt(m):  # Qᵀ m = H2 H1 m
        return _reflect(v2, _reflect(v1, m))

    qaq = qt(qt(a).T).T
    b = qt(rhs * w[:, None])
    chol = jnp.linalg.cholesky(qaq[2:, 2:])
    theta = jax.scipy.linalg.cho_solve((chol, True), b[2:])
    d = jax.scipy.linalg.solve_triangular(r, b[:2] - qaq[:2, 2:] @ theta, lower=False)
    c = _reflect(v1, _reflect(v2, jnp.concatenate([jnp.zeros((2, rhs.shape[1]), t.dtype), theta])))
    c = jnp.where(mask[:, None], c, 0.0)
    return c, d


def solve_kernel(t: Array, mask: Array, lam: Array, y: Array) -> tuple[Array, Array]:
    """Kernel-form fit; returns the spline's values and slopes at all nodes, each ``(n, r)``."""
    c, d = _solve(t, mask, lam, y)
    gram = kernel(t[:, None], t[None, :], t[0])
    dgram = kernel_ds(t[:, None], t[None, :], t[0])
    values = gram @ c + d[0][None, :] + t[:, None] * d[1][None, :]
    slopes = dgram @ c + d[1][None, :]
    return values, slopes
