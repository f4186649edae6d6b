"""ApproxIFERCode and LagrangeECCode: error location against NumPy and brute-force references."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

import gcc_jax as gcc


def numpy_rational_locator(z, y, degree):
    """|Q(z)| of the least-squares rational fit P - yQ = 0 (monomial basis, NumPy SVD)."""
    v = np.vander(z, degree + 1)
    s = np.max(np.abs(y))
    a = np.concatenate([v, -(y / s)[:, None] * v], axis=1)
    q = np.linalg.svd(a)[2][-1, degree + 1 :]
    return np.abs(v @ q)


def berrut_loop(t, y, z):
    w = (-1.0) ** np.arange(len(t))
    out = []
    for zz in z:
        c = w / (zz - t)
        out.append(c @ y / c.sum())
    return np.array(out)


def _rational_outputs(code, rng):
    """Honest outputs of f = id through BACC: y = Berrut interpolant of x (exactly rational)."""
    x = rng.normal(size=(code.num_inputs, 2))
    return np.array(code.encode(x)), x


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_approxifer_matches_numpy_reference(seed):
    rng = np.random.default_rng(seed)
    k, n, a = 3, 16, 2
    code = gcc.ApproxIFERCode.chebyshev(num_inputs=k, num_workers=n, num_adversaries=a)
    y, x = _rational_outputs(code, rng)
    mask = np.ones(n, bool)
    mask[rng.choice(n, 2, replace=False)] = False
    live = np.flatnonzero(mask)
    bad = rng.choice(live, a, replace=False)
    y[bad] += rng.choice([-1, 1], size=(a, 2)) * rng.uniform(2, 5, size=(a, 2))
    beta = np.asarray(code.beta)
    # reference: per-column NumPy locator, votes, Berrut over the rest
    votes = np.zeros(n)
    for j in range(2):
        q = numpy_rational_locator(beta[live], y[live, j], k + a - 1)
        votes[live[np.argsort(q)[:a]]] += 1
    located = np.zeros(n, bool)
    located[np.argsort(-votes, kind="stable")[:a]] = True
    np.testing.assert_array_equal(np.asarray(code.locate(y, mask)), located)
    np.testing.assert_array_equal(np.flatnonzero(located), np.sort(bad))
    keep = mask & ~located
    ref = berrut_loop(beta[keep], y[keep], np.asarray(code.alpha))
    np.testing.assert_allclose(code.decode(y, mask), ref, rtol=1e-10, atol=1e-12)
    # the located liars are gone: the decode equals BACC over the honest live workers
    np.testing.assert_allclose(
        code.decode(y, mask), code.berrut.decode(y, keep), rtol=1e-10, atol=1e-12
    )


def test_approxifer_brute_force_locator_tiny():
    # brute force: the A-subset whose removal leaves the best rational fit of degree K - 1
    rng = np.random.default_rng(5)
    k, n, a = 3, 11, 1
    code = gcc.ApproxIFERCode.chebyshev(num_inputs=k, num_workers=n, num_adversaries=a)
    beta = np.asarray(code.beta)
    for trial in range(4):
        y, _ = _rational_outputs(code, rng)
        y = y[:, :1]
        bad = rng.integers(n)
        y[bad] += 3.0
        best = min(
            itertools.combinations(range(n), a),
            key=lambda s: np.linalg.svd(
                np.concatenate(
                    [
                        np.vander(np.delete(beta, s), k),
                        -np.delete(y[:, 0], s)[:, None] * np.vander(np.delete(beta, s), k),
                    ],
                    axis=1,
                ),
                compute_uv=False,
            )[-1],
        )
        got = np.flatnonzero(np.asarray(code.locate(y, np.ones(n, bool))))
        assert list(got) == list(best) == [bad], trial


def test_approxifer_no_adversaries_is_bacc_and_status():
    code = gcc.ApproxIFERCode.chebyshev(num_inputs=3, num_workers=12, num_adversaries=0)
    y = np.random.default_rng(0).normal(size=(12, 2))
    mask = np.ones(12, bool)
    mask[4] = False
    np.testing.assert_allclose(code.decode(y, mask), code.berrut.decode(y, mask), rtol=1e-12)
    code = gcc.ApproxIFERCode.chebyshev(num_inputs=3, num_workers=12, num_adversaries=2)
    assert code.recovery_threshold == 9
    few = np.zeros(12, bool)
    few[:8] = True
    out = code.decode_with_status(y, few)
    assert int(out.status) & int(gcc.Status.BELOW_RECOVERY_THRESHOLD)
    assert np.all(np.isnan(out.value))
    assert not bool(code.available(few).any())


def brute_force_polynomial_decode(z, y, deg, a, alpha):
    """Try every A-subset of removals; the one leaving an exact degree-`deg` fit decodes."""
    best = None
    for s in itertools.combinations(range(len(z)), a):
        keep = np.setdiff1d(np.arange(len(z)), s)
        coef = np.polynomial.chebyshev.chebfit(z[keep], y[keep], deg)
        res = np.abs(np.polynomial.chebyshev.chebval(z[keep], coef) - y[keep]).max()
        if best is None or res < best[0]:
            best = (res, np.polynomial.chebyshev.chebval(alpha, coef))
    return best[1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lagrange_ec_exact_and_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    k, deg, a, s = 3, 2, 2, 1
    n = (k - 1) * deg + 2 * a + 1 + s  # exactly LCC's bound: 10 workers
    code = gcc.LagrangeECCode.chebyshev(num_inputs=k, num_workers=n, degree=deg, num_adversaries=a)
    assert code.recovery_threshold == n - s
    x = rng.normal(size=(k, 2))

    def f(v):
        return v**2 - 0.5 * v + 1.0

    y = np.array(f(code.encode(x)))
    mask = np.ones(n, bool)
    mask[rng.integers(n)] = False
    live = np.flatnonzero(mask)
    bad = rng.choice(live, a, replace=False)
    y[bad] = rng.uniform(-10, 10, size=(a, 2))
    got = np.asarray(code.decode(y, mask))
    np.testing.assert_allclose(got, f(x), rtol=1e-8, atol=1e-8)
    beta, alpha = np.asarray(code.beta), np.asarray(code.alpha)
    for j in range(2):
        ref = brute_force_polynomial_decode(beta[live], y[live, j], (k - 1) * deg, a, alpha)
        np.testing.assert_allclose(got[:, j], ref, rtol=1e-8, atol=1e-8)
    # the liars are the workers dropped in every coordinate
    assert np.all(np.asarray(code.locate(y, mask))[bad])


def test_lagrange_ec_without_adversaries_is_lcc_and_status():
    code = gcc.LagrangeECCode.chebyshev(num_inputs=3, num_workers=10, degree=2, num_adversaries=0)
    y = np.random.default_rng(0).normal(size=(10, 3))
    mask = np.ones(10, bool)
    np.testing.assert_allclose(
        code.decode(y, mask), code.lagrange.decode(y, mask), rtol=1e-10, atol=1e-12
    )
    code = gcc.LagrangeECCode.chebyshev(num_inputs=3, num_workers=10, degree=2, num_adversaries=2)
    few = np.ones(10, bool)
    few[:2] = False
    out = code.decode_with_status(y, few)
    assert int(out.status) & int(gcc.Status.BELOW_RECOVERY_THRESHOLD)
    with pytest.raises(gcc.GCCValueError):
        code.decode(y, few)
    with pytest.raises(ValueError, match="num_adversaries"):
        gcc.LagrangeECCode.chebyshev(num_inputs=3, num_workers=10, degree=2, num_adversaries=-1)


def test_float32_decodes():
    code = gcc.ApproxIFERCode.chebyshev(
        num_inputs=3, num_workers=16, num_adversaries=1, dtype=jnp.float32
    )
    x = jnp.linspace(-1, 1, 3, dtype=jnp.float32)[:, None]
    y = code.worker_outputs(jnp.sin, x).at[5].set(4.0)
    out = code.decode(y, jnp.ones(16, bool))
    assert out.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(out)))
    assert bool(code.locate(y, jnp.ones(16, bool))[5])
