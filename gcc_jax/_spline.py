"""Cubic smoothing splines with 0/1 weights (straggler masks): fit, evaluate, smoother matrix.

The public entry points take ``solver="banded"`` (default, O(n) Kalman smoother:
:mod:`gcc_jax._banded`) or
``solver="kernel"`` (the Gram-form reference below, O(n³)); both return a :class:`Spline`
stored by values and slopes at every node.

Binding convention (DESIGN §1). For nodes ``t_1 < … < t_n`` with weights ``w_i ∈ {0, 1}``
(``w_i = 1``: the point is live) the fit minimises

    (1/Σw) Σ_i w_i (y_i − s(t_i))² + λ ∫ s''(t)² dt

over the second-order Sobolev space. The minimiser is the natural cubic spline with knots at the
live nodes: a cubic between live nodes, **linear outside the hull of the live nodes**; ``λ = 0``
is the natural interpolating spline. With ``n_live = Σw`` it equals
``scipy.interpolate.make_smoothing_spline(t_live, y_live, lam=n_live * λ)`` between the outermost
live nodes (SciPy extrapolates the end cubic instead of the line).

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
``x`` right of the last one. Cost O(n³) per fit (see ``_banded`` for the O(n) path).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from ._banded import evaluate, solve_banded
from ._misc import as_float_array, as_lam, as_mask, as_nodes, float_dtype
from ._status import Status, combine, is_concrete, raise_if_bad
from ._types import Array, ArrayLike, Bool, Float, Int, Shaped

__all__ = [
    "Spline",
    "fit_smoothing_spline",
    "fit_smoothing_spline_with_status",
    "smoother_matrix",
    "kernel",
]


# ------------------------------------------------------------------------------------------------
# kernel


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


def _solve_kernel(t: Array, mask: Array, lam: Array, y: Array) -> tuple[Array, Array]:
    """Kernel-form fit; returns the spline's values and slopes at all nodes, each ``(n, r)``."""
    c, d = _solve(t, mask, lam, y)
    gram = kernel(t[:, None], t[None, :], t[0])
    dgram = kernel_ds(t[:, None], t[None, :], t[0])
    values = gram @ c + d[0][None, :] + t[:, None] * d[1][None, :]
    slopes = dgram @ c + d[1][None, :]
    return values, slopes


_SOLVERS = {"kernel": _solve_kernel, "banded": solve_banded}


def _check_solver(solver: str):
    if solver not in _SOLVERS:
        raise ValueError(f"`solver` must be one of {tuple(_SOLVERS)}; got {solver!r}")
    return _SOLVERS[solver]


def _value_status(t: Array, mask: Array, lam: Array, y_flat: Array | None) -> Array:
    """Status flags for the value problems of one fit (per pattern under vmap)."""
    n_live = jnp.sum(mask)
    flags = [
        (n_live < 2, Status.TOO_FEW_LIVE),
        (jnp.any(jnp.diff(t) <= 0) | ~jnp.all(jnp.isfinite(t)), Status.BAD_NODES),
        (~(lam >= 0), Status.NEGATIVE_LAM),
    ]
    if y_flat is not None:
        finite = jnp.all(jnp.isfinite(y_flat), axis=1)
        flags.append((jnp.any(mask & ~finite), Status.NONFINITE_DATA))
    return combine(*flags)


def _safe_inputs(t: Array, mask: Array, lam: Array, status: Array):
    """Substitute harmless inputs for a failed pattern so the solve (and its gradient) is finite.

    The returned value is replaced by NaN afterwards; this only keeps NaN/Inf out of the
    linear algebra and out of reverse-mode cotangents.
    """
    bad = status != 0
    n = t.shape[0]
    safe_t = jnp.linspace(0.0, 1.0, n, dtype=t.dtype)
    t_ok = jnp.where(bad, safe_t, t)
    mask_ok = jnp.where(bad, jnp.ones_like(mask), mask)
    lam_ok = jnp.where(bad, jnp.ones_like(lam), lam)
    return t_ok, mask_ok, lam_ok


# ------------------------------------------------------------------------------------------------
# the Spline pytree


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Spline:
    """A fitted natural cubic spline, stored by its values and slopes at every node.

    Between consecutive nodes the spline is the cubic Hermite interpolant of ``(values, slopes)``;
    beyond the first and last node it is linear with the end slopes. Both solvers produce this
    representation, so evaluation is one mechanism.

    Attributes:
        knots: the nodes ``t`` (all of them, live or dead), shape ``(n,)``.
        mask: which nodes were live, shape ``(n,)``.
        values: ``s(t_i)``, shape ``(n, *tail)``.
        slopes: ``s'(t_i)``, shape ``(n, *tail)``.
        status: :class:`gcc_jax.Status` flags (int32 scalar); 0 means the fit is valid. A failed
            fit has NaN values and slopes.

    Call ``spline(tq)`` to evaluate at query points ``tq`` of shape ``(q,)`` → ``(q, *tail)``.
    """

    knots: Float[Array, " n"]
    mask: Bool[Array, " n"]
    values: Float[Array, "n ..."]
    slopes: Float[Array, "n ..."]
    status: Int[Array, ""]

    def __call__(self, tq: Float[ArrayLike, " q"]) -> Float[Array, "q ..."]:
        tq = jnp.asarray(tq)
        if tq.ndim > 1:
            raise ValueError(f"query points must be a scalar or 1-D array; got shape {tq.shape}")
        scalar = tq.ndim == 0
        tq = jnp.atleast_1d(tq).astype(self.knots.dtype)
        n, tail = self.values.shape[0], self.values.shape[1:]
        out = evaluate(
            self.knots, self.values.reshape(n, -1), self.slopes.reshape(n, -1), tq
        ).reshape((tq.shape[0], *tail))
        return out[0] if scalar else out


def fit_smoothing_spline_with_status(
    t: Float[ArrayLike, " n"],
    y: Shaped[ArrayLike, "n ..."],
    lam: Float[ArrayLike, ""],
    mask: Bool[ArrayLike, " n"] | None = None,
    *,
    solver: str = "banded",
) -> Spline:
    """Like :func:`fit_smoothing_spline` but never raises on value problems.

    Value problems are reported in ``Spline.status`` (values and slopes are then NaN). Use this
    form under ``jit``/``vmap`` when each straggler pattern must carry its own status.
    """
    _check_solver(solver)
    y = as_float_array(y, "y")
    dtype = float_dtype(t, y)
    t = as_float_array(t, "t")
    if t.ndim != 1:
        raise ValueError(f"`t` must be a 1-D array of nodes; got shape {t.shape}")
    t = t.astype(dtype)
    n = t.shape[0]
    if n < 2:
        raise ValueError(f"`t` must hold at least 2 nodes; got {n}")
    if y.ndim < 1 or y.shape[0] != n:
        raise ValueError(f"`y` must have one row per node (n={n}); got shape {y.shape}")
    lam = as_lam(lam, "lam", dtype, check_value=False)
    mask = as_mask(mask, n)
    tail = y.shape[1:]
    y_flat = y.reshape(n, -1).astype(dtype)

    values, slopes, status = _fit_core(t, mask, lam, y_flat, solver=solver)
    return Spline(
        knots=t,
        mask=mask,
        values=values.reshape((n, *tail)),
        slopes=slopes.reshape((n, *tail)),
        status=status,
    )


@functools.partial(jax.jit, static_argnames="solver")
def _fit_core(t, mask, lam, y_flat, *, solver):
    """Status, then a guarded solve: values and slopes ``(n, r)`` (NaN when status != 0)."""
    status = _value_status(t, mask, lam, y_flat)
    t_ok, mask_ok, lam_ok = _safe_inputs(t, mask, lam, status)
    # A straggler's output (even NaN/Inf) never reaches the solve or the gradient.
    y_ok = jnp.where(mask_ok[:, None] & jnp.isfinite(y_flat), y_flat, 0.0)
    values, slopes = _SOLVERS[solver](t_ok, mask_ok, lam_ok, y_ok)
    finite = jnp.all(jnp.isfinite(values)) & jnp.all(jnp.isfinite(slopes))
    status = status | combine((~finite, Status.NONFINITE_RESULT))
    ok = status == 0
    return jnp.where(ok, values, jnp.nan), jnp.where(ok, slopes, jnp.nan), status


def fit_smoothing_spline(
    t: Float[ArrayLike, " n"],
    y: Shaped[ArrayLike, "n ..."],
    lam: Float[ArrayLike, ""],
    mask: Bool[ArrayLike, " n"] | None = None,
    *,
    solver: str = "banded",
) -> Spline:
    """Fit a cubic smoothing spline to ``(t_i, y_i)`` over the live points of ``mask``.

    Minimises ``(1/Σw) Σ_i w_i (y_i − s(t_i))² + lam ∫ s''(t)² dt`` with ``w_i = mask[i]``.
    The result is the natural cubic spline with knots at the live nodes, linear outside their
    hull; ``lam = 0`` is the natural interpolating spline. Each trailing coordinate of ``y`` is
    its own 1-D spline, all sharing ``lam``. Equivalent to
    ``scipy.interpolate.make_smoothing_spline(t[mask], y[mask], lam=mask.sum() * lam)`` between
    the outermost live nodes.

    Shapes are static: a dead point changes no shape, so ``jax.vmap`` over masks compiles once,
    and ``lam``/``t``/``y`` are differentiable. A straggler's ``y`` (even NaN/Inf) does not affect
    the result or its gradient.

    Args:
        t: strictly increasing nodes, shape ``(n,)``, ``n ≥ 2``.
        y: data, shape ``(n, *tail)``.
        lam: smoothing parameter ``λ ≥ 0`` (scalar).
        mask: boolean ``(n,)``, True where the point is live; ``None`` means all live.
        solver: ``"banded"`` (default; O(n) state-space smoother, see ``gcc_jax._banded``)
            or ``"kernel"`` (the Gram-form reference, O(n³)).

    Precision (measured, n = 100 Chebyshev nodes, random masks): the banded (Kalman) form
    matches SciPy's natural ``CubicSpline`` at ``lam = 0`` and a Reinsch reference for
    ``lam > 0`` to ~1e-12 relative in float64 and ~1e-6 in float32 (n ≤ 1000). The kernel form
    is exact to ~1e-12 at large ``lam`` but loses digits as ``lam → 0`` (~1e-6 at n = 100) and
    in float32 (~1e-2); it is the O(n³) reference, not the workhorse.

    Returns:
        A :class:`Spline`; call it at query points.

    Raises:
        ValueError: wrong shapes or ranks, an unknown solver (at trace time).
        TypeError: a non-boolean mask.
        GCCValueError: in eager calls, a value problem (fewer than 2 live points, NaN/Inf in a live
            ``y``, unsorted or duplicate nodes, ``lam < 0``). Under ``jit``/``vmap`` these are
            reported in ``Spline.status`` instead (and the values are NaN).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> t = jnp.linspace(-1.0, 1.0, 7)
        >>> s = gcc.fit_smoothing_spline(t, 2.0 * t + 1.0, lam=0.1)
        >>> bool(jnp.allclose(s(jnp.array([-3.0, 0.25, 4.0])), jnp.array([-5.0, 1.5, 9.0])))
        True
    """
    if is_concrete(t, y, lam, mask):
        dtype = float_dtype(t, y)
        as_nodes(t, "t", dtype)
        as_lam(lam, "lam", dtype)
    spline = fit_smoothing_spline_with_status(t, y, lam, mask, solver=solver)
    raise_if_bad(spline.status, "fit_smoothing_spline")
    return spline


def smoother_matrix_with_status(
    t: Float[ArrayLike, " n"],
    tq: Float[ArrayLike, " q"],
    lam: Float[ArrayLike, ""],
    mask: Bool[ArrayLike, " n"] | None = None,
    *,
    solver: str = "banded",
) -> tuple[Float[Array, "q n"], Int[Array, ""]]:
    """:func:`smoother_matrix` plus its status, never raising on value problems."""
    t = as_float_array(t, "t")
    tq = as_float_array(tq, "tq")
    if t.ndim != 1 or t.shape[0] < 2:
        raise ValueError(f"`t` must be a 1-D array of at least 2 nodes; got shape {t.shape}")
    if tq.ndim != 1:
        raise ValueError(f"`tq` must be a 1-D array of query points; got shape {tq.shape}")
    n = t.shape[0]
    dtype = float_dtype(t, tq)
    spline = fit_smoothing_spline_with_status(
        t.astype(dtype), jnp.eye(n, dtype=dtype), lam, mask, solver=solver
    )
    return spline(tq.astype(dtype)), spline.status


def smoother_matrix(
    t: Float[ArrayLike, " n"],
    tq: Float[ArrayLike, " q"],
    lam: Float[ArrayLike, ""],
    mask: Bool[ArrayLike, " n"] | None = None,
    *,
    solver: str = "banded",
) -> Float[Array, "q n"]:
    """The linear map ``H`` from data ``y`` to the fitted spline's values at ``tq``.

    ``fit_smoothing_spline(t, y, lam, mask)(tq) == H @ y`` for every ``y``; columns of dead nodes
    are zero. For a code, ``smoother_matrix(alpha, beta, lam_enc)`` is the ``(N, K)`` encoder and
    ``smoother_matrix(beta, alpha, lam_dec, mask)`` the ``(K, N)`` decoder.

    Raises:
        as :func:`fit_smoothing_spline`.

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> t = jnp.linspace(-1.0, 1.0, 6)
        >>> h = gcc.smoother_matrix(t, jnp.array([0.1, 0.3]), lam=0.01)
        >>> bool(jnp.allclose(h.sum(axis=1), 1.0))  # constants are reproduced
        True
    """
    if is_concrete(t, tq, lam, mask):
        dtype = float_dtype(t, tq)
        as_nodes(t, "t", dtype)
        as_lam(lam, "lam", dtype)
    h, status = smoother_matrix_with_status(t, tq, lam, mask, solver=solver)
    raise_if_bad(status, "smoother_matrix")
    return h
