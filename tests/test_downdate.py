"""The rank-S downdate decoder (gcc_jax.spline._downdate) against independent references.

References: the Kalman pass (``smooth_batch_with_status``, itself held against SciPy in
tests/test_kalman.py), SciPy's ``make_smoothing_spline`` on the survivors, and a roughness
matrix built from SciPy's natural ``CubicSpline`` (``∫ s_i'' s_j''``, exact for piecewise-linear
second derivatives). Each equality test also asserts that the downdate path was the one taken.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.interpolate import CubicSpline, make_smoothing_spline

import gcc_jax as gcc
from gcc_jax._core.sanitise import sanitise
from gcc_jax.spline import _downdate as dd
from gcc_jax.spline._kalman import smooth_batch_with_status

N, K, P = 64, 8, 32  # workers, query points, masks per chunk (the smallest gated-in sizes)


def _problem(n=N, seed=0):
    code = gcc.SplineCode.chebyshev(num_inputs=K, num_workers=n)
    rng = np.random.default_rng(seed)
    t = np.asarray(code.beta)
    y = np.stack([np.sin(3 * t) + 0.1 * rng.standard_normal(n), 1e3 * np.cos(t)], axis=1)
    return jnp.asarray(t), jnp.asarray(code.alpha), jnp.asarray(y)


def _masks(key, stragglers, n=N, num=P):
    return gcc.sample_masks(jax.random.key(key), n, num=num, stragglers=stragglers)


def _one_chunk(values, status):
    return values, status


@jax.jit
def _decode(t, lam, y, tq, masks):
    """The decoder on one chunk of masks (its first valid row gives the base)."""
    return jax.tree.map(lambda a: a[0], dd.smooth_chunks(t, lam, y, tq, masks[None], _one_chunk))


@jax.jit
def _kalman(t, lam, y, tq, masks):
    return smooth_batch_with_status(t, masks, lam, y, tq)


@jax.jit
def _taken(t, lam, y, tq, masks):
    """Whether the decoder takes the downdate for this chunk (its own first row as the base)."""
    return dd.downdate_chunks(t, lam, y, tq, masks[None], _one_chunk)[1][0]


def _rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


@pytest.mark.parametrize("lam", [0.0, 1e-10, 1e-6, 1e-2, 1e10])
@pytest.mark.parametrize("stragglers", [0, 3, 10, 20])
def test_equals_kalman_pass(stragglers, lam):
    t, tq, y = _problem()
    masks = _masks(stragglers, stragglers)
    lam = jnp.asarray(lam)
    assert bool(_taken(t, lam, y, tq, masks))
    got, status = _decode(t, lam, y, tq, masks)
    ref, ref_status = _kalman(t, lam, y, tq, masks)
    np.testing.assert_array_equal(status, ref_status)
    assert int(status.max()) == 0
    assert _rel(got, ref) < 1e-11


@jax.jit
def _chunks(t, lam, y, tq, chunks):
    values, status = dd.smooth_chunks(t, lam, y, tq, chunks, _one_chunk)
    return values, status, dd.downdate_chunks(t, lam, y, tq, chunks, _one_chunk)[1]


@jax.jit
def _decode_with(t, lam, y, tq, masks, plan):
    return jax.tree.map(
        lambda a: a[0], dd.smooth_chunks(t, lam, y, tq, masks[None], _one_chunk, plan)
    )


def test_a_plan_is_used_only_for_the_fit_it_was_made_for():
    """A plan (the base's part that does not depend on ``y``) made for this call's nodes, λ,
    query points and S is used: a copy with a doctored ``G`` changes the values. One made for
    other nodes, λ, query points or S is not: the values stay the Kalman pass's."""
    t, tq, y = _problem()
    lam = jnp.asarray(1e-6)
    masks = _masks(3, 6)
    ref, ref_status = _kalman(t, lam, y, tq, masks)
    plan = dd.downdate_plan(t, lam, tq, jnp.int32(6))
    got, status = _decode_with(t, lam, y, tq, masks, plan)
    np.testing.assert_array_equal(status, ref_status)
    assert _rel(got, ref) < 1e-11
    doctored = plan._replace(g=plan.g * 1.5)
    assert _rel(_decode_with(t, lam, y, tq, masks, doctored)[0], ref) > 1e-3
    others = [
        dd.downdate_plan(t, 2 * lam, tq, jnp.int32(6)),
        dd.downdate_plan(jnp.linspace(t[0], t[-1], N), lam, tq, jnp.int32(6)),
        dd.downdate_plan(t, lam, tq / 2, jnp.int32(6)),
        dd.downdate_plan(t, lam, tq, jnp.int32(7)),
    ]
    for other in others:
        doctored = other._replace(g=other.g * 1.5)  # would show if it were used
        got, status = _decode_with(t, lam, y, tq, masks, doctored)
        np.testing.assert_array_equal(status, ref_status)
        assert _rel(got, ref) < 1e-11


def test_block_of_chunks_takes_the_kalman_pass_only_where_the_downdate_does_not_fit():
    """Several chunks in one call: the base is the first chunk's; a later chunk with one mask of
    another straggler count, or with an ill-conditioned ``P_dd``, is smoothed by the Kalman pass
    alone; every chunk equals the Kalman pass, statuses included."""
    t, tq, y = _problem()
    lam = jnp.asarray(1e-6)
    base = np.array(_masks(11, 6, num=3 * P)).reshape(3, P, N)
    base[1, 5] = np.asarray(_masks(12, 9, num=1))[0]  # 9 stragglers: chunk 1 cannot downdate
    base[2, 7] = True  # a mask with no straggler: chunk 2 neither
    base[2, 8] = False  # and one with no live worker (flagged, its S ignored)
    chunks = jnp.asarray(base)
    got, status, fast = _chunks(t, lam, y, tq, chunks)
    assert np.asarray(fast).tolist() == [True, False, False]
    for g in range(3):
        ref, ref_status = _kalman(t, lam, y, tq, chunks[g])
        np.testing.assert_array_equal(status[g], ref_status)
        ok = np.asarray(ref_status) == 0
        assert _rel(np.asarray(got[g])[ok], np.asarray(ref)[ok]) < 1e-11
    assert int(status[2, 8]) == gcc.Status.TOO_FEW_LIVE


def _roughness(t):
    """Ω with gᵀΩg = ∫ s''² for SciPy's natural cubic spline s through g (exact Gram matrix)."""
    n = t.size
    m = CubicSpline(t, np.eye(n), bc_type="natural").derivative(2)(t)  # (n nodes, n columns)
    h = np.diff(t)[:, None, None]
    a, b = m[:-1, :, None], m[1:, :, None]  # s_i'' is linear on each interval
    c, d = m[:-1, None, :], m[1:, None, :]
    return np.sum(h / 3 * (a * c + b * d) + h / 6 * (a * d + b * c), axis=0)


@pytest.mark.parametrize("c", [0.0, 1e-4, 1.0])
def test_reinsch_p_matches_scipy_roughness(c):
    t = np.sort(np.random.default_rng(1).uniform(-1, 1, 12))
    omega = _roughness(t)
    ref = np.linalg.solve(np.eye(t.size) + c * omega, omega)
    got = dd.reinsch_p(jnp.asarray(t), jnp.asarray(c))
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9 * np.max(np.abs(ref)))


def test_interpolation_matrix_matches_scipy_natural_spline():
    """``E g`` is SciPy's natural ``CubicSpline`` through ``g`` inside the nodes, and its linear
    continuation (value and slope at the end node) beyond them, for every unit vector ``g``."""
    rng = np.random.default_rng(2)
    t = np.sort(rng.uniform(-1, 1, 15))
    inside = np.concatenate([rng.uniform(t[0], t[-1], 9), t[[0, 3, -1]]])
    outside = np.array([t[0] - 0.3, t[0] - 1e-3, t[-1] + 1e-3, t[-1] + 0.5])
    x = np.concatenate([inside, outside])
    got = np.asarray(dd.interpolation_matrix(jnp.asarray(t), jnp.asarray(x)))
    spline = CubicSpline(t, np.eye(t.size), bc_type="natural")  # column j: the spline of e_j
    ref_in = spline(inside)
    left, right = outside < t[0], outside > t[-1]
    ends = np.where(left, t[0], t[-1])
    ref_out = spline(ends) + (outside - ends)[:, None] * spline(ends, 1)
    assert left.any() and right.any()
    np.testing.assert_allclose(got[: inside.size], ref_in, rtol=0, atol=1e-13)
    np.testing.assert_allclose(got[inside.size :], ref_out, rtol=0, atol=1e-13)


@pytest.mark.parametrize("size", [4, 12, 24])  # straight-line sweeps and the loop (> UNROLL)
def test_sweep_inverse_matches_numpy(size):
    rng = np.random.default_rng(size)
    x = rng.standard_normal((6, size, size))
    a = x @ np.swapaxes(x, 1, 2) + 0.1 * np.eye(size)  # SPD, condition numbers up to ~1e4
    inv, pivots = jax.jit(dd.sweep_inverse)(jnp.asarray(np.moveaxis(a, 0, -1)))
    ref = np.linalg.inv(a)
    got = np.moveaxis(np.asarray(inv), -1, 0)
    scale = np.max(np.abs(ref), axis=(1, 2), keepdims=True)
    assert np.max(np.abs(got - ref) / scale) < 1e-11
    # the pivots are the Schur complements: ratios of leading principal minors
    minors = np.stack([np.linalg.det(a[:, :k, :k]) for k in range(1, size + 1)], axis=1)
    ratios = minors / np.concatenate([np.ones((6, 1)), minors[:, :-1]], axis=1)
    np.testing.assert_allclose(np.asarray(pivots).T, ratios, rtol=1e-8)
    indefinite = jnp.asarray(np.diag(np.r_[1.0, -1.0, np.ones(size - 2)])[:, :, None])
    assert float(jnp.min(dd.sweep_inverse(indefinite)[1])) < 0


# whole words (64, 1024), a partial last word (100, 200, 300), fewer dead than slots or more
@pytest.mark.parametrize(("n", "size"), [(N, 12), (100, 24), (200, 12), (300, 12), (1024, 24)])
def test_dead_workers_match_a_loop(n, size):
    masks = np.array(gcc.sample_masks(jax.random.key(9), n, num=P, p=0.15))  # 0 … ~20 dead
    masks[0] = True  # none dead
    masks[1] = False  # all dead
    masks[2, :-1], masks[2, -1] = True, False  # only the last
    got = np.asarray(jax.jit(dd.dead_workers, static_argnums=1)(jnp.asarray(masks), size))
    for p in range(P):
        ref = np.flatnonzero(~masks[p])[:size]
        np.testing.assert_array_equal(got[:, p], np.r_[ref, np.full(size - ref.size, n)])


def test_condition_check_is_numpys_condition_number():
    """A mask passes exactly when κ∞ of the Jacobi-scaled ``Ω_dd`` (at λ = 0, ``P = Ω``; Ω from
    SciPy) is ≤ 1/RCOND (numpy's cond); contiguous gaps can fail."""
    n = 100
    t, tq, y = _problem(n)
    masks = np.array(_masks(11, 10, n=n))
    for p in range(0, P, 2):  # contiguous gaps at λ = 0: the ill-conditioned case
        masks[p] = True
        masks[p, 3 * p : 3 * p + 10] = False
    masks = jnp.asarray(masks)
    s = sanitise(t, jnp.asarray(0.0), y, masks)
    base = jax.jit(dd.prepare)(dd.downdate_plan(s.t, s.lam, tq, jnp.int32(10)), s.y)
    good = np.asarray(jax.jit(dd.downdate, static_argnums=2)(base, masks, 12)[1])
    omega, dead = _roughness(np.asarray(t)), (~np.asarray(masks)).nonzero()[1].reshape(P, 10)
    kappa = []
    for d in dead:
        a = omega[np.ix_(d, d)]
        scale = 1 / np.sqrt(np.diag(a))
        kappa.append(np.linalg.cond(a * scale[:, None] * scale[None, :], np.inf))
    kappa = np.array(kappa)
    clear = np.abs(np.log(kappa * dd.RCOND[64])) > 0.01
    np.testing.assert_array_equal(good[clear], (kappa <= 1 / dd.RCOND[64])[clear])
    assert np.all(good[1::2]) and not np.all(good[::2])


@pytest.mark.parametrize("lam", [1e-6, 1e-2])
def test_matches_scipy_on_the_survivors(lam):
    t, tq, y = _problem()
    rng = np.random.default_rng(7)
    masks = np.ones((P, N), bool)
    for p in range(P):  # 6 stragglers, never the end nodes (SciPy then needs no extrapolation)
        masks[p, 1 + rng.choice(N - 2, 6, replace=False)] = False
    masks = jnp.asarray(masks)
    assert bool(_taken(t, jnp.asarray(lam), y, tq, masks))
    got, _ = _decode(t, jnp.asarray(lam), y, tq, masks)
    tn, yn, tqn = np.asarray(t), np.asarray(y), np.asarray(tq)
    for p in range(0, P, 7):
        live = np.asarray(masks[p])
        spl = make_smoothing_spline(tn[live], yn[live], lam=live.sum() * lam, axis=0)
        np.testing.assert_allclose(got[p], spl(tqn), rtol=1e-8, atol=1e-8 * np.abs(yn).max())


def test_fallbacks_equal_kalman_pass():
    """Chunks the downdate does not fit take the Kalman pass; the values are the same."""
    t, tq, y = _problem()
    lam = jnp.asarray(1e-6)
    mixed = gcc.sample_masks(jax.random.key(3), N, num=P, p=0.1)  # different straggler counts
    block = np.ones((P, N), bool)
    for p in range(P):
        block[p, p : p + 24] = False  # contiguous gaps of 24 at λ = 0: ill-conditioned P_dd
    many = _masks(4, 40)  # more stragglers than the largest solve size
    huge = y.at[5].set(1e15)  # a worker whose output dwarfs the others (dead in some masks)
    cases = [
        (mixed, lam, y),
        (jnp.asarray(block), jnp.asarray(0.0), y),
        (many, lam, y),
        (_masks(5, 4), lam, huge),
    ]
    for masks, lam_c, yc in cases:
        assert not bool(_taken(t, lam_c, yc, tq, masks))
        got, status = _decode(t, lam_c, yc, tq, masks)
        ref, ref_status = _kalman(t, lam_c, yc, tq, masks)
        np.testing.assert_array_equal(status, ref_status)
        assert _rel(got, ref) < 1e-11


def test_statuses_and_stragglers_garbage():
    """A dead worker's NaN is exact to drop; a live one's flags that mask only; too few live
    workers flag theirs; the rest of the chunk stays on the downdate and equals the Kalman pass."""
    t, tq, y = _problem()
    lam = jnp.asarray(1e-6)
    rng = np.random.default_rng(6)
    masks = np.ones((P, N), bool)
    masks[:, 0] = False  # worker 0 dead in every mask but one ...
    for p in range(P):
        masks[p, 1 + rng.choice(N - 1, 4, replace=False)] = False
    masks[1] = np.arange(N) != 3
    masks[1, 10:14] = False  # ... and live here (5 dead)
    masks[2] = False
    masks[2, [7, 9]] = False  # no live worker
    y_nan = y.at[0].set(jnp.nan)
    masks = jnp.asarray(masks)
    assert bool(_taken(t, lam, y_nan, tq, masks))
    got, status = _decode(t, lam, y_nan, tq, masks)
    ref, ref_status = _kalman(t, lam, y_nan, tq, masks)
    np.testing.assert_array_equal(status, ref_status)
    assert int(status[1]) == gcc.Status.NONFINITE_DATA
    assert int(status[2]) == gcc.Status.TOO_FEW_LIVE
    ok = np.asarray(status) == 0
    assert ok.sum() == P - 2 and np.all(np.isnan(np.asarray(got)[~ok]))
    assert _rel(np.asarray(got)[ok], np.asarray(ref)[ok]) < 1e-11


@pytest.mark.slow  # float32 programs of the downdate and the Kalman pass
def test_float32_close_to_float64():
    """float32 takes the downdate where its tighter gates pass (κ∞(P̃_dd) ≤ 100, at least S + 1
    outputs within 10x of a column's largest) and agrees with float64 to 1e-5 there; where they fail
    (a straggler's output 50x the rest; contiguous gaps of 10 at λ = 1e-8, κ∞ ~ 1e3) it takes the
    float32 Kalman pass."""
    t, tq, y = _problem()
    t32, tq32, y32 = (a.astype(jnp.float32) for a in (t, tq, y))
    block = np.ones((P, N), bool)
    for p in range(P):
        block[p, p : p + 10] = False
    big = y.at[5].multiply(50.0)  # dead in some masks: exceeds float32's spread gate
    cases = [(_masks(8, 10), 1e-6, y, True), (_masks(9, 20), 1e-2, y, True)]
    cases += [(_masks(10, 5), 1e-6, big, False), (jnp.asarray(block), 1e-8, y, False)]
    for masks, lam, yc, taken in cases:
        lam32, yc32 = jnp.float32(lam), yc.astype(jnp.float32)
        assert bool(_taken(t32, lam32, yc32, tq32, masks)) == taken
        got, status = _decode(t32, lam32, yc32, tq32, masks)
        assert got.dtype == jnp.float32 and int(status.max()) == 0
        ref, _ = _kalman(t, jnp.asarray(lam), yc, tq, masks)
        assert _rel(got, ref) < 1e-5
        if not taken:  # the same program as the Kalman pass: equal to rounding
            assert _rel(got, _kalman(t32, lam32, yc32, tq32, masks)[0]) < 1e-6


def _weighted(fn):
    return lambda t, lam, y, tq, masks, w: jnp.sum(w * fn(t, lam, y, tq, masks)[0])


def _fast_loss(t, lam, y, tq, masks, w):  # reuses _decode's compiled program
    return jnp.sum(w * _decode(t, lam, y, tq, masks)[0])


@jax.jit
def _grads(*args):
    """Gradients w.r.t. nodes, λ and y through the downdate and through the Kalman pass."""
    return tuple(jax.grad(_weighted(fn), (0, 1, 2))(*args) for fn in (_decode, _kalman))


@pytest.mark.slow  # compiles reverse mode through the downdate and the Kalman pass
@pytest.mark.parametrize("lam", [0.0, 1e-4])
def test_gradients(lam):
    """Reverse mode through the downdate w.r.t. nodes, λ and y: equal to the Kalman pass's
    gradients, and to central differences along random directions (one-sided in λ at 0)."""
    t, tq, y = _problem()
    masks = _masks(9, 6)
    lam = jnp.asarray(lam)
    w = jnp.asarray(np.random.default_rng(2).standard_normal((P, K, 2)))
    assert bool(_taken(t, lam, y, tq, masks))
    got, ref = _grads(t, lam, y, tq, masks, w)
    for a, b in zip(got, ref, strict=True):
        assert _rel(a, b) < 1e-7
    rng = np.random.default_rng(3)
    args = [t, lam, y]
    for i, eps in enumerate((1e-7, 1e-7 if float(lam) > 0 else 1e-15, 1e-5)):
        v = jnp.asarray(rng.uniform(-1, 1, np.shape(args[i])))
        if i == 1 and float(lam) == 0.0:  # λ < 0 is flagged: one-sided
            v = jnp.abs(v)
            plus = args[:i] + [args[i] + eps * v] + args[i + 1 :]
            numeric = (_fast_loss(*plus, tq, masks, w) - _fast_loss(*args, tq, masks, w)) / eps
            np.testing.assert_allclose(numeric, jnp.sum(got[i] * v), rtol=1e-2)
            continue
        plus = args[:i] + [args[i] + eps * v] + args[i + 1 :]
        minus = args[:i] + [args[i] - eps * v] + args[i + 1 :]
        numeric = (_fast_loss(*plus, tq, masks, w) - _fast_loss(*minus, tq, masks, w)) / (2 * eps)
        np.testing.assert_allclose(numeric, jnp.sum(got[i] * v), rtol=1e-5)


@pytest.mark.slow  # the program of test_gradients
def test_gradients_through_the_larger_solve_size():
    """S = 16 takes the second solve size (a loop over the pivots): the same gradients as the
    Kalman pass (the program of test_gradients, so no new compilation)."""
    t, tq, y = _problem()
    masks = _masks(10, 16)
    lam = jnp.asarray(1e-4)
    w = jnp.asarray(np.random.default_rng(4).standard_normal((P, K, 2)))
    assert 12 < 16 <= dd.SIZES[-1] and bool(_taken(t, lam, y, tq, masks))
    got, ref = _grads(t, lam, y, tq, masks, w)
    for a, b in zip(got, ref, strict=True):
        assert _rel(a, b) < 1e-7


def test_compiles_once_across_masks_lam_nodes():
    """A new number of stragglers, λ or nodes is a value, not a shape: no new trace."""
    t, tq, y = _problem()

    @jax.jit
    @chex.assert_max_traces(n=1)
    def decode(t, lam, masks):
        return dd.smooth_chunks(t, lam, y, tq, masks[None], _one_chunk)[0][0]

    for stragglers, lam, shift in [(3, 1e-6, 0.0), (10, 0.0, 0.5), (17, 1e-2, -1.0)]:
        masks = _masks(stragglers + 20, stragglers)
        got = decode(t + shift, jnp.asarray(lam), masks)
        ref, _ = _kalman(t + shift, jnp.asarray(lam), y, tq, masks)
        assert _rel(got, ref) < 1e-10  # 2.3e-11 at λ = 0, 10 of 64 straggling (P_dd's conditioning)


def test_monte_carlo_through_the_evaluator():
    """monte_carlo_loss (blocks, padding with copies of the first mask) equals the per-mask
    decode loop, on masks the downdate takes."""
    code = gcc.SplineCode.chebyshev(num_inputs=K, num_workers=N, lam_dec=1e-6)
    x = jnp.linspace(-1.0, 1.0, K)[:, None]
    masks = _masks(10, 6, num=40)  # one chunk of 64 with 24 padded rows
    losses = gcc.monte_carlo_loss(code, jnp.sin, x, masks)
    yt, fx = code.worker_outputs(jnp.sin, x), jnp.sin(x)
    loop = [float(jnp.mean(jnp.sum((code.decode(yt, m) - fx) ** 2, -1))) for m in masks[:8]]
    np.testing.assert_allclose(losses[:8], loop, rtol=1e-9)
    assert bool(_taken(code.beta, code.lam_dec, yt, code.alpha, masks))
