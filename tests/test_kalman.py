"""The batch-native scale-free smoother (gcc_jax.spline._kalman) against independent references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from scipy.interpolate import CubicSpline, make_smoothing_spline

import gcc_jax as gcc
from gcc_jax.evaluation._evaluator import batch_losses, pattern_loss
from gcc_jax.spline._kalman import smooth_at, smooth_batch_with_status, smooth_nodes

# Jitted once per file: eagerly, every call compiles each operation and scan again, and a
# compiled program per shape is what a test here costs (running is free).
smooth_at_jit = jax.jit(smooth_at, static_argnames="block")
decode_batch = jax.jit(lambda code, y, masks: code.decode_batch_with_status(y, masks))


def _reference(t, y, lam, mask, tq):
    """SciPy's fit on the survivors, extended linearly outside their hull (our convention)."""
    tl, yl = t[mask], y[mask]
    if lam == 0:
        spl = CubicSpline(tl, yl, bc_type="natural")
    else:
        spl = make_smoothing_spline(tl, yl, lam=mask.sum() * lam, axis=0)
    inside = np.clip(tq, tl[0], tl[-1])
    d = spl.derivative()
    out = spl(inside)
    out += np.minimum(tq - tl[0], 0)[:, None] * d(tl[0])[None]
    out += np.maximum(tq - tl[-1], 0)[:, None] * d(tl[-1])[None]
    return out


@pytest.mark.parametrize("lam", [0.0, 1e-4])
@pytest.mark.parametrize("where", ["first", "last", "every other", "just after"])
def test_query_points_on_or_next_to_nodes(where, lam):
    """Query points on the nodes (the first and the last included) or 1e-9 after them: the
    slope unit ρ at the ends once became tiny there (8e-7 error reproducing a line)."""
    n = 20
    t = np.linspace(-1.0, 1.0, n)
    tq = {
        "first": t[[0, 5]],
        "last": t[[7, -1]],
        "every other": t[::2],
        "just after": t[::2] + 1e-9,
    }[where]
    y = np.stack([np.sin(3 * t), t], axis=1)
    got = smooth_at_jit(jnp.asarray(t), jnp.ones((n, 1)), lam, jnp.asarray(y), jnp.asarray(tq))
    ref = _reference(t, y, lam, np.ones(n, bool), tq)
    np.testing.assert_allclose(got[:, :, 0], ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("lam", [0.0, 1e-6, 1e-2, 10.0])
@pytest.mark.parametrize("n", [9, 40])
def test_smooth_at_matches_scipy(n, lam):
    rng = np.random.default_rng(n)
    t = np.sort(rng.uniform(-1, 1, n))
    y = np.sin(3 * t)[:, None] + 0.1 * rng.standard_normal((n, 2))
    tq = np.concatenate([np.linspace(-1.3, 1.2, 9), t[2:4]])  # outside the hull, on nodes
    masks = rng.random((4, n)) > 0.3
    masks[:, :6] = True  # SciPy needs 5 points
    got = np.asarray(smooth_at_jit(jnp.asarray(t), jnp.asarray(masks.T, float), lam, y, tq))
    for p in range(4):
        ref = _reference(t, y, lam, masks[p], tq)
        np.testing.assert_allclose(got[:, :, p], ref, rtol=1e-8, atol=1e-8 * np.abs(ref).max())


@pytest.mark.parametrize("lam", [0.0, 1e-3])
def test_checkpointed_blocks_match_scipy(lam):
    """The blocked (checkpointed) smoother, blocks not dividing the grid, vs SciPy and one block."""
    n = 40
    rng = np.random.default_rng(7)
    t = np.sort(rng.uniform(-1, 1, n))
    # the shapes of test_smooth_at_matches_scipy at n = 40 (shared compiles)
    y = np.cos(2 * t)[:, None] + 0.1 * rng.standard_normal((n, 2))
    tq = np.linspace(-1.1, 1.05, 11)
    masks = rng.random((4, n)) > 0.3
    masks[:, :6] = True
    args = (jnp.asarray(t), jnp.asarray(masks.T, float), lam, y, tq)
    one = np.asarray(smooth_at_jit(*args, block=10_000))
    got = np.asarray(smooth_at_jit(*args, block=5))
    np.testing.assert_allclose(got, one, rtol=1e-11, atol=1e-11 * np.abs(one).max())
    for p in range(4):
        ref = _reference(t, y, lam, masks[p], tq)
        np.testing.assert_allclose(got[:, :, p], ref, rtol=1e-8, atol=1e-8 * np.abs(ref).max())
    if lam > 0:
        w = jnp.asarray(masks.T, float)
        f = jax.jit(lambda yy: smooth_at(jnp.asarray(t), w, lam, yy, tq, block=5))
        check_grads(f, (jnp.asarray(y),), order=1, modes=("rev",))


def test_smooth_nodes_slopes_match_scipy():
    rng = np.random.default_rng(3)
    t = np.sort(rng.uniform(0, 5, 30))
    y = np.cos(t)[:, None]
    mask = rng.random(30) > 0.2
    mask[[0, -1]] = True
    values, slopes = jax.jit(smooth_nodes)(jnp.asarray(t), jnp.asarray(mask), 0.0, y)
    spl = CubicSpline(t[mask], y[mask], bc_type="natural")
    np.testing.assert_allclose(values, spl(t), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(slopes, spl.derivative()(t), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("lam", [0.0, 1e-3])
def test_decode_batch_equals_kernel_loop(lam):
    code = gcc.SplineCode.chebyshev(num_inputs=5, num_workers=24, lam_dec=lam)
    ref_code = gcc.SplineCode.chebyshev(num_inputs=5, num_workers=24, lam_dec=lam, solver="kernel")
    y = code.worker_outputs(lambda v: jnp.sin(2 * v), jnp.linspace(-1, 1, 5)[:, None] * jnp.ones(3))
    masks = gcc.sample_masks(jax.random.key(1), 24, num=12, stragglers=5)
    out = decode_batch(code, y, masks)
    loop = np.stack([np.asarray(ref_code.decode(y, m)) for m in masks])
    assert out.value.shape == (12, 5, 3) and int(out.status.max()) == 0
    np.testing.assert_allclose(out.value, loop, rtol=1e-7, atol=1e-9)


def test_batch_status_and_straggler_garbage():
    code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=8)
    y = jnp.arange(8.0)[:, None] ** 2
    masks = np.ones((4, 8), bool)
    masks[0, 1:] = False  # one live worker
    y_bad = y.at[3].set(jnp.nan).at[5].set(1e300)  # garbage on stragglers only (row 2)
    masks[1, 3] = False
    masks[2, [3, 5]] = False
    out = decode_batch(code, y_bad, masks)
    assert int(out.status[0]) == gcc.Status.TOO_FEW_LIVE
    assert int(out.status[1]) == 0  # NaN on a straggler, 1e300 on a live worker: fine
    assert int(out.status[2]) == 0
    assert int(out.status[3]) == gcc.Status.NONFINITE_DATA
    assert np.all(np.isnan(np.asarray(out.value)[[0, 3]]))
    ref = code.decode(jnp.where(masks[2][:, None], y_bad, 0.0), jnp.asarray(masks[2]))
    np.testing.assert_allclose(out.value[2], ref, rtol=1e-12)
    # a straggler's NaN never reaches the gradient
    g = jax.jit(jax.grad(lambda yy: jnp.sum(code.decode_batch_with_status(yy, masks[2:3]).value)))(
        y_bad
    )
    assert np.all(np.isfinite(g)) and np.all(g[~masks[2]] == 0)


def test_large_values_and_huge_lam_are_not_flagged():
    n = 50
    t = np.asarray(gcc.chebyshev_nodes(n, kind=2))
    tq = np.linspace(-0.9, 0.9, 7)
    rng = np.random.default_rng(0)
    y = np.sin(3 * t)[:, None] + 0.1 * rng.standard_normal((n, 1))
    masks = rng.random((3, n)) > 0.2
    smooth = jax.jit(smooth_batch_with_status)  # one compile for the four calls (eager: four)
    small, status = smooth(jnp.asarray(t), jnp.asarray(masks), 1e-4, y, tq)
    big, status_big = smooth(jnp.asarray(t), jnp.asarray(masks), 1e-4, 1e300 * y, tq)
    assert int(status.max()) == 0 and int(status_big.max()) == 0
    np.testing.assert_allclose(np.asarray(big) / 1e300, small, rtol=1e-12)
    # λ → ∞: the least-squares line through the live points (NumPy polyfit)
    for lam in (1e160, 1e300):
        line, st = smooth(jnp.asarray(t), jnp.asarray(masks), lam, y, tq)
        assert int(st.max()) == 0
        for p in range(3):
            coef = np.polyfit(t[masks[p]], y[masks[p], 0], 1)
            np.testing.assert_allclose(line[p, :, 0], np.polyval(coef, tq), rtol=1e-9, atol=1e-12)


# λ → tolerance for float32 vs float64, per n. The λ of one n run in one vmapped pass (at
# n = 10^5 a pass per λ cost ~0.75 s of running per dtype; compiled programs are per n anyway).
FLOAT32_TOLS = {
    1000: {0.0: 1e-5, 1e-4: 1e-5, 1e20: 1e-5},
    10_000: {0.0: 1e-5, 1e-6: 1e-4, 1.0: 1e-4},
    100_000: {0.0: 1e-5, 1e-6: 1e-4, 1.0: 1e-4, 1e20: 1e-4},
}
smooth_batch_over_lams = jax.jit(
    jax.vmap(smooth_batch_with_status, in_axes=(None, None, 0, None, None))
)


@pytest.mark.parametrize(
    "n", [pytest.param(n, marks=pytest.mark.slow) if n >= 100_000 else n for n in FLOAT32_TOLS]
)
def test_float32_agrees_with_float64(n):
    """float32 vs float64 on the same (float32) nodes and data, |y| up to 1e6, m = 1."""
    if n < 100_000:
        t32 = np.asarray(gcc.chebyshev_nodes(n, kind=2, dtype=jnp.float32))
    else:  # Chebyshev-2 nodes coincide in float32 at n = 1e5 (spacing 5e-10 < ulp(1)/2)
        t32 = np.linspace(-1.0, 1.0, n, dtype=np.float32)
    assert np.all(np.diff(t32) > 0)
    tq32 = np.asarray(gcc.chebyshev_nodes(20, kind=1, dtype=jnp.float32))
    rng = np.random.default_rng(n)
    y32 = (1e6 * np.sin(3 * t32)[:, None] + 1e4 * rng.standard_normal((n, 1))).astype(np.float32)
    masks = rng.random((2, n)) > 0.1
    lams32 = np.asarray(list(FLOAT32_TOLS[n]), np.float32)
    v32, s32 = smooth_batch_over_lams(jnp.asarray(t32), jnp.asarray(masks), lams32, y32, tq32)
    v64, s64 = smooth_batch_over_lams(
        jnp.asarray(t32, jnp.float64),
        jnp.asarray(masks),
        lams32.astype(np.float64),
        y32 * 1.0,
        tq32 * 1.0,
    )
    assert v32.dtype == jnp.float32
    for i, (lam, tol) in enumerate(FLOAT32_TOLS[n].items()):
        assert int(s32[i].max()) == 0 and int(s64[i].max()) == 0, lam
        err = np.max(np.abs(np.asarray(v32[i], np.float64) - v64[i])) / np.max(np.abs(v64[i]))
        assert err < tol, (lam, err)


def test_float32_decode_of_the_issue_example():
    code = gcc.SplineCode.chebyshev(num_inputs=10, num_workers=10_000, dtype=jnp.float32)
    out = code.decode(20.0 * jnp.ones((10_000, 1), jnp.float32), jnp.ones(10_000, bool))
    np.testing.assert_allclose(out, 20.0, rtol=1e-5)


@pytest.mark.slow  # four evaluator programs at N = 100
@pytest.mark.parametrize("lam", [0.0, 1e-6])  # float32: the Kalman pass / the downdate
def test_monte_carlo_float32_within_10_percent_of_float64(lam):
    def smooth_map(x):  # the demo's worker function (gcc_jax.experiments.demo.smooth_map)
        return jnp.concatenate(
            [
                x * jnp.sin(x),
                jnp.tanh(x),
                jnp.mean(jnp.cos(x))[None],
                (jnp.sum(x * x) / x.size)[None],
            ]
        )

    x = jax.random.uniform(jax.random.key(0), (20, 4), minval=-2.0, maxval=2.0)
    masks = gcc.sample_masks(jax.random.key(1), 100, num=64, stragglers=10)
    losses = {}
    for dt in (jnp.float64, jnp.float32):
        code = gcc.SplineCode.chebyshev(num_inputs=20, num_workers=100, lam_dec=lam, dtype=dt)
        losses[dt] = gcc.monte_carlo_loss(code, smooth_map, x.astype(dt), masks)
    mean64, mean32 = np.mean(losses[jnp.float64]), np.mean(losses[jnp.float32])
    assert abs(mean32 - mean64) <= 0.1 * mean64, (mean32, mean64)
    worst64, worst32 = np.max(losses[jnp.float64]), np.max(losses[jnp.float32])
    assert abs(worst32 - worst64) <= 0.1 * worst64, (worst32, worst64)


def test_evaluator_fast_path_equals_vmap():
    code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=20, lam_dec=1e-5)
    x = jnp.linspace(-1, 1, 4)[:, None]
    yt, fx = code.worker_outputs(jnp.sin, x), jnp.sin(x)
    masks = gcc.sample_masks(jax.random.key(0), 20, num=37, stragglers=4)
    loss, status = gcc.evaluate_masks(code, yt, fx, masks, chunk_size=8)
    ref, ref_status = jax.jit(jax.vmap(lambda m: pattern_loss(code, yt, fx, m)))(masks)
    np.testing.assert_allclose(loss, ref, rtol=1e-9, atol=1e-20)
    np.testing.assert_array_equal(status, ref_status)
    b_loss, _ = batch_losses(code, yt, fx, masks)
    np.testing.assert_allclose(b_loss, ref, rtol=1e-9, atol=1e-20)


@pytest.mark.slow  # Kalman-pass gradients also in test_spline (make test)
def test_grads_y_lam_nodes():
    n = 9
    t = jnp.asarray(np.sort(np.random.default_rng(0).uniform(-1, 1, n)))
    tq = jnp.array([-0.5, 0.1, 0.7])
    masks = jnp.asarray(np.random.default_rng(1).random((2, n)) > 0.25).at[:, :2].set(True)
    y = jnp.asarray(np.random.default_rng(2).standard_normal((n, 2)))

    @jax.jit  # one compile per derivative order (eager, every call re-traced the scans)
    def f(y, lam, t):
        return smooth_batch_with_status(t, masks, lam, y, tq)[0]

    # One jitted f for every check: y, λ and the nodes together to first order in reverse mode
    # and to second order forward-over-forward (which checks first-order forward mode too;
    # reverse-over-reverse through the scans costs 21 s of compiling here); the nodes at λ = 0
    # (a λ step below 0 is NEGATIVE_LAM, so λ stays fixed there).
    lam = jnp.asarray(1e-3)
    check_grads(f, (y, lam, t), order=1, modes=("rev",), eps=1e-6)
    check_grads(f, (y, lam, t), order=2, modes=("fwd",), eps=1e-6)
    check_grads(lambda yy, tt: f(yy, 0.0, tt), (y, t), order=1, modes=("rev",), eps=1e-5)


def test_compile_once_across_masks_lam_nodes():
    traces = []

    @jax.jit
    def run(code, y, masks):
        traces.append(1)
        return code.decode_batch_with_status(y, masks).value

    y = jnp.ones((16, 2))
    for i, lam in enumerate([0.0, 1e-4, 3.0]):
        code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=16, lam_dec=lam)
        code = gcc.SplineCode(code.alpha * (1 - 0.01 * i), code.beta, code.lam_enc, code.lam_dec)
        run(code, y, gcc.sample_masks(jax.random.key(i), 16, num=4, stragglers=i + 1))
    assert len(traces) == 1
