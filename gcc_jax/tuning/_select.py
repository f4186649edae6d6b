"""Choosing ``λ_dec`` per straggler pattern from the workers' outputs alone: GCV and grid CV.

At decoding time the master sees only the live workers' outputs ``y_i = f(x~_i)``, ``i ∈ F``;
the target ``f(x_k)`` is unknown. Both rules below pick ``λ_dec`` from these outputs, per pattern
(and per job), by minimising an estimate of the prediction error over ``log λ``:

* **GCV** (Craven & Wahba): the decoder is a linear smoother on the live nodes,
  ``ŷ = H(λ) y`` with ``H = smoother_matrix(beta, beta, λ, mask)`` restricted to live rows and
  columns, and

      GCV(λ) = (1/n) ‖(I − H) y‖² / (1 − tr(H)/n)²,   n = |F|,

  summed over the ``m`` output coordinates (divided by ``m``), which share one λ.
* **Grid cross-validation**: the live workers are dealt into ``folds`` interleaved folds (fold
  ``j`` = the live workers whose rank among the live ones is ``j`` mod ``folds``); for each λ the
  spline is refitted without each fold and scored on it,

      CV(λ) = (1/(n m)) Σ_j Σ_{i ∈ fold j} ‖y_i − ŝ_{−j}(β_i)‖².

Both minimise over a log-spaced grid of λ and then refine the best grid point by golden-section
search in ``log λ`` between its two grid neighbours (``refine`` steps), all with static shapes:
``jax.vmap`` over masks compiles once.
"""

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .._core.checks import as_int, check_instance, check_outputs, data_status
from .._core.status import Status, combine
from .._core.types import Array, ArrayLike, Bool, Float, Int
from ..codes import SplineCode
from ..spline import fit_smoothing_spline_with_status, smoother_matrix_with_status

__all__ = [
    "LamChoice",
    "default_lam_grid",
    "gcv_score",
    "cv_score",
    "gcv_lam_dec",
    "cv_lam_dec",
]

_INV_PHI = (math.sqrt(5.0) - 1.0) / 2.0  # 0.618…


class LamChoice(NamedTuple):
    """A per-pattern choice of ``λ_dec``.

    Attributes:
        lam: the chosen ``λ_dec`` (scalar; one per pattern under ``vmap``).
        score: the criterion at ``lam`` (GCV or CV estimate of the squared prediction error).
        status: :class:`gcc_jax.Status` of the fit at ``lam`` (0 = valid; e.g. too few live
            workers for the criterion).
    """

    lam: Float[Array, ""]
    score: Float[Array, ""]
    status: Int[Array, ""]


def default_lam_grid(dtype=None) -> Float[Array, " g"]:
    """The default grid ``λ = 10^{-12}, 10^{-11.5}, …, 10^{0}`` (25 values).

    Spans interpolation (the smoothing kernel's width ``(2λ)^{1/4} ≈ 10^{-3}`` at the low end)
    to nearly a straight line (width ``≈ 1.2`` on Ω = [−1, 1] at the high end).
    """
    dtype = jnp.dtype(dtype) if dtype is not None else jnp.zeros(()).dtype
    return jnp.logspace(-12.0, 0.0, 25, dtype=dtype)


def _prepare(code, y, mask):
    code = check_instance(code, SplineCode, "code", "gcc_jax.SplineCode")
    y, mask = check_outputs(y, mask, code.num_workers)
    dtype = code.beta.dtype
    y_flat = y.reshape(code.num_workers, -1).astype(dtype)
    return code, y_flat, mask


def _prepare_search(code, y, mask, grid, refine):
    """:func:`_prepare` plus the checked λ grid and number of refinement steps of a search."""
    code, y_flat, mask = _prepare(code, y, mask)
    return code, y_flat, mask, _grid(grid, y_flat.dtype), as_int(refine, "refine", 0)


def _gcv(beta, solver, y_flat, mask, lam):
    """GCV score and fit status at one λ (``y_flat`` of shape ``(n, r)``)."""
    h, status = smoother_matrix_with_status(beta, beta, lam, mask, solver=solver)
    w = mask.astype(y_flat.dtype)
    safe_y = jnp.where(mask[:, None] & jnp.isfinite(y_flat), y_flat, 0.0)
    h = jnp.where(status == 0, h, jnp.eye(h.shape[0], dtype=h.dtype))
    resid = (safe_y - h @ safe_y) * w[:, None]
    n = jnp.sum(w)
    dof = n - jnp.sum(w * jnp.diag(h))  # tr(I − H) over the live rows
    score = n * jnp.sum(resid * resid) / (y_flat.shape[1] * dof * dof)
    status = status | combine((~(dof > 0), Status.NONFINITE_RESULT)) | data_status(y_flat, mask)
    return jnp.where(status == 0, score, jnp.nan), status


def _fold_masks(mask: Array, folds: int) -> Array:
    """``(folds, n)`` booleans: fold ``j`` holds the live workers of rank ≡ j (mod folds)."""
    rank = jnp.cumsum(mask) - 1
    fold = jnp.where(mask, rank % folds, -1)
    return fold[None, :] == jnp.arange(folds)[:, None]


def _cv(beta, solver, y_flat, mask, lam, folds):
    """K-fold CV score (refits without each fold) and status at one λ."""
    held = _fold_masks(mask, folds)
    safe_y = jnp.where(mask[:, None] & jnp.isfinite(y_flat), y_flat, 0.0)

    def one(out):
        # The factorisation depends on (beta, mask, λ) only, never on y: under vmap over jobs
        # (outputs) it is shared and only the substitutions are batched.
        fit = fit_smoothing_spline_with_status(beta, safe_y, lam, mask & ~out, solver=solver)
        values, status = fit.values, fit.status
        err = jnp.where(out[:, None], safe_y - values, 0.0)
        return jnp.sum(err * err), status

    sq, status = jax.vmap(one)(held)
    status = jnp.bitwise_or.reduce(status)
    status = status | data_status(y_flat, mask)
    n = jnp.sum(mask)
    score = jnp.sum(sq) / (n * y_flat.shape[1])
    return jnp.where(status == 0, score, jnp.nan), status


def _minimise(score_fn, grid: Array, refine: int) -> LamChoice:
    """Grid search in ``log λ``, then golden-section refinement between the grid neighbours.

    Every score is computed by one loop over ``g + refine + 3`` evaluations (the grid, the two
    golden-section starts, ``refine`` steps, the chosen λ), so ``score_fn`` appears once in the
    compiled program: writing the phases as separate loops would trace and compile the fit five
    times. It is a loop, not a ``vmap`` over the grid: under the callers' ``vmap`` over patterns
    and jobs a vmapped grid would hold every λ's fits at once (grid × patterns × jobs × folds
    spline fits), the loop holds one λ's.
    """
    g = grid.shape[0]
    if refine == 0 or g == 1:
        scores, statuses = lax.map(score_fn, grid)
        i = jnp.argmin(jnp.where(jnp.isnan(scores), jnp.inf, scores))
        # the grid point itself: its score and status are already known (recomputing them at
        # a per-job λ would redo one fit per job and pattern: the bulk of a rule's memory)
        return LamChoice(grid[i], scores[i], statuses[i])
    logs = jnp.log(grid)
    inf = jnp.asarray(jnp.inf, grid.dtype)

    def bracket(scores):
        """Grid minimiser ``i`` (NaN scores lose), its key, and the golden-section start."""
        key = jnp.where(jnp.isnan(scores), jnp.inf, scores)
        i = jnp.argmin(key)
        lo, hi = logs[jnp.maximum(i - 1, 0)], logs[jnp.minimum(i + 1, g - 1)]
        return i, key[i], lo, hi, hi - _INV_PHI * (hi - lo), lo + _INV_PHI * (hi - lo)

    def golden(a, b, c, d, fc, fd):
        """One golden-section step's new bracket and the point it evaluates next."""
        left = fc <= fd  # minimum in [a, d]
        a2 = jnp.where(left, a, c)
        b2 = jnp.where(left, d, b)
        c2 = jnp.where(left, b2 - _INV_PHI * (b2 - a2), d)
        d2 = jnp.where(left, c, a2 + _INV_PHI * (b2 - a2))
        return left, a2, b2, c2, d2, jnp.where(left, c2, d2)

    def chosen(scores, c, d, fc, fd):
        """``log λ`` of the refined point if it beats the grid minimum, else of the grid's."""
        i, key_i, *_ = bracket(scores)
        return jnp.where(jnp.minimum(fc, fd) < key_i, jnp.where(fc <= fd, c, d), logs[i])

    def body(k, state):
        scores, statuses, a, b, c, d, fc, fd, lam, score, status = state
        _, _, lo, hi, c0, d0 = bracket(scores)
        left, a2, b2, c2, d2, new = golden(a, b, c, d, fc, fd)
        # the log λ this evaluation needs: golden start c, start d, a step, the chosen λ
        u = jnp.select(
            [k == g, k == g + 1, k < g + 2 + refine], [c0, d0, new], chosen(scores, c, d, fc, fd)
        )
        lam_k = jnp.where(k < g, grid[jnp.minimum(k, g - 1)], jnp.exp(u))
        s, st = score_fn(lam_k)
        f = jnp.where(jnp.isnan(s), inf, s)
        grid_phase, step = k < g, (k >= g + 2) & (k < g + 2 + refine)
        scores = jnp.where(grid_phase, scores.at[jnp.minimum(k, g - 1)].set(s), scores)
        statuses = jnp.where(grid_phase, statuses.at[jnp.minimum(k, g - 1)].set(st), statuses)
        a = jnp.where(k == g, lo, jnp.where(step, a2, a))
        b = jnp.where(k == g, hi, jnp.where(step, b2, b))
        c = jnp.where(k == g, c0, jnp.where(step, c2, c))
        d = jnp.where(k == g, d0, jnp.where(step, d2, d))
        fc, fd = (
            jnp.where(k == g, f, jnp.where(step, jnp.where(left, f, fd), fc)),
            jnp.where(k == g + 1, f, jnp.where(step, jnp.where(left, fc, f), fd)),
        )
        return scores, statuses, a, b, c, d, fc, fd, lam_k, s, st

    zero = jnp.zeros((), grid.dtype)
    state = (
        jnp.full((g,), jnp.nan, grid.dtype),
        jnp.zeros((g,), jnp.int32),
        zero,
        zero,
        zero,
        zero,
        inf,
        inf,
        zero,
        zero,
        jnp.zeros((), jnp.int32),
    )
    *_, lam, score, status = lax.fori_loop(0, g + refine + 3, body, state)
    return LamChoice(lam, score, status)


# Compiled cores: one compilation per shape and static setting; inlined under an outer jit/vmap.


@functools.partial(jax.jit, static_argnames="solver")
def _gcv_jit(beta, y_flat, mask, lam, *, solver):
    return _gcv(beta, solver, y_flat, mask, lam)


@functools.partial(jax.jit, static_argnames=("solver", "folds"))
def _cv_jit(beta, y_flat, mask, lam, *, solver, folds):
    return _cv(beta, solver, y_flat, mask, lam, folds)


@functools.partial(jax.jit, static_argnames=("solver", "refine"))
def _gcv_choice(beta, y_flat, mask, grid, *, solver, refine):
    return _minimise(lambda lam: _gcv(beta, solver, y_flat, mask, lam), grid, refine)


@functools.partial(jax.jit, static_argnames=("solver", "refine", "folds"))
def _cv_choice(beta, y_flat, mask, grid, *, solver, refine, folds):
    return _minimise(lambda lam: _cv(beta, solver, y_flat, mask, lam, folds), grid, refine)


def _grid(grid: ArrayLike | None, dtype) -> Array:
    grid = default_lam_grid(dtype) if grid is None else jnp.asarray(grid, dtype)
    if grid.ndim != 1 or grid.shape[0] < 1:
        raise ValueError(f"`grid` must be a 1-D array of λ values; got shape {grid.shape}")
    return grid


def gcv_score(
    code: SplineCode,
    y: Float[ArrayLike, "n ..."],
    mask: Bool[ArrayLike, " n"],
    lam: Float[ArrayLike, ""],
) -> Float[Array, ""]:
    """Generalised cross-validation score of ``λ_dec`` for one pattern.

    ``GCV(λ) = (1/n) ‖(I − H)y‖² / (1 − tr(H)/n)²`` over the ``n`` live workers, with
    ``H = smoother_matrix(beta, beta, λ, mask)`` (live rows and columns) and the squared norm
    summed over output coordinates and divided by their number. NaN when it is undefined
    (fewer than 2 live workers, ``tr(H) = n``).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> from gcc_jax.tuning import gcv_score
        >>> code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=12)
        >>> y = 2.0 * code.beta[:, None] - 1.0  # a line: the residual is 0 for every λ
        >>> float(gcv_score(code, y, jnp.ones(12, bool), 1e-3)) < 1e-10
        True
    """
    code, y_flat, mask = _prepare(code, y, mask)
    lam = jnp.asarray(lam, y_flat.dtype)
    return _gcv_jit(code.beta, y_flat, mask, lam, solver=code.solver)[0]


def cv_score(
    code: SplineCode,
    y: Float[ArrayLike, "n ..."],
    mask: Bool[ArrayLike, " n"],
    lam: Float[ArrayLike, ""],
    *,
    folds: int = 5,
) -> Float[Array, ""]:
    """K-fold cross-validation score of ``λ_dec`` for one pattern (see the module docstring).

    ``CV(λ) = (1/(n m)) Σ_j Σ_{i ∈ fold j} ‖y_i − ŝ_{−j}(β_i)‖²`` with interleaved folds of the
    live workers and ``ŝ_{−j}`` the decoder spline fitted without fold ``j``.
    """
    code, y_flat, mask = _prepare(code, y, mask)
    folds = as_int(folds, "folds", 2)
    lam = jnp.asarray(lam, y_flat.dtype)
    return _cv_jit(code.beta, y_flat, mask, lam, solver=code.solver, folds=folds)[0]


def gcv_lam_dec(
    code: SplineCode,
    y: Float[ArrayLike, "n ..."],
    mask: Bool[ArrayLike, " n"],
    *,
    grid: Float[ArrayLike, " g"] | None = None,
    refine: int = 12,
) -> LamChoice:
    """``λ_dec`` minimising :func:`gcv_score` for one straggler pattern.

    Closed form per λ (one smoother matrix: O(N²) with the Kalman solver), minimised over
    ``grid`` (default :func:`default_lam_grid`) and refined by ``refine`` golden-section steps
    in ``log λ`` between the best grid point's neighbours. Pure and static-shaped:
    ``jax.vmap(lambda y, m: gcv_lam_dec(code, y, m))`` chooses one λ per pattern.

    Precision: near interpolation ``1 − tr(H)/n`` is small and must be accurate; in float32
    the smoother loses most digits for ``λ > 0`` on clustered nodes (see
    :func:`gcc_jax.fit_smoothing_spline`) and the choice drifts to tiny λ. Enable x64.

    Args:
        code: the :class:`~gcc_jax.SplineCode` (its ``beta`` and ``solver`` are used).
        y: the workers' outputs, shape ``(N, ...)`` (stragglers' rows are ignored).
        mask: boolean ``(N,)``; True = live.
        grid: positive λ values (ascending); the search runs over ``log λ``.
        refine: golden-section steps (0 = grid only).

    Returns:
        :class:`LamChoice` ``(lam, score, status)``.

    Example:
        >>> import jax, jax.numpy as jnp, gcc_jax as gcc
        >>> from gcc_jax.tuning import gcv_lam_dec
        >>> jax.config.update("jax_enable_x64", True)  # see the precision note above
        >>> code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=30)
        >>> noisy = jnp.sin(3 * code.beta) + 0.3 * jax.random.normal(jax.random.key(0), (30,))
        >>> choice = gcv_lam_dec(code, noisy, jnp.ones(30, bool))
        >>> bool(choice.lam > 1e-6), int(choice.status)
        (True, 0)
    """
    code, y_flat, mask, grid, refine = _prepare_search(code, y, mask, grid, refine)
    return _gcv_choice(code.beta, y_flat, mask, grid, solver=code.solver, refine=refine)


def cv_lam_dec(
    code: SplineCode,
    y: Float[ArrayLike, "n ..."],
    mask: Bool[ArrayLike, " n"],
    *,
    grid: Float[ArrayLike, " g"] | None = None,
    refine: int = 12,
    folds: int = 5,
) -> LamChoice:
    """``λ_dec`` minimising :func:`cv_score` (grid cross-validation) for one straggler pattern.

    The same interface and search as :func:`gcv_lam_dec`, with the ``folds``-fold
    cross-validation error (``folds`` refits per λ, O(folds · N · m) each) instead of GCV.
    Enable x64 as for :func:`gcv_lam_dec`.

    Example:
        >>> import jax, jax.numpy as jnp, gcc_jax as gcc
        >>> from gcc_jax.tuning import cv_lam_dec, gcv_lam_dec
        >>> jax.config.update("jax_enable_x64", True)  # see gcv_lam_dec's precision note
        >>> code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=30)
        >>> noisy = jnp.sin(3 * code.beta) + 0.3 * jax.random.normal(jax.random.key(0), (30,))
        >>> live = jnp.arange(30) % 10 != 3  # three stragglers
        >>> cv, gcv = cv_lam_dec(code, noisy, live, folds=3), gcv_lam_dec(code, noisy, live)
        >>> int(cv.status), bool(0.5 < cv.lam / gcv.lam < 2.0)  # the two criteria agree here
        (0, True)
    """
    code, y_flat, mask, grid, refine = _prepare_search(code, y, mask, grid, refine)
    folds = as_int(folds, "folds", 2)
    return _cv_choice(code.beta, y_flat, mask, grid, solver=code.solver, refine=refine, folds=folds)
