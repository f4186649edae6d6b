"""UncodedCode and ReplicationCode: copies, missing results and their accounting in the loss."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from refs import fill_reference

import gcc_jax as gcc


@pytest.mark.parametrize("fill", ["zero", "mean", "interpolate"])
@pytest.mark.parametrize("seed", range(4))
def test_fill_rules_match_a_loop(fill, seed):
    rng = np.random.default_rng(seed)
    k, n = 7, 10
    code = gcc.ReplicationCode(num_inputs=k, num_workers=n, fill=fill, fill_value=-0.5)
    y = rng.normal(size=(n, 2, 3))
    for _ in range(6):
        mask = rng.random(n) < rng.uniform(0.1, 0.9)
        have = np.asarray(code.available(jnp.asarray(mask)))
        copies = [
            [y[w] for w in range(n) if w % k == i and mask[w]] or [np.zeros((2, 3))]
            for i in range(k)
        ]
        mean = np.stack([np.mean(c, axis=0) for c in copies])
        expect = fill_reference(mean, have, fill, -0.5).reshape(k, 2, 3)
        np.testing.assert_allclose(code.decode(jnp.asarray(y), mask), expect, rtol=1e-13)
        unc = gcc.UncodedCode(num_inputs=k, fill=fill, fill_value=-0.5)
        expect = fill_reference(y[:k], mask[:k], fill, -0.5).reshape(k, 2, 3)
        np.testing.assert_allclose(unc.decode(jnp.asarray(y[:k]), mask[:k]), expect, rtol=1e-13)


def test_fill_gradient_flows_through_interpolation():
    code = gcc.UncodedCode(num_inputs=4, fill="interpolate")
    mask = jnp.array([True, False, False, True])
    g = jax.grad(lambda y: code.decode(y, mask)[1, 0])(jnp.ones((4, 1)))
    np.testing.assert_allclose(np.asarray(g)[:, 0], [2 / 3, 0.0, 0.0, 1 / 3], rtol=1e-14)


def test_uncoded_missing_result_is_fill_value_and_counted_in_loss():
    code = gcc.UncodedCode(num_inputs=4, fill="zero")
    assert code.num_workers == 4
    x = jnp.array([[1.0], [2.0], [3.0], [4.0]])
    f = lambda v: jnp.concatenate([v, v**2])  # noqa: E731
    mask = jnp.array([True, False, True, False])
    yh = code.decode(jax.vmap(f)(code.encode(x)), mask)
    fx = jax.vmap(f)(x)
    np.testing.assert_array_equal(yh, jnp.where(mask[:, None], fx, 0.0))
    np.testing.assert_array_equal(code.available(mask), mask)
    # The loss counts a missing input as ‖fill − f(x_k)‖² (= ‖f(x_k)‖² for the default fill).
    loss = gcc.monte_carlo_loss(code, f, x, mask[None, :])
    expect = (np.sum(np.asarray(fx[1]) ** 2) + np.sum(np.asarray(fx[3]) ** 2)) / 4
    np.testing.assert_allclose(loss, [expect], rtol=1e-14)
    filled = gcc.UncodedCode(num_inputs=4, fill="zero", fill_value=0.5)
    np.testing.assert_array_equal(filled.decode(fx, mask)[1], [0.5, 0.5])


def test_replication_round_robin_and_mean_of_live_copies():
    code = gcc.ReplicationCode.with_replicas(num_inputs=3, replicas=2)
    assert code.num_workers == 6
    np.testing.assert_array_equal(code.assignment, [0, 1, 2, 0, 1, 2])
    x = jnp.array([[1.0], [2.0], [3.0]])
    np.testing.assert_array_equal(code.encode(x)[:, 0], [1, 2, 3, 1, 2, 3])
    y = jnp.array([[1.0], [2.0], [3.0], [5.0], [7.0], [9.0]])  # copies disagree: mean is used
    mask = jnp.array([True, False, False, True, True, False])
    np.testing.assert_allclose(code.decode(y, mask)[:, 0], [3.0, 7.0, 5.0])  # mean fill
    np.testing.assert_array_equal(code.available(mask), [True, True, False])


def test_replication_tolerates_any_r_minus_one_stragglers():
    code = gcc.ReplicationCode(num_inputs=3, num_workers=9)  # 3 copies each
    x = jnp.array([[0.5], [-1.0], [2.0]])
    masks = []
    for dead in itertools.combinations(range(9), 2):
        m = np.ones(9, bool)
        m[list(dead)] = False
        masks.append(m)
    loss = gcc.monte_carlo_loss(code, jnp.sin, x, np.stack(masks))
    assert float(np.max(loss)) < 1e-30  # the mean of identical copies, up to round-off
    # Killing all three copies of input 1 loses it.
    m = np.ones(9, bool)
    m[[1, 4, 7]] = False
    assert not bool(code.available(jnp.asarray(m))[1])


def test_uneven_replication_and_status():
    code = gcc.ReplicationCode(num_inputs=3, num_workers=5)  # inputs 0, 1 twice; 2 once
    np.testing.assert_array_equal(code.assignment, [0, 1, 2, 0, 1])
    y = jnp.arange(5.0)[:, None]
    mask = jnp.ones(5, bool).at[2].set(False)
    out = code.decode_with_status(y.at[2].set(jnp.nan), mask)  # a dead NaN is ignored
    assert int(out.status) == 0
    np.testing.assert_allclose(out.value[:, 0], [1.5, 2.5, 2.0])  # mean fill
    out = code.decode_with_status(y.at[0].set(jnp.nan), mask)  # a live NaN is flagged
    assert int(out.status) == gcc.Status.NONFINITE_DATA and bool(jnp.all(jnp.isnan(out.value)))
    with pytest.raises(gcc.GCCValueError):
        code.decode(y.at[0].set(jnp.nan), mask)


def test_validation():
    with pytest.raises(ValueError, match="num_workers"):
        gcc.ReplicationCode(num_inputs=4, num_workers=3)
    with pytest.raises(ValueError, match="`fill`"):
        gcc.ReplicationCode(num_inputs=2, num_workers=3, fill="median")
    with pytest.raises(ValueError, match="fill_value"):
        gcc.UncodedCode(num_inputs=2, fill_value=float("nan"))
