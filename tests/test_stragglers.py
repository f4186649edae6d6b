import itertools

import jax
import numpy as np
import pytest

import gcc_jax as gcc
from gcc_jax.evaluation import _stragglers as stragglers_module


@pytest.mark.parametrize("n, s", [(5, 0), (10, 3), (30, 29), (7, 7)])
def test_exact_stragglers_per_row(n, s):
    m = np.asarray(gcc.sample_masks(jax.random.key(1), n, num=500, stragglers=s))
    assert m.shape == (500, n) and m.dtype == bool
    np.testing.assert_array_equal((~m).sum(axis=1), s)


def test_exact_stragglers_are_uniform():
    # every worker is dead with probability S/n: check against a binomial 5-sigma band
    n, s, num = 10, 3, 20000
    m = np.asarray(gcc.sample_masks(jax.random.key(2), n, num=num, stragglers=s))
    freq = (~m).mean(axis=0)
    sigma = np.sqrt(0.3 * 0.7 / num)
    assert np.all(np.abs(freq - 0.3) < 5 * sigma)


def test_iid_stragglers_rate_and_determinism():
    n, num, p = 50, 4000, 0.2
    m1 = np.asarray(gcc.sample_masks(jax.random.key(3), n, num=num, p=p))
    m2 = np.asarray(gcc.sample_masks(jax.random.key(3), n, num=num, p=p))
    np.testing.assert_array_equal(m1, m2)
    dead = (~m1).mean()
    assert abs(dead - p) < 5 * np.sqrt(p * (1 - p) / (n * num))


@pytest.mark.parametrize("n, s", [(6, 0), (6, 2), (9, 4), (5, 5)])
def test_contiguous_masks_match_loop(n, s):
    ref = []
    for start in range(n - s + 1):
        row = np.ones(n, bool)
        row[start : start + s] = False
        ref.append(row)
    np.testing.assert_array_equal(np.asarray(gcc.contiguous_masks(n, s)), np.array(ref))


@pytest.mark.parametrize(
    "kwargs, err",
    [
        (dict(num=3), ValueError),
        (dict(num=3, stragglers=2, p=0.1), ValueError),
        (dict(num=3, stragglers=11), ValueError),
        (dict(num=3, stragglers=-1), ValueError),
        (dict(num=3, p=1.5), ValueError),
        (dict(num=-1, p=0.5), ValueError),
        (dict(num=3, stragglers=2.0), TypeError),
    ],
)
def test_bad_input(kwargs, err):
    with pytest.raises(err):
        gcc.sample_masks(jax.random.key(0), 10, **kwargs)
    with pytest.raises(ValueError):
        gcc.contiguous_masks(4, 5)


def test_all_subsets_reachable_small():
    m = np.asarray(gcc.sample_masks(jax.random.key(4), 5, num=3000, stragglers=2))
    seen = {tuple(np.flatnonzero(~row)) for row in m}
    assert seen == set(itertools.combinations(range(5), 2))


def test_large_batches_are_sampled_blockwise_and_stay_exact(monkeypatch):
    # Blocks of 1000 rows instead of 65536: the same code path at toy size.
    monkeypatch.setattr(stragglers_module, "_BLOCK", 1000)
    m = np.asarray(gcc.sample_masks(jax.random.key(5), 6, num=2_500, stragglers=2))
    assert m.shape == (2_500, 6)
    np.testing.assert_array_equal((~m).sum(axis=1), 2)
    # the blocks are different draws, not a repeat
    assert not np.array_equal(m[:500], m[1000:1500]) and not np.array_equal(m[:500], m[2000:])
    p = np.asarray(gcc.sample_masks(jax.random.key(6), 4, num=2_500, p=0.25))
    assert abs((~p).mean() - 0.25) < 5 * np.sqrt(0.25 * 0.75 / p.size)
