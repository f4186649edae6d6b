"""Gram-form (reproducing-kernel) smoothing spline: the O(n³) reference solver.

Same objective and convention as :mod:`gcc_jax.spline._fit`; the default O(n) solver is the
Kalman smoother in :mod:`gcc_jax.spline._kalman`.

Representation (reproducing kernel of ``{g : g(a) = g'(a) = 0}`` on ``[a, ∞)``):

    R(s, t) = (u − a)² (3v − u − 2a) / 6,   u = min(s, t), v = max(s, t),

anchored at ``a = t_1`` (the first node; ``a = −1`` for Chebyshev-2 workers),
and ``s(x) = d_0 + d_1 x + Σ_i c_i R(x, t_i)``. The coefficients solve the symmetric saddle-point
system of fixed size ``n + 2`` in ``γ`` with ``c = W γ``

    [[W Σ W + λ' W + (I − L),  W T],   [γ]   [W y]
     [Tᵀ W,                    0  ]] · [d] = [ 0 ],     Σ_ij = R(t_i, t_j), T = [1, t],

with weights ``W = diag(w)``, ``w_i ≥ 0``, ``L = diag(w_i > 0)`` and ``λ' = (Σw) λ``. (Multiply
the optimality conditions ``Σ c + T d + λ' W⁻¹ c = y`` on the positive-weight rows by ``w_i`` and
substitute ``c = W γ``.) A zero-weight (dead) row reduces to ``γ_i = 0``, so a masked fit is
exactly the fit on the survivors while every shape stays ``n`` (no retrace per mask). The
``Tᵀc = 0`` side conditions make ``s`` linear left of the first live knot; the kernel is linear in
``x`` right of the last one. Accuracy: the nodes are mapped to ``[−1, 1]``, live values use the
exact identity ``s(t_i) = y_i − λ' γ_i``, and one step of iterative refinement gives an
a-posteriori error estimate; above ``TOLERANCE`` the solver refuses (NaN, reported as
``Status.ILL_CONDITIONED``) rather than return a silently wrong number. For ``λ' > 0`` the
exact limit ``γ_i = (y_i − s(t_i))/λ'`` of a dead row re-enters through a zero-valued
correction term, so gradients w.r.t. a weight are exact at ``w_i = 0`` too. Cost O(n³) per
fit (see :mod:`gcc_jax.spline._kalman` for the O(n) path).
"""

import functools

import jax
import jax.numpy as jnp
from jax import lax

from .._core.types import Array, Float
from ._kalman import scale_free

HIGHEST = lax.Precision.HIGHEST
_mm = functools.partial(jnp.matmul, precision=HIGHEST)  # full precision on every backend

__all__ = ["kernel", "kernel_ds", "solve_kernel", "estimated_error", "TOLERANCE"]


def kernel(s: Float[Array, "..."], t: Float[Array, "..."], anchor) -> Float[Array, "..."]:
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
    return m - jnp.outer(v, (2.0 / jnp.dot(v, v, precision=HIGHEST)) * _mm(v, m)).reshape(m.shape)


def _solve(t: Array, w: Array, lam: Array, rhs: Array) -> tuple[Array, Array, Array]:
    """Solve the weighted kernel system; values, slopes ``(n, r)`` and the estimated error.

    Works in the affine coordinate ``u = (t − m)/h ∈ [−1, 1]`` (``m``, ``h`` the centre and
    half-width of the nodes; ``λ'`` becomes ``λ'/h³``), so the kernel entries are O(1) whatever
    the scale of ``t``. The side conditions ``(WT)ᵀ γ = e`` are eliminated with the two
    Householder reflectors of ``WT = Q [R; 0]``: writing ``γ = Q [z; θ]`` with ``Rᵀ z = e`` leaves
    the symmetric positive definite system ``(QᵀAQ)₂₂ θ = (Qᵀ b)₂ − (QᵀAQ)₂₁ z`` (Cholesky),
    then ``R d = (Qᵀ b)₁ − (QᵀAQ)₁₁ z − (QᵀAQ)₁₂ θ``. One step of iterative refinement follows;
    its correction, mapped to the values and slopes and added to the rounding bound of the final
    kernel sums ``Σ_j R(t_i, t_j) c_j``, is the returned error estimate, relative to the scale of
    each column (``max(|y|, |s|)``; slopes counted as ``h̄_i |δs'_i|`` with ``h̄_i`` the longer
    adjacent gap).
    """
    dtype = t.dtype
    eps = jnp.finfo(dtype).eps
    live = w > 0
    centre, half, lam_eff = scale_free(t, lam, jnp.sum(w))
    u = (t - centre) / half
    gram = kernel(u[:, None], u[None, :], -1.0)
    dgram = kernel_ds(u[:, None], u[None, :], -1.0)
    a_true = (w[:, None] * w[None, :]) * gram + jnp.diag(w * lam_eff)
    a = a_true + jnp.diag((~live).astype(dtype))
    wt_cols = jnp.stack([w, w * u], axis=1)  # W T
    v1 = _householder(w)
    wt = _reflect(v1, w * u)
    v2 = _householder(wt[1:])
    v2 = jnp.concatenate([jnp.zeros((1,), dtype), v2])
    r = jnp.stack(
        [
            jnp.stack([-jnp.sqrt(jnp.sum(w * w)), wt[0]]),
            jnp.stack([jnp.zeros((), dtype), wt[1] - v2[1]]),
        ]
    ).astype(dtype)

    def qt(m):  # Qᵀ m = H2 H1 m
        return _reflect(v2, _reflect(v1, m))

    def q(m):  # Q m = H1 H2 m
        return _reflect(v1, _reflect(v2, m))

    qaq = qt(qt(a).T).T
    chol = jnp.linalg.cholesky(qaq[2:, 2:])

    def saddle(b, e):
        """``[[A, WT], [(WT)ᵀ, 0]] [γ; d] = [b; e]`` → ``(γ, d)`` (dead rows of γ: 0)."""
        qb = qt(b)
        z = jax.scipy.linalg.solve_triangular(r.T, e, lower=True)
        theta = jax.scipy.linalg.cho_solve((chol, True), qb[2:] - _mm(qaq[2:, :2], z))
        d = jax.scipy.linalg.solve_triangular(
            r, qb[:2] - _mm(qaq[:2, :2], z) - _mm(qaq[:2, 2:], theta), lower=False
        )
        return jnp.where(live[:, None], q(jnp.concatenate([z, theta])), 0.0), d

    def evaluate(gamma, d):
        c = w[:, None] * gamma
        return _mm(gram, c) + d[0] + u[:, None] * d[1], _mm(dgram, c) + d[1]

    b = rhs * w[:, None]
    gamma, d = saddle(b, jnp.zeros((2, rhs.shape[1]), dtype))
    # one step of iterative refinement; its size estimates the error of the first solve
    res_b = b - _mm(a, gamma) - _mm(wt_cols, d)
    res_e = -_mm(wt_cols.T, gamma)
    dgamma, dd = saddle(res_b, res_e)
    gamma, d = gamma + dgamma, d + dd
    # Dead rows (λ' > 0): γ_i = (y_i − s(t_i))/λ', the limit of the live equations as w_i → 0.
    # Their columns of the true system are w_i-multiples, so this correction term is 0 in value
    # and only restores the exact derivative w.r.t. w_i at w_i = 0 (the solve is linear).
    s, _ = evaluate(gamma, d)
    pos = lam_eff > 0
    gamma_dead = jnp.where(pos & ~live[:, None], (rhs - s) / jnp.where(pos, lam_eff, 1.0), 0.0)
    g_fix, d_fix = saddle(-_mm(a_true, gamma_dead), -_mm(wt_cols.T, gamma_dead))
    gamma, d = gamma + g_fix + gamma_dead, d + d_fix

    values, slopes = evaluate(gamma, d)
    # live nodes: s(t_i) = y_i − λ' γ_i exactly (no cancellation in the kernel sum)
    values = jnp.where(live[:, None], rhs - lam_eff * gamma, values)

    # error estimate (relative, per column)
    dv, ds = evaluate(dgamma, dd)
    c_abs = jnp.abs(w[:, None] * gamma)
    round_v = eps * (
        _mm(jnp.abs(gram), c_abs) + jnp.abs(d[0]) + jnp.abs(u)[:, None] * jnp.abs(d[1])
    )
    round_s = eps * (_mm(jnp.abs(dgram), c_abs) + jnp.abs(d[1]))
    gaps = jnp.diff(u)
    hbar = jnp.maximum(jnp.concatenate([gaps[:1], gaps]), jnp.concatenate([gaps, gaps[-1:]]))
    err = jnp.max(jnp.abs(dv) + round_v, axis=0) + jnp.max(
        hbar[:, None] * (jnp.abs(ds) + round_s), axis=0
    )
    scale = jnp.maximum(
        jnp.max(jnp.where(live[:, None], jnp.abs(rhs), 0.0), axis=0),
        jnp.max(jnp.abs(values), axis=0),
    )
    rel = jnp.where(scale > 0, err / jnp.where(scale > 0, scale, 1.0), jnp.where(err > 0, 1.0, 0.0))
    # a failed Cholesky (NaN) is refused too
    rel = jnp.where(jnp.isfinite(err) & jnp.isfinite(scale), rel, jnp.inf)
    return values, slopes / half, jnp.max(rel)


#: relative error estimate above which the kernel solver refuses (NaN + Status.ILL_CONDITIONED)
TOLERANCE = {"float64": 1e-9, "float32": 1e-4}


def solve_kernel(t: Array, w: Array, lam: Array, y: Array) -> tuple[Array, Array]:
    """Kernel-form fit; the spline's values and slopes at all nodes, each ``(n, r)``.

    Refuses (returns NaN, which the caller reports as ``Status.ILL_CONDITIONED``) when the
    estimated relative error exceeds ``TOLERANCE`` for the dtype (1e-9 in float64, 1e-4 in
    float32).

    Args:
        t: strictly increasing nodes ``(n,)``.
        w: weights ``(n,)``, ``≥ 0`` (a boolean mask is the 0/1 case); at least 2 positive.
        lam: ``λ ≥ 0`` (mean-data-term convention; ``λ' = (Σw) λ`` is formed here).
        y: data ``(n, r)``; zero-weight rows must be finite.
    """
    w = jnp.asarray(w).astype(t.dtype)
    values, slopes, rel = _solve(t, w, lam, y)
    ok = rel <= TOLERANCE[jnp.dtype(t.dtype).name]
    return jnp.where(ok, values, jnp.nan), jnp.where(ok, slopes, jnp.nan)


def estimated_error(t: Array, w: Array, lam: Array, y: Array) -> Array:
    """The kernel solver's estimated relative error for this fit (see :func:`solve_kernel`)."""
    return _solve(t, jnp.asarray(w).astype(t.dtype), lam, y)[2]
