"""RobustSplineCode and adversarial_lam_dec: IRLS against a NumPy/SciPy loop, transforms, status."""

import dataclasses
import itertools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from scipy.interpolate import make_smoothing_spline

import gcc_jax as gcc

HUBER, TUKEY, TRIM, MAD = 1.345, 4.685, 2.5, 1.482602218505602


def _scipy_fit(t, y, w, lam):
    """SciPy weighted smoothing spline on the points with w > 0, with our convention outside the
    hull of those points (linear with the end slopes). Returns a callable."""
    live = w > 0
    spl = make_smoothing_spline(t[live], y[live], w=w[live], lam=w.sum() * lam, axis=0)
    der = spl.derivative()
    lo, hi = t[live][0], t[live][-1]

    def call(tq):
        tq = np.asarray(tq, float)
        out = spl(np.clip(tq, lo, hi))
        below = np.minimum(tq - lo, 0)[:, None] * der(lo)[None, :]
        above = np.maximum(tq - hi, 0)[:, None] * der(hi)[None, :]
        return out + below + above

    return call


def numpy_lts_start(t, y, mask, lam, trim, max_subsets=256):
    """Independent reference of the LTS start: SciPy fits of every drop set (itertools), or
    greedy rounds past ``max_subsets``; the kept live workers."""
    n, m = len(t), y.shape[1]
    h = max(mask.sum() - trim, 2)

    def objective(keep):
        if keep.sum() < 2:
            return np.inf
        r2 = np.sum((y - _scipy_fit(t, y, keep.astype(float), lam)(t)) ** 2, axis=1) / m
        return np.sort(r2[mask])[:h].sum()

    def best(candidates, fallback):
        obj = [objective(c) for c in candidates]
        i = int(np.argmin(obj))
        return candidates[i] if np.isfinite(obj[i]) else fallback

    if math.comb(n, trim) <= max_subsets:
        drops = [np.isin(np.arange(n), d) for d in itertools.combinations(range(n), trim)]
        return best([mask & ~d for d in drops], mask)
    keep = mask.copy()
    for _ in range(trim):
        keep = best([keep & (np.arange(n) != i) for i in range(n)], keep)
    return keep


def numpy_irls(t, y, mask, lam, tq, loss, iterations, trim, tuning=None, min_scale=0.0):
    """Independent reference: a Python IRLS loop over SciPy fits (float64)."""
    c = {"huber": HUBER, "tukey": TUKEY, "trim": TRIM}[loss] if tuning is None else tuning
    w = (mask if trim == 0 else numpy_lts_start(t, y, mask, lam, trim)).astype(float)
    m = y.shape[1]
    scale = np.sqrt(np.sum(y[mask] ** 2) / (mask.sum() * m))
    floor = max(np.finfo(float).eps * 16 * scale, min_scale)
    for i in range(iterations):
        s = _scipy_fit(t, y, w, lam)
        r = np.sqrt(np.sum((y - s(t)) ** 2, axis=1) / m)
        r_live = r[mask]
        sigma = max(MAD * np.median(r_live), floor)
        u = r / sigma
        if loss == "trim":
            order = np.argsort(r_live)
            drop = np.zeros(mask.sum(), bool)
            drop[order[max(mask.sum() - trim, 2) :]] = True
            w = np.zeros(len(t))
            w[mask] = ~(drop & (u[mask] > c))
            continue
        kind = "huber" if (loss == "huber" or (trim == 0 and i < iterations // 2)) else "tukey"
        if kind == "huber":
            cc = c if loss == "huber" else HUBER
            new = np.minimum(1.0, cc / np.maximum(u, 1e-300))
        else:
            new = np.where(u < c, (1 - np.minimum(u / c, 1) ** 2) ** 2, 0.0)
        w = np.where(mask, new, 0.0)
    return _scipy_fit(t, y, w, lam)(tq)


def _setup(n=30, k=5, gamma=3, seed=0, m=2, bound=3.0):
    rng = np.random.default_rng(seed)
    code = gcc.SplineCode.chebyshev(num_inputs=k, num_workers=n, lam_dec=1e-4)
    x = rng.uniform(-1, 1, size=(k, m))
    yt = np.asarray(code.worker_outputs(lambda v: v * jnp.sin(3 * v), x))
    fx = np.asarray(x * np.sin(3 * x))
    adv = rng.choice(n, gamma, replace=False)
    y = yt.copy()
    y[adv] = rng.uniform(-bound, bound, size=(gamma, m))
    return code, y, fx, adv


@pytest.mark.parametrize("loss", ["huber", "tukey", "trim"])
@pytest.mark.parametrize("seed", [1])
def test_irls_matches_numpy_scipy_loop(loss, seed):
    code, y, _, _ = _setup(seed=seed)
    mask = np.ones(30, bool)
    mask[[4, 17]] = False
    rob = gcc.RobustSplineCode.from_spline(code, loss=loss, iterations=6, trim=3)
    got = np.asarray(rob.decode(y, mask))
    ref = numpy_irls(np.asarray(code.beta), y, mask, 1e-4, np.asarray(code.alpha), loss, 6, trim=3)
    np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-9)


def test_the_three_losses_share_one_compiled_program():
    # the loss is data (an int32 leaf), not structure: Huber, Tukey and trimming codes of the
    # same sizes go through one trace of a jitted decode, each still matching the SciPy loop
    code, y, _, _ = _setup(seed=2)
    mask = np.ones(30, bool)
    mask[[3, 11]] = False

    @jax.jit
    @chex.assert_max_traces(n=1)
    def dec(c, m):
        return c.decode_with_status(y, m).value

    t, tq = np.asarray(code.beta), np.asarray(code.alpha)
    for index, loss in enumerate(["huber", "tukey", "trim"]):
        rob = gcc.RobustSplineCode.from_spline(code, loss=loss, iterations=4, trim=3)
        assert rob.loss_name == loss and int(rob.loss) == index and rob.loss.dtype == jnp.int32
        ref = numpy_irls(t, y, mask, 1e-4, tq, loss, 4, trim=3)
        np.testing.assert_allclose(dec(rob, mask), ref, rtol=1e-7, atol=1e-9)
    chex.clear_trace_counter()
    # the index is accepted too, and dataclasses.replace re-validates the name
    same = gcc.RobustSplineCode(code.alpha, code.beta, code.lam_enc, code.lam_dec, loss=1)
    assert same.loss_name == "tukey" and float(same.tuning) == TUKEY
    with pytest.raises(ValueError, match="loss"):
        dataclasses.replace(same, loss="l2")
    with pytest.raises(ValueError, match="loss"):
        dataclasses.replace(same, loss=3)


def test_zero_iterations_is_the_plain_spline_decoder():
    code, y, _, _ = _setup()
    mask = np.ones(30, bool)
    mask[3] = False
    rob = gcc.RobustSplineCode.from_spline(code, iterations=0)
    np.testing.assert_allclose(rob.decode(y, mask), code.decode(y, mask), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(rob.encode(np.ones((5, 2))), code.encode(np.ones((5, 2))))


@pytest.mark.parametrize("loss", ["huber", "tukey", "trim"])
def test_garbage_workers_are_rejected(loss):
    # 3 of 40 workers return uniform garbage in [-3, 3]. The oracle knows who lies and treats
    # them as stragglers. Trimming 3 reproduces the oracle exactly; Tukey and Huber stay within
    # 1.2x / 1.5x of its error; the plain spline with the same λ is at least 3x off.
    rng = np.random.default_rng(4)
    code = gcc.SplineCode.chebyshev(num_inputs=5, num_workers=40, lam_dec=1e-5)
    x = rng.uniform(-1, 1, size=(5, 2))
    yt = np.asarray(code.worker_outputs(lambda v: v * jnp.sin(v), x))
    fx = x * np.sin(x)
    adv = rng.choice(40, 3, replace=False)
    y = yt.copy()
    y[adv] = rng.uniform(-3, 3, size=(3, 2))
    live = np.ones(40, bool)
    rob = gcc.RobustSplineCode.from_spline(code, loss=loss, iterations=10, trim=3)
    err_clean = np.abs(np.asarray(code.decode(yt, live)) - fx).max()
    err_plain = np.abs(np.asarray(code.decode(y, live)) - fx).max()
    oracle = np.asarray(code.decode(y, live & ~np.isin(np.arange(40), adv)))
    err_oracle = np.abs(oracle - fx).max()
    got = np.asarray(rob.decode(y, live))
    err_rob = np.abs(got - fx).max()
    assert err_plain > 3 * max(err_clean, err_oracle)
    assert err_rob < {"trim": 1.0 + 1e-9, "tukey": 1.2, "huber": 1.5}[loss] * err_oracle
    if loss == "trim":
        np.testing.assert_allclose(got, oracle, rtol=1e-9, atol=1e-12)
    if loss != "huber":  # redescending / trimming: the liars get weight 0
        w = np.asarray(rob.weights(y, live))
        assert np.all(w[adv] < 1e-3)


@pytest.mark.slow  # reverse mode through the IRLS loop; every code's transforms: test_contract
def test_transforms_jit_vmap_compile_once_grads():
    code, y, fx, _ = _setup()
    # 6 iterations, trim 3: the IRLS test's static configuration (its compiled decoder serves)
    rob = gcc.RobustSplineCode.from_spline(code, loss="huber", iterations=6, trim=3)
    masks = np.asarray(gcc.sample_masks(jax.random.key(0), 30, num=3, stragglers=3))
    eager = np.stack([np.asarray(rob.decode(y, m)) for m in masks])
    batched = jax.jit(jax.vmap(lambda c, m: c.decode_with_status(y, m).value, (None, 0)))(
        rob, masks
    )
    np.testing.assert_allclose(batched, eager, rtol=1e-10, atol=1e-12)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def dec(c, m):
        return c.decode_with_status(y, m).value

    for i, lam in enumerate([1e-4, 3e-4, 1e-3]):
        c = gcc.RobustSplineCode.from_spline(
            gcc.SplineCode(code.alpha, code.beta, code.lam_enc, jnp.asarray(lam)),
            loss="huber",
            iterations=6,
            trim=3,
        )
        dec(c, masks[i])
    chex.clear_trace_counter()
    # gradient w.r.t. the worker outputs and λ (generic data: no residual at a kink)
    check_grads(
        lambda yy, lam: (
            gcc.RobustSplineCode(
                code.alpha, code.beta, code.lam_enc, lam, loss="huber", iterations=6, trim=3
            )
            .decode_with_status(yy, masks[0])
            .value
        ),
        (jnp.asarray(y), jnp.asarray(1e-4, code.lam_dec.dtype)),  # not weak: the eager decode's
        order=1,
        modes=("rev",),
        eps=1e-7,
        atol=1e-4,
        rtol=1e-4,
    )


def test_status_and_errors():
    code, y, _, _ = _setup()
    # 6 iterations, trim 3: the IRLS test's static configuration (its compiled decoder serves)
    rob = gcc.RobustSplineCode.from_spline(code, loss="trim", iterations=6, trim=3)
    few = np.zeros(30, bool)
    few[:4] = True  # 4 live < 2 + trim: keeps the 2 best-fitting
    assert int(rob.decode_with_status(y, few).status) == 0
    few[1:4] = False
    out = rob.decode_with_status(y, few)
    assert int(out.status) & int(gcc.Status.TOO_FEW_LIVE) and np.all(np.isnan(out.value))
    bad = y.copy()
    bad[5] = np.nan
    mask = np.ones(30, bool)
    assert int(rob.decode_with_status(bad, mask).status) & int(gcc.Status.NONFINITE_DATA)
    mask[5] = False  # a straggler's NaN is ignored
    out = rob.decode_with_status(bad, mask)
    assert int(out.status) == 0 and np.all(np.isfinite(out.value))
    with pytest.raises(gcc.GCCValueError):
        rob.decode(y, few)
    with pytest.raises(ValueError, match="loss"):
        gcc.RobustSplineCode.from_spline(code, loss="l1")
    with pytest.raises(ValueError, match="trim"):
        gcc.RobustSplineCode.from_spline(code, loss="trim", trim=29)
    with pytest.raises(TypeError, match="code"):
        gcc.RobustSplineCode.from_spline(gcc.BerrutCode.chebyshev(num_inputs=3, num_workers=8))


def test_float32_works():
    rob = gcc.RobustSplineCode.chebyshev(
        num_inputs=4, num_workers=24, lam_dec=1e-4, loss="tukey", dtype=jnp.float32
    )
    x = jnp.linspace(-1, 1, 4, dtype=jnp.float32)[:, None]
    y = rob.worker_outputs(jnp.sin, x).at[7].set(3.0)
    out = rob.decode(y, jnp.ones(24, bool))
    assert out.dtype == jnp.float32
    assert float(jnp.abs(out - jnp.sin(x)).max()) < 1e-2


def test_adversarial_lam_dec_formula():
    for n, g, m in [(20, 1, 1.0), (640, 25, 3.0), (100, 0, 2.0)]:
        assert gcc.adversarial_lam_dec(n, g, m) == pytest.approx((g * m / n) ** 1.6, rel=1e-14)
    assert gcc.adversarial_lam_dec(100, 4, 1.0, constant=1e-3) == pytest.approx(
        1e-3 * 0.04**1.6, rel=1e-14
    )
    with pytest.raises(ValueError, match="bound"):
        gcc.adversarial_lam_dec(10, 1, -1.0)
    with pytest.raises(ValueError, match="num_adversaries"):
        gcc.adversarial_lam_dec(10, 11, 1.0)
    with pytest.raises(TypeError, match="num_workers"):
        gcc.adversarial_lam_dec(10.5, 1, 1.0)
