"""Byzantine-robust GCC: the paper's adversarial λ rule and robust smoothing-spline decoders.

Adversarial setting (Moradi, Akbarinodehi & Maddah-Ali, "General Coded Computing: Adversarial
Settings", arXiv 2502.08058): up to ``γ`` of the ``N`` workers are adversarial and may return
*anything* within ``[−M, M]^m``; honest workers return ``f(x~_n)``. The paper's decoder is the
ordinary GCC smoothing spline with ``λ_dec`` chosen for ``(N, γ, M)`` (:func:`adversarial_lam_dec`);
its worst-case error decays like ``N^{6/5 (a − 1)}`` when ``γ = O(N^a)``.

Beyond the paper, :class:`RobustSplineCode` decodes with an M-estimator: a least-trimmed-squares
start (Rousseeuw 1984) followed by an iteratively reweighted smoothing spline (Huber or Tukey
weights, residual scale by the MAD) or a reweighted trimmed spline (drop the largest outlying
residuals), built on weighted smoothing splines. See docs/adversarial.md
for the derivations.
"""

import dataclasses
import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core.checks import (
    as_float_array,
    as_int,
    as_mask,
    check_instance,
    check_outputs,
    float_dtype,
)
from .._core.sanitise import sanitise
from .._core.scalars import as_real
from .._core.status import Status, combine, is_concrete
from .._core.types import Array, ArrayLike, Bool, Float, Int, Real, Shaped
from ..spline import fit_smoothing_spline_with_status, smooth_batch_with_status
from ._base import AbstractCode, Decoded, Encoded, NodeSizes, jit_method, pytree_dataclass
from .spline import SplineCode, SplineLeaves

__all__ = ["RobustSplineCode", "adversarial_lam_dec"]

_LOSSES = ("huber", "tukey", "trim")
_HUBER, _TUKEY, _TRIM = range(3)  # a code stores its loss as this index (an int32 array leaf)
_TUNING = {"huber": 1.345, "tukey": 4.685, "trim": 2.5}
_MAX_SUBSETS = 256  # the exhaustive LTS start's most drop sets (N = 12: C(12, 3) = 220)
_DENSE_MAX = 64  # the LTS start's fits: dense normal equations up to this many workers
_MAD = 1.482602218505602  # 1 / Φ⁻¹(3/4): the MAD of a standard normal sample is 1/_MAD


def adversarial_lam_dec(
    num_workers: int, num_adversaries: int, bound: float, *, constant: float = 1.0
) -> float:
    """The decoder smoothing parameter for ``γ`` adversaries bounded by ``M`` among ``N`` workers.

    ``λ_dec = c · (γ M / N)^{8/5}`` (``0`` when ``γ = 0``: the noiseless optimum).

    Derivation (a heuristic that reproduces the paper's rate, not the paper's proof). The decoder
    is linear, ``u_dec = H y``, so an attack ``δ`` (``γ`` non-zero rows, each within ``2M``)
    adds ``g = H δ``, the smoothing spline of ``δ``. Its fitting inequality
    ``‖g‖²_N + λ J(g) ≤ (1/N) Σ_i δ_i g(β_i) ≤ (2γM/N) ‖g‖_∞`` together with the kernel bound
    ``‖g‖²_∞ ≲ λ^{-1/4} (‖g‖²_N + λ J(g))`` (the reproducing kernel of that norm has diagonal
    ``~λ^{-1/4}``) gives ``‖g‖²_∞ ≲ (γM/N)² λ^{-1/2}``. The smoothing bias of a function with
    ``‖(f∘u_enc)''‖² = J`` is ``≲ λ^{3/4} J`` (the same two terms as LeTCC's Theorem 2, with the
    noise ``σ²/N`` replaced by ``(γM/N)²``). Balancing ``λ^{3/4} J = (γM/N)² λ^{-1/2}`` gives
    ``λ ∝ (γM/N)^{8/5} J^{-4/5}`` and an error ``∝ (γM/N)^{6/5}``: with ``γ = N^a`` that is the
    paper's ``N^{6/5 (a−1)}``. ``constant`` absorbs ``J^{-4/5}`` and the kernel constants (choose
    it on held-out data, never on the test job).

    Args:
        num_workers: ``N ≥ 1``.
        num_adversaries: ``γ ≥ 0``.
        bound: ``M > 0``, the adversaries' range ``[−M, M]`` per output coordinate.
        constant: ``c > 0``.

    Returns:
        ``λ_dec`` as a Python float (use it as ``SplineCode.chebyshev(..., lam_dec=...)``).

    Example:
        >>> import gcc_jax as gcc
        >>> lam = gcc.adversarial_lam_dec(640, 1, 1.0)
        >>> round(lam / (1 / 640) ** 1.6, 12)
        1.0
        >>> code = gcc.SplineCode.chebyshev(num_inputs=10, num_workers=640, lam_dec=lam)
    """
    n = as_int(num_workers, "num_workers", 1)
    g = as_int(num_adversaries, "num_adversaries", 0, n)
    m = float(bound)
    if not np.isfinite(m) or m <= 0:
        raise ValueError(f"`bound` must be finite and > 0; got {bound!r}")
    c = float(constant)
    if not np.isfinite(c) or c <= 0:
        raise ValueError(f"`constant` must be finite and > 0; got {constant!r}")
    return c * (g * m / n) ** 1.6


# ------------------------------------------------------------------------------------------------
# weights


def _masked_median(r: Array, mask: Array) -> Array:
    """Median of ``r`` over the live entries (``r`` finite where ``mask``)."""
    k = jnp.sum(mask)
    s = jnp.sort(jnp.where(mask, r, jnp.inf))
    lo = s[jnp.clip((k - 1) // 2, 0, r.shape[0] - 1)]
    hi = s[jnp.clip(k // 2, 0, r.shape[0] - 1)]
    return 0.5 * (lo + hi)


def robust_weights(
    residual: Float[Array, " n"],
    mask: Bool[Array, " n"],
    kind: Int[ArrayLike, ""],
    tuning: Real[ArrayLike, ""],
    trim: int,
    floor,
) -> Float[Array, " n"]:
    """IRLS weights ``w_i = ψ(u_i)/u_i`` of the live workers from residual norms ``r_i``.

    ``kind`` is the loss's index in ``("huber", "tukey", "trim")`` (data, not structure: the
    three decoders share one compiled program; every rule is computed and ``kind`` selects
    one, with harmless constants in the unselected ones so that their gradients stay finite).
    ``u_i = r_i / σ``, ``σ = max(1.4826 · median_live(r), floor)`` (MAD about 0: the residuals
    of a good fit are centred; ``floor > 0`` = the code's ``min_scale`` or round-off). Huber:
    ``w = min(1, c/u)``; Tukey: ``w = (1 − (u/c)²)²`` for ``u < c`` else 0; trim: 0 for the
    live workers that are among the ``trim`` largest residuals *and* have ``u > c``, 1 for the
    rest (always keeping the ``max(n_live − trim, 2)`` smallest). Dead workers get 0.
    """
    kind = jnp.asarray(kind)
    dtype = residual.dtype
    n_live = jnp.sum(mask)
    sigma = jnp.maximum(_MAD * _masked_median(residual, mask), floor)
    u = residual / sigma
    order = jnp.argsort(jnp.where(mask, residual, jnp.inf))
    rank = jnp.argsort(order)
    c_trim = jnp.where(kind == _TRIM, tuning, _TUNING["trim"]).astype(dtype)
    drop = (rank >= jnp.maximum(n_live - trim, 2)) & (u > c_trim)
    trimmed = (mask & ~drop).astype(dtype)
    c_huber = jnp.where(kind == _HUBER, tuning, _TUNING["huber"]).astype(dtype)
    big = u > c_huber  # double where: no infinite gradient of c/u at u = 0
    huber = jnp.where(big, c_huber / jnp.where(big, u, 1.0), 1.0)
    c_tukey = jnp.where(kind == _TUKEY, tuning, _TUNING["tukey"]).astype(dtype)
    z = jnp.minimum(u / c_tukey, 1.0)
    tukey = (1.0 - z * z) ** 2
    w = jnp.where(kind == _HUBER, huber, tukey)
    return jnp.where(kind == _TRIM, trimmed, jnp.where(mask, w, 0.0).astype(dtype))


def drop_sets(num_workers: int, trim: int, max_subsets: int) -> np.ndarray | None:
    """Every set of ``trim`` workers as boolean rows ``(C(n, trim), n)``; ``None`` when there
    are more than ``max_subsets`` of them (or ``trim = 0``)."""
    if trim == 0 or math.comb(num_workers, trim) > max_subsets:
        return None
    rows = np.zeros((math.comb(num_workers, trim), num_workers), bool)
    for i, subset in enumerate(itertools.combinations(range(num_workers), trim)):
        rows[i, list(subset)] = True
    return rows


def penalty_matrix(t: Float[Array, " n"]) -> Float[Array, "n n"]:
    """Reinsch's ``K = Q R⁻¹ Qᵀ``: ``gᵀ K g = ∫ g''²`` for the natural cubic spline through
    ``(t_i, g_i)`` (Green & Silverman, *Nonparametric Regression and Generalized Linear Models*,
    1994, §2.1.2). ``Q`` is ``n × (n−2)`` with ``1/h_{j−1}, −1/h_{j−1} − 1/h_j, 1/h_j`` down
    column ``j``, ``R`` tridiagonal with ``(h_{j−1} + h_j)/3`` and ``h_j/6``."""
    n = t.shape[0]
    h = jnp.diff(t)
    j = jnp.arange(n - 2)
    q = jnp.zeros((n, n - 2), t.dtype)
    q = q.at[j, j].set(1 / h[:-1]).at[j + 1, j].set(-1 / h[:-1] - 1 / h[1:])
    q = q.at[j + 2, j].set(1 / h[1:])
    r = jnp.diag((h[:-1] + h[1:]) / 3) + jnp.diag(h[1:-1] / 6, 1) + jnp.diag(h[1:-1] / 6, -1)
    return jnp.matmul(q, jnp.linalg.solve(r, q.T), precision=lax.Precision.HIGHEST)


def _candidate_fits(beta, y, lam, keeps):
    """Values at ``beta`` ``(c, n, m)`` of the splines fitted to the workers of each row of
    ``keeps``, and whether each fit is usable. Up to :data:`_DENSE_MAX` workers: the dense
    normal equations ``(W + λ Σw K) g = W y`` (one small batched solve); above, the batched
    Kalman pass."""
    if beta.shape[0] > _DENSE_MAX:
        values, status = smooth_batch_with_status(beta, keeps, lam, y, beta)
        return values, status == 0
    w = keeps.astype(y.dtype)
    a = jax.vmap(jnp.diag)(w) + (lam * jnp.sum(w, axis=1))[:, None, None] * penalty_matrix(beta)
    values = jnp.linalg.solve(a, w[:, :, None] * y[None])
    return values, (jnp.sum(keeps, axis=1) >= 2) & jnp.all(jnp.isfinite(values), axis=(1, 2))


def _trimmed_objective(beta, y, lam, mask, keeps, h):
    """LTS objective of each candidate: the sum of the ``h`` smallest live squared residual
    norms of the spline fitted to the workers of ``keeps[c]`` (``+inf`` where it fails)."""
    values, ok = _candidate_fits(beta, y, lam, keeps)
    r2 = jnp.mean((y[None] - jnp.where(ok[:, None, None], values, 0.0)) ** 2, axis=2)
    ranked = jnp.sort(jnp.where(mask[None], r2, jnp.inf), axis=1)
    head = jnp.arange(beta.shape[0]) < h
    obj = jnp.sum(jnp.where(head[None], ranked, 0.0), axis=1)
    return jnp.where(ok & jnp.isfinite(obj), obj, jnp.inf)


def _best(candidates, objective, fallback):
    """The candidate with the smallest objective (``fallback`` if every one failed)."""
    obj = objective(candidates)
    best = jnp.argmin(obj)
    return jnp.where(jnp.isfinite(obj[best]), candidates[best], fallback)


def lts_start(
    beta: Float[Array, " n"],
    y: Float[Array, "n m"],
    lam: Float[Array, ""],
    mask: Bool[Array, " n"],
    *,
    trim: int,
    max_subsets: int,
) -> Bool[Array, " n"]:
    """The live workers kept by a least-trimmed-squares start that drops ``trim`` of them.

    Minimises, over the sets ``D`` of ``trim`` workers, the LTS objective
    ``Σ_{i ≤ h} r²_(i)`` (the ``h = max(n_live − trim, 2)`` smallest squared residual norms
    over the live workers) of the spline fitted without ``D``: exhaustively over all
    ``C(n, trim)`` sets when that is at most ``max_subsets`` (one batched fit of every set),
    else greedily (``trim`` rounds, each dropping the one further worker that lowers the
    objective most: ``n`` fits a round). Discrete: no gradient flows through the choice.
    """
    n = beta.shape[0]
    h = jnp.maximum(jnp.sum(mask) - trim, 2)
    y = lax.stop_gradient(y)

    def objective(keeps):
        return _trimmed_objective(beta, y, lax.stop_gradient(lam), mask, keeps, h)

    sets = drop_sets(n, trim, max_subsets)
    if sets is not None:
        return _best(mask[None] & ~jnp.asarray(sets), objective, mask)
    one = ~jnp.eye(n, dtype=bool)
    return lax.fori_loop(0, trim, lambda _, keep: _best(keep[None] & one, objective, keep), mask)


def _weighted_fit(beta, y_flat, lam, w, alpha, solver):
    """Weighted smoothing spline through ``(beta, y)``: values at ``beta`` and at ``alpha``.

    :func:`gcc_jax.fit_smoothing_spline` with ``weights=w``: minimises
    ``(1/Σw) Σ w_i (y_i − s(β_i))² + λ ∫ s''²``.
    """
    spline = fit_smoothing_spline_with_status(beta, y_flat, lam, weights=w, solver=solver)
    return spline.values, spline(alpha)


def _power_of_two_scale(y: Array, mask: Array) -> Array:
    """``2^e`` nearest the largest live ``|y|`` (1 if that is 0): dividing by it is exact."""
    big = lax.stop_gradient(jnp.max(jnp.where(mask[:, None], jnp.abs(y), 0.0)))
    _, e = jnp.frexp(jnp.where(big > 0, big, 1.0))
    return jnp.ldexp(jnp.ones((), y.dtype), e)


@functools.partial(
    jax.jit, static_argnames=("iterations", "trim", "min_scale", "max_subsets", "solver")
)
def robust_fit(
    beta: Array,
    y_flat: Array,
    lam: Array,
    mask: Array,
    alpha: Array,
    *,
    kind: Int[ArrayLike, ""],
    iterations: int,
    tuning: Real[ArrayLike, ""],
    trim: int,
    min_scale: float = 0.0,
    max_subsets: int = 256,
    solver: str = "kalman",
) -> tuple[Array, Array]:
    """Fixed-count IRLS: decoded values at ``alpha`` ``(q, r)`` and the final weights ``(n,)``.

    The outputs are first divided by ``s = 2^e`` near their largest live magnitude (exact; the
    weights are scale-free and the fits linear, so the decode is ``s`` times the decode of
    ``y/s`` with ``min_scale/s``): no square overflows or underflows at any output scale.
    The start is the live mask (``trim = 0``) or :func:`lts_start`; each step computes residual
    norms ``r_i = ‖y_i − s(β_i)‖ / √m`` at the live workers, reweights
    (:func:`robust_weights`) and refits. ``kind`` is the loss's index in
    ``("huber", "tukey", "trim")``, an array (the three losses share one compiled program).
    Tukey runs its first ``iterations // 2`` steps with Huber weights. Every step is a
    fixed-shape weighted fit, so the whole decoder is one ``lax.fori_loop``: jit/vmap-able and
    differentiable.
    """
    dtype = y_flat.dtype
    m = y_flat.shape[1]
    scale = _power_of_two_scale(y_flat, mask)
    y_flat = jnp.where(mask[:, None], y_flat, 0.0) / scale
    live = jnp.maximum(jnp.sum(mask) * m, 1).astype(dtype)
    rms = lax.stop_gradient(jnp.sqrt(jnp.sum(y_flat * y_flat) / live))
    eps = jnp.finfo(dtype).eps
    floor = jnp.maximum(jnp.where(rms > 0, 16 * eps * rms, 1.0), min_scale / scale)

    def residuals(w):
        at_nodes, _ = _weighted_fit(beta, y_flat, lam, w, alpha, solver)
        d = jnp.where(mask[:, None], y_flat - at_nodes, 0.0)
        ss = jnp.sum(d * d, axis=1) / m
        pos = ss > 0  # sqrt's gradient at 0 is infinite: keep zeros out of it
        return jnp.where(pos, jnp.sqrt(jnp.where(pos, ss, 1.0)), 0.0)

    kind = jnp.asarray(kind)
    tuning = jnp.asarray(tuning, dtype)

    huber_steps = iterations // 2 if trim == 0 else 0  # an LTS start needs no Huber phase

    def step(i, w):
        # Tukey's first half: Huber weights with Huber's constant
        start = (kind == _TUKEY) & (i < huber_steps)
        step_kind = jnp.where(start, _HUBER, kind)
        step_tuning = jnp.where(start, jnp.asarray(_TUNING["huber"], dtype), tuning)
        return robust_weights(residuals(w), mask, step_kind, step_tuning, trim, floor)

    w0 = (
        mask
        if trim == 0
        else lts_start(beta, y_flat, lam, mask, trim=trim, max_subsets=max_subsets)
    )
    w = lax.fori_loop(0, iterations, step, w0.astype(dtype))
    _, at_alpha = _weighted_fit(beta, y_flat, lam, w, alpha, solver)
    return at_alpha * scale, w


# ------------------------------------------------------------------------------------------------
# the code


@pytree_dataclass
class RobustSplineCode(SplineLeaves, NodeSizes, AbstractCode):
    """GCC with a robust (M-estimator) smoothing-spline decoder against Byzantine workers.

    Encoder: GCC's (``X~ = E X``, the smoothing spline through ``(alpha_k, x_k)`` with
    ``lam_enc``; identical to :class:`gcc_jax.SplineCode`). Decoder: the weighted smoothing
    spline ``u_dec`` minimising ``(1/Σw) Σ_n w_n ‖y~_n − u(beta_n)‖² + lam_dec ∫ ‖u''‖²`` with
    weights found by ``iterations`` steps of iteratively reweighted least squares.

    **High-breakdown start** (``trim = γ > 0``). IRLS from the ordinary fit fails when liars
    pull that fit towards themselves (two garbage workers beside an input node). The start is
    least trimmed squares (Rousseeuw, "Least median of squares regression", JASA 79, 1984;
    Rousseeuw & Leroy, *Robust Regression and Outlier Detection*, 1987): over the sets ``D`` of
    ``γ`` workers, minimise ``Σ_{i ≤ h} r²_(i)(D)``, the ``h = max(n_live − γ, 2)`` smallest
    squared residual norms over the live workers of the spline fitted without ``D``. All
    ``C(N, γ)`` sets are tried when there are at most ``max_subsets`` (N = 12: 66 pairs, 220
    triples; one batched solve of the dense normal equations ``(W + λ Σw K) g = W y``, ``K``
    Reinsch's penalty matrix), else ``γ`` greedy rounds of ``N`` fits each. As long as the
    ``γ`` liars are among the dropped the start is the oracle fit, wherever the liars sit. The
    IRLS steps then start from the kept workers (weights 0/1; the choice carries no gradient):

    * ``"huber"``: ``w_n = min(1, c/u_n)`` (``c = 1.345``), a convex loss, bounded influence
      (never rejects: an in-range liar keeps some weight);
    * ``"tukey"``: Tukey's biweight ``w_n = (1 − (u_n/c)²)²₊`` (``c = 4.685``), which rejects
      outliers completely (with ``trim = 0`` the first half of the steps use Huber weights as
      the start; an MM-estimate in the sense of Yohai, Ann. Statist. 15, 1987, otherwise);
    * ``"trim"``: reweighted LTS: ``w_n = 0`` for the live workers that are among the ``γ``
      largest residuals *and* have ``u_n > c`` (``c = 2.5``, Rousseeuw & Leroy's cut-off; ``c
      = 0``: always drop ``γ``), 1 for the rest. The budget ``γ`` bounds the rejections; the
      cut-off keeps honest workers, so clean data lose no accuracy. With fewer than ``γ + 2``
      live workers it keeps the 2 best (a spline needs 2), so it decodes whatever a spline
      decodes (deadline decoding, and services that treat codes decoding from fewer than
      ``K`` results as approximate, rely on this).

    ``u_n = r_n/σ`` with ``r_n = ‖y~_n − u_dec(beta_n)‖/√m`` the worker's RMS residual over the
    output coordinates (an adversary corrupts a whole worker, so one weight per worker) and
    ``σ = max(1.4826 · median_live(r), floor)`` (MAD about 0; ``floor`` = ``min_scale`` or
    round-off). The outputs are divided by a power of two near their largest live magnitude
    before anything else (exact), so no square overflows and the gradient stays finite at any
    output scale, all-zero outputs included. ``lam_dec`` must be
    positive for the residuals to say anything (at ``λ = 0`` the spline interpolates every
    worker, outliers included); :func:`adversarial_lam_dec` gives the paper's choice.

    The decoder is non-linear in ``y~`` (this is an :class:`~gcc_jax.AbstractCode`, not a linear
    code) but a fixed-count loop of fixed-shape fits: jit/vmap-able over masks, differentiable
    in ``y~`` and ``lam_dec`` (which is what the gradient attack of
    :func:`gcc_jax.attack` uses against it). ``alpha``, ``beta``, ``lam_enc``, ``lam_dec``,
    ``loss`` (stored as its index in ``("huber", "tukey", "trim")``, an int32 array; the name is
    :attr:`loss_name`) and ``tuning`` are array leaves, so the three losses share every compiled
    program (a decode, a gradient attack) at the same sizes; ``iterations``, ``trim``,
    ``min_scale``, ``max_subsets`` and ``solver`` are static.

    Attributes:
        alpha: ascending input nodes ``(K,)``.
        beta: ascending worker nodes ``(N,)``.
        lam_enc: encoder smoothing ``≥ 0``.
        lam_dec: decoder smoothing ``≥ 0``.
        loss: ``"huber"``, ``"tukey"`` or ``"trim"`` (or its index 0, 1, 2); stored as the
            index, an int32 array leaf.
        iterations: IRLS steps (fixed; ``0`` with ``trim = 0``: the plain
            :class:`SplineCode` decoder; with ``trim > 0``: the LTS start alone).
        tuning: the constant ``c`` in units of σ (``None``: 1.345 Huber, 4.685 Tukey, 2.5
            trim's cut-off); ``> 0`` (trim: ``≥ 0``); an array leaf (a traced bad value gives
            ``Status.BAD_ARGUMENT``).
        trim: ``γ``, the liars guarded against: the LTS start drops that many, ``"trim"``
            rejects at most that many (0: no start, plain IRLS).
        min_scale: a floor on the residual scale ``σ``, in output units (default 0: only a
            round-off floor). With noiseless workers the honest residuals are pure smoothing
            bias, concentrated where the spline bends most; a MAD scale of such tiny, structured
            residuals lets Huber/Tukey down-weight honest workers. Set it to the residual level
            that does not matter for your outputs (e.g. ``1e-2`` for probabilities).
        max_subsets: the most drop sets the LTS start tries exhaustively (static; past it,
            greedy).
        solver: the spline solver of the encoder and of every weighted fit (see
            :class:`gcc_jax.SplineCode`).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.RobustSplineCode.chebyshev(
        ...     num_inputs=5, num_workers=40, loss="tukey",
        ...     lam_dec=gcc.adversarial_lam_dec(40, 2, 2.0, constant=1e-3))
        >>> x = jnp.linspace(-1.0, 1.0, 5)[:, None]
        >>> y = code.worker_outputs(jnp.sin, x).at[jnp.array([7, 20])].set(2.0)  # 2 liars
        >>> err = jnp.abs(code.decode(y, jnp.ones(40, bool)) - jnp.sin(x)).max()
        >>> bool(err < 1e-2)
        True
    """

    loss: str | Int[ArrayLike, ""] = "huber"  # stored as its index, an int32 array leaf
    iterations: int = dataclasses.field(default=10, metadata=dict(static=True))
    tuning: Real[ArrayLike, ""] | None = None  # stored as an array leaf
    trim: int = dataclasses.field(default=0, metadata=dict(static=True))
    min_scale: float = dataclasses.field(default=0.0, metadata=dict(static=True))
    max_subsets: int = dataclasses.field(default=_MAX_SUBSETS, metadata=dict(static=True))
    solver: str = dataclasses.field(
        default=SplineCode.__dataclass_fields__["solver"].default, metadata=dict(static=True)
    )

    def __post_init__(self):
        dtype = self._check_leaves()
        loss, name = self.loss, None
        if isinstance(loss, str):
            if loss not in _LOSSES:
                raise ValueError(f"`loss` must be one of {_LOSSES}; got {loss!r}")
            name, loss = loss, jnp.asarray(_LOSSES.index(loss), jnp.int32)
        elif isinstance(loss, bool | np.bool_ | float):
            raise TypeError(f"`loss` must be one of {_LOSSES}; got {loss!r}")
        elif isinstance(loss, int | np.integer | np.ndarray | jax.Array):
            loss = jnp.asarray(loss)
            if loss.shape != () or not jnp.issubdtype(loss.dtype, jnp.integer):
                raise TypeError(f"`loss` must be one of {_LOSSES} or its index; got {loss!r}")
            loss = loss.astype(jnp.int32)
            if is_concrete(loss):
                if not 0 <= int(loss) < len(_LOSSES):
                    raise ValueError(f"`loss` must be one of {_LOSSES}; got index {int(loss)}")
                name = _LOSSES[int(loss)]
        else:
            raise TypeError(f"`loss` must be one of {_LOSSES}; got {type(loss).__name__}")
        object.__setattr__(self, "loss", loss)
        object.__setattr__(self, "iterations", as_int(self.iterations, "iterations", 0))
        object.__setattr__(self, "trim", as_int(self.trim, "trim", 0))
        tuning = self.tuning
        if tuning is None:
            if name is None:
                raise TypeError("`tuning` must be given when `loss` is a traced index")
            tuning = _TUNING[name]
        if not is_concrete(tuning):
            object.__setattr__(self, "tuning", tuning)  # a tracer: checked in the status
        else:  # > 0 (Huber, Tukey; also an unknown loss), >= 0 (trim: 0 = plain LTS steps)
            value = as_real(tuning, "tuning", 0.0, lo_open=name != "trim")
            object.__setattr__(self, "tuning", jnp.asarray(value, dtype))
        object.__setattr__(self, "max_subsets", as_int(self.max_subsets, "max_subsets", 0))
        min_scale = float(self.min_scale)
        if not (np.isfinite(min_scale) and min_scale >= 0):
            raise ValueError(f"`min_scale` must be finite and >= 0; got {self.min_scale!r}")
        object.__setattr__(self, "min_scale", min_scale)
        if hasattr(self.beta, "shape") and self.trim > self.beta.shape[0] - 2:
            raise ValueError(
                f"`trim` must leave at least 2 workers (N={self.beta.shape[0]}); got {self.trim}"
            )

    # -- constructors -----------------------------------------------------------------------

    @classmethod
    def from_spline(
        cls,
        code: SplineCode,
        *,
        loss: str = "huber",
        iterations: int = 10,
        tuning: float | None = None,
        trim: int = 0,
        min_scale: float = 0.0,
        max_subsets: int = _MAX_SUBSETS,
    ) -> "RobustSplineCode":
        """The robust decoder on top of an existing :class:`SplineCode` (same leaves)."""
        check_instance(code, SplineCode, "code", "gcc_jax.SplineCode")
        return cls(
            alpha=code.alpha,
            beta=code.beta,
            lam_enc=code.lam_enc,
            lam_dec=code.lam_dec,
            loss=loss,
            iterations=iterations,
            tuning=tuning,
            trim=trim,
            min_scale=min_scale,
            max_subsets=max_subsets,
            solver=code.solver,
        )

    @property
    def max_liars(self) -> int:
        """``trim`` (``γ``): the liars the least-trimmed-squares start drops (see
        :attr:`AbstractCode.max_liars`); Tukey and trimming then reject them, Huber only bounds
        their weight."""
        return self.trim

    @property
    def loss_name(self) -> str:
        """``"huber"``, ``"tukey"`` or ``"trim"`` (outside ``jit``: :attr:`loss` is an index)."""
        return _LOSSES[int(self.loss)]

    @property
    def spline(self) -> SplineCode:
        """The plain GCC code with the same nodes and λs (the paper's decoder)."""
        return SplineCode(self.alpha, self.beta, self.lam_enc, self.lam_dec, solver=self.solver)

    def available(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, " k"]:
        """Every estimate when at least :attr:`min_live` workers are live."""
        mask = as_mask(mask, self.num_workers)
        return jnp.broadcast_to(jnp.sum(mask) >= self.min_live, (self.num_inputs,))

    # -- encoder / decoder ------------------------------------------------------------------

    @jit_method
    def encode_with_status(self, x: Shaped[ArrayLike, "k *d"]) -> Encoded:
        """GCC's encoder (:meth:`gcc_jax.SplineCode.encode_with_status`)."""
        return self.spline.encode_with_status(x)

    @jit_method
    def decode_with_status(
        self, y: Shaped[ArrayLike, "n *m"], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """The IRLS decode at ``alpha`` with its status; never raises on value problems.

        Status flags: ``TOO_FEW_LIVE`` (fewer than 2 live workers), ``NONFINITE_DATA``
        (NaN/Inf from a live worker: an honest-but-broken worker is reported, not silently
        down-weighted), ``BAD_NODES``, ``NEGATIVE_LAM``, ``NONFINITE_RESULT``.
        """
        y, mask = check_outputs(y, mask, self.num_workers)
        y = as_float_array(y, "y")
        n = self.num_workers
        dtype = float_dtype(self.alpha, self.beta, y)
        y_flat = y.reshape(n, -1).astype(dtype)
        beta, alpha = self.beta.astype(dtype), self.alpha.astype(dtype)
        lam = jnp.asarray(self.lam_dec, dtype)
        # flags, and harmless inputs for a failed pattern (the value is NaN afterwards)
        s = sanitise(beta, lam, y_flat, mask, nodes=(alpha,), min_live=self.min_live)
        status = s.status | self._tuning_status(dtype)
        value, _ = self._robust_fit(s.t, s.y, s.lam, s.masks, alpha)
        status = status | combine((~jnp.all(jnp.isfinite(value)), Status.NONFINITE_RESULT))
        value = jnp.where(status == 0, value, jnp.nan)
        return Decoded(value.reshape((self.num_inputs, *y.shape[1:])), status)

    def weights(self, y: Shaped[ArrayLike, "n *m"], mask: Bool[ArrayLike, " n"]) -> Array:
        """The final IRLS weights ``(n,)`` (0 = rejected; useful to flag suspect workers)."""
        y, mask = check_outputs(y, mask, self.num_workers)
        dtype = float_dtype(self.alpha, self.beta, y)
        y_flat = jnp.where(mask[:, None], y.reshape(self.num_workers, -1), 0.0).astype(dtype)
        lam = jnp.asarray(self.lam_dec, dtype)
        _, w = self._robust_fit(
            self.beta.astype(dtype), y_flat, lam, mask, self.alpha.astype(dtype)
        )
        return w

    def _tuning_status(self, dtype) -> Array:
        """``BAD_ARGUMENT`` when ``tuning`` (traced under a transform) is not finite or not
        ``> 0`` (``>= 0`` for ``"trim"``)."""
        c = jnp.asarray(self.tuning, dtype)
        ok = jnp.isfinite(c) & ((c > 0) | ((c == 0) & (jnp.asarray(self.loss) == _TRIM)))
        return combine((~ok, Status.BAD_ARGUMENT))

    def _robust_fit(self, beta, y_flat, lam, mask, alpha) -> tuple[Array, Array]:
        """:func:`robust_fit` with this code's loss, iterations, tuning, trim, scale floor and
        solver: the values at ``alpha`` and the final weights."""
        return robust_fit(
            beta,
            y_flat,
            lam,
            mask,
            alpha,
            kind=self.loss,
            iterations=self.iterations,
            tuning=self.tuning,
            trim=self.trim,
            min_scale=self.min_scale,
            max_subsets=self.max_subsets,
            solver=self.solver,
        )
