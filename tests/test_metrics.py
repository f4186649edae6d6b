"""Metrics (`gcc_jax.evaluation`): hand-computed values, NumPy/SciPy references, transforms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from scipy import stats

import gcc_jax as gcc


def test_mse_rmse_hand_values():
    # errors per input: (3, 4) -> norm 5; (0, 0) -> 0; (1, 0) -> 1
    y = np.array([[1.0, 1.0], [2.0, 2.0], [0.0, 5.0]])
    y_hat = y + np.array([[3.0, 4.0], [0.0, 0.0], [1.0, 0.0]])
    assert float(gcc.mean_l2_error(y_hat, y)) == pytest.approx((5.0 + 0.0 + 1.0) / 3, rel=1e-15)
    assert float(gcc.mse(y_hat, y)) == pytest.approx((25.0 + 0.0 + 1.0) / 3, rel=1e-15)
    # RMSE is sqrt(MSE); LeTCC's "RMSE" is the mean of the norms, a different number
    assert float(gcc.rmse(y_hat, y)) == pytest.approx(np.sqrt(26.0 / 3), rel=1e-15)


@pytest.mark.parametrize("shape", [(5, 3), (4, 2, 3), (6, 1)])
def test_mse_rmse_match_numpy_loop(shape):
    rng = np.random.default_rng(0)
    y, y_hat = rng.standard_normal(shape), rng.standard_normal(shape)
    norms = [np.sqrt(np.sum((y_hat[k] - y[k]) ** 2)) for k in range(shape[0])]
    np.testing.assert_allclose(gcc.mean_l2_error(y_hat, y), np.mean(norms), rtol=1e-13)
    np.testing.assert_allclose(gcc.mse(y_hat, y), np.mean(np.square(norms)), rtol=1e-13)
    np.testing.assert_allclose(
        gcc.rmse(y_hat, y), np.sqrt(np.mean((y_hat - y) ** 2) * np.prod(shape[1:])), rtol=1e-13
    )


def test_mse_rmse_equal_monte_carlo_loss_definition():
    code = gcc.BerrutCode.chebyshev(num_inputs=4, num_workers=12)
    x = jnp.linspace(-1.0, 1.0, 4)[:, None] * jnp.ones((4, 2))
    mask = jnp.ones(12, bool).at[jnp.array([2, 7])].set(False)
    loss = gcc.monte_carlo_loss(code, jnp.sin, x, mask[None])[0]
    y_hat = gcc.coded_apply(code, jnp.sin, x, mask)
    np.testing.assert_allclose(gcc.mse(y_hat, jnp.sin(x)), loss, rtol=1e-12)


def test_metric_transforms():
    rng = np.random.default_rng(1)
    y = jnp.asarray(rng.standard_normal((4, 3)))
    stack = jnp.asarray(rng.standard_normal((5, 4, 3)))
    for fn in (gcc.rmse, gcc.mean_l2_error, gcc.mse):
        np.testing.assert_allclose(jax.jit(fn)(stack[0], y), fn(stack[0], y), rtol=1e-14)
        batched = jax.vmap(fn, in_axes=(0, None))(stack, y)
        np.testing.assert_allclose(batched, [fn(s, y) for s in stack], rtol=1e-14)
        # jitted: the derivatives are checked on the compiled function (eager dispatch is slow);
        # both modes, second order in forward mode (rev-over-rev compiles as much again)
        jitted = jax.jit(lambda a, fn=fn: fn(a, y))
        check_grads(jitted, (stack[0],), order=1, modes=("rev",))
        check_grads(jitted, (stack[0],), order=2, modes=("fwd",))
    # a zero error has a finite (zero) gradient, not NaN
    for fn in (gcc.rmse, gcc.mean_l2_error):
        g = jax.grad(fn)(y, y)
        assert np.all(np.asarray(g) == 0.0)


@pytest.mark.usefixtures("without_jaxtyping")  # gcc_jax's own messages, not the annotations'
def test_mse_rmse_reject_mismatched_shapes():
    with pytest.raises(ValueError, match="one shape"):
        gcc.rmse(np.zeros((3, 2)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="one shape"):
        gcc.mean_l2_error(np.zeros((3, 2)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="one shape"):
        gcc.mse(np.zeros((3,)), np.zeros((4,)))


def test_rel_acc_hand_values():
    y = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]])  # base predicts 0, 1, 0, 1
    labels = np.array([0, 0, 0, 1])  # base correct on inputs 0, 2, 3 -> 3 hits
    y_hat = np.array([[0.7, 0.3], [0.6, 0.4], [0.1, 0.9], [0.2, 0.8]])  # decoded: 0, 0, 1, 1
    # decoded correct on inputs 0, 1, 3 -> 3 hits: RelAcc = 3 / 3
    assert float(gcc.rel_acc(y_hat, y, labels)) == pytest.approx(1.0)
    # against the base argmax: agreement on inputs 0, 3 -> 2 / 4
    assert float(gcc.rel_acc(y_hat, y)) == pytest.approx(0.5)
    # input 3 missing -> wrong: 2 / 3 against labels, 1 / 4 against the base
    avail = np.array([True, True, True, False])
    assert float(gcc.rel_acc(y_hat, y, labels, available=avail)) == pytest.approx(2 / 3)
    assert float(gcc.rel_acc(y_hat, y, available=avail)) == pytest.approx(0.25)
    # a NaN estimate (failed decode) is wrong too, whatever argmax says
    bad = y_hat.copy()
    bad[0] = np.nan
    assert float(gcc.rel_acc(bad, y, labels)) == pytest.approx(2 / 3)


def test_rel_acc_pools_trials_as_a_ratio_of_totals():
    rng = np.random.default_rng(2)
    p, k, c = 6, 5, 4
    y = rng.random((k, c))
    labels = rng.integers(0, c, k)
    labels[0] = np.argmax(y[0])  # the base model gets at least one right
    y_hat = y[None] + 0.5 * rng.standard_normal((p, k, c))
    avail = rng.random((p, k)) > 0.2
    hits = sum(
        int(np.argmax(y_hat[t, i]) == labels[i] and avail[t, i]) for t in range(p) for i in range(k)
    )
    base_hits = p * sum(int(np.argmax(y[i]) == labels[i]) for i in range(k))
    got = gcc.rel_acc(y_hat, y, labels, available=avail)
    np.testing.assert_allclose(got, hits / base_hits, rtol=1e-14)


def test_rel_acc_undefined():
    y = np.array([[0.9, 0.1], [0.8, 0.2]])
    assert np.isnan(float(gcc.rel_acc(y, y, np.array([1, 1]))))  # base never right


@pytest.mark.usefixtures("without_jaxtyping")  # gcc_jax's own messages, not the annotations'
def test_rel_acc_bad_input():
    y = np.array([[0.9, 0.1], [0.8, 0.2]])
    with pytest.raises(ValueError, match="classes last"):
        gcc.rel_acc(np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="broadcast"):
        gcc.rel_acc(np.zeros((2, 3)), np.zeros((4, 3)))
    with pytest.raises(TypeError, match="boolean"):
        gcc.rel_acc(y, y, available=np.array([1, 0]))
    with pytest.raises(TypeError, match="integers"):
        gcc.rel_acc(y, y, np.array([0.0, 1.0]))


def test_mean_ci_one_dimensional_matches_scipy_t_interval():
    v = np.array([0.3, 0.1, 0.4, 0.1, 0.5, 0.9, 0.2])
    mean, half = gcc.mean_ci(v)
    lo, hi = stats.t.interval(0.95, len(v) - 1, loc=v.mean(), scale=stats.sem(v))
    assert mean == pytest.approx(v.mean(), rel=1e-14)
    assert half == pytest.approx((hi - lo) / 2, rel=1e-12)


def test_mean_ci_clusters_are_rows():
    rng = np.random.default_rng(3)
    table = rng.random((5, 8))
    mean, half = gcc.mean_ci(table, level=0.9)
    rows = table.mean(axis=1)
    lo, hi = stats.t.interval(0.9, 4, loc=rows.mean(), scale=stats.sem(rows))
    assert mean == pytest.approx(table.mean(), rel=1e-14)
    assert half == pytest.approx((hi - lo) / 2, rel=1e-12)
    # one row: its entries are the samples
    assert gcc.mean_ci(table[:1]) == pytest.approx(gcc.mean_ci(table[0]), rel=1e-14)
    # fewer than two samples: no interval
    assert np.isnan(gcc.mean_ci(np.array([1.0]))[1])


def test_ratio_ci_hand_formula():
    num = np.array([[1.0, 2.0], [3.0, 1.0], [0.0, 2.0]])  # cluster totals y = 3, 4, 2
    den = np.array([[2.0, 2.0], [2.0, 1.0], [1.0, 1.0]])  # x = 4, 3, 2
    r, half = gcc.ratio_ci(num, den)
    assert r == pytest.approx(9.0 / 9.0)
    resid = np.array([3.0, 4.0, 2.0]) - r * np.array([4.0, 3.0, 2.0])
    se = np.sqrt(np.sum(resid**2) / (3 * 2)) / 3.0
    assert half == pytest.approx(stats.t.ppf(0.975, 2) * se, rel=1e-12)
    assert np.isnan(gcc.ratio_ci(np.ones(3), np.zeros(3))[0])
    with pytest.raises(ValueError, match="level"):
        gcc.ratio_ci(num, den, level=1.5)
