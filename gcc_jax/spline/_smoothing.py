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
from .._core.sanitise import node_status
from .._core.status import GCCValueError, Status, combine, raising_form
from .._core.types import Array, ArrayLike, Bool, Float, Int
from ._fit import as_solver, fit_smoothing_spline_with_status

__all__ = ["effective_dof", "effective_dof_with_status", "lam_from_dof", "lam_from_dof_with_status"]

_BLOCK = 256  # hat-matrix columns per fit when computing the trace (memory O(_BLOCK · n))
_LOG10_RANGE = (-40.0, 12.0)  # search range of log10(λ / width³) for lam_from_dof
_BISECTIONS = 80  # 52 decades / 2^80: far below float64 resolution


def _trace(t: Array, lam: Array, mask: Array, solver: str) -> tuple[Array, Array]:
    """``(tr H(λ), status)``: fits the unit vectors in blocks of columns, keeps ``s_j(t_j)``.

    The status is the fits' (one problem for every block: nodes, λ, live count); the trace is
    NaN where it is not OK.
    """
    n = t.shape[0]
    block = min(n, _BLOCK)
    num_blocks = -(-n // block)
    rows = jnp.arange(n)

    def one_block(b):
        cols = b * block + jnp.arange(block)  # columns past n are all-zero data: they add 0
        y = (rows[:, None] == cols[None, :]).astype(t.dtype)
        spline = fit_smoothing_spline_with_status(t, y, lam, mask, solver=solver)
        diag = spline.values[jnp.clip(cols, 0, n - 1), jnp.arange(block)]
        return jnp.sum(jnp.where(cols < n, diag, 0.0)), spline.status

    sums, statuses = jax.lax.map(one_block, jnp.arange(num_blocks))
    status = jax.lax.reduce(statuses, jnp.int32(0), jax.lax.bitwise_or, (0,))
    return jnp.where(status == 0, jnp.sum(sums), jnp.nan), status


_trace_jit = jax.jit(_trace, static_argnames="solver")


def _static_args(t, mask, solver: str) -> tuple[Array, Array, str]:
    """The nodes in their float dtype, the mask and the solver name (static checks only)."""
    t = as_float_array(t, "t")
    if t.ndim != 1 or t.shape[0] < 2:
        raise ValueError(f"`t` must be a 1-D array of at least 2 nodes; got shape {t.shape}")
    return t.astype(float_dtype(t)), as_mask(mask, t.shape[0]), as_solver(solver)


def _check_live(mask, n: int, need: int, what: str) -> int:
    """Eager check: ``mask`` leaves at least ``need`` live nodes; the live count."""
    live = int(np.sum(np.asarray(as_mask(mask, n))))
    if live < need:
        name = "t` (all live" if mask is None else "mask"
        raise GCCValueError(
            f"`{name}` must leave at least {need} live nodes for {what}; got {live} of {n}"
        )
    return live


def _check_effective_dof(t, lam, mask=None, *, solver="kalman") -> None:
    """The eager value checks of :func:`effective_dof`, each naming its argument."""
    t = as_nodes(t, "t", float_dtype(t))
    as_lam(lam, "lam", t.dtype)
    _check_live(mask, t.shape[0], 2, "a smoothing spline")


@raising_form("effective_dof", lambda out: out, _check_effective_dof, returns=Float[Array, ""])
def effective_dof(
    t: Float[ArrayLike, " n"],
    lam: Float[ArrayLike, ""],
    mask: Bool[ArrayLike, " n"] | None = None,
    *,
    solver: str = "kalman",
) -> tuple[Float[Array, ""], Int[Array, ""]]:
    """Effective degrees of freedom ``tr H(λ)`` of the smoothing spline on nodes ``t``.

    ``H(λ)`` is the hat matrix of :func:`gcc_jax.fit_smoothing_spline` at its own nodes
    (``smoother_matrix(t, t, lam, mask)``): the live fitted values are ``H y``. The trace
    decreases strictly from ``n_live = Σ mask`` at ``λ = 0`` to ``2`` as ``λ → ∞``. Dead nodes
    contribute nothing. Cost: ``n`` spline fits' worth of work (``O(n²)`` time with the default
    solver), in blocks of 256 columns (``O(256 · n)`` memory). Jittable; differentiable in
    ``lam``. Under ``jit`` a value problem (``λ < 0``, fewer than 2 live nodes, unsorted
    nodes) gives NaN; :func:`effective_dof_with_status` returns ``(dof, status)`` instead.

    Args:
        t: strictly increasing nodes ``(n,)``, e.g. a code's worker nodes ``code.beta``.
        lam: smoothing parameter ``λ ≥ 0``, in the convention of
            :func:`gcc_jax.fit_smoothing_spline` (mean data term).
        mask: live nodes (default: all); at least 2.
        solver: ``"kalman"`` (default; O(n) per fit), ``"parallel"`` or ``"kernel"``; see
            :func:`gcc_jax.fit_smoothing_spline`.

    Returns:
        The scalar ``tr H(λ)``, in ``[2, n_live]``.

    Raises:
        ValueError/TypeError: wrong shapes or types, an unknown solver.
        GCCValueError: (eager calls) unsorted or non-finite ``t``, ``lam`` negative or not
            finite, fewer than 2 live nodes in ``mask``.

    Example:
        >>> import gcc_jax as gcc
        >>> beta = gcc.chebyshev_nodes(50, kind=2)
        >>> round(float(gcc.effective_dof(beta, 0.0)), 3)   # interpolation
        50.0
        >>> 2.0 < float(gcc.effective_dof(beta, 1e-6)) < 50.0
        True
    """
    t, mask, solver = _static_args(t, mask, solver)
    lam = as_lam(lam, "lam", t.dtype, check_value=False)
    return _trace_jit(t, lam, mask, solver=solver)


effective_dof_with_status = effective_dof.with_status
"""Like :func:`effective_dof` but returns ``(dof, status)`` and never raises on value problems:
``NEGATIVE_LAM``, ``TOO_FEW_LIVE``, ``BAD_NODES`` (the value is then NaN). Use under ``jit``."""


def _check_lam_from_dof(t, dof, mask=None, *, solver="kalman") -> None:
    """The eager value checks of :func:`lam_from_dof`, each naming its argument."""
    t = as_nodes(t, "t", float_dtype(t))
    live = _check_live(mask, t.shape[0], 3, "a target dof in (2, n_live]")
    d = float(_as_dof(dof, t.dtype))
    if not (np.isfinite(d) and 2.0 < d <= live):
        raise GCCValueError(
            f"`dof` must be in (2, n_live] = (2, {live}] (2 is the straight line, n_live "
            f"interpolation); got {d}"
        )


def _as_dof(dof, dtype) -> Array:
    dof = as_float_array(dof, "dof")
    if dof.ndim != 0:
        raise ValueError(f"`dof` must be a scalar; got shape {dof.shape}")
    return dof.astype(dtype)


@raising_form("lam_from_dof", lambda out: out, _check_lam_from_dof, returns=Float[Array, ""])
def lam_from_dof(
    t: Float[ArrayLike, " n"],
    dof: Float[ArrayLike, ""],
    mask: Bool[ArrayLike, " n"] | None = None,
    *,
    solver: str = "kalman",
) -> tuple[Float[Array, ""], Int[Array, ""]]:
    """The smoothing parameter ``λ`` whose spline on nodes ``t`` has ``dof`` degrees of freedom.

    Solves ``tr H(λ) = dof`` (see :func:`effective_dof`) by bisection on ``log λ`` over
    ``λ / width³ ∈ [1e-40, 1e12]`` with ``width = t[-1] − t[0]`` (80 steps; the trace is
    monotone). ``dof = n_live`` gives ``λ = 0`` exactly (interpolation). This is the scale-free
    way to set smoothing: the same ``dof / N`` means the same amount of smoothing for every
    number of workers, whereas a fixed ``λ`` smooths more and more as ``N`` grows.

    Typical use: the decoder's ``λ_dec`` for ``N`` workers with all of them live,
    ``lam_from_dof(code.beta, 0.9 * N)``; with stragglers the same ``λ`` leaves a little fewer
    degrees of freedom (``effective_dof(code.beta, lam, mask)``). Under ``jit`` a ``dof``
    outside ``(2, n_live]`` gives NaN; :func:`lam_from_dof_with_status` returns
    ``(λ, status)`` with ``Status.BAD_ARGUMENT`` instead.

    Args:
        t: strictly increasing nodes ``(n,)``.
        dof: target degrees of freedom, ``2 < dof ≤ n_live``.
        mask: live nodes (default: all); at least 3.
        solver: ``"kalman"`` (default; O(n) per fit), ``"parallel"`` or ``"kernel"``; see
            :func:`gcc_jax.fit_smoothing_spline`.

    Returns:
        ``λ ≥ 0`` (scalar, dtype of ``t``).

    Raises:
        ValueError/TypeError: wrong shapes or types, an unknown solver.
        GCCValueError: (eager calls) ``dof`` outside ``(2, n_live]``, fewer than 3 live nodes,
            unsorted or non-finite ``t``.

    Example:
        >>> import jax, gcc_jax as gcc
        >>> N = 200
        >>> beta = gcc.chebyshev_nodes(N, kind=2)
        >>> lam = gcc.lam_from_dof(beta, 0.9 * N)
        >>> round(float(gcc.effective_dof(beta, lam)) / N, 4)
        0.9
        >>> code = gcc.SplineCode.chebyshev(num_inputs=20, num_workers=N, lam_dec=lam)
        >>> lam, status = jax.jit(lambda d: gcc.lam_from_dof_with_status(beta, d))(1.0)
        >>> bool(jax.numpy.isnan(lam)), gcc.describe_status(status).startswith("an argument")
        (True, True)
    """
    t, mask, solver = _static_args(t, mask, solver)
    return _lam_from_dof(t, _as_dof(dof, t.dtype), mask, solver=solver)


lam_from_dof_with_status = lam_from_dof.with_status
"""Like :func:`lam_from_dof` but returns ``(λ, status)`` and never raises on value problems:
``BAD_ARGUMENT`` (``dof`` outside ``(2, n_live]`` or not finite), ``TOO_FEW_LIVE`` (fewer than
2 live nodes), ``BAD_NODES`` (the value is then NaN). Use under ``jit``."""


@functools.partial(jax.jit, static_argnames="solver")
def _lam_from_dof(t: Array, dof: Array, mask: Array, *, solver: str) -> tuple[Array, Array]:
    dtype = t.dtype
    n_live = jnp.sum(mask).astype(dtype)
    status = node_status(t) | combine(
        (n_live < 2, Status.TOO_FEW_LIVE),
        (~(jnp.isfinite(dof) & (dof > 2) & (dof <= n_live)), Status.BAD_ARGUMENT),
    )
    # the search runs on stand-ins where the status is not OK (its value is discarded)
    t = jnp.where(status == 0, t, jnp.linspace(-1.0, 1.0, t.shape[0], dtype=dtype))
    mask = jnp.where(status == 0, mask, True)
    width3 = (t[-1] - t[0]) ** 3
    lo0, hi0 = (jnp.asarray(v, dtype) for v in _LOG10_RANGE)

    def step(_, bounds):
        lo, hi = bounds  # tr H(10^lo · w³) ≥ dof ≥ tr H(10^hi · w³)
        mid = 0.5 * (lo + hi)
        above = _trace(t, width3 * 10.0**mid, mask, solver)[0] > dof
        return jnp.where(above, mid, lo), jnp.where(above, hi, mid)

    lo, hi = jax.lax.fori_loop(0, _BISECTIONS, step, (lo0, hi0))
    lam = width3 * 10.0 ** (0.5 * (lo + hi))
    lam = jnp.where(dof >= n_live, jnp.zeros((), dtype), lam)
    return jnp.where(status == 0, lam, jnp.nan), status
