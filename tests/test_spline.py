"""The smoothing spline against SciPy, a NumPy Reinsch reference and closed forms (float64)."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.test_util import check_grads
from refs import reinsch_values
from scipy.interpolate import CubicSpline, make_smoothing_spline

import gcc_jax as gcc

SOLVERS = ["kalman", "kernel"]


def _nodes(n, kind):
    if kind == "cheb":
        return np.asarray(gcc.chebyshev_nodes(n, kind=2))
    rng = np.random.default_rng(n)
    t = np.sort(rng.uniform(-1, 1, n))
    return t if np.min(np.diff(t)) > 1e-3 else np.linspace(-1, 1, n)


def _mask(n, pattern):
    m = np.ones(n, bool)
    if pattern == "interior":
        m[[2, n // 2, n - 3]] = False
    elif pattern == "ends":
        m[[0, 1, n - 1]] = False
    return m


def _rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b)))


# Compiling is what a test here costs (a new (n, columns, queries, dtype, solver) compiles the
# fit and the eager evaluation again; running is free), so the tests share a few sizes: n in
# {8, 20, 40, 100} unless a size is the point, two data columns, Q query points.
Q = 101


# SciPy's make_smoothing_spline is itself accurate only for moderate n·lam (its B-spline normal
# equations lose digits as lam grows); these settings are inside its accurate range. Larger lam
# is held against the NumPy Reinsch reference below.
@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("n", [8, 20, 40])
@pytest.mark.parametrize("lam", [1e-7, 1e-5, 1e-3])
@pytest.mark.parametrize("pattern", ["none", "interior", "ends"])
@pytest.mark.parametrize("kind", ["cheb", "random"])
def test_matches_scipy_smoothing_spline(solver, n, lam, pattern, kind):
    t = _nodes(n, kind)
    rng = np.random.default_rng(0)
    y = np.sin(3 * t)[:, None] + 0.1 * rng.normal(size=(n, 2))
    mask = _mask(n, pattern)
    s = gcc.fit_smoothing_spline(t, y, lam, mask, solver=solver)
    tl, yl = t[mask], y[mask]
    ref = make_smoothing_spline(tl, yl, lam=mask.sum() * lam, axis=0)
    xq = np.linspace(tl[0], tl[-1], Q)
    assert _rel(s(xq), ref(xq)) < 1e-8


@pytest.mark.parametrize("solver, nmax", [("kalman", 200), ("kernel", 40)])
@pytest.mark.parametrize("pattern", ["none", "interior", "ends"])
def test_lam_zero_is_natural_interpolation(solver, nmax, pattern):
    # lam = 0 against SciPy's natural CubicSpline, with and without masks. The kernel (Gram)
    # form is ill-conditioned as lam -> 0 on clustered Chebyshev nodes: it either agrees to 1e-8
    # or refuses with Status.ILL_CONDITIONED (tests/test_kernel.py); at n = 8 it must agree.
    for n in (8, 20, nmax):
        t = _nodes(n, "cheb")
        y = np.cos(2 * t)[:, None] + np.random.default_rng(n).normal(size=(n, 2))
        mask = _mask(n, pattern)
        s = gcc.fit_smoothing_spline_with_status(t, y, 0.0, mask, solver=solver)
        if int(s.status) == int(gcc.Status.ILL_CONDITIONED) and solver == "kernel" and n > 8:
            continue
        assert int(s.status) == 0
        ref = CubicSpline(t[mask], y[mask], bc_type="natural")
        xq = np.linspace(t[mask][0], t[mask][-1], Q)
        assert _rel(s(xq), ref(xq)) < 1e-8, n


@pytest.mark.parametrize("lam", [1e-2, 1.0, 100.0])
def test_kernel_form_matches_reinsch_at_large_lam(lam):
    n = 100
    t = _nodes(n, "cheb")
    rng = np.random.default_rng(1)
    y = rng.normal(size=(n, 2))
    mask = rng.random(n) > 0.3
    s = gcc.fit_smoothing_spline(t, y, lam, mask, solver="kernel")
    ref = reinsch_values(t[mask], y[mask], mask.sum() * lam)
    assert _rel(s(t[mask]), ref) < 1e-9


@pytest.mark.parametrize("lam", [1e-6, 1e-2, 1.0])
def test_kalman_matches_reinsch(lam):
    # the kalman (state-space) path at n = 100 Chebyshev nodes: measured ~1e-13 relative
    n = 100
    t = _nodes(n, "cheb")
    rng = np.random.default_rng(1)
    y = rng.normal(size=(n, 2))
    mask = rng.random(n) > 0.3
    s = gcc.fit_smoothing_spline(t, y, lam, mask, solver="kalman")
    ref = reinsch_values(t[mask], y[mask], mask.sum() * lam)
    assert _rel(s(t[mask]), ref) < 1e-10


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("lam", [0.0, 1e-4])
def test_extrapolation_is_linear_outside_live_hull(solver, lam):
    n = 40
    t = _nodes(n, "cheb")
    y = np.stack([np.sin(4 * t), np.cos(3 * t)], axis=1)
    mask = np.ones(n, bool)
    mask[:4] = False
    mask[-3:] = False
    s = gcc.fit_smoothing_spline(t, y, lam, mask, solver=solver)
    lo, hi = t[mask][0], t[mask][-1]
    for a, b in ((-1.5, lo), (hi, 1.7)):
        xq = np.linspace(a, b, Q)
        v = np.asarray(s(xq))
        # values on a line: second differences vanish
        np.testing.assert_allclose(np.diff(v, 2), 0.0, atol=1e-9 * np.abs(v).max())
    # and the line continues the spline with its slope at the live end point
    eps = 1e-6
    slope = (np.asarray(s(np.array([hi]))) - np.asarray(s(np.array([hi - eps])))) / eps
    np.testing.assert_allclose(s(np.array([hi + 0.5])), s(np.array([hi])) + 0.5 * slope, rtol=1e-5)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("lam", [0.0, 1e-8, 1e-3, 10.0, 1e4])
def test_straight_line_reproduced_for_every_lam(solver, lam):
    t = _nodes(40, "random")
    y = np.stack([3.0 * t - 0.5, -t + 2.0], axis=1)
    mask = _mask(40, "ends")
    s = gcc.fit_smoothing_spline(t, y, lam, mask, solver=solver)
    xq = np.linspace(-2, 2, Q)
    np.testing.assert_allclose(s(xq), np.stack([3 * xq - 0.5, -xq + 2.0], 1), atol=1e-9)


# The two paths agree to 1e-9 relative wherever the kernel (reference) form is itself accurate:
# every n at lam >= 1e-4, and small n as lam -> 0 (its Gram system degrades like ~1e-6 at n = 100
# for lam = 0, where the kalman path is held against CubicSpline instead).
@pytest.mark.parametrize(
    "n, lam",
    [(8, 0.0), (20, 0.0), (20, 1e-8), (40, 1e-4), (100, 1e-4), (100, 1e-2), (100, 1.0)],
)
def test_kalman_agrees_with_kernel(n, lam):
    t = _nodes(n, "cheb")
    rng = np.random.default_rng(n)
    for trial in range(4):
        y = rng.normal(size=(n, 2))
        mask = rng.random(n) > 0.3
        mask[: trial % 3] = False  # dead first workers
        mask[n - (trial // 2) :] = False  # dead last workers
        if mask.sum() < 2:
            mask[[1, n - 2]] = True
        xq = np.linspace(-1.2, 1.2, Q)
        a = gcc.fit_smoothing_spline(t, y, lam, mask, solver="kalman")(xq)
        b = gcc.fit_smoothing_spline(t, y, lam, mask, solver="kernel")(xq)
        assert _rel(a, b) < 1e-9


@functools.partial(jax.jit, static_argnames="solver")
def _weighted_sum_grad(y, log_lam, t, mask, lam_on, *, solver):
    """∇ over (y, log λ, t) of Σ cos(x_q) s(x_q); λ = 0 exactly (zero gradient in λ) if not lam_on.

    One jitted program per solver, shared by every parametrisation of the test below.
    """
    xq = jnp.linspace(-1.1, 1.1, 13)

    def loss(y, log_lam, t):
        lam_v = jnp.where(lam_on, jnp.exp(log_lam), 0.0)
        s = gcc.fit_smoothing_spline_with_status(t, y, lam_v, mask, solver=solver)
        return jnp.sum(jnp.cos(xq) * s(xq))

    return jax.grad(loss, argnums=(0, 1, 2))(y, log_lam, t)


@pytest.mark.parametrize("lam", [0.0, 1e-3])
def test_kalman_and_kernel_gradients_agree(lam):
    n = 10
    t = jnp.asarray(_nodes(n, "cheb"))
    mask = jnp.asarray(_mask(n, "ends"))
    y = jnp.sin(3 * t)
    args = (y, jnp.log(max(lam, 1e-30)), t, mask, jnp.asarray(lam > 0))
    ga = _weighted_sum_grad(*args, solver="kalman")
    gb = _weighted_sum_grad(*args, solver="kernel")
    for a, b in zip(ga, gb, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-7 * np.max(np.abs(b)) + 1e-12)


@pytest.mark.parametrize("solver", SOLVERS)
def test_smoother_matrix_is_the_linear_map(solver):
    n = 20
    t = _nodes(n, "cheb")
    tq = np.linspace(-1.1, 1.1, Q)
    mask = _mask(n, "ends")
    h = gcc.smoother_matrix(t, tq, 1e-4, mask, solver=solver)
    y = np.random.default_rng(0).normal(size=(n, 2))
    y_dead_garbage = np.where(mask[:, None], y, 1e30)
    np.testing.assert_allclose(
        h @ y,
        gcc.fit_smoothing_spline(t, y_dead_garbage, 1e-4, mask, solver=solver)(tq),
        rtol=1e-10,
        atol=1e-12,
    )
    np.testing.assert_array_equal(np.asarray(h)[:, ~mask], 0.0)
    np.testing.assert_allclose(np.asarray(h).sum(axis=1), 1.0, atol=1e-10)


def test_trailing_shapes():
    t = _nodes(8, "cheb")
    y = np.random.default_rng(0).normal(size=(8, 2, 3))
    xq = np.linspace(-1, 1, Q)
    s = gcc.fit_smoothing_spline(t, y, 1e-3)
    assert s(xq).shape == (Q, 2, 3)
    assert s(0.3).shape == (2, 3)
    flat = gcc.fit_smoothing_spline(t, y.reshape(8, 6), 1e-3)(xq)
    np.testing.assert_allclose(s(xq).reshape(Q, 6), flat, rtol=1e-12)
    s1 = gcc.fit_smoothing_spline(t, y[:, 0, 0], 1e-3)
    assert s1(xq).shape == (Q,)


# --- transforms ----------------------------------------------------------------------------


@pytest.mark.parametrize("solver", SOLVERS)
def test_jit_equals_eager(solver):
    t = jnp.asarray(_nodes(20, "cheb"))
    y = jnp.stack([jnp.sin(3 * t), jnp.cos(t)], 1)
    mask = jnp.asarray(_mask(20, "ends"))
    xq = jnp.linspace(-1, 1, Q)

    def f(t, y, lam, mask):
        return gcc.fit_smoothing_spline_with_status(t, y, lam, mask, solver=solver)(xq)

    # same maths, different op fusion: agreement to the solver's round-off
    np.testing.assert_allclose(jax.jit(f)(t, y, 1e-3, mask), f(t, y, 1e-3, mask), rtol=1e-8)


@pytest.mark.parametrize("solver", SOLVERS)
def test_vmap_over_masks_equals_loop(solver):
    n = 20
    t = jnp.asarray(_nodes(n, "cheb"))
    y = jnp.stack([jnp.sin(3 * t), jnp.cos(t)], 1)
    masks = gcc.sample_masks(jax.random.key(0), n, num=6, stragglers=5)
    xq = jnp.linspace(-1, 1, Q)

    def f(mask):
        return gcc.fit_smoothing_spline_with_status(t, y, 1e-4, mask, solver=solver)(xq)

    batched = jax.jit(jax.vmap(f))(masks)  # one program (eager vmap: one per operation)
    loop = np.stack(
        [np.asarray(gcc.fit_smoothing_spline(t, y, 1e-4, m, solver=solver)(xq)) for m in masks]
    )
    np.testing.assert_allclose(batched, loop, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("solver", SOLVERS)
def test_gradients_wrt_data_and_lam(solver):
    n = 8
    t = jnp.asarray(_nodes(n, "cheb"))
    y0 = jnp.sin(2 * t) + 0.3 * t**2
    mask = jnp.asarray(_mask(n, "interior"))
    xq = jnp.linspace(-1.2, 1.2, 5)

    @jax.jit
    def f(y, log_lam):
        lam = jnp.exp(log_lam)
        return gcc.fit_smoothing_spline_with_status(t, y, lam, mask, solver=solver)(xq)

    log_lam = jnp.log(1e-3)
    # first order in y and λ together, both modes; second order forward-over-forward in y and λ
    # together (the fit is linear in y, so its second derivative in y is zero by construction).
    # The order-2 forward check also checks the first-order forward mode (one jvp program).
    check_grads(f, (y0, log_lam), order=1, modes=("rev",), atol=1e-6, rtol=1e-6)
    check_grads(f, (y0, log_lam), order=2, modes=("fwd",), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("solver", SOLVERS)
def test_straggler_garbage_changes_neither_value_nor_gradient(solver):
    n = 12
    t = jnp.asarray(_nodes(n, "cheb"))
    mask = jnp.asarray(_mask(n, "ends"))
    y = jnp.cos(t)
    xq = jnp.linspace(-1, 1, 7)
    garbage = jnp.where(mask, y, jnp.array([jnp.nan, jnp.inf, -jnp.inf] * 4))

    def loss(y):
        return jnp.sum(
            gcc.fit_smoothing_spline_with_status(t, y, 1e-3, mask, solver=solver)(xq) ** 2
        )

    np.testing.assert_array_equal(loss(garbage), loss(y))
    g_clean, g_garbage = jax.grad(loss)(y), jax.grad(loss)(garbage)
    np.testing.assert_array_equal(g_clean, g_garbage)
    assert np.all(np.isfinite(g_garbage)) and np.all(np.asarray(g_garbage)[~np.asarray(mask)] == 0)


@pytest.mark.parametrize("solver", SOLVERS)
def test_compiles_once_across_masks_and_lam(solver):
    n = 16
    t = jnp.asarray(_nodes(n, "cheb"))
    y = jnp.sin(t)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def fit(lam, mask):
        return gcc.fit_smoothing_spline_with_status(t, y, lam, mask, solver=solver)(t)

    for i, s in enumerate([0, 3, 7, 14]):
        mask = gcc.sample_masks(jax.random.key(i), n, num=1, stragglers=s)[0]
        fit(jnp.asarray(10.0**-i), mask)
    chex.clear_trace_counter()


@pytest.mark.parametrize("n", [40, 300, 1000])
@pytest.mark.parametrize("lam", [0.0, 1e-8, 1e-4, 1.0])
def test_kalman_float32_close_to_float64(n, lam):
    # the state-space recursion works with variances, so float32 keeps ~1e-6 relative accuracy
    # on clustered Chebyshev nodes for every lam (the nodal/kernel systems do not). Worker
    # outputs are smooth in practice; with noisy data at lam = 0 and n = 1000 the end slopes
    # (noise / 5e-6 spacing) amplify float32's rounding of the nodes themselves.
    t64 = _nodes(n, "cheb")
    y64 = (np.sin(3 * t64) + 0.5 * t64)[:, None] + np.exp(t64)[:, None] * np.array([1.0, -2.0])
    mask = np.random.default_rng(n + 1).random(n) > 0.2
    mask[:2] = False
    xq = np.asarray(gcc.chebyshev_nodes(20, kind=1))  # where a decoder evaluates
    ref = gcc.fit_smoothing_spline(t64, y64, lam, mask)(xq)
    got = gcc.fit_smoothing_spline(
        t64.astype(np.float32), y64.astype(np.float32), np.float32(lam), mask
    )(xq.astype(np.float32))
    assert got.dtype == np.float32
    assert _rel(got, ref) < 1e-4


def test_kernel_float32_at_large_lam():
    # the kernel form in float32 is usable only where it is well conditioned (large lam)
    n = 40  # shapes shared with test_kalman_float32_close_to_float64 and the float64 tests
    t64 = _nodes(n, "cheb")
    y64 = (np.sin(3 * t64) + 0.5 * t64)[:, None] * np.array([1.0, -2.0])
    mask = _mask(n, "interior")
    xq = np.asarray(gcc.chebyshev_nodes(20, kind=1))
    ref = gcc.fit_smoothing_spline(t64, y64, 1e-2, mask, solver="kernel")(xq)
    got = gcc.fit_smoothing_spline(
        t64.astype(np.float32), y64.astype(np.float32), np.float32(1e-2), mask, solver="kernel"
    )(xq.astype(np.float32))
    assert _rel(got, ref) < 1e-3


# --- property tests --------------------------------------------------------------------------


# Shapes come from a small fixed set (each new one compiles); which workers survive and λ are
# drawn freely (they never recompile).
@settings(max_examples=20, deadline=None)
@given(
    n=st.sampled_from([8, 20]),
    live=st.sampled_from([2, 5]),
    tail=st.sampled_from([(), (1,), (2, 2)]),
    data=st.data(),
)
def test_masked_fit_equals_fit_on_survivors(n, live, tail, data):
    alive = data.draw(st.permutations(range(n)))[:live]
    mask = np.zeros(n, bool)
    mask[alive] = True
    lam = data.draw(st.sampled_from([0.0, 1e-6, 1e-3]))
    t = np.asarray(gcc.chebyshev_nodes(n, kind=2))
    y = np.random.default_rng(n).normal(size=(n, *tail))
    xq = np.linspace(-1.3, 1.3, Q)
    masked = gcc.fit_smoothing_spline(
        t, np.where(mask.reshape(-1, *[1] * len(tail)), y, 7e7), lam, mask
    )(xq)
    survivors = gcc.fit_smoothing_spline(t[mask], y[mask], lam)(xq)
    np.testing.assert_allclose(masked, survivors, rtol=1e-8, atol=1e-8 * np.abs(y).max())


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.usefixtures("without_jaxtyping")  # gcc_jax's own messages, not the annotations'
def test_bad_input_raises_clearly():
    t = np.linspace(-1, 1, 6)
    y = np.zeros(6)
    with pytest.raises(ValueError, match="one row per node"):
        gcc.fit_smoothing_spline(t, np.zeros(5), 0.1)
    with pytest.raises(ValueError, match="1-D"):
        gcc.fit_smoothing_spline(t[None], y, 0.1)
    with pytest.raises(ValueError, match="scalar"):
        gcc.fit_smoothing_spline(t, y, np.ones(2))
    with pytest.raises(gcc.GCCValueError, match="lam"):
        gcc.fit_smoothing_spline(t, y, -1.0)
    with pytest.raises(gcc.GCCValueError, match="strictly increasing"):
        gcc.fit_smoothing_spline(t[::-1], y, 0.1)
    with pytest.raises(gcc.GCCValueError, match="strictly increasing"):
        gcc.fit_smoothing_spline(np.array([0, 1, 1, 2, 3, 4.0]), y, 0.1)
    with pytest.raises(TypeError, match="boolean"):
        gcc.fit_smoothing_spline(t, y, 0.1, mask=np.ones(6))
    with pytest.raises(ValueError, match="shape"):
        gcc.fit_smoothing_spline(t, y, 0.1, mask=np.ones(5, bool))
    with pytest.raises(gcc.GCCValueError, match="fewer than 2 live"):
        gcc.fit_smoothing_spline(t, y, 0.1, mask=np.eye(6, dtype=bool)[2])
    with pytest.raises(gcc.GCCValueError, match="NaN or Inf"):
        gcc.fit_smoothing_spline(
            t,
            y.at[3].set(np.nan) if hasattr(y, "at") else np.where(np.arange(6) == 3, np.nan, y),
            0.1,
        )
    with pytest.raises(ValueError, match="solver"):
        gcc.fit_smoothing_spline(t, y, 0.1, solver="magic")


def test_value_problems_are_status_under_jit():
    t = jnp.linspace(-1, 1, 6)

    @jax.jit
    def fit(t, y, lam, mask):
        s = gcc.fit_smoothing_spline_with_status(t, y, lam, mask)
        return s(t), s.status

    ok = jnp.ones(6, bool)
    y = jnp.sin(t)
    cases = {
        gcc.Status.TOO_FEW_LIVE: (t, y, 0.1, jnp.eye(6, dtype=bool)[0]),
        gcc.Status.NONFINITE_DATA: (t, y.at[2].set(jnp.inf), 0.1, ok),
        gcc.Status.BAD_NODES: (t.at[3].set(t[2]), y, 0.1, ok),
        gcc.Status.NEGATIVE_LAM: (t, y, -0.5, ok),
    }
    for flag, args in cases.items():
        value, status = fit(*args)
        assert int(status) & int(flag), flag
        assert np.all(np.isnan(value)), flag  # flagged, never silently finite garbage
    value, status = fit(t, y, 0.1, ok)
    assert int(status) == 0 and np.all(np.isfinite(value))
    # a NaN in a *dead* worker is not a problem
    value, status = fit(t, y.at[2].set(jnp.nan), 0.1, ok.at[2].set(False))
    assert int(status) == 0


def test_banded_is_an_alias_of_kalman():
    t = np.linspace(0.0, 1.0, 8)
    y = np.sin(3 * t)
    a = gcc.fit_smoothing_spline(t, y, 1e-3, solver="banded")
    b = gcc.fit_smoothing_spline(t, y, 1e-3, solver="kalman")
    np.testing.assert_array_equal(np.asarray(a.values), np.asarray(b.values))
    code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=6, solver="banded")
    assert code.solver == "kalman"
    with pytest.raises(ValueError, match="solver"):
        gcc.fit_smoothing_spline(t, y, 1e-3, solver="reinsch")
    with pytest.raises(ValueError, match="solver"):
        gcc.SplineCode.chebyshev(num_inputs=3, num_workers=6, solver="qr")
