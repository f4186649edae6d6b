"""Cubic smoothing splines with weights and straggler masks: fit, evaluate, smoother matrix.

The public entry points take ``solver="kalman"`` (default, O(n) Kalman filter + smoother:
:mod:`gcc_jax.spline._kalman`; ``"banded"`` is an accepted alias), ``solver="parallel"`` (the
same posterior mean by associative scans, O(log n) depth for accelerators:
:mod:`gcc_jax.spline._parallel`) or ``solver="kernel"`` (the Gram-form reference, O(n³):
:mod:`gcc_jax.spline._kernel`); all return a :class:`Spline` stored by values and slopes at every
node. ``solver="auto"`` picks one of the first two per fit (:func:`resolve_solver`).

Convention. For nodes ``t_1 < … < t_n`` with weights ``w_i ≥ 0`` (a straggler
mask is the 0/1 case, ``w_i = 1``: the point is live; ``weights`` and ``mask`` combine as
``w_i = weights_i · mask_i``) the fit minimises

    (1/Σw) Σ_i w_i (y_i − s(t_i))² + λ ∫ s''(t)² dt

over the second-order Sobolev space. The minimiser is the natural cubic spline with knots at the
live (positive-weight) nodes: a cubic between live nodes, **linear outside the hull of the live
nodes**; ``λ = 0`` is the natural interpolating spline. It equals
``scipy.interpolate.make_smoothing_spline(t_live, y_live, w=w_live, lam=Σw · λ)`` between the
outermost live nodes (SciPy extrapolates the end cubic instead of the line). Multiplying every
weight by the same constant changes nothing.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import as_float_array, as_lam, as_mask, as_nodes, as_weights, float_dtype
from .._core.sanitise import sanitise
from .._core.status import GCCValueError, Status, combine, is_concrete, raising_form
from .._core.types import Array, ArrayLike, Bool, Float, Int, Shaped
from ._kalman import evaluate, solve_kalman
from ._kernel import solve_kernel
from ._parallel import solve_parallel

__all__ = [
    "Spline",
    "fit_smoothing_spline",
    "fit_smoothing_spline_with_status",
    "smoother_matrix",
    "smoother_matrix_with_status",
    "SOLVERS",
    "as_solver",
    "resolve_solver",
    "AUTO_PARALLEL_MAX_N_CPU",
]


SOLVERS = {"kalman": solve_kalman, "parallel": solve_parallel, "kernel": solve_kernel}
_ALIASES = {"banded": "kalman"}  # the Kalman smoother by its banded-system name


#: Largest ``n`` at which ``solver="auto"`` picks ``"parallel"`` on a CPU (one data column): up
#: to it the parallel solver's single decode is faster than the Kalman pass on a CPU, beyond it
#: its O(n log n) work is not; with more columns the Kalman pass is faster
#: (``bench/parallel.py``, table in ``bench/README.md``).
AUTO_PARALLEL_MAX_N_CPU = 30_000


def as_solver(solver: str) -> str:
    """The canonical solver name: ``"kalman"``, ``"parallel"``, ``"kernel"`` or ``"auto"``.

    ``"banded"`` (the Kalman smoother by its banded-system name) means ``"kalman"``; ``"auto"``
    is resolved per fit by :func:`resolve_solver`.

    Raises:
        ValueError: an unknown solver name.
    """
    name = _ALIASES.get(solver, solver) if isinstance(solver, str) else None
    if name not in SOLVERS and name != "auto":
        choices = (*SOLVERS, "auto", *_ALIASES)
        raise ValueError(f"`solver` must be one of {choices}; got {solver!r}")
    return name


def resolve_solver(solver: str, n: int, columns: int = 1) -> str:
    """The solver a fit of ``columns`` data columns on ``n`` nodes uses (``"auto"`` resolved).

    Any other name is returned canonical (:func:`as_solver`). ``"auto"`` is ``"parallel"`` on an
    accelerator (``jax.default_backend()`` not ``"cpu"``: the sequential scan costs a kernel
    launch per node there) and on a CPU for one column with ``n ≤ AUTO_PARALLEL_MAX_N_CPU``
    (``bench/parallel.py``); otherwise
    ``"kalman"``. Resolved at trace time (``n`` and ``columns`` are shapes): never recompiles.

    Example:
        >>> import jax
        >>> on_cpu = jax.default_backend() == "cpu"
        >>> resolve_solver("auto", 10**6) == ("kalman" if on_cpu else "parallel")
        True
        >>> resolve_solver("kernel", 10)
        'kernel'
    """
    solver = as_solver(solver)
    if solver != "auto":
        return solver
    if jax.default_backend() != "cpu":
        return "parallel"
    return "parallel" if columns == 1 and n <= AUTO_PARALLEL_MAX_N_CPU else "kalman"


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
        mask: the straggler mask given to the fit (True = returned), shape ``(n,)``.
        weights: the weights used, ``weights · mask`` (0 at masked-off nodes), shape ``(n,)``.
        values: ``s(t_i)``, shape ``(n, *tail)``.
        slopes: ``s'(t_i)``, shape ``(n, *tail)``.
        status: :class:`gcc_jax.Status` flags (int32 scalar); 0 means the fit is valid. A failed
            fit has NaN values and slopes.

    Call ``spline(tq)`` to evaluate at query points ``tq`` of shape ``(q,)`` → ``(q, *tail)``
    (a scalar ``tq`` → ``tail``); :meth:`evaluate_with_status` also returns a status.
    """

    knots: Float[Array, " n"]
    mask: Bool[Array, " n"]
    weights: Float[Array, " n"]
    values: Float[Array, "n ..."]
    slopes: Float[Array, "n ..."]
    status: Int[Array, ""]

    def __call__(
        self, tq: Float[ArrayLike, " q"] | Float[ArrayLike, ""]
    ) -> Float[Array, "q ..."] | Float[Array, "..."]:
        """``s(tq)``: the spline at query points ``tq`` (a scalar or shape ``(q,)``).

        Raises:
            TypeError/ValueError: ``tq`` not real, or of more than one dimension.
            GCCValueError: in eager calls, NaN or Inf in ``tq``. Under ``jit`` the value at such
                a point is NaN; :meth:`evaluate_with_status` reports it as
                ``Status.BAD_ARGUMENT``.
        """
        tq = self._query_points(tq)
        if is_concrete(tq) and not bool(np.all(np.isfinite(np.asarray(tq)))):
            bad = np.flatnonzero(~np.isfinite(np.atleast_1d(np.asarray(tq))))
            raise GCCValueError(
                f"`tq` (the query points) must be finite; got {bad.size} NaN/Inf entries "
                f"(first at index {bad[0]})"
            )
        return self._evaluate(tq)

    def evaluate_with_status(
        self, tq: Float[ArrayLike, " q"] | Float[ArrayLike, ""]
    ) -> tuple[Float[Array, "q ..."] | Float[Array, "..."], Int[Array, ""]]:
        """``(s(tq), status)``: never raises on value problems (use under ``jit``/``vmap``).

        The status is the fit's (:attr:`status`) with ``Status.BAD_ARGUMENT`` added when
        ``tq`` holds NaN or Inf (the value is NaN at those points).

        Example:
            >>> import jax.numpy as jnp, gcc_jax as gcc
            >>> t = jnp.linspace(-1.0, 1.0, 5)
            >>> s = gcc.fit_smoothing_spline(t, t**2, lam=0.0)
            >>> value, status = s.evaluate_with_status(jnp.array([jnp.nan, 0.5]))
            >>> bool(jnp.isnan(value[0])), gcc.describe_status(status).startswith("an argument")
            (True, True)
        """
        tq = self._query_points(tq)
        status = self.status | combine((~jnp.all(jnp.isfinite(tq)), Status.BAD_ARGUMENT))
        return self._evaluate(tq), status

    @staticmethod
    def _query_points(tq) -> Array:
        tq = as_float_array(tq, "tq")
        if tq.ndim > 1:
            raise ValueError(f"`tq` (the query points) must be a scalar or 1-D; got {tq.shape}")
        return tq

    def _evaluate(self, tq: Array) -> Array:
        """The values at ``tq``; NaN at a NaN/Inf query point (never an extrapolated Inf)."""
        scalar = tq.ndim == 0
        tq = jnp.atleast_1d(tq).astype(self.knots.dtype)
        n, tail = self.values.shape[0], self.values.shape[1:]
        out = _evaluate_at(
            self.knots, self.values.reshape(n, -1), self.slopes.reshape(n, -1), tq
        ).reshape((tq.shape[0], *tail))
        return out[0] if scalar else out


@jax.jit
def _evaluate_at(knots: Array, values: Array, slopes: Array, tq: Array) -> Array:
    """:func:`evaluate` at finite query points, NaN at the others (one compiled call when
    eager; inlined under an outer ``jit``)."""
    finite = jnp.isfinite(tq)
    out = evaluate(knots, values, slopes, jnp.where(finite, tq, knots[0]))
    return jnp.where(finite[:, None], out, jnp.nan)


def _check_common(t, data, lam, mask, weights) -> np.ndarray:
    """The eager value checks shared by :func:`fit_smoothing_spline` and
    :func:`smoother_matrix` (``data`` is ``y`` or ``tq``), each naming its argument; the live
    points (``mask`` and a positive weight)."""
    dtype = float_dtype(t, data)
    t = as_nodes(t, "t", dtype)
    n = t.shape[0]
    as_lam(lam, "lam", dtype)
    w = np.asarray(as_weights(weights, n, dtype))
    live = np.asarray(as_mask(mask, n)) & (w > 0)
    if live.sum() < 2:
        who = "`mask` and `weights` leave" if weights is not None else "`mask` leaves"
        raise GCCValueError(
            f"{who} fewer than 2 live points (with a positive weight) for a smoothing "
            f"spline: {int(live.sum())} of {n}"
        )
    return live


def _check_values(t, y, lam, mask=None, *, weights=None, solver=None) -> None:
    """The eager value checks of :func:`fit_smoothing_spline`: a message naming the argument
    before the status is read."""
    del solver
    live = _check_common(t, y, lam, mask, weights)
    y = as_float_array(y, "y")
    if y.ndim >= 1 and y.shape[0] == live.shape[0] and jnp.issubdtype(y.dtype, jnp.inexact):
        rows = np.asarray(y).reshape(live.shape[0], -1)
        bad = np.flatnonzero(live & ~np.all(np.isfinite(rows), axis=1))
        if bad.size:
            raise GCCValueError(
                f"`y` holds NaN or Inf at {bad.size} live point(s) (first: index {bad[0]}); "
                "mark them dead in `mask` or give them weight 0"
            )


@raising_form("fit_smoothing_spline", lambda spline: (spline, spline.status), _check_values)
def fit_smoothing_spline(
    t: Float[ArrayLike, " n"],
    y: Shaped[ArrayLike, "n ..."],
    lam: Float[ArrayLike, ""],
    mask: Bool[ArrayLike, " n"] | None = None,
    *,
    weights: Float[ArrayLike, " n"] | None = None,
    solver: str = "kalman",
) -> Spline:
    """Fit a weighted cubic smoothing spline to ``(t_i, y_i)`` over the live points of ``mask``.

    Minimises ``(1/Σw) Σ_i w_i (y_i − s(t_i))² + lam ∫ s''(t)² dt`` with
    ``w_i = weights[i] · mask[i]`` (``weights=None``: all 1, so ``w`` is the 0/1 mask). The result
    is the natural cubic spline with knots at the live (``w_i > 0``) nodes, linear outside their
    hull; ``lam = 0`` is the natural interpolating spline through the live points (the weights
    then only select them). Each trailing coordinate of ``y`` is its own 1-D spline, all sharing
    ``lam`` and ``w``. Equivalent to
    ``scipy.interpolate.make_smoothing_spline(t[live], y[live], w=w[live], lam=w.sum() * lam)``
    between the outermost live nodes; rescaling all weights by one constant changes nothing.

    Shapes are static: a dead point changes no shape, so ``jax.vmap`` over masks or weight
    vectors compiles once, and ``lam``/``t``/``y``/``weights`` are differentiable (with
    ``lam > 0`` also at a zero weight). A straggler's ``y`` (even NaN/Inf) does not affect the
    result or its gradient; a zero weight drops its point from the fit (a NaN/Inf ``y`` there is
    ignored too).

    Args:
        t: strictly increasing nodes, shape ``(n,)``, ``n ≥ 2``.
        y: data, shape ``(n, *tail)``.
        lam: smoothing parameter ``λ ≥ 0`` (scalar).
        mask: boolean ``(n,)``, True where the point is live; ``None`` means all live.
        weights: non-negative observation weights ``(n,)``; ``None`` means all 1. The Kalman
            solver treats ``w_i`` as observation noise variance ``∝ 1/w_i``.
        solver: ``"kalman"`` (default; O(n) Kalman filter + smoother, see
            ``gcc_jax.spline._kalman``; ``"banded"`` is an alias), ``"parallel"`` (the same fit
            by associative scans over the filter and smoother elements, O(log n) depth, for a
            single large-n fit on a GPU/TPU; see ``gcc_jax.spline._parallel``), ``"kernel"``
            (the Gram-form reference, O(n³), see ``gcc_jax.spline._kernel``) or ``"auto"``
            (parallel on a GPU/TPU and on a CPU for one column and ``n ≤ 3·10⁴``, else kalman:
            :func:`gcc_jax.resolve_solver`).

    Precision (n = 100 Chebyshev nodes, random masks): the Kalman form
    matches SciPy's natural ``CubicSpline`` at ``lam = 0`` and a Reinsch reference for
    ``lam > 0`` to ~1e-12 relative in float64 and ~1e-6 in float32 (n ≤ 1000). The kernel form
    is the O(n³) reference, not the workhorse: its Gram system degrades as ``lam → 0`` on
    clustered nodes, so it estimates its own error and refuses (NaN values,
    ``Status.ILL_CONDITIONED``) above 1e-9 of the data scale in float64 (1e-4 in float32);
    wherever it returns a value it agrees with the Kalman form to 1e-8 (float64) / 1e-3
    (float32). Typical refusals: ``lam = 0`` decoder matrices for n ≳ 30 (float64).

    Returns:
        A :class:`Spline`; call it at query points.

    Raises:
        ValueError: wrong shapes or ranks, an unknown solver (at trace time).
        TypeError: a non-boolean mask.
        GCCValueError: in eager calls, a value problem (fewer than 2 live points, NaN/Inf in a live
            ``y``, unsorted or duplicate nodes, ``lam < 0``, a negative/NaN/Inf weight). Under
            ``jit``/``vmap`` these are reported in ``Spline.status`` instead (and the values are
            NaN; a bad weight is ``Status.BAD_WEIGHTS``).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> t = jnp.linspace(-1.0, 1.0, 7)
        >>> s = gcc.fit_smoothing_spline(t, 2.0 * t + 1.0, lam=0.1)
        >>> bool(jnp.allclose(s(jnp.array([-3.0, 0.25, 4.0])), jnp.array([-5.0, 1.5, 9.0])))
        True
        >>> y = jnp.sin(3.0 * t).at[2].set(9.0)  # an outlier, down-weighted
        >>> w = jnp.ones(7).at[2].set(1e-9)
        >>> s = gcc.fit_smoothing_spline(t, y, lam=1e-4, weights=w)
        >>> bool(abs(s(t[2]) - jnp.sin(3.0 * t[2])) < 0.1)
        True
    """
    solver = as_solver(solver)
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
    weights = as_weights(weights, n, dtype, check_value=False)
    tail = y.shape[1:]
    y_flat = y.reshape(n, -1).astype(dtype)

    values, slopes, status, w = _fit_core(t, mask, weights, lam, y_flat, solver=solver)
    return Spline(
        knots=t,
        mask=mask,
        weights=w,
        values=values.reshape((n, *tail)),
        slopes=slopes.reshape((n, *tail)),
        status=status,
    )


fit_smoothing_spline_with_status = fit_smoothing_spline.with_status
"""Like :func:`fit_smoothing_spline` but never raises on value problems: they are reported in
``Spline.status`` (values and slopes are then NaN). Use this form under ``jit``/``vmap`` when
each straggler pattern must carry its own status."""


@functools.partial(jax.jit, static_argnames="solver")
def _fit_core(t, mask, weights, lam, y_flat, *, solver):
    """Status, then a guarded solve: values and slopes ``(n, r)`` (NaN when status != 0), the
    status and the effective weights ``weights · mask``."""
    solver = resolve_solver(solver, *y_flat.shape)
    w = jnp.where(mask, weights, 0.0)  # a straggler's weight (even NaN) is 0
    # a straggler's output (even NaN/Inf) never reaches the solve or the gradient; a live
    # zero-weight output is kept when finite (it enters the gradient w.r.t. its weight only)
    s = sanitise(t, lam, y_flat, mask, weights=w)
    status = s.status
    values, slopes = SOLVERS[solver](s.t, s.weights, s.lam, s.y)
    finite = jnp.all(jnp.isfinite(values)) & jnp.all(jnp.isfinite(slopes))
    # the kernel solver returns NaN when its error estimate exceeds its tolerance
    flag = Status.ILL_CONDITIONED if solver == "kernel" else Status.NONFINITE_RESULT
    status = status | combine((~finite & (status == 0), flag))
    ok = status == 0
    return jnp.where(ok, values, jnp.nan), jnp.where(ok, slopes, jnp.nan), status, w


def _check_smoother_values(t, tq, lam, mask=None, *, weights=None, solver=None) -> None:
    """The eager value checks of :func:`smoother_matrix`, and finite query points ``tq``."""
    del solver
    _check_common(t, tq, lam, mask, weights)
    tq = as_float_array(tq, "tq")
    if jnp.issubdtype(tq.dtype, jnp.inexact) and not bool(np.all(np.isfinite(np.asarray(tq)))):
        raise GCCValueError("`tq` (the query points) contains NaN or Inf")


@raising_form(
    "smoother_matrix",
    lambda out: out,
    _check_smoother_values,
    returns=Float[Array, "q n"],
)
def smoother_matrix(
    t: Float[ArrayLike, " n"],
    tq: Float[ArrayLike, " q"],
    lam: Float[ArrayLike, ""],
    mask: Bool[ArrayLike, " n"] | None = None,
    *,
    weights: Float[ArrayLike, " n"] | None = None,
    solver: str = "kalman",
) -> tuple[Float[Array, "q n"], Int[Array, ""]]:
    """The linear map ``H`` from data ``y`` to the fitted spline's values at ``tq``.

    ``fit_smoothing_spline(t, y, lam, mask, weights=w)(tq) == H @ y`` for every ``y``; columns
    of dead (masked-off or zero-weight) nodes are zero. For a code,
    ``smoother_matrix(alpha, beta, lam_enc)`` is the ``(N, K)`` encoder and
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
    t = as_float_array(t, "t")
    tq = as_float_array(tq, "tq")
    if t.ndim != 1 or t.shape[0] < 2:
        raise ValueError(f"`t` must be a 1-D array of at least 2 nodes; got shape {t.shape}")
    if tq.ndim != 1:
        raise ValueError(f"`tq` must be a 1-D array of query points; got shape {tq.shape}")
    n = t.shape[0]
    dtype = float_dtype(t, tq)
    spline = fit_smoothing_spline_with_status(
        t.astype(dtype), jnp.eye(n, dtype=dtype), lam, mask, weights=weights, solver=solver
    )
    return spline.evaluate_with_status(tq.astype(dtype))


smoother_matrix_with_status = smoother_matrix.with_status
""":func:`smoother_matrix` plus its status, never raising on value problems."""
