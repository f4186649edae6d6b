"""TEMPORARY (until ``fit_smoothing_spline(..., weights=)`` lands): weighted O(n) Kalman fit.

Same recursion as :func:`gcc_jax._banded.solve_banded` with observation variance ``λ'/w_i``
(``λ' = Σw · λ``), so ``w ∈ {0, 1}`` reproduces the masked fit. Minimises
``(1/Σw) Σ w_i (y_i − s(t_i))² + λ ∫ s''²``.
"""

import jax.numpy as jnp
from jax import lax

from .._kalman import evaluate


def weighted_values_slopes(t, w, lam, y):
    dtype = t.dtype
    n, r = y.shape
    w = w.astype(dtype)
    noise = jnp.sum(w) * lam
    h = jnp.diff(t)
    h0 = h[0]
    h_out = jnp.concatenate([h, jnp.zeros((1,), dtype)])
    obs = jnp.concatenate([y * (w > 0)[:, None], jnp.zeros((n, 2), dtype)], axis=1)
    zeros_r = jnp.zeros((r,), dtype)
    c0 = jnp.concatenate([zeros_r, jnp.stack([jnp.ones_like(h0), h0])])
    c1 = jnp.concatenate([zeros_r, jnp.stack([jnp.zeros_like(h0), jnp.ones_like(h0)])])
    p = (h0**3 / 3.0, h0**2 / 2.0, h0)

    def forward(carry, inputs):
        c0, c1, p00, p01, p11, i00, i01, i11, s0, s1 = carry
        y_i, w_i, h_i = inputs
        u = y_i - c0
        den = w_i * p00 + noise
        den = jnp.where(den > 0, den, 1.0)
        g = w_i / den
        k0 = g * (p00 + h_i * p01)
        k1 = g * p01
        ub0, ub1, ud = u[r], u[r + 1], u[:r]
        i00, i01, i11 = i00 + g * ub0 * ub0, i01 + g * ub0 * ub1, i11 + g * ub1 * ub1
        s0, s1 = s0 + (g * ub0) * ud, s1 + (g * ub1) * ud
        c0_next = c0 + h_i * c1 + k0 * u
        c1_next = c1 + k1 * u
        keep = jnp.where(w_i > 0, noise * g / jnp.where(w_i > 0, w_i, 1.0), 1.0)
        f00, f01 = p00 * keep, p01 * keep
        f11 = p11 - g * p01 * p01
        hh = h_i * h_i
        q00 = f00 + 2.0 * h_i * f01 + hh * f11 + hh * h_i / 3.0
        q01 = f01 + h_i * f11 + hh / 2.0
        q11 = f11 + h_i
        out = (c0, c1, p00, p01, p11, u * g, k0, k1, h_i)
        return (c0_next, c1_next, q00, q01, q11, i00, i01, i11, s0, s1), out

    z = jnp.zeros((), dtype)
    init = (c0, c1, *p, z, z, z, zeros_r, zeros_r)
    carry, (cs0, cs1, ps00, ps01, ps11, ug, ks0, ks1, hs) = lax.scan(forward, init, (obs, w, h_out))
    i00, i01, i11, s0, s1 = carry[5:]
    det = i00 * i11 - i01 * i01
    beta0 = -(i11 * s0 - i01 * s1) / det
    beta1 = -(i00 * s1 - i01 * s0) / det

    def backward(rr, inputs):
        rr0, rr1 = rr
        c0, c1, p00, p01, p11, u, k0, k1, h_i = inputs
        r0 = u + (1.0 - k0) * rr0 - k1 * rr1
        r1 = h_i * rr0 + rr1
        return (r0, r1), (c0 + p00 * r0 + p01 * r1, c1 + p01 * r0 + p11 * r1)

    zero = jnp.zeros((r + 2,), dtype)
    _, (a0, a1) = lax.scan(
        backward, (zero, zero), (cs0, cs1, ps00, ps01, ps11, ug, ks0, ks1, hs), reverse=True
    )
    values = a0[:, :r] + a0[:, r : r + 1] * beta0 + a0[:, r + 1 :] * beta1
    slopes = a1[:, :r] + a1[:, r : r + 1] * beta0 + a1[:, r + 1 :] * beta1
    return values, slopes


def weighted_fit_eval(t, w, lam, y, tq):
    values, slopes = weighted_values_slopes(t, w, lam, y)
    return values, evaluate(t, values, slopes, tq)
