"""Batch-native, scale-free O(n) smoothing-spline solver: many masks, outputs at the query points.

Same objective and convention as :mod:`gcc_jax.spline._fit` (DESIGN §1): for each mask ``p`` minimise
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

The recursion is written to be *scale-free*, so that nothing overflows, underflows or cancels in
float32 however small the node spacing (Chebyshev nodes at ``n = 10⁴`` are 5·10⁻⁸ apart near
±1), however large ``λ`` or ``|y|``:

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

Measured float32 vs float64 (``bench/float32_error.py``: the same float32 nodes and data, two
columns with ``|y|`` up to 1e6 and 1e3, 10% stragglers, K = 20 query points; max relative
difference):

| nodes | λ = 0 | 1e-10 | 1e-6 | 1e-2 | 1 | 1e10 | 1e30 |
| --- | --- | --- | --- | --- | --- | --- | --- |
| 10³ Chebyshev | 9.6e-8 | 9.6e-8 | 8.6e-8 | 1.7e-6 | 2.5e-7 | 4.1e-7 | 4.1e-7 |
| 10⁴ Chebyshev | 1.0e-7 | 4.9e-8 | 9.3e-8 | 5.5e-6 | 2.8e-6 | 5.1e-7 | 5.1e-7 |
| 10⁵ equispaced | 1.3e-7 | 7.7e-8 | 2.4e-7 | 5.8e-5 | 1.5e-5 | 6.8e-7 | 6.8e-7 |
| 10⁵ Chebyshev (float32-distinct) | 1.2e-7 | 8.9e-8 | 1.0e-6 | 6.5e-5 | 8.2e-6 | 3.9e-7 | 3.9e-7 |

so at most 6.5e-5 (< 1e-4) for ``n`` up to 10⁵ and any λ ≥ 0; nothing overflows or is flagged
(float64 also holds ``|y|`` ~ 1e300 and λ up to 1e300). At ``n`` = 10⁵ the Chebyshev nodes are
not all distinct in float32 (spacing below ulp near ±1), hence the distinct subset.

Layout: the masks are the minor (vectorised) axis of every array, ``(…, p)``; ``y`` is shared by all
masks. The forward pass stores per step only what the backward pass needs (the weighted innovations
and two gains per mask); the predicted states are kept only at the query points, in a small carried
buffer, and so are the smoother's ``r̂`` (each written under a conditional at those positions only:
writing a spare slot at every node cost 7–12% of the pass). When those per-step quantities would
exceed 4 MiB (``(r + 4) p L`` numbers) the pass is checkpointed (:func:`block_length`): a first
forward pass keeps only the state at the start of each block of ``~√L`` steps, then the blocks are
taken in reverse, each recomputing its forward steps (same arithmetic, same result) into a
block-sized store that its backward steps consume. Memory is then ``O(√L p)`` beyond the weights,
the working set stays in cache and the time per mask and node no longer grows with ``L`` (one extra
forward pass, which the cache locality more than pays for on CPU). All of it is ``lax.scan``:
jittable and differentiable w.r.t. ``y``, ``λ``, ``t`` and ``tq``.
"""

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .._core.status import Status, combine
from .._core.types import Array, ArrayLike, Bool, Float, Int, Shaped

__all__ = ["smooth_at", "smooth_nodes", "smooth_batch_with_status", "solve_kalman", "evaluate"]


def _grid(tt: Array) -> tuple[Array, Array, Array, Array]:
    """Normalised steps: ``hr_i = h_i/ρ_i``, ``rr_i = ρ_{i+1}/ρ_i``, ``hn_i = h_i/ρ_{i+1}`` and ρ.

    ``tt`` is the merged, sorted, normalised grid ``(L,)``; the step after the last node is 0.
    """
    dtype = tt.dtype
    h = jnp.diff(tt)
    floor = jnp.asarray(1e-12, dtype)
    # ρ_i = max(h_{i−1}, h_i); at the two ends the missing neighbour is the next step inward, so
    # that a query point on (or next to) the first or last node does not make ρ there tiny:
    # the normalisation by ρ³ then lost up to 9 digits (8e-7 reproducing a line in float64)
    first, last = (h[1:2], h[-2:-1]) if h.shape[0] > 1 else (h, h)
    rho = jnp.maximum(jnp.maximum(jnp.concatenate([first, h]), jnp.concatenate([h, last])), floor)
    # a power of two (in [max h, 2 max h)): the ratios ρ_{i+1}/ρ_i and the divisions by ρ are
    # then exact, so no rounding of the grid compounds along the recursion (float32)
    rho = lax.stop_gradient(jnp.ldexp(jnp.ones_like(rho), jnp.frexp(rho)[1]))
    h_next = jnp.concatenate([h, jnp.zeros((1,), dtype)])
    rho_next = jnp.concatenate([rho[1:], rho[-1:]])
    return h_next / rho, rho_next / rho, h_next / rho_next, rho


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
    """Smoothed state ``(2, E, r, p)`` (value, ρ·slope) at the ``E`` emission slots.

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
    # long run of steps otherwise accumulates ~N·eps; float64 has digits to spare).
    compensate = jnp.finfo(dtype).bits < 64
    big_y = jnp.asarray(jnp.finfo(dtype).max / 8, dtype)  # a straggler's huge y stays finite
    hr, rr, hn, rho = _grid(tt)
    big = lam_eff > 1
    q = jnp.where(big, 1.0 / jnp.where(big, lam_eff, 1.0), 1.0).astype(dtype)
    r = jnp.where(big, 1.0, lam_eff).astype(dtype)
    rho3 = rho**3
    rho3_next = jnp.concatenate([rho3[1:], rho3[-1:]])
    last = jnp.arange(length) == length - 1
    inv_rr3 = jnp.where(last, 0.0, (1.0 / rr) ** 3)

    def coefficients(rho3_i, rho3_n, inv_rr3_i, last_i):
        """Per-mask ``c_i = 1/(qρ_i³ + r)``, ``ν_i = r c_i``, ``κ_{i+1}`` and ``c_{i+1}/c_i``."""
        c_i = 1.0 / (q * rho3_i + r)
        c_n = 1.0 / (q * rho3_n + r)
        kn = q * rho3_n * c_n
        ratio = jnp.where(last_i, 1.0, kn * inv_rr3_i + r * c_n)
        return c_i, r * c_i, kn, ratio

    def step(state, xs):
        """One filter step: the new state and what the backward pass needs (per mask)."""
        ad0, ad1, ab0, ab1, p00, p01, p11, cd, cb, i00, i01, i11, s0, s1, cg = state
        y_i, w_i, rho3_i, rho3_n, inv_rr3_i, last_i, hr_i, rr_i, hn_i, _ = xs
        w_i = w_i.astype(dtype)  # masks travel as booleans: 8x less memory than float64 weights
        c_i, nu_i, kn_i, ratio_i = coefficients(rho3_i, rho3_n, inv_rr3_i, last_i)
        # g = 1/F̂ with F̂ = w P̂00 + ν: smooth in w down to 0 when λ > 0 (exact weight gradients)
        f = w_i * p00 + nu_i
        live = f > 0  # False only for w = 0 at λ = 0
        f_safe = jnp.where(live, f, 1.0)
        g = jnp.where(live, w_i / f_safe, 0.0)
        vd = jnp.clip(y_i[:, None] * inv_scale, -big_y, big_y) - ad0  # (r, p); finite
        vb = -ab0  # (2, p)
        wg = g * c_i  # 1/F_i, the GLS weight
        wb0, wb1 = wg * vb[0], wg * vb[1]
        (i00, i01, i11, s0, s1), cg = _kahan(
            (i00, i01, i11, s0, s1), (wb0 * vb[0], wb0 * vb[1], wb1 * vb[1], wb0 * vd, wb1 * vd), cg
        )
        m0, m1 = g * p00, g * p01  # filter gain
        k0 = m0 + hr_i * m1  # predictive gain A P̂ e0 g
        k1 = rr_i * m1
        ad0, cd = _kahan(ad0, hr_i * ad1 + k0 * vd, cd)
        ab0, cb = _kahan(ab0, hr_i * ab1 + k0 * vb, cb)
        ad1, ab1 = rr_i * ad1 + k1 * vd, rr_i * ab1 + k1 * vb
        keep = jnp.where(live, nu_i / f_safe, 1.0)  # 1 − g p00, written to stay >= 0
        f00, f01 = p00 * keep, p01 * keep
        f11 = p11 - m1 * p01
        hn2 = hn_i * hn_i
        p00 = ratio_i * (f00 + hr_i * (2.0 * f01 + hr_i * f11)) + kn_i * hn2 * hn_i / 3.0
        p01 = ratio_i * rr_i * (f01 + hr_i * f11) + kn_i * hn2 / 2.0
        p11 = ratio_i * rr_i * rr_i * f11 + kn_i * hn_i
        new = (ad0, ad1, ab0, ab1, p00, p01, p11, cd, cb, i00, i01, i11, s0, s1, cg)
        return new, (g * vd, g * vb, k0, k1)

    def emit_step(carry, xs):
        """:func:`step`, first saving the predicted state at this position's emission slot."""
        state, bd, bb, bp = carry
        ad0, ad1, ab0, ab1, p00, p01, p11 = state[:7]
        slot_i = xs[-1]

        def save(buffers):
            bd, bb, bp = buffers
            bd = lax.dynamic_update_index_in_dim(bd, jnp.stack([ad0, ad1]), slot_i, 0)
            bb = lax.dynamic_update_index_in_dim(bb, jnp.stack([ab0, ab1]), slot_i, 0)
            bp = lax.dynamic_update_index_in_dim(bp, jnp.stack([p00, p01, p11]), slot_i, 0)
            return bd, bb, bp

        bd, bb, bp = lax.cond(slot_i < num_out, save, lambda b: b, (bd, bb, bp))
        state, out = step(state, xs)
        return (state, bd, bb, bp), out

    def smooth_step(carry, xs):
        """De Jong: ``r̂_{i−1} = e0 g v + (c_{i+1}/c_i) Lᵀ r̂_i``, ``L = [[1 − k0, hr], [−k1, rr]]``,
        saved at this position's emission slot."""
        rd0, rd1, rb0, rb1, od, ob = carry
        (vgd_i, vgb_i, k0, k1), (_, _, rho3_i, rho3_n, inv_rr3_i, last_i, hr_i, rr_i, _, slot_i) = (
            xs
        )
        ratio_i = coefficients(rho3_i, rho3_n, inv_rr3_i, last_i)[3]
        a0, b0 = ratio_i * (1.0 - k0), ratio_i * k1
        a1, b1 = ratio_i * hr_i, ratio_i * rr_i
        rd0, rd1 = vgd_i + a0 * rd0 - b0 * rd1, a1 * rd0 + b1 * rd1
        rb0, rb1 = vgb_i + a0 * rb0 - b0 * rb1, a1 * rb0 + b1 * rb1

        def save(buffers):
            od, ob = buffers
            od = lax.dynamic_update_index_in_dim(od, jnp.stack([rd0, rd1]), slot_i, 0)
            ob = lax.dynamic_update_index_in_dim(ob, jnp.stack([rb0, rb1]), slot_i, 0)
            return od, ob

        od, ob = lax.cond(slot_i < num_out, save, lambda b: b, (od, ob))
        return (rd0, rd1, rb0, rb1, od, ob), None

    kappa0 = q * rho3[0] / (q * rho3[0] + r)
    zeros_rp = jnp.zeros((r_cols, p), dtype)
    zeros_2p = jnp.zeros((2, p), dtype)
    zeros_p = jnp.zeros((p,), dtype)
    ones_p = jnp.ones((p,), dtype)
    # β columns: the state at a virtual node one step ρ_0 before the first one (diffuse).
    state0 = (
        zeros_rp,
        zeros_rp,
        jnp.stack([ones_p, ones_p]),
        jnp.stack([zeros_p, ones_p]),
        kappa0 / 3.0,
        kappa0 / 2.0,
        kappa0,
        zeros_rp if compensate else None,
        zeros_2p if compensate else None,
        zeros_p,
        zeros_p,
        zeros_p,
        zeros_rp,
        zeros_rp,
        (zeros_p, zeros_p, zeros_p, zeros_rp, zeros_rp) if compensate else None,
    )
    buffers = (
        jnp.zeros((num_out + 1, 2, r_cols, p), dtype),
        jnp.zeros((num_out + 1, 2, 2, p), dtype),
        jnp.zeros((num_out + 1, 3, p), dtype),
    )
    smooth0 = (zeros_rp, zeros_rp, zeros_2p, zeros_2p, buffers[0], buffers[1])
    xs = (y, w, rho3, rho3_next, inv_rr3, last, hr, rr, hn, slot)
    block = block_length(length, p, r_cols, jnp.dtype(dtype).itemsize) if block is None else block
    if block >= length:  # one block: store the per-step quantities of the whole grid
        (state, bd, bb, bp), outs = lax.scan(emit_step, (state0, *buffers), xs)
        (*_, od, ob), _ = lax.scan(smooth_step, smooth0, (outs, xs), reverse=True)
    else:  # checkpointed: forward once storing the state per block, recompute block by block
        nb = -(-length // block)
        pad = nb * block - length
        # padded positions after the last node are exact no-ops: w = 0, hr = hn = 0, rr = 1,
        # ratio = 1 (``last``) and no emission slot
        fills = (0.0, 0.0, None, None, None, True, 0.0, 1.0, 0.0, num_out)
        xs = tuple(
            jnp.concatenate(
                [
                    a,
                    jnp.broadcast_to(
                        a[-1:] if v is None else jnp.asarray(v, a.dtype), (pad, *a.shape[1:])
                    ),
                ]
            ).reshape(nb, block, *a.shape[1:])
            for a, v in zip(xs, fills, strict=True)
        )

        def forward_block(state, xs_b):
            new, _ = lax.scan(lambda s, x: (step(s, x)[0], None), state, xs_b)
            return new, state[:9]

        state, checkpoints = lax.scan(forward_block, state0, xs)

        def backward_block(carry, inp):
            smooth, bd, bb, bp = carry
            start, xs_b = inp
            zero_sums = (zeros_p, zeros_p, zeros_p, zeros_rp, zeros_rp, None)
            (_, bd, bb, bp), outs = lax.scan(emit_step, ((*start, *zero_sums), bd, bb, bp), xs_b)
            smooth, _ = lax.scan(smooth_step, smooth, (outs, xs_b), reverse=True)
            return (smooth, bd, bb, bp), None

        ((*_, od, ob), bd, bb, bp), _ = lax.scan(
            backward_block, (smooth0, *buffers), (checkpoints, xs), reverse=True
        )
    i00, i01, i11, s0, s1 = state[9:14]

    bd, bb, bp, od, ob = bd[:num_out], bb[:num_out], bp[:num_out], od[:num_out], ob[:num_out]
    p00, p01, p11 = bp[:, 0, None], bp[:, 1, None], bp[:, 2, None]  # (E, 1, p)
    zd = jnp.stack(
        [bd[:, 0] + p00 * od[:, 0] + p01 * od[:, 1], bd[:, 1] + p01 * od[:, 0] + p11 * od[:, 1]]
    )  # (2, E, r, p)
    zb = jnp.stack(
        [bb[:, 0] + p00 * ob[:, 0] + p01 * ob[:, 1], bb[:, 1] + p01 * ob[:, 0] + p11 * ob[:, 1]]
    )  # (2, E, 2, p)
    # GLS estimate of the diffuse initial state, equilibrated: Iβ = −s.
    # D^{-1/2} I D^{-1/2} has a unit diagonal (D = diag I), so det is the 1 − correlation².
    tiny = jnp.finfo(dtype).tiny
    d0, d1 = 1.0 / jnp.sqrt(jnp.maximum(i00, tiny)), 1.0 / jnp.sqrt(jnp.maximum(i11, tiny))
    j01 = i01 * d0 * d1
    det = 1.0 - j01 * j01
    t0, t1 = s0 * d0, s1 * d1
    beta0 = -d0 * (t0 - j01 * t1) / det
    beta1 = -d1 * (t1 - j01 * t0) / det
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

    Arrays or tuples of arrays alike; ``comp`` None (float64) is a plain sum.
    """
    if isinstance(total, tuple):
        pairs = [
            _kahan(a, b, None if comp is None else c)
            for a, b, c in zip(total, incr, comp if comp is not None else total, strict=True)
        ]
        return tuple(a for a, _ in pairs), None if comp is None else tuple(c for _, c in pairs)
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
    """The scale-free problem: ``τ = (tt − t_c)/L`` (``L`` the half-span of the nodes ``t``, 1
    if degenerate), ``L``, the data scales (:func:`_scales`) and ``λ'/L³``, ``λ' = (Σ_i w_ip) λ``.
    """
    half = (t[-1] - t[0]) / 2.0
    half = jnp.where(half > 0, half, 1.0)
    center = (t[-1] + t[0]) / 2.0
    live = jnp.sum(w, axis=0, dtype=t.dtype)
    return (tt - center) / half, half, _scales(y, w), lam * live / half**3


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


class Sanitised(NamedTuple):
    """A batch problem with every value problem flagged and replaced by a harmless stand-in."""

    status: Int[Array, " p"]  # per-mask flags known before solving
    t: Float[Array, " n"]  # nodes (equispaced stand-ins if the nodes are bad)
    lam: Float[Array, ""]  # λ (1 if λ is bad)
    masks: Bool[Array, "p n"]  # masks (all live where the status is not OK)
    y: Float[Array, "n r"]  # outputs (0 in rows with a NaN/Inf)
    dead: Int[Array, " p"]  # stragglers per mask, as given


def sanitise(t: Array, masks: Array, lam: Array, y: Array) -> Sanitised:
    """Flags ``TOO_FEW_LIVE``, ``NONFINITE_DATA``, ``BAD_NODES``, ``NEGATIVE_LAM`` per mask and
    replaces what they flag, so that no NaN/Inf (a straggler's included) reaches the arithmetic
    or the gradient.

    The live workers and the live workers with a non-finite output are counted in one
    two-operand reduction over the workers (two separate sums were two kernels each on CPU).
    """
    dtype = t.dtype
    n = t.shape[0]
    finite_rows = jnp.all(jnp.isfinite(y), axis=1)
    node_bad = jnp.any(jnp.diff(t) <= 0) | ~jnp.all(jnp.isfinite(t))
    lam_bad = ~(lam >= 0) | ~jnp.isfinite(lam)
    global_status = combine((node_bad, Status.BAD_NODES), (lam_bad, Status.NEGATIVE_LAM))
    zero = jnp.zeros((), jnp.int32)
    live, live_nonfinite = lax.reduce(
        (masks.astype(jnp.int32), (masks & ~finite_rows[None, :]).astype(jnp.int32)),
        (zero, zero),
        lambda a, b: (a[0] + b[0], a[1] + b[1]),
        (1,),
    )
    status = (
        combine((live < 2, Status.TOO_FEW_LIVE), (live_nonfinite > 0, Status.NONFINITE_DATA))
        | global_status
    )
    return Sanitised(
        status=status,
        t=jnp.where(global_status != 0, jnp.linspace(0.0, 1.0, n, dtype=dtype), t),
        lam=jnp.where(global_status != 0, jnp.ones_like(lam), lam),
        masks=jnp.where((status != 0)[:, None], True, masks),
        y=jnp.where(finite_rows[:, None], y, 0.0),
        dead=n - live,
    )


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
    s = sanitise(t, masks, lam, y)
    # (q, r, p); boolean weights
    return finish(in_sequence(s, lambda: smooth_at(s.t, s.masks.T, s.lam, s.y, tq)), s.status)


def in_sequence(s: Sanitised, fn):
    """``fn()`` as the taken branch of a ``lax.cond`` (its predicate is always true).

    A performance device for XLA's CPU backend, measured, not derived
    (``bench/conditional_pass.py``: the same ``monte_carlo_loss`` with this and with a direct
    call, each in its own process, float64, S = N/10, 2-core CPU): at N = 10⁴ (256 masks) 116
    against 172 ns per mask and node (1.48x wall, 2.4x less CPU), at N = 10⁵ (128 masks) 129
    against 205 (1.60x, 2.6x); at N = 10³ no gain (0.96–0.98x). Mean losses equal, or 1 ulp
    apart (N = 10⁵). Turning off ``--xla_cpu_enable_concurrency_optimized_scheduler`` gave part
    of it (144 ns at N = 10⁴): the gain is in how the ~30 small kernels per step are scheduled
    on the thread pool. The predicate (``status ≥ 0``) is data, so XLA cannot fold the
    conditional away; the other branch (zeros) is never taken.
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
