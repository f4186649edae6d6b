"""gcc_jax.tuning against independent references: loops over monte_carlo_loss, NumPy Reinsch
hat matrices, SciPy splines, brute-force searches and finite differences (float64)."""

import dataclasses
import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from refs import reinsch_values
from scipy.interpolate import CubicSpline

import gcc_jax as gcc
from gcc_jax import tuning
from gcc_jax.experiments.rates import xsinx
from gcc_jax.tuning import StragglerModel

K, N = 5, 16
LEAVES = ("log_lam_enc", "log_lam_dec", "alpha_logits", "beta_logits")


@pytest.fixture(scope="module")
def code():
    return gcc.SplineCode.chebyshev(num_inputs=K, num_workers=N, lam_enc=1e-5, lam_dec=1e-4)


@pytest.fixture(scope="module")
def x():
    return jax.random.uniform(jax.random.key(3), (K, 1), minval=-2.5, maxval=2.5)


@pytest.fixture(scope="module")
def masks():
    m = np.array(gcc.sample_masks(jax.random.key(0), N, num=6, stragglers=3))
    m[1] = np.arange(N) >= 3  # the first workers dead: the decoder extrapolates
    return jnp.asarray(m)


# -- parametrisation ---------------------------------------------------------------------------


def test_params_round_trip_and_pinning(code):
    p = tuning.params_from_code(code)
    assert p.pin_beta and not p.pin_alpha  # Chebyshev-2 workers include ±1; Chebyshev-1 do not
    assert p.alpha_logits.shape == (K + 1,) and p.beta_logits.shape == (N - 1,)
    back = p.to_code()
    np.testing.assert_allclose(back.alpha, code.alpha, atol=1e-15)
    np.testing.assert_allclose(back.beta, code.beta, atol=1e-15)
    assert back.beta[0] == -1.0 and back.beta[-1] == 1.0  # exactly
    np.testing.assert_allclose([back.lam_enc, back.lam_dec], [1e-5, 1e-4], rtol=1e-14)
    assert back.solver == code.solver
    zero = gcc.SplineCode.chebyshev(num_inputs=K, num_workers=N)  # λ = 0 starts at the floor
    assert float(tuning.params_from_code(zero, lam_floor=1e-9).lam_dec) == pytest.approx(1e-9)
    inner = gcc.SplineCode(code.alpha, gcc.chebyshev_nodes(N, kind=1), code.lam_enc, code.lam_dec)
    assert tuning.params_from_code(inner).beta_logits.shape == (N + 1,)  # free ends
    with pytest.raises(gcc.GCCValueError, match="strictly inside"):
        tuning.params_from_code(code, pin_beta=False)  # ±1 cannot be free nodes
    with pytest.raises(gcc.GCCValueError, match="start at -1"):
        tuning.params_from_code(code, pin_alpha=True)
    with pytest.raises(TypeError, match="SplineCode"):
        tuning.params_from_code(gcc.BerrutCode.chebyshev(num_inputs=K, num_workers=N))


@pytest.mark.parametrize("pinned", [False, True])
def test_nodes_from_any_logits_are_increasing_in_the_interval(pinned):
    z = 4.0 * jax.random.normal(jax.random.key(1), (200, 9))
    t = np.asarray(jax.vmap(functools.partial(tuning.nodes_from_logits, pinned=pinned))(z))
    assert t.shape == (200, 10 if pinned else 8)
    assert np.all(np.diff(t, axis=1) > 0)
    assert np.all(t >= -1) and np.all(t <= 1)
    if pinned:
        assert np.all(t[:, 0] == -1.0) and np.all(t[:, -1] == 1.0)
    # closed form: gaps are 2·softmax(z)
    gaps = np.diff(np.concatenate([[-1.0], t[0], [1.0]]) if not pinned else t[0])
    ez = np.exp(np.asarray(z[0]) - np.max(z[0]))
    np.testing.assert_allclose(gaps, 2 * ez / ez.sum(), rtol=1e-12, atol=1e-15)


# -- expected_loss ------------------------------------------------------------------------------


def test_expected_loss_matches_monte_carlo_loss(code, x, masks):
    p = tuning.params_from_code(code)
    ref = gcc.monte_carlo_loss(code, xsinx, x, masks)
    assert float(tuning.expected_loss(p, xsinx, x, masks)) == pytest.approx(ref.mean(), rel=1e-12)
    worst = tuning.expected_loss(p, xsinx, x, masks, reduce="max")
    assert float(worst) == pytest.approx(ref.max(), rel=1e-12)
    # a code works directly too, and a pattern with < 2 live workers is left out of the mean
    dead = masks.at[0].set(jnp.arange(N) == 4)  # one live worker: left out of the mean
    mean_rest = ref[1:].mean()
    assert float(tuning.expected_loss(code, xsinx, x, dead)) == pytest.approx(mean_rest, 1e-12)
    # one compilation for new λs, nodes, masks and both reductions
    from gcc_jax.tuning._loss import _expected_loss

    size = _expected_loss._cache_size()
    other = dataclasses.replace(p, log_lam_dec=p.log_lam_dec + 1.0, beta_logits=p.beta_logits * 0.9)
    tuning.expected_loss(other, xsinx, x, ~masks.at[:, 5].set(True), reduce="max")
    assert _expected_loss._cache_size() == size
    with pytest.raises(ValueError, match="reduce"):
        tuning.expected_loss(p, xsinx, x, masks, reduce="median")
    with pytest.raises(ValueError, match=r"\(5, \.\.\.\)"):
        tuning.expected_loss(p, xsinx, x[:3], masks)


@pytest.fixture(scope="module")
def loss(x, masks):
    return lambda p: tuning.expected_loss(p, xsinx, x, masks)


def _only(params, name):
    """``a ↦ loss(params with leaf ``name`` = a)``; the other leaves are tied to ``a`` by ``+0·a``
    so every call differentiates the same graph (one compilation for all four groups)."""

    def fn(loss, a):
        zero = 0.0 * jnp.sum(a)
        leaves = {k: getattr(params, k) + zero for k in LEAVES}
        leaves[name] = a
        return loss(dataclasses.replace(params, **leaves))

    return fn


@pytest.mark.parametrize("name", LEAVES)
def test_check_grads_each_group_kalman(code, loss, name):
    p = tuning.params_from_code(code)
    fn = functools.partial(_only(p, name), loss)
    check_grads(fn, (getattr(p, name),), order=1, modes=("rev",), atol=1e-6, rtol=1e-5)
    # and the gradient against a central difference along a random direction
    g = jax.grad(fn)(getattr(p, name))
    d = jax.random.normal(jax.random.key(7), g.shape)
    eps = 1e-5
    fd = (fn(getattr(p, name) + eps * d) - fn(getattr(p, name) - eps * d)) / (2 * eps)
    assert float(jnp.sum(g * d)) == pytest.approx(float(fd), rel=1e-5, abs=1e-9)
    assert float(jnp.max(jnp.abs(g))) > 0  # every group actually moves the loss


def test_gradient_through_a_flax_model(masks):
    from gcc_jax.nn.models import make_model, worker_function

    apply, mparams = make_model("mlp", input_shape=(2, 2, 1), num_classes=3, key=0, hidden=(8,))
    f = worker_function(apply, mparams)
    xi = jax.random.uniform(jax.random.key(5), (K, 2, 2, 1), dtype=jnp.float64)
    code = gcc.SplineCode.chebyshev(num_inputs=K, num_workers=N, lam_enc=1e-6, lam_dec=1e-5)
    p = tuning.params_from_code(code)
    loss = lambda q: tuning.expected_loss(q, f, xi, masks)  # noqa: E731
    for name in ("log_lam_enc", "beta_logits"):  # one compiled gradient serves both
        fn = functools.partial(_only(p, name), loss)
        check_grads(fn, (getattr(p, name),), order=1, modes=("rev",), atol=1e-6, rtol=1e-4)


# -- λ_dec per pattern: GCV and grid CV ---------------------------------------------------------


def _live_hat(t, mask, lam):
    """NumPy hat matrix of the smoothing spline on the live nodes (Reinsch, λ' = n_live·λ)."""
    tl = t[mask]
    return reinsch_values(tl, np.eye(tl.size), tl.size * lam)


def _gcv_ref(t, y, mask, lam):
    h = _live_hat(t, mask, lam)
    yl = y[mask]
    n = yl.shape[0]
    rss = np.sum((yl - h @ yl) ** 2)
    return n * rss / (yl.shape[1] * (n - np.trace(h)) ** 2)


def _natural_eval(t, g, tq):
    """The natural cubic spline through (t, g), linear outside [t_0, t_-1]."""
    cs = CubicSpline(t, g, bc_type="natural", axis=0)
    out = cs(np.clip(tq, t[0], t[-1]))
    d = cs(np.array([t[0], t[-1]]), 1)
    out = out + np.minimum(tq - t[0], 0)[:, None] * d[0] + np.maximum(tq - t[-1], 0)[:, None] * d[1]
    return out


def _cv_ref(t, y, mask, lam, folds):
    live = np.flatnonzero(mask)
    err = 0.0
    for j in range(folds):
        out = live[j::folds]
        keep = np.setdiff1d(live, out)
        g = reinsch_values(t[keep], y[keep], keep.size * lam)
        err += np.sum((y[out] - _natural_eval(t[keep], g, t[out])) ** 2)
    return err / (live.size * y.shape[1])


GRID = jnp.logspace(-9, -1, 17)


@pytest.fixture(scope="module")
def noisy():
    code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=30)
    t = np.asarray(code.beta)
    rng = np.random.default_rng(0)
    y = np.stack([np.sin(3 * t), np.cos(2 * t)], 1) + 0.2 * rng.normal(size=(30, 2))
    mask = np.ones(30, bool)
    mask[[0, 7, 8, 9, 20]] = False
    return code, y, mask


@pytest.mark.parametrize("lam", [1e-7, 1e-5, 1e-3])
def test_gcv_and_cv_scores_match_numpy(noisy, lam):
    code, y, mask = noisy
    gcv = tuning.gcv_score(code, y, mask, lam)
    assert float(gcv) == pytest.approx(_gcv_ref(np.asarray(code.beta), y, mask, lam), rel=1e-6)
    cv = tuning.cv_score(code, y, mask, lam, folds=4)
    assert float(cv) == pytest.approx(_cv_ref(np.asarray(code.beta), y, mask, lam, 4), rel=1e-6)


@pytest.mark.parametrize("target", [3e-4, 2e-7])
def test_lam_search_traces_its_score_once_and_refines_between_grid_points(target):
    """Grid, golden-section starts, steps and final λ are one loop: the score is traced once."""
    calls = []

    def score(lam):  # (log λ − log target)², minimised off the grid
        calls.append(1)
        return (jnp.log(lam) - np.log(target)) ** 2, jnp.zeros((), jnp.int32)

    grid = jnp.logspace(-12.0, 0.0, 13)
    choice = jax.jit(lambda g: tuning._select._minimise(score, g, 12))(grid)
    assert len(calls) == 1
    # 12 golden-section steps shrink the bracket of 4 decades (log width 4.6) by 0.618^12
    bracket = 2 * np.log(10.0) * 0.618**12
    assert abs(np.log(float(choice.lam)) - np.log(target)) < bracket
    assert float(choice.score) == pytest.approx((np.log(float(choice.lam)) - np.log(target)) ** 2)
    assert int(choice.status) == 0


def test_lam_choices_minimise_their_scores(noisy):
    code, y, mask = noisy
    fine = np.logspace(-9, -1, 161)
    for choose, ref in (
        (tuning.gcv_lam_dec, lambda lam: _gcv_ref(np.asarray(code.beta), y, mask, lam)),
        (tuning.cv_lam_dec, lambda lam: _cv_ref(np.asarray(code.beta), y, mask, lam, 5)),
    ):
        choice = choose(code, y, mask, grid=GRID)
        assert int(choice.status) == 0
        brute = min(ref(lam) for lam in fine)
        # golden-section refinement reaches the brute-force minimum of the reference score
        assert float(choice.score) <= brute * (1 + 1e-3)
        assert float(choice.score) == pytest.approx(ref(float(choice.lam)), rel=1e-6)
        assert 1e-8 < float(choice.lam) < 1e-1  # interior: smoothing the noise pays


def test_gcv_vmap_over_masks_equals_loop(noisy):
    code, y, _ = noisy
    ms = np.array(gcc.sample_masks(jax.random.key(2), 30, num=3, stragglers=6))
    ms[2, :] = False  # too few live workers: status, not a crash
    ms[2, :1] = True
    batched = jax.vmap(lambda m: tuning.gcv_lam_dec(code, y, m, grid=GRID))(ms)
    for i, m in enumerate(ms):
        one = tuning.gcv_lam_dec(code, y, m, grid=GRID)
        if i < 2:
            assert float(batched.lam[i]) == pytest.approx(float(one.lam), rel=1e-12)
    assert int(batched.status[2]) & int(gcc.Status.TOO_FEW_LIVE)
    with pytest.raises(ValueError, match="folds"):
        tuning.cv_lam_dec(code, y, ms[0], folds=1)
    with pytest.raises(TypeError, match="SplineCode"):
        tuning.gcv_lam_dec(gcc.BerrutCode.chebyshev(num_inputs=4, num_workers=30), y, ms[0])


# -- straggler models and evaluation ------------------------------------------------------------


def test_straggler_model_sampling():
    key = jax.random.key(0)
    worst = StragglerModel.worst(3).sample(key, 10, num=12)
    blocks = np.asarray(gcc.contiguous_masks(10, 3))
    assert worst.shape == (12, 10) and np.all((~worst).sum(1) == 3)
    np.testing.assert_array_equal(worst[:8], blocks)  # all 8 blocks first
    few = np.asarray(StragglerModel.worst(3).sample(key, 10, num=4))
    assert all(any((row == b).all() for b in blocks) for row in few)
    assert np.all((~StragglerModel.exact(2).sample(key, 10, num=5)).sum(1) == 2)
    iid = np.asarray(StragglerModel.iid(0.3).sample(key, 200, num=50))
    assert abs((~iid).mean() - 0.3) < 0.02
    assert StragglerModel.worst(2).reduce == "max" and StragglerModel.iid(0.1).reduce == "mean"
    with pytest.raises(ValueError, match="kind"):
        StragglerModel("sometimes")
    with pytest.raises(ValueError, match="fewer than 2"):
        StragglerModel.exact(9).sample(key, 10, num=1)
    with pytest.raises(ValueError, match="probability"):
        StragglerModel.iid(1.5)


@pytest.fixture(scope="module")
def jobs():
    return jax.random.uniform(jax.random.key(11), (3, K, 1), minval=-2.5, maxval=2.5)


def test_evaluate_random_matches_a_loop(code, jobs):
    model = StragglerModel.iid(0.2)
    res = tuning.evaluate(
        code, xsinx, jobs, key=jax.random.key(4), straggler_model=model, num_masks=64
    )
    k_masks, _ = jax.random.split(jax.random.key(4))
    ms = np.asarray(model.sample(k_masks, N, num=64))
    # 16 patterns per call: the loop reuses one compiled evaluator (16 masks, one job)
    per = np.stack(
        [
            np.concatenate(
                [
                    gcc.monte_carlo_loss(code, xsinx, xj, ms[i : i + 16], return_status=True).loss
                    for i in range(0, len(ms), 16)
                ]
            )
            for xj in jobs
        ]
    )
    live = ms.sum(1) >= 2
    ref = per.mean(0)[live]
    assert res.loss == pytest.approx(ref.mean(), rel=1e-10)
    assert res.failed == int((~live).sum())
    assert res.ci95 == pytest.approx(1.96 * ref.std() / np.sqrt(ref.size), rel=1e-8)


def test_evaluate_worst_is_the_exhaustive_maximum(code, jobs):
    res = tuning.evaluate(
        code, xsinx, jobs, key=jax.random.key(4), straggler_model=StragglerModel.worst(2)
    )
    assert res.exhaustive and res.num_patterns == 120
    best = -1.0
    for dead in itertools.combinations(range(N), 2):
        m = np.ones((1, N), bool)
        m[0, list(dead)] = False
        loss = np.mean([gcc.monte_carlo_loss(code, xsinx, xj, m)[0] for xj in jobs])
        best = max(best, loss)
    assert res.loss == pytest.approx(best, rel=1e-10)
    assert (~res.worst_mask).sum() == 2


def test_evaluate_with_gcv_rule_matches_a_loop(code, jobs):
    grid = jnp.logspace(-10, -2, 9)
    rule = functools.partial(tuning.gcv_lam_dec, grid=grid, refine=2)
    model = StragglerModel.exact(3)
    res = tuning.evaluate(
        code,
        xsinx,
        jobs,
        key=jax.random.key(5),
        straggler_model=model,
        num_masks=4,
        select_lam_dec=rule,
    )
    ms = model.sample(jax.random.split(jax.random.key(5))[0], N, num=4)

    @jax.jit  # the loop's rule and decode: one compile for every mask and job
    def decode_by_rule(yt, m):
        lam = rule(code, yt, m).lam
        return dataclasses.replace(code, lam_dec=lam).decode_with_status(yt, m).value

    losses = []
    for m in ms:
        per_job = []
        for xj in jobs:
            _, yt = gcc.apply_workers(code, xsinx, xj)
            dec = decode_by_rule(yt, m)
            per_job.append(np.mean(np.sum((dec - jax.vmap(xsinx)(xj)) ** 2, -1)))
        losses.append(np.mean(per_job))
    assert res.loss == pytest.approx(np.mean(losses), rel=1e-9)


def test_grid_search_matches_a_loop(code, jobs):
    enc, dec = [0.0, 1e-6], [0.0, 1e-5, 1e-3]
    model = StragglerModel.exact(3)
    g = tuning.grid_search(
        code,
        xsinx,
        jobs,
        key=jax.random.key(6),
        straggler_model=model,
        lam_enc_grid=enc,
        lam_dec_grid=dec,
        num_masks=16,
        progress=False,
    )
    ms = model.sample(jax.random.split(jax.random.key(6))[0], N, num=16)
    ref = np.empty((2, 3))
    for i, j in itertools.product(range(2), range(3)):
        c = gcc.SplineCode(code.alpha, code.beta, jnp.asarray(enc[i]), jnp.asarray(dec[j]))
        ref[i, j] = np.mean([gcc.monte_carlo_loss(c, xsinx, xj, ms).mean() for xj in jobs])
    np.testing.assert_allclose(g.losses, ref, rtol=1e-10)
    i, j = np.unravel_index(np.argmin(ref), ref.shape)
    assert (g.lam_enc, g.lam_dec) == (enc[i], dec[j]) and g.loss == pytest.approx(ref.min())
    assert float(g.code.lam_dec) == dec[j] and g.code.solver == code.solver


# -- tune ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tune_data():
    xtr = jax.random.uniform(jax.random.key(21), (8, K, 1), minval=-2.5, maxval=2.5)
    return gcc.SplineCode.chebyshev(num_inputs=K, num_workers=N), xtr


@pytest.mark.slow  # compiles tune's step and validation programs (tune's doctest: make test)
def test_tune_improves_held_out_loss_and_keeps_frozen_groups(tune_data):
    code, xtr = tune_data
    model = StragglerModel.exact(3)
    # 3 validation jobs, as many as `jobs`: validation reuses evaluate's compiled evaluator
    xval = jax.random.uniform(jax.random.key(22), (3, K, 1), minval=-2.5, maxval=2.5)
    res = tuning.tune(
        code,
        xsinx,
        xtr,
        x_val=xval,
        key=jax.random.key(0),
        straggler_model=model,
        steps=30,
        eval_every=5,
        val_masks=64,
        progress=False,
    )
    assert isinstance(res.code, gcc.SplineCode) and res.code.solver == code.solver
    h = res.history
    assert h.train_loss.shape == (30,) and h.val_step.tolist() == [0, 5, 10, 15, 20, 25, 30]
    assert res.best_val_loss < 0.8 * res.initial_val_loss
    best = h.val_loss[list(h.val_step).index(res.best_step)]
    assert res.best_val_loss == best and h.val_loss.min() >= 0.99 * best  # min_delta = 1%
    assert np.all(np.diff(np.asarray(res.code.beta)) > 0) and res.code.beta[0] == -1.0
    # the returned code's validation loss, recomputed by a loop over the validation patterns
    k_val = jax.random.split(jax.random.key(0), 3)[1]
    ms = np.asarray(model.sample(k_val, N, num=64))
    per = [
        np.concatenate(
            [gcc.monte_carlo_loss(res.code, xsinx, xj, ms[i : i + 16]) for i in (0, 16, 32, 48)]
        )
        for xj in xval
    ]
    ref = np.mean([p.mean() for p in per])
    assert res.best_val_loss == pytest.approx(ref, rel=1e-9)
    # λ only: the nodes do not move, and the compiled step of the first run is reused
    step = tuning._tune._make_step(xsinx, tuning.default_optimizer())
    compiled = step._cache_size()
    lam_only = tuning.tune(
        code,
        xsinx,
        xtr,
        x_val=xval,
        key=jax.random.key(0),
        straggler_model=model,
        steps=10,
        eval_every=5,
        val_masks=64,
        trainable=("lam_enc", "lam_dec"),
        progress=False,
    )
    assert lam_only.history.lam_dec.shape == (3,)
    assert step._cache_size() == compiled
    start = tuning.params_from_code(code)
    np.testing.assert_array_equal(lam_only.params.beta_logits, start.beta_logits)
    np.testing.assert_array_equal(lam_only.params.alpha_logits, start.alpha_logits)


def test_tune_rejects_bad_input(tune_data):
    code, xtr = tune_data
    model = StragglerModel.worst(2)
    with pytest.raises(ValueError, match="single job"):
        tuning.tune(code, xsinx, xtr[:1], key=jax.random.key(0), straggler_model=model)
    with pytest.raises(ValueError, match="trainable"):
        tuning.tune(
            code, xsinx, xtr, key=jax.random.key(0), straggler_model=model, trainable=("gamma",)
        )
    with pytest.raises(TypeError, match="StragglerModel"):
        tuning.tune(code, xsinx, xtr, key=jax.random.key(0), straggler_model="worst")
    with pytest.raises(ValueError, match=r"\(B, 5, \.\.\.\)"):
        tuning.tune(code, xsinx, xtr[0], key=jax.random.key(0), straggler_model=model)
