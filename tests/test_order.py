"""Input ordering (gcc_jax/evaluation/_order.py) against NumPy/SciPy references, and `order=` in
coded_apply, monte_carlo_loss and the mask evaluator."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import gcc_jax as gcc
from gcc_jax.evaluation import MaskEvaluator, inverse_order


def _curve(k, d=5, seed=0, noise=0.0):
    """``k`` points along a smooth curve in ``ℝ^d`` (parameter ``t``), shuffled."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0.0, 1.0, k))
    freq = np.arange(1, d + 1)
    pts = np.stack([np.cos(0.8 * f * t + f) for f in freq], axis=1) + 3.0 * t[:, None]
    pts = pts + noise * rng.normal(size=pts.shape)
    perm = rng.permutation(k)
    return pts[perm], t[perm]


def _up_to_reversal(order, expect):
    order, expect = list(np.asarray(order)), list(np.asarray(expect))
    return order == expect or order == expect[::-1]


@pytest.mark.parametrize("method", gcc.evaluation.ORDERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(9, 1), (12, 3, 2)])
def test_every_method_gives_a_permutation(method, dtype, shape):
    x = np.random.default_rng(1).normal(size=shape).astype(dtype)
    if method == "sort" and np.prod(shape[1:]) > 1:  # sort refuses non-scalar inputs by name
        with pytest.raises(ValueError, match="'sort' needs scalar inputs"):
            gcc.input_order(jnp.asarray(x), method)
        return
    order = gcc.input_order(jnp.asarray(x), method)
    assert order.dtype == jnp.int32 and order.shape == (shape[0],)
    np.testing.assert_array_equal(np.sort(np.asarray(order)), np.arange(shape[0]))


def test_sort_and_given_match_numpy():
    x = np.random.default_rng(2).normal(size=(15, 1))
    np.testing.assert_array_equal(gcc.input_order(x, "sort"), np.argsort(x[:, 0], kind="stable"))
    np.testing.assert_array_equal(gcc.input_order(x, "given"), np.arange(15))


def test_pca_matches_numpy_svd():
    x = np.random.default_rng(3).normal(size=(14, 6)) * np.arange(1, 7)  # distinct spreads
    xc = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(xc, full_matrices=False)
    expect = np.argsort(xc @ vt[0], kind="stable")
    assert _up_to_reversal(gcc.input_order(x, "pca"), expect)


def test_spectral_matches_a_scipy_fiedler_vector():
    x, _ = _curve(18, noise=0.01, seed=4)
    k, nb = x.shape[0], 5
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    far = d2 + np.diag(np.full(k, np.inf))
    kth = np.sort(far, axis=1)[:, nb - 1]
    adj = (far <= kth[:, None]) | (far <= kth[:, None]).T
    w = np.where(adj, np.exp(-d2 / np.median(kth)), 0.0)
    w = w + (1e-6 * w.sum() / (k * (k - 1))) * (1 - np.eye(k))
    _, vecs = scipy.linalg.eigh(np.diag(w.sum(1)) - w)
    expect = np.argsort(vecs[:, 1], kind="stable")
    assert _up_to_reversal(gcc.input_order(x, "spectral", neighbors=nb), expect)


def test_greedy_matches_a_python_loop():
    x = np.random.default_rng(5).normal(size=(13, 4))
    xc = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(xc, full_matrices=False)
    score = xc @ vt[0]
    score = score * np.sign(score[np.argmax(np.abs(score))])
    path = [int(np.argmin(score))]
    while len(path) < len(x):
        dist = [np.inf if j in path else np.sum((x[j] - x[path[-1]]) ** 2) for j in range(len(x))]
        path.append(int(np.argmin(dist)))
    np.testing.assert_array_equal(gcc.input_order(x, "greedy"), path)


@pytest.mark.parametrize("method", ["pca", "spectral", "greedy"])
def test_graph_orders_recover_a_shuffled_curve(method):
    x, t = _curve(30, seed=6)
    order = np.asarray(gcc.input_order(x, method))
    assert _up_to_reversal(order, np.argsort(t))


def _setup(k=8, n=20):
    code = gcc.SplineCode.chebyshev(num_inputs=k, num_workers=n, lam_dec=1e-8)
    x = jnp.asarray(np.random.default_rng(7).uniform(-2.0, 2.0, (k, 2)))
    f = lambda v: jnp.stack([jnp.sin(v[0]) * v[1], jnp.cos(v[1]), v[0] ** 2])  # noqa: E731
    return code, x, f


def test_coded_apply_returns_the_callers_order():
    code, x, f = _setup()
    mask = jnp.ones(20, bool).at[jnp.array([3, 11])].set(False)
    order = np.random.default_rng(8).permutation(8)
    got = np.asarray(gcc.coded_apply(code, f, x, mask, order=jnp.asarray(order)))
    on_permuted = np.asarray(gcc.coded_apply(code, f, np.asarray(x)[order], mask))
    expect = np.empty_like(on_permuted)
    expect[order] = on_permuted  # row j estimates f(x[order[j]])
    np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(inverse_order(order), np.argsort(order))
    # with a good order and few stragglers each row is close to f of the caller's row
    fx = np.asarray(jax.vmap(f)(x))
    sorted_order = gcc.input_order(x, "pca")
    good = np.asarray(gcc.coded_apply(code, f, x, jnp.ones(20, bool), order=sorted_order))
    assert np.max(np.abs(good - fx)) < 0.2 * np.max(np.abs(fx))


def test_gradient_flows_through_the_order_and_orders_do_not_recompile():
    code, x, f = _setup()
    mask = jnp.ones(20, bool).at[5].set(False)
    rng = np.random.default_rng(9)
    o1, o2 = (jnp.asarray(rng.permutation(8)) for _ in range(2))

    def loss(xx, order):
        return jnp.sum(gcc.coded_apply(code, f, xx, mask, order=order)[2] ** 2)

    g = jax.grad(loss)(x, o1)

    def loss_ref(xx):  # the same computation with the permutation written out in NumPy
        inv = np.argsort(np.asarray(o1))
        return jnp.sum(gcc.coded_apply(code, f, xx[np.asarray(o1)], mask)[inv[2]] ** 2)

    np.testing.assert_allclose(g, jax.grad(loss_ref)(x), rtol=1e-10, atol=1e-12)
    from gcc_jax.evaluation._pipeline import _apply_workers

    gcc.coded_apply(code, f, x, mask, order=o1)
    before = _apply_workers._cache_size()
    gcc.coded_apply(code, f, x, mask, order=o2)
    assert _apply_workers._cache_size() == before


def test_monte_carlo_loss_and_evaluator_with_order():
    code, x, f = _setup()
    masks = gcc.sample_masks(jax.random.key(3), 20, num=24, stragglers=4)
    order = np.random.default_rng(10).permutation(8)
    got = gcc.monte_carlo_loss(code, f, x, masks, order=jnp.asarray(order))
    np.testing.assert_allclose(
        got, gcc.monte_carlo_loss(code, f, np.asarray(x)[order], masks), rtol=1e-13
    )
    yt = code.worker_outputs(f, jnp.asarray(np.asarray(x)[order]))
    fx = jax.vmap(f)(x)  # the caller's order
    loss, status = MaskEvaluator(code, yt, fx, order=jnp.asarray(order))(masks)
    np.testing.assert_allclose(loss, got, rtol=1e-13)
    assert not status.any()


def test_sorting_halves_gcc_mse_on_xsinx():
    """x·sin x, K = 20, N = 30, S = 6: GCC's MSE with sorted inputs is at most half of the
    MSE in the order drawn (mean over 6 batches × 32 patterns; measured ratio ≫ 2)."""
    k, n, s = 20, 30, 6
    code = gcc.SplineCode.chebyshev(num_inputs=k, num_workers=n, lam_dec=1e-6)
    f = lambda v: v * jnp.sin(v)  # noqa: E731
    given, sort = [], []
    for b in range(6):
        x = jnp.asarray(np.random.default_rng((11, b)).uniform(-3.0, 3.0, (k, 1)))
        masks = gcc.sample_masks(jax.random.key(b), n, num=32, stragglers=s)
        given.append(gcc.monte_carlo_loss(code, f, x, masks).mean())
        order = gcc.input_order(x, "sort")
        sort.append(gcc.monte_carlo_loss(code, f, x, masks, order=order).mean())
    assert np.mean(sort) <= 0.5 * np.mean(given), (np.mean(sort), np.mean(given))


@pytest.mark.usefixtures("without_jaxtyping")  # gcc_jax's own messages
def test_bad_arguments_raise_naming_them():
    code, x, f = _setup()
    with pytest.raises(ValueError, match="`method`"):
        gcc.input_order(x, "random")
    with pytest.raises(ValueError, match="scalar inputs"):
        gcc.input_order(x, "sort")
    with pytest.raises(ValueError, match="`neighbors`"):
        gcc.input_order(x, "spectral", neighbors=8)
    with pytest.raises(ValueError, match="`order`"):
        gcc.coded_apply(code, f, x, jnp.ones(20, bool), order=jnp.zeros(8, jnp.int32))
    with pytest.raises(ValueError, match="`order`"):
        gcc.monte_carlo_loss(code, f, x, jnp.ones((1, 20), bool), order=jnp.arange(7))
