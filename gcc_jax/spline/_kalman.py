"""Batch-native, scale-free O(n) smoothing-spline solver: many masks, outputs at the query points.

Same objective and convention as :mod:`gcc_jax.spline._fit`: for each mask ``p`` minimise
``Σ_i w_pi (y_i − s(t_i))² + λ'_p ∫ s''²`` with ``λ'_p = n_live,p λ``; the minimiser is the natural
cubic spline with knots at the live nodes (linear outside their hull).

Method. The spline is the posterior mean of an integrated Wiener process (state ``(s, s')``,
``s'' = √q dW/dt``) with a diffuse prior on the initial state, observed as ``y_i = s(t_i) + ε_i``,
``Var ε_i = r / w_i`` (Wahba 1978); only the ratio ``r/q = λ'`` matters. One forward Kalman filter
and one backward de Jong state smoother (Durbin & Koopman 2012, §4.4) give it in O(n) work; the
diffuse start is handled exactly by two augmented columns and a 2×2 GLS solve (de Jong 1991).
The query points ``tq`` are merged into the time grid as unobserved nodes, so the smoother's
state there *is* the spline value (the posterior mean of the IWP between knots is the cubic
spline) and nothing else has to be returned.

The recursion is *scale-free*, so that nothing overflows, underflows or cancels in float32
however small the node spacing (Chebyshev nodes at ``n = 10⁴`` are 5·10⁻⁸ apart near ±1),
however large ``λ`` or ``|y|``:

* time is mapped to ``τ = (t − t_c)/L`` with ``L`` the half-span of the nodes (``λ' → λ'/L³``);
* ``(q, r) = (1, λ')`` when ``λ' ≤ 1`` and ``(1/λ', 1)`` otherwise, so both are at most 1 and
  ``λ' → ∞`` degrades gracefully to the straight-line fit (``q`` may underflow to 0, which *is*
  that limit) while ``λ' = 0`` is exact interpolation;
* the slope is measured in units of the local spacing, ``z_i = (s_i, ρ_i s'_i)`` with
  ``ρ_i = max(h_{i−1}, h_i)``, and the covariance is normalised node by node,
  ``P̂_i = P_i / (q ρ_i³ + r)``, so every entry of ``P̂`` and of the normalised process noise
  ``κ_i [[(h/ρ)³/3, (h/ρ)²/2], [·, h/ρ]]`` (``κ_i = qρ_i³/(qρ_i³ + r) ∈ [0, 1]``) is O(1);
  the de Jong recursion is carried in the same normalisation (``r̂_{i−1} = r_{i−1}/c_i``);
* the data are divided by their largest live ``|y|`` per mask (the fit is linear in ``y``)
  and the 2×2 GLS system is equilibrated before it is solved;
* ``ρ_i`` is rounded up to a power of two, so the ratios ``ρ_{i+1}/ρ_i`` and the divisions by
  ``ρ`` are exact and no rounding of the grid compounds along the recursion;
* in float32 the value component and the GLS sums are accumulated with compensated (Kahan) sums.

float32 decodes stay within 1e-4 of float64 for ``n`` up to 10⁵ and every λ ≥ 0
(``bench/float32_error.py``; the table is in ``bench/README.md``).

The scan states are named: :class:`FilterState` (a :class:`Prediction`, the :class:`Gls` sums
and their compensation) forward, :class:`SmootherState` backward, over the per-position inputs
:class:`Grid`. The masks are the minor (vectorised) axis of every array, ``(…, p)``; ``y`` is
shared by all masks. The forward pass stores per step only what the backward pass needs
(:class:`StepRecord`); the predictions are kept only at the query points, in a small carried
buffer (:class:`Saved`), and so are the smoother's ``r̂`` (each written under a conditional at
those positions only). When the per-step records would exceed 4 MiB (``(r + 4) p L`` numbers)
the pass is checkpointed (:func:`block_length`): a first forward pass keeps only the prediction
at the start of each block of ``~√L`` steps, then the blocks are taken in reverse, each
recomputing its forward steps (same arithmetic, same result) into a block-sized store that its
backward steps consume. Memory is then ``O(√L p)`` beyond the weights and the working set stays
in cache. All of it is ``lax.scan``: jittable and differentiable w.r.t. ``y``, ``λ``, ``t`` and
``tq``.
"""

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .._core.sanitise import Sanitised, sanitise
from .._core.status import Status, combine
from .._core.types import Array, ArrayLike, Bool, Float, Int, Shaped

__all__ = [
    "smooth_at",
    "smooth_nodes",
    "smooth_batch_with_status",
    "solve_kalman",
    "evaluate",
    "scale_free",
    "noise_split",
]


def scale_free(t: Array, lam: Array, live: Array) -> tuple[Array, Array, Array]:
    """The scale-free problem of the nodes ``t``: centre ``t_c`` and half-span ``L`` (1 if the
    nodes coincide) of the map ``τ = (t − t_c)/L`` onto ``[−1, 1]``, and ``λ'/L³`` for
    ``λ' = live · λ`` (``∫ s''²`` scales like ``L⁻³`` under the map)."""
    half = (t[-1] - t[0]) / 2.0
    half = jnp.where(half > 0, half, 1.0)
    center = (t[-1] + t[0]) / 2.0
    return center, half, lam * live / half**3


def noise_split(lam_eff: Array, dtype) -> tuple[Array, Array]:
    """The noise variances ``(q, r)`` of the state-space model with ``r/q = λ'`` (the normalised
    ``lam_eff``): ``(1, λ')`` when ``λ' ≤ 1`` and ``(1/λ', 1)`` otherwise, so both are at most 1
    and ``λ' → ∞`` degrades to the straight-line fit (``q`` may underflow to 0)."""
    big = lam_eff > 1
    q = jnp.where(big, 1.0 / jnp.where(big, lam_eff, 1.0), 1.0).astype(dtype)
    return q, jnp.where(big, 1.0, lam_eff).astype(dtype)


def _grid(tt: Array) -> tuple[Array, Array, Array, Array]:
    """Normalised steps: ``hr_i = h_i/ρ_i``, ``rr_i = ρ_{i+1}/ρ_i``, ``hn_i = h_i/ρ_{i+1}`` and ρ.

    ``tt`` is the merged, sorted, normalised grid ``(L,)``; the step after the last node is 0.
    """
    dtype = tt.dtype
    h = jnp.diff(tt)
    floor = jnp.asarray(1e-12, dtype)
    # ρ_i = max(h_{i−1}, h_i); at the two ends the missing neighbour is the next step inward, so
    # that a query point on (or next to) the first or last node does not make ρ there tiny (the
    # normalisation by ρ³ would lose up to 9 digits)
    first, last = (h[1:2], h[-2:-1]) if h.shape[0] > 1 else (h, h)
    rho = jnp.maximum(jnp.maximum(jnp.concatenate([first, h]), jnp.concatenate([h, last])), floor)
    # a power of two (in [max h, 2 max h)): the ratios ρ_{i+1}/ρ_i and the divisions by ρ are
    # then exact, so no rounding of the grid compounds along the recursion (float32)
    rho = lax.stop_gradient(jnp.ldexp(jnp.ones_like(rho), jnp.frexp(rho)[1]))
    h_next = jnp.concatenate([h, jnp.zeros((1,), dtype)])
    rho_next = jnp.concatenate([rho[1:], rho[-1:]])
    return h_next / rho, rho_next / rho, h_next / rho_next, rho


class Grid(NamedTuple):
    """What every step of the scans reads, one row per position of the merged grid ``L``."""

    y: Float[Array, "L r"]  # data (anything at unobserved positions)
    w: Shaped[Array, "L p"]  # weights, or boolean masks (0 at query points and dead workers)
    rho3: Float[Array, " L"]  # ρ_i³
    rho3_next: Float[Array, " L"]  # ρ_{i+1}³
    inv_rr3: Float[Array, " L"]  # (ρ_i/ρ_{i+1})³, 0 at the last position
    last: Bool[Array, " L"]  # the last position
    hr: Float[Array, " L"]  # h_i/ρ_i
    rr: Float[Array, " L"]  # ρ_{i+1}/ρ_i
    hn: Float[Array, " L"]  # h_i/ρ_{i+1}
    slot: Int[Array, " L"]  # emission slot (the spare slot E where none)


class Noise(NamedTuple):
    """The per-mask constants of the model: ``(q, r)`` with ``r/q = λ'`` and the data scale."""

    q: Float[Array, " p"]  # process noise, ≤ 1
    r: Float[Array, " p"]  # observation noise, ≤ 1
    inv_scale: Float[Array, "r p"]  # per-mask (or per column and mask) scale applied to y
    big_y: Float[Array, ""]  # |y| bound after scaling: a straggler's huge y stays finite


class Prediction(NamedTuple):
    """The filter's predicted state at one position: where a checkpointed block restarts."""

    value: Float[Array, "r p"]  # predicted s of the data columns
    slope: Float[Array, "r p"]  # predicted ρ s' (the slope in units of ρ) of the data columns
    value_b: Float[Array, "2 p"]  # predicted s of the two diffuse (β) columns of de Jong's filter
    slope_b: Float[Array, "2 p"]  # predicted ρ s' of the diffuse columns
    p00: Float[Array, " p"]  # the normalised covariance P̂: value, value
    p01: Float[Array, " p"]  # value, slope
    p11: Float[Array, " p"]  # slope, slope
    value_err: Float[Array, "r p"] | None  # Kahan compensation of value (None in float64)
    value_b_err: Float[Array, "2 p"] | None  # Kahan compensation of value_b (None in float64)


class Gls(NamedTuple):
    """Running sums of the GLS estimate of the diffuse initial state ``β``: ``I β = −s``, over
    the innovations ``v_b`` (diffuse columns) and ``v_d`` (data columns) weighted by ``1/F``."""

    i00: Float[Array, " p"]  # I = Σ v_b v_bᵀ / F: entry (0, 0)
    i01: Float[Array, " p"]  # entry (0, 1)
    i11: Float[Array, " p"]  # entry (1, 1)
    s0: Float[Array, "r p"]  # s = Σ v_b v_d / F: the row of β_0
    s1: Float[Array, "r p"]  # the row of β_1


class FilterState(NamedTuple):
    """The forward filter's scan carry."""

    pred: Prediction
    gls: Gls
    gls_err: Gls | None  # Kahan compensation of gls (float32); None in float64


class StepRecord(NamedTuple):
    """What the backward pass needs of each forward step: weighted innovations and gains."""

    innovation: Float[Array, "r p"]  # g v of the data columns
    innovation_b: Float[Array, "2 p"]  # g v of the diffuse columns
    k0: Float[Array, " p"]  # predictive gain A P̂ e0 g, value component
    k1: Float[Array, " p"]  # and slope component


class Saved(NamedTuple):
    """Predicted states at the ``E`` emission slots (plus a spare slot written by no one)."""

    value: Float[Array, "E1 2 r p"]  # (value, slope) of the data columns
    value_b: Float[Array, "E1 2 2 p"]  # (value, slope) of the diffuse columns
    cov: Float[Array, "E1 3 p"]  # (P̂00, P̂01, P̂11)


class SmootherState(NamedTuple):
    """The backward (de Jong) scan carry."""

    r_value: Float[Array, "r p"]  # r̂ of the data columns: value component
    r_slope: Float[Array, "r p"]  # slope component
    r_value_b: Float[Array, "2 p"]  # r̂ of the diffuse columns: value component
    r_slope_b: Float[Array, "2 p"]  # slope component
    saved: Float[Array, "E1 2 r p"]  # (r_value, r_slope) saved at each emission slot
    saved_b: Float[Array, "E1 2 2 p"]  # (r_value_b, r_slope_b) saved at each emission slot


def _coefficients(noise: Noise, x: Grid) -> tuple[Array, Array, Array, Array]:
    """Per-mask ``c_i = 1/(qρ_i³ + r)``, ``ν_i = r c_i``, ``κ_{i+1}`` and ``c_{i+1}/c_i``."""
    q, r = noise.q, noise.r
    c_i = 1.0 / (q * x.rho3 + r)
    c_n = 1.0 / (q * x.rho3_next + r)
    kn = q * x.rho3_next * c_n
    ratio = jnp.where(x.last, 1.0, kn * x.inv_rr3 + r * c_n)
    return c_i, r * c_i, kn, ratio


def _filter_step(noise: Noise, state: FilterState, x: Grid) -> tuple[FilterState, StepRecord]:
    """One filter step: the next prediction, the GLS sums, and what the backward pass needs."""
    pred = state.pred
    w_i = x.w.astype(pred.p00.dtype)  # masks travel as booleans: 8x less memory than weights
    c_i, nu_i, kn_i, ratio_i = _coefficients(noise, x)
    # g = 1/F̂ with F̂ = w P̂00 + ν: smooth in w down to 0 when λ > 0 (exact weight gradients)
    f = w_i * pred.p00 + nu_i
    live = f > 0  # False only for w = 0 at λ = 0
    f_safe = jnp.where(live, f, 1.0)
    g = jnp.where(live, w_i / f_safe, 0.0)
    vd = jnp.clip(x.y[:, None] * noise.inv_scale, -noise.big_y, noise.big_y) - pred.value
    vb = -pred.value_b  # (2, p)
    wg = g * c_i  # 1/F_i, the GLS weight
    wb0, wb1 = wg * vb[0], wg * vb[1]
    gls, gls_err = _kahan(
        state.gls, (wb0 * vb[0], wb0 * vb[1], wb1 * vb[1], wb0 * vd, wb1 * vd), state.gls_err
    )
    m0, m1 = g * pred.p00, g * pred.p01  # filter gain
    k0 = m0 + x.hr * m1  # predictive gain A P̂ e0 g
    k1 = x.rr * m1
    value, value_err = _kahan(pred.value, x.hr * pred.slope + k0 * vd, pred.value_err)
    value_b, value_b_err = _kahan(pred.value_b, x.hr * pred.slope_b + k0 * vb, pred.value_b_err)
    keep = jnp.where(live, nu_i / f_safe, 1.0)  # 1 − g p00, written to stay >= 0
    f00, f01 = pred.p00 * keep, pred.p01 * keep
    f11 = pred.p11 - m1 * pred.p01
    hr, rr, hn = x.hr, x.rr, x.hn
    hn2 = hn * hn
    new = Prediction(
        value=value,
        slope=rr * pred.slope + k1 * vd,
        value_b=value_b,
        slope_b=rr * pred.slope_b + k1 * vb,
        p00=ratio_i * (f00 + hr * (2.0 * f01 + hr * f11)) + kn_i * hn2 * hn / 3.0,
        p01=ratio_i * rr * (f01 + hr * f11) + kn_i * hn2 / 2.0,
        p11=ratio_i * rr * rr * f11 + kn_i * hn,
        value_err=value_err,
        value_b_err=value_b_err,
    )
    return FilterState(new, gls, gls_err), StepRecord(g * vd, g * vb, k0, k1)


def _emit_step(
    noise: Noise, num_out: int, carry: tuple[FilterState, Saved], x: Grid
) -> tuple[tuple[FilterState, Saved], StepRecord]:
    """:func:`_filter_step`, first saving the prediction at this position's emission slot."""
    state, saved = carry
    pred = state.pred

    def save(saved: Saved) -> Saved:
        return Saved(
            value=lax.dynamic_update_index_in_dim(
                saved.value, jnp.stack([pred.value, pred.slope]), x.slot, 0
            ),
            value_b=lax.dynamic_update_index_in_dim(
                saved.value_b, jnp.stack([pred.value_b, pred.slope_b]), x.slot, 0
            ),
            cov=lax.dynamic_update_index_in_dim(
                saved.cov, jnp.stack([pred.p00, pred.p01, pred.p11]), x.slot, 0
            ),
        )

    saved = lax.cond(x.slot < num_out, save, lambda b: b, saved)
    state, record = _filter_step(noise, state, x)
    return (state, saved), record


def _smooth_step(
    noise: Noise, num_out: int, carry: SmootherState, xs: tuple[StepRecord, Grid]
) -> tuple[SmootherState, None]:
    """De Jong: ``r̂_{i−1} = e0 g v + (c_{i+1}/c_i) Lᵀ r̂_i``, ``L = [[1 − k0, hr], [−k1, rr]]``,
    saved at this position's emission slot."""
    rec, x = xs
    ratio_i = _coefficients(noise, x)[3]
    a0, b0 = ratio_i * (1.0 - rec.k0), ratio_i * rec.k1
    a1, b1 = ratio_i * x.hr, ratio_i * x.rr
    rd0, rd1, rb0, rb1 = carry.r_value, carry.r_slope, carry.r_value_b, carry.r_slope_b
    rd0, rd1 = rec.innovation + a0 * rd0 - b0 * rd1, a1 * rd0 + b1 * rd1
    rb0, rb1 = rec.innovation_b + a0 * rb0 - b0 * rb1, a1 * rb0 + b1 * rb1

    def save(buffers):
        od, ob = buffers
        od = lax.dynamic_update_index_in_dim(od, jnp.stack([rd0, rd1]), x.slot, 0)
        ob = lax.dynamic_update_index_in_dim(ob, jnp.stack([rb0, rb1]), x.slot, 0)
        return od, ob

    od, ob = lax.cond(x.slot < num_out, save, lambda b: b, (carry.saved, carry.saved_b))
    return SmootherState(rd0, rd1, rb0, rb1, od, ob), None


def _zero_gls(num_cols: int, p: int, dtype) -> Gls:
    zeros_p, zeros_rp = jnp.zeros((p,), dtype), jnp.zeros((num_cols, p), dtype)
    return Gls(zeros_p, zeros_p, zeros_p, zeros_rp, zeros_rp)


def _initial_state(noise: Noise, rho3_0: Array, num_cols: int, compensate: bool) -> FilterState:
    """The prediction at a virtual node one step ``ρ_0`` before the first one (diffuse β)."""
    q, r = noise.q, noise.r
    dtype = q.dtype
    p = q.shape[0]
    kappa0 = q * rho3_0 / (q * rho3_0 + r)
    zeros_rp = jnp.zeros((num_cols, p), dtype)
    zeros_p, ones_p = jnp.zeros((p,), dtype), jnp.ones((p,), dtype)
    pred = Prediction(
        value=zeros_rp,
        slope=zeros_rp,
        value_b=jnp.stack([ones_p, ones_p]),
        slope_b=jnp.stack([zeros_p, ones_p]),
        p00=kappa0 / 3.0,
        p01=kappa0 / 2.0,
        p11=kappa0,
        value_err=zeros_rp if compensate else None,
        value_b_err=jnp.zeros((2, p), dtype) if compensate else None,
    )
    gls = _zero_gls(num_cols, p, dtype)
    return FilterState(pred, gls, gls if compensate else None)


def _pad_grid(grid: Grid, block: int, num_out: int) -> Grid:
    """``grid`` padded to whole blocks and reshaped ``(blocks, block, …)``.

    The padded positions after the last node are exact no-ops: ``w = 0``, ``hr = hn = 0``,
    ``rr = 1``, ratio 1 (``last``) and the spare emission slot ``num_out``; ``ρ`` repeats.
    """
    length = grid.slot.shape[0]
    nb = -(-length // block)
    pad = nb * block - length
    fills = Grid(
        y=0.0,
        w=0.0,
        rho3=None,
        rho3_next=None,
        inv_rr3=None,
        last=True,
        hr=0.0,
        rr=1.0,
        hn=0.0,
        slot=num_out,
    )

    def padded(a, v):
        tail = a[-1:] if v is None else jnp.asarray(v, a.dtype)
        return jnp.concatenate([a, jnp.broadcast_to(tail, (pad, *a.shape[1:]))]).reshape(
            nb, block, *a.shape[1:]
        )

    return Grid(*(padded(a, v) for a, v in zip(grid, fills, strict=True)))


def _gls_beta(gls: Gls) -> tuple[Array, Array]:
    """The GLS estimate of the diffuse initial state, ``I β = −s``, equilibrated.

    ``D^{-1/2} I D^{-1/2}`` has a unit diagonal (``D = diag I``), so its determinant is
    ``1 − correlation²``.
    """
    tiny = jnp.finfo(gls.i00.dtype).tiny
    d0, d1 = 1.0 / jnp.sqrt(jnp.maximum(gls.i00, tiny)), 1.0 / jnp.sqrt(jnp.maximum(gls.i11, tiny))
    j01 = gls.i01 * d0 * d1
    det = 1.0 - j01 * j01
    t0, t1 = gls.s0 * d0, gls.s1 * d1
    beta0 = -d0 * (t0 - j01 * t1) / det
    beta1 = -d1 * (t1 - j01 * t0) / det
    return beta0, beta1


def _smooth_core(
    tt: Array,
    w: Array,
    y: Array,
    inv_scale: Array,
    lam_eff: Array,
    slot: Array,
    num_out: int,
    block: int | None = None,
) -> tuple[Array, Array]:
    """Smoothed state ``(2, E, r, p)`` (value, ρ·slope) at the ``E`` emission slots, and ρ.

    Args:
        tt: merged normalised grid ``(L,)``, ascending.
        w: observation weights ``(L, p)`` (0 at query points and dead workers).
        y: data ``(L, r)`` (finite; anything at unobserved positions).
        inv_scale: ``(r, p)`` (or ``(1, p)``) per-mask scales applied to ``y``.
        lam_eff: ``(p,)`` normalised ``λ'`` (``n_live λ / L³``).
        slot: ``(L,)`` int32 emission slot per position; ``num_out`` (the spare slot) = none.
        num_out: number of emission slots ``E``.
        block: steps per checkpointed block (static); default :func:`block_length`.
    """
    dtype = tt.dtype
    length = tt.shape[0]
    p = w.shape[1]
    r_cols = y.shape[1]
    # float32: the value component is propagated with compensated sums (the position along a
    # long run of steps otherwise accumulates ~N·eps; float64 has digits to spare)
    compensate = jnp.finfo(dtype).bits < 64
    hr, rr, hn, rho = _grid(tt)
    q, r = noise_split(lam_eff, dtype)
    noise = Noise(
        q=q,
        r=r,
        inv_scale=inv_scale,
        big_y=jnp.asarray(jnp.finfo(dtype).max / 8, dtype),
    )
    rho3 = rho**3
    last = jnp.arange(length) == length - 1
    grid = Grid(
        y=y,
        w=w,
        rho3=rho3,
        rho3_next=jnp.concatenate([rho3[1:], rho3[-1:]]),
        inv_rr3=jnp.where(last, 0.0, (1.0 / rr) ** 3),
        last=last,
        hr=hr,
        rr=rr,
        hn=hn,
        slot=slot,
    )
    state0 = _initial_state(noise, rho3[0], r_cols, compensate)
    saved0 = Saved(
        value=jnp.zeros((num_out + 1, 2, r_cols, p), dtype),
        value_b=jnp.zeros((num_out + 1, 2, 2, p), dtype),
        cov=jnp.zeros((num_out + 1, 3, p), dtype),
    )
    zeros_rp, zeros_2p = jnp.zeros((r_cols, p), dtype), jnp.zeros((2, p), dtype)
    smooth0 = SmootherState(zeros_rp, zeros_rp, zeros_2p, zeros_2p, saved0.value, saved0.value_b)
    emit = functools.partial(_emit_step, noise, num_out)
    smooth = functools.partial(_smooth_step, noise, num_out)
    block = block_length(length, p, r_cols, jnp.dtype(dtype).itemsize) if block is None else block
    if block >= length:  # one block: store the per-step records of the whole grid
        (state, saved), records = lax.scan(emit, (state0, saved0), grid)
        smoothed, _ = lax.scan(smooth, smooth0, (records, grid), reverse=True)
    else:  # checkpointed: forward once keeping the prediction per block, then block by block
        blocks = _pad_grid(grid, block, num_out)

        def forward_block(state: FilterState, grid_b: Grid):
            new, _ = lax.scan(lambda s, x: (_filter_step(noise, s, x)[0], None), state, grid_b)
            return new, state.pred

        state, checkpoints = lax.scan(forward_block, state0, blocks)

        def backward_block(carry, inp):
            smoothed, saved = carry
            start, grid_b = inp
            restart = FilterState(start, _zero_gls(r_cols, p, dtype), None)
            (_, saved), records = lax.scan(emit, (restart, saved), grid_b)
            smoothed, _ = lax.scan(smooth, smoothed, (records, grid_b), reverse=True)
            return (smoothed, saved), None

        (smoothed, saved), _ = lax.scan(
            backward_block, (smooth0, saved0), (checkpoints, blocks), reverse=True
        )

    bd, bb, bp = saved.value[:num_out], saved.value_b[:num_out], saved.cov[:num_out]
    od, ob = smoothed.saved[:num_out], smoothed.saved_b[:num_out]
    p00, p01, p11 = bp[:, 0, None], bp[:, 1, None], bp[:, 2, None]  # (E, 1, p)
    zd = jnp.stack(
        [bd[:, 0] + p00 * od[:, 0] + p01 * od[:, 1], bd[:, 1] + p01 * od[:, 0] + p11 * od[:, 1]]
    )  # (2, E, r, p)
    zb = jnp.stack(
        [bb[:, 0] + p00 * ob[:, 0] + p01 * ob[:, 1], bb[:, 1] + p01 * ob[:, 0] + p11 * ob[:, 1]]
    )  # (2, E, 2, p)
    beta0, beta1 = _gls_beta(state.gls)
    z = zd + zb[:, :, 0:1] * beta0 + zb[:, :, 1:2] * beta1
    return z, rho


def block_length(length: int, num_masks: int, num_cols: int, itemsize: int) -> int:
    """Steps per block of the checkpointed smoother (static): the whole grid when its stored
    per-step quantities (``(r + 4) p`` numbers a step) fit in 4 MiB, else about ``√L`` steps."""
    per_step = (num_cols + 4) * num_masks * itemsize
    if length * per_step <= (4 << 20):
        return length
    return max(16, math.isqrt(length - 1) + 1)


def _kahan(total, incr, comp):
    """Compensated ``total + incr`` (Kahan): the new total and its rounding error.

    Arrays, or a NamedTuple of arrays with ``incr`` a tuple of the same length; ``comp`` None
    (float64) is a plain sum.
    """
    if isinstance(total, tuple):
        comps = comp if comp is not None else total
        pairs = [
            _kahan(a, b, None if comp is None else c)
            for a, b, c in zip(total, incr, comps, strict=True)
        ]
        new = type(total)(*(a for a, _ in pairs))
        return new, None if comp is None else type(total)(*(c for _, c in pairs))
    if comp is None:
        return total + incr, None
    y = incr - comp
    new = total + y
    return new, (new - total) - y


def _merge(t: Array, tq: Array) -> tuple[Array, Array, Array]:
    """Sorted merge of nodes and query points: order, and each position's slot (q = none)."""
    n, nq = t.shape[0], tq.shape[0]
    order = jnp.argsort(jnp.concatenate([t, tq]), stable=True)
    slot = jnp.where(order >= n, order - n, nq).astype(jnp.int32)
    return order, slot, jnp.concatenate([t, tq])[order]


def _scales(y: Array, w: Array) -> Array:
    """``(1, p)``: 1/max live ``|y|`` per mask over all columns (1 where 0 or not finite).

    A ``(p, n)`` reduction (the fit is linear in ``y``, so one scale per mask suffices).
    """
    row = jnp.max(jnp.abs(y), axis=1)  # (n,)
    big = jnp.max(jnp.where(w > 0, row[:, None], 0.0), axis=0)[None]  # (1, p)
    ok = (big > 0) & jnp.isfinite(big)
    return lax.stop_gradient(jnp.where(ok, 1.0 / jnp.where(ok, big, 1.0), 1.0))


def _normalised(
    t: Array, tt: Array, w: Array, y: Array, lam: Array
) -> tuple[Array, Array, Array, Array]:
    """The scale-free problem (:func:`scale_free`): ``τ = (tt − t_c)/L``, ``L``, the data scales
    (:func:`_scales`) and ``λ'/L³``, ``λ' = (Σ_i w_ip) λ``."""
    center, half, lam_eff = scale_free(t, lam, jnp.sum(w, axis=0, dtype=t.dtype))
    return (tt - center) / half, half, _scales(y, w), lam_eff


def smooth_at(
    t: Float[Array, " n"],
    w: Shaped[Array, "n p"],
    lam: Float[ArrayLike, ""],
    y: Float[ArrayLike, "n r"],
    tq: Float[ArrayLike, " q"],
    block: int | None = None,
) -> Float[Array, "q r p"]:
    """Values at ``tq`` of the smoothing splines of ``y`` under each weight column of ``w``.

    ``w``: float weights ``≥ 0``, or boolean masks (kept boolean until each step: 8x less
    memory than float64 weights). No validation: ``t`` strictly increasing, at least 2 positive
    weights per column, ``y`` finite where ``w > 0``, ``λ ≥ 0``. ``λ' = (Σ_i w_ip) λ`` per
    column. ``block``: steps per checkpointed block (static; default :func:`block_length`, the
    result does not depend on it).
    """
    lam, y, tq = jnp.asarray(lam), jnp.asarray(y), jnp.asarray(tq)
    nq = tq.shape[0]
    order, slot, tt = _merge(t, tq)
    tau, half, inv, lam_eff = _normalised(t, tt, w, y, lam)
    wm = jnp.concatenate([w, jnp.zeros((nq, w.shape[1]), w.dtype)])[order]
    ym = jnp.concatenate([y, jnp.zeros((nq, y.shape[1]), y.dtype)])[order]
    z, _ = _smooth_core(tau, wm, ym, inv, lam_eff, slot, nq, block)
    return z[0] / inv[None]


def smooth_nodes(
    t: Float[Array, " n"],
    w: Shaped[ArrayLike, " n"],
    lam: Float[ArrayLike, ""],
    y: Float[ArrayLike, "n r"],
) -> tuple[Float[Array, "n r"], Float[Array, "n r"]]:
    """Values and slopes of one fitted spline at all nodes, each ``(n, r)`` (no validation).

    ``w``: weights ``(n,)`` ``≥ 0`` (or a boolean mask); ``λ' = (Σw) λ``, noise ``λ'/w_i``.
    """
    n = t.shape[0]
    lam, y = jnp.asarray(lam), jnp.asarray(y)
    w = jnp.asarray(w).astype(t.dtype)[:, None]
    tau, half, inv, lam_eff = _normalised(t, t, w, y, lam)
    z, rho = _smooth_core(tau, w, y, inv, lam_eff, jnp.arange(n, dtype=jnp.int32), n)
    values = z[0, :, :, 0] / inv[:, 0]
    slopes = z[1, :, :, 0] / (inv[:, 0] * rho[:, None] * half)
    return values, slopes


def finish(values: Float[Array, "q r p"], status: Int[Array, " p"]) -> tuple[Array, Array]:
    """Masks-last values ``(q, r, p)`` → masks-first ``(p, q, r)``, adding ``NONFINITE_RESULT``
    and putting NaN where the status is not OK.

    The finiteness is read in the masks-last layout (a reduction over the leading axes, with
    the masks as the vector axis), where XLA fuses the transposition into what reads it.
    """
    bad = status != 0
    finite = jnp.all(jnp.isfinite(values), axis=(0, 1))
    status = status | combine((~finite & ~bad, Status.NONFINITE_RESULT))
    values = jnp.moveaxis(values, -1, 0)
    return jnp.where((status == 0)[:, None, None], values, jnp.nan), status


def smooth_batch_with_status(
    t: Float[Array, " n"],
    masks: Bool[Array, "p n"],
    lam: Float[ArrayLike, ""],
    y: Float[ArrayLike, "n r"],
    tq: Float[ArrayLike, " q"],
) -> tuple[Float[Array, "p q r"], Int[Array, " p"]]:
    """Spline values at ``tq`` for every mask, with per-mask status (NaN where not OK).

    The batched form of ``fit_smoothing_spline_with_status(t, y, lam, mask)(tq)``: same flags
    (``TOO_FEW_LIVE``, ``NONFINITE_DATA``, ``BAD_NODES``, ``NEGATIVE_LAM``, ``NONFINITE_RESULT``),
    and a straggler's ``y`` (even NaN/Inf) never reaches the arithmetic or the gradient.
    """
    dtype = t.dtype
    lam, y, tq = jnp.asarray(lam, dtype), jnp.asarray(y, dtype), jnp.asarray(tq, dtype)
    s = sanitise(t, lam, y, masks)
    # (q, r, p); boolean weights
    return finish(in_sequence(s, lambda: smooth_at(s.t, s.masks.T, s.lam, s.y, tq)), s.status)


def in_sequence(s: Sanitised, fn):
    """``fn()`` as the taken branch of a ``lax.cond`` (its predicate is always true).

    A scheduling device for XLA's CPU backend: the smoother's ~30 small kernels per step run
    faster as a conditional's branch than inline for ``n`` from 10⁴ on
    (``bench/conditional_pass.py``; figures in ``bench/README.md``). The predicate
    (``status ≥ 0``) is data, so XLA cannot fold the conditional away; the other branch
    (zeros) is never taken.
    """
    shape = jax.eval_shape(fn)
    return lax.cond(jnp.all(s.status >= 0), fn, lambda: jnp.zeros(shape.shape, shape.dtype))


def solve_kalman(t: Array, w: Array, lam: Array, y: Array) -> tuple[Array, Array]:
    """Values and slopes of the fitted spline at all nodes, each of shape ``(n, r)``.

    Args:
        t: strictly increasing nodes ``(n,)``.
        w: weights ``(n,)``, ``≥ 0`` (a boolean mask is the 0/1 case); 0 = not observed.
        lam: ``λ ≥ 0`` (mean-data-term convention; ``λ' = (Σw) λ`` is formed here).
        y: data ``(n, r)``; zero-weight rows must be finite (they are never used).
    """
    return smooth_nodes(t, w, lam, y)


@jax.jit  # one program per shape: an eager spline(tq) call would dispatch ~20 operations
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
