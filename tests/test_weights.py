"""Weighted smoothing splines against SciPy's ``make_smoothing_spline(w=...)`` (float64)."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from scipy.interpolate import CubicSpline, make_smoothing_spline

import gcc_jax as gcc

SOLVERS = ["kalman", "kernel"]
# Compiling is what a test here costs (each new (n, columns, queries, solver) compiles the fit
# and the eager evaluation again; running is free): the tests share N nodes and Q query points
# unless a size is the point.
N, Q = 9, 101


def _problem(n, seed=0):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(-1, 1, n))
    if np.min(np.diff(t)) < 1e-3:
        t = np.linspace(-1, 1, n)
    y = np.sin(3 * t)[:, None] + 0.1 * rng.normal(size=(n, 2))
    w = rng.uniform(0.05, 5.0, n)
    w[[1, n // 2]] = 0.0  # zero weights: missing observations
    mask = np.ones(n, bool)
    mask[n // 3] = False  # a straggler on top
    return t, y, w, mask


def _rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b)))


# Objective (1/Σw) Σ w_i (y_i − s)² + λ ∫ s''² is SciPy's Σ w_i (y_i − s)² + (Σw λ) ∫ s''².
@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("n", [N, 40])
@pytest.mark.parametrize("lam", [1e-6, 1e-4, 1e-2])
def test_matches_scipy_weighted(solver, n, lam):
    t, y, w, mask = _problem(n)
    weff = w * mask
    live = weff > 0
    s = gcc.fit_smoothing_spline(t, y, lam, mask, weights=w, solver=solver)
    ref = make_smoothing_spline(t[live], y[live], w=weff[live], lam=weff.sum() * lam, axis=0)
    xq = np.linspace(t[live][0], t[live][-1], Q)
    assert _rel(s(xq), ref(xq)) < 1e-8
    np.testing.assert_array_equal(np.asarray(s.weights), weff)


@pytest.mark.parametrize("solver", SOLVERS)
def test_weighted_lam0_is_natural_interpolation_of_positive_weights(solver):
    _, y, w, mask = _problem(N)
    t = np.linspace(-1.0, 1.0, N)  # evenly spaced: the kernel form is well within reach
    live = w * mask > 0
    s = gcc.fit_smoothing_spline(t, y, 0.0, mask, weights=w, solver=solver)
    ref = CubicSpline(t[live], y[live], bc_type="natural", axis=0)
    xq = np.linspace(t[live][0], t[live][-1], Q)
    assert _rel(s(xq), ref(xq)) < 1e-9


@pytest.mark.parametrize("solver", SOLVERS)
def test_mask_and_weights_combine_and_scale_out(solver):
    t, y, w, mask = _problem(N)
    a = gcc.fit_smoothing_spline(t, y, 1e-3, mask, weights=w, solver=solver)(t)
    b = gcc.fit_smoothing_spline(t, y, 1e-3, weights=w * mask, solver=solver)(t)
    c = gcc.fit_smoothing_spline(t, y, 1e-3, mask, weights=1e3 * w, solver=solver)(t)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a, c, rtol=0, atol=1e-10)
    # all-ones weights are the unweighted fit
    d = gcc.fit_smoothing_spline(t, y, 1e-3, mask, weights=np.ones(N), solver=solver)(t)
    e = gcc.fit_smoothing_spline(t, y, 1e-3, mask, solver=solver)(t)
    np.testing.assert_allclose(d, e, rtol=0, atol=1e-13)


@pytest.mark.parametrize("solver", SOLVERS)
def test_smoother_matrix_with_weights(solver):
    t, y, w, mask = _problem(N)
    tq = np.linspace(-1.2, 1.2, 7)
    h = gcc.smoother_matrix(t, tq, 1e-3, mask, weights=w, solver=solver)
    fit = gcc.fit_smoothing_spline(t, y, 1e-3, mask, weights=w, solver=solver)(tq)
    np.testing.assert_allclose(np.asarray(h) @ y, fit, rtol=0, atol=1e-12)
    dead = (w * mask) == 0
    assert np.all(np.asarray(h)[:, dead] == 0)


@pytest.mark.parametrize("solver", SOLVERS)
def test_gradient_wrt_weights(solver):
    t, y, w, _ = _problem(N)
    w = np.abs(w) + 0.5  # check_grads perturbs every weight both ways: keep them positive
    xq = jnp.linspace(-0.9, 0.9, 5)

    def loss(w):
        s = gcc.fit_smoothing_spline(t, y[:, 0], 1e-3, weights=w, solver=solver)
        return jnp.sum(jnp.sin(s(xq)))

    check_grads(loss, (jnp.asarray(w),), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("solver", SOLVERS)
def test_gradient_at_a_zero_weight_is_the_one_sided_derivative(solver):
    # The fit is smooth in w_i down to w_i = 0 (for lam > 0): the point's pull starts linearly.
    t, y, w, _ = _problem(N)
    w[4] = 0.0
    xq = jnp.linspace(-0.9, 0.9, 5)

    def loss(w):
        s = gcc.fit_smoothing_spline(t, y[:, 0], 1e-3, weights=w, solver=solver)
        return jnp.sum(s(xq) ** 2)

    g = jax.grad(loss)(jnp.asarray(w))[4]
    eps = 1e-6
    # second-order one-sided difference: (−3 f(0) + 4 f(ε) − f(2ε)) / 2ε
    f0, f1, f2 = (float(loss(jnp.asarray(w + k * eps * (np.arange(N) == 4)))) for k in (0, 1, 2))
    fd = (-3 * f0 + 4 * f1 - f2) / (2 * eps)
    assert abs(fd) > 1e-4  # the point matters
    assert abs(float(g) - fd) < 1e-6 * max(1.0, abs(fd))


@pytest.mark.parametrize("solver", SOLVERS)
def test_vmap_over_weights_compiles_once_and_matches_a_loop(solver):
    t, y, _, _ = _problem(N)
    rng = np.random.default_rng(3)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def fit(w):
        return jax.vmap(
            lambda w: gcc.fit_smoothing_spline_with_status(t, y, 1e-3, weights=w, solver=solver)(t)
        )(w)

    for _ in range(3):
        ws = rng.uniform(0.0, 2.0, (4, N))
        ws[:, 5] = 0.0
        got = fit(jnp.asarray(ws))
        for i in range(4):
            want = gcc.fit_smoothing_spline(t, y, 1e-3, weights=ws[i], solver=solver)(t)
            np.testing.assert_allclose(got[i], want, rtol=0, atol=1e-12)
    chex.clear_trace_counter()


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("bad", [-1.0, np.nan, np.inf])
def test_bad_weights(solver, bad):
    t, y, w, mask = _problem(N)
    w = w.copy()
    w[3] = bad
    with pytest.raises(gcc.GCCValueError, match=r"weights\[3\]"):
        gcc.fit_smoothing_spline(t, y, 1e-3, weights=w, solver=solver)
    with pytest.raises(gcc.GCCValueError, match="weights"):
        gcc.smoother_matrix(t, t, 1e-3, weights=w, solver=solver)
    s = jax.jit(
        lambda w: gcc.fit_smoothing_spline_with_status(t, y, 1e-3, weights=w, solver=solver)
    )(jnp.asarray(w))
    assert int(s.status) & gcc.Status.BAD_WEIGHTS
    assert np.all(np.isnan(np.asarray(s.values)))
    assert "weight" in gcc.describe_status(int(s.status))
    # the same bad weight on a masked-off (straggling) node is ignored
    m = np.ones(N, bool)
    m[3] = False
    s = jax.jit(
        lambda w: gcc.fit_smoothing_spline_with_status(t, y, 1e-3, m, weights=w, solver=solver)
    )(jnp.asarray(w))
    assert int(s.status) == 0


def test_too_few_positive_weights_and_nan_data_at_zero_weight():
    t, y, _, _ = _problem(N)
    w = np.zeros(N)
    w[2] = 1.0
    with pytest.raises(gcc.GCCValueError, match="fewer than 2"):
        gcc.fit_smoothing_spline(t, y, 1e-3, weights=w)
    # NaN data at a zero-weight node is never used
    w = np.ones(N)
    w[4] = 0.0
    y2 = y.copy()
    y2[4] = np.nan
    a = gcc.fit_smoothing_spline(t, y2, 1e-3, weights=w)(t)
    b = gcc.fit_smoothing_spline(t, y, 1e-3, weights=w)(t)
    np.testing.assert_array_equal(a, b)


@pytest.mark.usefixtures("without_jaxtyping")  # gcc_jax's own messages, not the annotations'
def test_weights_static_errors():
    t, y, _, _ = _problem(6)
    with pytest.raises(ValueError, match="weights"):
        gcc.fit_smoothing_spline(t, y, 1e-3, weights=np.ones(5))
    with pytest.raises(TypeError, match="weights"):
        gcc.fit_smoothing_spline(t, y, 1e-3, weights=np.ones(6) * 1j)
