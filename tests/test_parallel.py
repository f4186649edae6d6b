"""The parallel-in-time solver (gcc_jax.spline._parallel) against the sequential one, SciPy and
loops."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from scipy.interpolate import CubicSpline, make_smoothing_spline

import gcc_jax as gcc

N = 24  # one size for most tests, so the compiled fits are shared


def _problem(n=N, kind="cheb", seed=0):
    rng = np.random.default_rng(seed)
    if kind == "cheb":
        t = np.asarray(gcc.chebyshev_nodes(n, kind=2))
    else:
        t = np.sort(rng.uniform(-1, 1, n))
    y = np.sin(3 * t)[:, None] + 0.1 * rng.standard_normal((n, 2))
    mask = rng.random(n) > 0.25
    mask[[1, n // 2]] = True
    mask[[0, n - 1]] = False  # the live hull is inside: linear extrapolation on both ends
    return t, y, mask


def _rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b)))


def _fit(t, y, lam, mask, solver, weights=None):
    return gcc.fit_smoothing_spline_with_status(t, y, lam, mask, weights=weights, solver=solver)


@pytest.mark.parametrize("lam", [0.0, 1e-6, 1e-3, 10.0, 1e12])
@pytest.mark.parametrize("kind", ["cheb", "random"])
def test_equals_kalman_at_query_points(lam, kind):
    t, y, mask = _problem(kind=kind)
    tq = np.linspace(-1.2, 1.2, 41)
    a = _fit(t, y, lam, mask, "parallel")
    b = _fit(t, y, lam, mask, "kalman")
    assert int(a.status) == 0 == int(b.status)
    assert _rel(a(tq), b(tq)) < 1e-9
    assert _rel(a.slopes, b.slopes) < 1e-8  # slopes: ~1e-9 at λ = 0 on random nodes


@pytest.mark.parametrize("lam", [0.0, 1e-5, 1e-2])
def test_matches_scipy_on_survivors(lam):
    t, y, mask = _problem(kind="random", seed=1)
    s = _fit(t, y, lam, mask, "parallel")
    tl, yl = t[mask], y[mask]
    if lam == 0:
        ref = CubicSpline(tl, yl, bc_type="natural")
    else:
        ref = make_smoothing_spline(tl, yl, lam=mask.sum() * lam, axis=0)
    xq = np.linspace(tl[0], tl[-1], 201)
    assert _rel(s(xq), ref(xq)) < 1e-9


def test_weights_match_kalman_and_scipy():
    t, y, mask = _problem(seed=2)
    w = np.random.default_rng(2).uniform(0.1, 3.0, N)
    a = _fit(t, y, 1e-3, mask, "parallel", weights=w)
    b = _fit(t, y, 1e-3, mask, "kalman", weights=w)
    tl, yl, wl = t[mask], y[mask], w[mask]
    ref = make_smoothing_spline(tl, yl, w=wl, lam=wl.sum() * 1e-3, axis=0)
    xq = np.linspace(tl[0], tl[-1], 101)
    assert _rel(a(xq), b(xq)) < 1e-9
    assert _rel(a(xq), ref(xq)) < 1e-9


def test_modest_size_equals_kalman():
    n = 3000
    t = np.asarray(gcc.chebyshev_nodes(n, kind=2))
    rng = np.random.default_rng(3)
    y = np.cos(5 * t)[:, None] + 0.01 * rng.standard_normal((n, 1))
    mask = rng.random(n) > 0.1
    tq = np.linspace(-1, 1, 257)
    for lam in (0.0, 1e-7):
        a, b = _fit(t, y, lam, mask, "parallel"), _fit(t, y, lam, mask, "kalman")
        assert _rel(a(tq), b(tq)) < 1e-9


def test_float32_close_to_float64():
    # documented tolerance (gcc_jax.spline._parallel): ~1e-5 up to n = 10^4; held to 1e-4 here
    t, y, mask = _problem(n=300)
    for lam in (0.0, 1e-6, 1e-2):
        ref = _fit(t, y, lam, mask, "kalman")(t)
        got = _fit(t.astype(np.float32), y.astype(np.float32), np.float32(lam), mask, "parallel")
        assert got.values.dtype == jnp.float32
        assert _rel(got(t.astype(np.float32)), ref) < 1e-4


def test_status_flags_equal_kalman():
    t, y, mask = _problem()
    nan_y = y.copy()
    nan_y[np.flatnonzero(mask)[0]] = np.nan  # a live NaN
    garbage = y.copy()
    garbage[~mask] = np.inf  # stragglers' garbage is fine
    swapped = t.copy()
    swapped[[3, 4]] = swapped[[4, 3]]
    few = np.zeros(N, bool)
    few[5] = True
    cases = [
        (t, y, 1e-3, mask, None),
        (t, nan_y, 1e-3, mask, None),
        (t, garbage, 1e-3, mask, None),
        (swapped, y, 1e-3, mask, None),
        (t, y, -1.0, mask, None),
        (t, y, 1e-3, few, None),
        (t, y, 1e-3, mask, np.full(N, -1.0)),
    ]
    # status and solve run in one jitted core (shared with the other tests' shapes)
    for tt, yy, lam, m, w in cases:
        a, b = _fit(tt, yy, lam, m, "parallel", w), _fit(tt, yy, lam, m, "kalman", w)
        assert int(a.status) == int(b.status)
        assert np.isnan(a.values).all() == (int(a.status) != 0)
    assert int(_fit(t, garbage, 1e-3, mask, "parallel").status) == 0


def test_gradients_wrt_data_lam_and_nodes():
    n = 8
    t, y, mask = _problem(n=n, kind="random", seed=4)
    tq = jnp.linspace(-0.5, 0.6, 4)

    def loss(solver):
        return lambda y, log_lam, t: _fit(t, y, jnp.exp(log_lam), mask, solver)(tq)

    args = (jnp.asarray(y), jnp.log(1e-3), jnp.asarray(t))
    check_grads(loss("parallel"), args, order=1, modes=["rev"], atol=1e-6, rtol=1e-6)


def test_vmap_over_masks_and_compile_once():
    t, y, _ = _problem()
    masks = gcc.sample_masks(jax.random.key(0), N, num=5, stragglers=6)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def fit(t, lam, masks):
        return jax.vmap(lambda m: _fit(t, y, lam, m, "parallel")(t))(masks)

    got = fit(jnp.asarray(t), jnp.asarray(1e-4), masks)
    loop = np.stack([np.asarray(_fit(t, y, 1e-4, m, "kalman")(t)) for m in masks])
    np.testing.assert_allclose(got, loop, rtol=1e-9, atol=1e-10)
    # new masks, λ and nodes: no retrace
    fit(jnp.asarray(t) * 1.5, jnp.asarray(0.0), masks[::-1])
    fit(
        jnp.asarray(t),
        jnp.asarray(3.0),
        gcc.sample_masks(jax.random.key(1), N, num=5, stragglers=2),
    )
    chex.clear_trace_counter()


def test_selectable_everywhere():
    code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=N, lam_dec=1e-4, solver="parallel")
    assert code.solver == "parallel"
    y = code.worker_outputs(lambda v: jnp.concatenate([jnp.sin(v), v**2]), jnp.ones((4, 1)))
    y = y * jnp.linspace(1.0, 2.0, N)[:, None]  # (N, 2), as the other tests (shared compiles)
    masks = gcc.sample_masks(jax.random.key(2), N, num=3, stragglers=5)
    out = code.decode_batch_with_status(y, masks)
    loop = np.stack([_fit(code.beta, y, 1e-4, m, "kalman")(code.alpha) for m in masks])
    np.testing.assert_allclose(out.value, loop, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(out.status, 0)
    h = gcc.smoother_matrix(code.beta, code.alpha, 1e-4, masks[0], solver="parallel")
    np.testing.assert_allclose(h @ y, loop[0], atol=1e-12)


def test_auto_resolves_by_backend_and_size():
    from gcc_jax.spline._fit import AUTO_PARALLEL_MAX_N_CPU, as_solver

    assert as_solver("auto") == "auto" and as_solver("parallel") == "parallel"
    cpu = jax.default_backend() == "cpu"
    assert gcc.resolve_solver("auto", 100) == "parallel"
    big = gcc.resolve_solver("auto", AUTO_PARALLEL_MAX_N_CPU + 1)
    assert big == ("kalman" if cpu else "parallel")
    assert gcc.resolve_solver("auto", 100, columns=10) == ("kalman" if cpu else "parallel")
    assert gcc.resolve_solver("banded", 10) == "kalman"
    with pytest.raises(ValueError, match="solver"):
        gcc.resolve_solver("fastest", 10)
    code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=N, lam_dec=1e-4, solver="auto")
    seq = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=N, lam_dec=1e-4)
    y = code.worker_outputs(jnp.sin, jnp.linspace(-1, 1, 4)[:, None])
    mask = gcc.sample_masks(jax.random.key(3), N, num=1, stragglers=5)[0]
    np.testing.assert_allclose(code.decode(y, mask), seq.decode(y, mask), rtol=1e-9, atol=1e-12)
