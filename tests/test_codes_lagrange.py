"""LagrangeCode (LCC): exact recovery of polynomials, explicit status below the threshold."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gcc_jax as gcc


def random_mask(rng, n, live):
    mask = np.zeros(n, bool)
    mask[rng.choice(n, live, replace=False)] = True
    return jnp.asarray(mask)


# Every degree and every size at least once, the highest degree at both ends of the sizes (each
# (k, n, degree) compiles its own decoder: the full 3 x 3 grid only re-ran the branch).
@pytest.mark.parametrize("degree, k, n", [(1, 2, 9), (2, 4, 16), (3, 6, 24), (3, 2, 9)])
def test_exact_recovery_at_and_above_threshold(degree, k, n):
    code = gcc.LagrangeCode.chebyshev(num_inputs=k, num_workers=n, degree=degree)
    r = code.recovery_threshold
    assert r == (k - 1) * degree + 1
    assert r <= n
    rng = np.random.default_rng(degree * 100 + k)
    coef = jnp.asarray(rng.normal(size=degree + 1))

    def f(v):  # a polynomial map R^2 -> R^2 of total degree `degree`
        return jnp.stack([jnp.polyval(coef, v[0]), v[1] ** degree - v[0] * v[1] ** (degree - 1)])

    x = jnp.asarray(rng.uniform(-1.0, 1.0, size=(k, 2)))
    apply = jax.jit(jax.vmap(f))  # one program per shape, not one dispatch per operation
    yt = apply(code.encode(x))
    fx = apply(x)
    dec = jax.jit(jax.vmap(lambda m: code.decode_with_status(yt, m)))
    masks = jnp.stack([random_mask(rng, n, live) for live in (r, r, r + 1, n)])
    out = dec(masks)
    assert not np.asarray(out.status).any()
    np.testing.assert_allclose(out.value, jnp.broadcast_to(fx, out.value.shape), atol=1e-8)


def test_decoder_uses_exactly_threshold_workers_spread_over_live_ranks():
    code = gcc.LagrangeCode.chebyshev(num_inputs=3, num_workers=20, degree=2)  # r = 5
    mask = jnp.ones(20, bool).at[jnp.array([0, 5, 6, 19])].set(False)
    d = np.asarray(code.decoder_matrix(mask))
    used = np.flatnonzero(np.abs(d).sum(axis=0) > 0)
    live = np.flatnonzero(np.asarray(mask))
    assert used.size == 5
    np.testing.assert_array_equal(used, live[[0, 4, 8, 11, 15]])  # ranks round(j·15/4)


def test_below_threshold_status_and_nan():
    code = gcc.LagrangeCode.chebyshev(num_inputs=4, num_workers=12, degree=3)  # r = 10
    y = jnp.ones((12, 2))
    mask = jnp.ones(12, bool).at[jnp.array([1, 2, 3])].set(False)  # 9 live < 10
    out = code.decode_with_status(y, mask)
    assert int(out.status) == gcc.Status.BELOW_RECOVERY_THRESHOLD
    assert bool(jnp.all(jnp.isnan(out.value)))
    assert not bool(code.recovers(mask))
    with pytest.raises(gcc.GCCValueError, match="recovery threshold"):
        code.decode(y, mask)
    assert "recovery threshold" in gcc.describe_status(out.status)


def test_below_threshold_interpolate_matches_numpy_polyfit():
    code = gcc.LagrangeCode.chebyshev(
        num_inputs=4, num_workers=12, degree=3, below_threshold="interpolate"
    )
    rng = np.random.default_rng(0)
    y = rng.normal(size=(12, 1))
    mask = np.ones(12, bool)
    mask[[0, 4, 5, 9]] = False  # 8 live < 10: degree-7 interpolant through the live points
    out = code.decode_with_status(y, jnp.asarray(mask))
    assert int(out.status) == 0
    beta, alpha = np.asarray(code.beta), np.asarray(code.alpha)
    poly = np.polynomial.Polynomial.fit(beta[mask], y[mask, 0], deg=int(mask.sum()) - 1)
    np.testing.assert_allclose(out.value[:, 0], poly(alpha), rtol=1e-9, atol=1e-9)


def test_encoder_matches_numpy_lagrange_and_is_interpolatory():
    code = gcc.LagrangeCode.chebyshev(num_inputs=5, num_workers=11, degree=1)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, 3))
    alpha, beta = np.asarray(code.alpha), np.asarray(code.beta)
    expect = np.stack(
        [np.polynomial.Polynomial.fit(alpha, x[:, j], deg=4)(beta) for j in range(3)], axis=1
    )
    np.testing.assert_allclose(code.encode(x), expect, rtol=1e-10, atol=1e-10)
    at_alpha = gcc.LagrangeCode(alpha=code.alpha, beta=code.alpha, degree=1)
    np.testing.assert_allclose(at_alpha.encode(x), x, rtol=1e-14)  # exact at the nodes


def test_validation():
    with pytest.raises(ValueError, match="degree"):
        gcc.LagrangeCode.chebyshev(num_inputs=3, num_workers=8, degree=0)
    with pytest.raises(ValueError, match="below_threshold"):
        gcc.LagrangeCode.chebyshev(num_inputs=3, num_workers=8, degree=1, below_threshold="x")
    code = gcc.LagrangeCode.chebyshev(num_inputs=3, num_workers=8, degree=2)
    assert code.max_stragglers == 3
    out = code.decode_with_status(jnp.ones((8, 1)), jnp.zeros(8, bool))
    assert int(out.status) == gcc.Status.TOO_FEW_LIVE | gcc.Status.BELOW_RECOVERY_THRESHOLD
    with pytest.raises(gcc.GCCValueError, match="LagrangeCode needs at least 1 live worker"):
        code.decode(jnp.ones((8, 1)), jnp.zeros(8, bool))


def test_many_nodes_do_not_underflow_in_float32():
    # 300 Chebyshev-2 workers, all needed (K = 2, deg 299): the product weights Π 1/(t_i − t_j)
    # underflow float32 unless rescaled. Reference: the closed-form Chebyshev-2 barycentric
    # weights (−1)^j δ_j, δ = 1/2 at the ends and 1 inside (Berrut & Trefethen 2004), in NumPy.
    n = 300
    code = gcc.LagrangeCode.chebyshev(num_inputs=2, num_workers=n, degree=n - 1, dtype=jnp.float32)
    d = np.asarray(code.decoder_matrix(jnp.ones(n, bool)))
    t = np.asarray(gcc.chebyshev_nodes(n, kind=2), np.float64)
    w = (-1.0) ** np.arange(n) * np.where((np.arange(n) == 0) | (np.arange(n) == n - 1), 0.5, 1)
    z = np.asarray(gcc.chebyshev_nodes(2, kind=1), np.float64)
    c = w[None, :] / (z[:, None] - t[None, :])
    ref = c / c.sum(axis=1, keepdims=True)
    assert d.dtype == np.float32 and np.all(np.isfinite(d))
    np.testing.assert_allclose(d, ref, rtol=0, atol=1e-4)


def test_check_grads_wrt_data_and_nodes():
    from jax.test_util import check_grads

    code = gcc.LagrangeCode.chebyshev(num_inputs=2, num_workers=6, degree=2)  # r = 3
    mask = jnp.array([True, False, True, True, True, False])

    def pipeline(x, alpha, beta):
        c = gcc.LagrangeCode(alpha=alpha, beta=beta, degree=2)
        return c.decode_with_status(jnp.sin(c.encode(x)), mask).value

    x = jnp.array([[0.3], [-0.7]])
    args = (x, code.alpha * 0.9, code.beta)
    # both modes, second order in forward mode (rev-over-rev compiles as much again)
    check_grads(jax.jit(pipeline), args, order=1, modes=("rev",))
    check_grads(jax.jit(pipeline), args, order=2, modes=("fwd",))
