"""Scale-free smoothing: effective degrees of freedom of a smoothing spline and the λ giving them.

A smoothing spline is a linear smoother: its values at the nodes are ``H(λ) y`` with the hat
matrix ``H(λ) = smoother_matrix(t, t, λ, mask)``. Its *effective degrees of freedom*

    dof(λ) = tr H(λ)

run from ``n_live`` (``λ = 0``, interpolation: every live value is reproduced) down to ``2``
(``λ → ∞``, the least-squares straight line), strictly decreasing in ``λ``. Unlike ``λ`` — whose
useful range moves by orders of magnitude with the number of nodes and their spacing (the
penalty ``∫ s''²`` scales like ``width⁻³`` when the nodes are stretched) — the degrees of freedom
mean the same thing for every ``N``: "the fit has about ``dof`` free parameters". The data's
units never matter: the fit is linear in ``y``, so ``λ`` and ``dof`` are both unit-free.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import as_float_array, as_lam, as_mask, as_nodes, float_dtype
from .._core.status import is_concrete
from .._core.types import Array, ArrayLike, Bool, Float
from ._fit import as_solver, fit_smoothing_spline_with_status

__all__ = ["effective_dof", "lam_from_dof"]

_BLOCK = 256  # hat-matrix columns per fit when computing the trace (memory O(_BLOCK · n))
_LOG10_RANGE = (-40.0, 12.0)  # search range of log10(λ / width³) for lam_from_dof
_BISECTIONS = 80  # 52 decades / 2^80: far below float64 resolution


def _trace(t: Array, lam: Array, mask: Array, solver: str) -> Array:
    """``tr H(λ)``: fits the unit vectors in blocks of columns, keeps ``s_j(t_j)``."""
    n = t.shape[0]
    block = min(n, _BLOCK)
    num_blocks = -(-n // block)
    rows = jnp.arange(n)

    def one_block(b):
        cols = b * block + jnp.arange(block)  # columns past n are all-zero data: they add 0
        y = (rows[:, None] == cols[None, :]).astype(t.dtype)
        spline = fit_smoothing_spline_with_status(t, y, lam, mask, solver=solver)
        diag = spline.values[jnp.clip(cols, 0, n - 1), jnp.arange(block)]
        return jnp.sum(jnp.where(cols < n, diag, 0.0))

    return jnp.sum(jax.lax.map(one_block, jnp.arange(num_blocks)))


_trace_jit = jax.jit(_trace, static_argnames="solver")


def _check_nodes(t, mask, solver: str) -> tuple[Array, Array, str]:
    """The nodes in their float dtype (checked when concrete), the mask and the solver name."""
    t = as_float_array(t, "t")
    dtype = float_dtype(t)
    t = as_nodes(t, "t", dtype) if is_concrete(t) else t.astype(dtype)
    return t, as_mask(mask, t.shape[0]), as_solver(solver)


def effective_dof(
    t: Float[ArrayLike, " n"],
    lam: Float[ArrayLike, ""],
    mask: Bool[ArrayLike, " n"] | None = None,
    *,
    solver: str = "kalman",
) -> Float[Array, ""]:
    """Effective degrees of freedom ``tr H(λ)`` of the smoothing spline on nodes ``t``.

    ``H(λ)`` is the hat matrix of :func:`gcc_jax.fit_smoothing_spline` at its own nodes
    (``smoother_matrix(t, t, lam, mask)``): the live fitted values are ``H y``. The trace
    decreases strictly from ``n_live = Σ mask`` at ``λ = 0`` to ``2`` as ``λ → ∞``. Dead nodes
    contribute nothing. Cost: ``n`` spline fits' worth of work (``O(n²)`` time with the default
    solver), in blocks of 256 columns (``O(256 · n)`` memory). Jittable; differentiable in
    ``lam``.

    Args:
        t: strictly increasing nodes ``(n,)``, e.g. a code's worker nodes ``code.beta``.
        lam: smoothing parameter ``λ ≥ 0``, in the convention of
            :func:`gcc_jax.fit_smoothing_spline` (mean data term).
        mask: live nodes (default: all).
        solver: ``"kalman"`` (default; O(n) per fit), ``"parallel"`` or ``"kernel"``; see
            :func:`gcc_jax.fit_smoothing_spline`.

    Returns:
        The scalar ``tr H(λ)``, in ``[2, n_live]``.

    Example:
        >>> import gcc_jax as gcc
        >>> beta = gcc.chebyshev_nodes(50, kind=2)
        >>> round(float(gcc.effective_dof(beta, 0.0)), 3)   # interpolation
        50.0
        >>> 2.0 < float(gcc.effective_dof(beta, 1e-6)) < 50.0
        True
    """
    t, mask, solver = _check_nodes(t, mask, solver)
    lam = as_lam(lam, "lam", t.dtype)
    return _trace_jit(t, lam, mask, solver=solver)


def lam_from_dof(
    t: Float[ArrayLike, " n"],
    dof: Float[ArrayLike, ""],
    mask: Bool[ArrayLike, " n"] | None = None,
    *,
    solver: str = "kalman",
) -> Float[Array, ""]:
    """The smoothing parameter ``λ`` whose spline on nodes ``t`` has ``dof`` degrees of freedom.

    Solves ``tr H(λ) = dof`` (see :func:`effective_dof`) by bisection on ``log λ`` over
    ``λ / width³ ∈ [1e-40, 1e12]`` with ``width = t[-1] − t[0]`` (80 steps; the trace is
    monotone). ``dof = n_live`` gives ``λ = 0`` exactly (interpolation). This is the scale-free
    way to set smoothing: the same ``dof / N`` means the same amount of smoothing for every
    number of workers, whereas a fixed ``λ`` smooths more and more as ``N`` grows.

    Typical use: the decoder's ``λ_dec`` for ``N`` workers with all of them live,
    ``lam_from_dof(code.beta, 0.9 * N)``; with stragglers the same ``λ`` leaves a little fewer
    degrees of freedom (``effective_dof(code.beta, lam, mask)``).

    Args:
        t: strictly increasing nodes ``(n,)``.
        dof: target degrees of freedom, ``2 < dof ≤ n_live``.
        mask: live nodes (default: all).
        solver: ``"kalman"`` (default; O(n) per fit), ``"parallel"`` or ``"kernel"``; see
            :func:`gcc_jax.fit_smoothing_spline`.

    Returns:
        ``λ ≥ 0`` (scalar, dtype of ``t``).

    Raises:
        ValueError: (eager calls) ``dof`` outside ``(2, n_live]``.

    Example:
        >>> import jax, gcc_jax as gcc
        >>> N = 200
        >>> beta = gcc.chebyshev_nodes(N, kind=2)
        >>> lam = gcc.lam_from_dof(beta, 0.9 * N)
        >>> round(float(gcc.effective_dof(beta, lam)) / N, 4)
        0.9
        >>> code = gcc.SplineCode.chebyshev(num_inputs=20, num_workers=N, lam_dec=lam)
    """
    t, mask, solver = _check_nodes(t, mask, solver)
    dtype = t.dtype
    dof = as_float_array(dof, "dof")
    if dof.ndim != 0:
        raise ValueError(f"`dof` must be a scalar; got shape {dof.shape}")
    dof = dof.astype(dtype)
    n_live = jnp.sum(mask).astype(dtype)
    if is_concrete(dof, mask):
        d, live = float(dof), int(n_live)
        if not (np.isfinite(d) and 2.0 < d <= live):
            raise ValueError(
                f"`dof` must be in (2, n_live] = (2, {live}] (2 is the straight line, n_live "
                f"interpolation); got {d}"
            )
    return _lam_from_dof(t, dof, mask, solver=solver)


@functools.partial(jax.jit, static_argnames="solver")
def _lam_from_dof(t: Array, dof: Array, mask: Array, *, solver: str) -> Array:
    dtype = t.dtype
    n_live = jnp.sum(mask).astype(dtype)
    width3 = (t[-1] - t[0]) ** 3
    lo0, hi0 = (jnp.asarray(v, dtype) for v in _LOG10_RANGE)

    def step(_, bounds):
        lo, hi = bounds  # tr H(10^lo · w³) ≥ dof ≥ tr H(10^hi · w³)
        mid = 0.5 * (lo + hi)
        above = _trace(t, width3 * 10.0**mid, mask, solver) > dof
        return jnp.where(above, mid, lo), jnp.where(above, hi, mid)

    lo, hi = jax.lax.fori_loop(0, _BISECTIONS, step, (lo0, hi0))
    lam = width3 * 10.0 ** (0.5 * (lo + hi))
    return jnp.where(dof >= n_live, jnp.zeros((), dtype), lam)
