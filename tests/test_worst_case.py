"""worst_case_mask: exhaustive search equals brute force; the heuristic is a lower bound."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gcc_jax as gcc
from gcc_jax.evaluation import THOROUGH_SEARCH, SearchBudget


def xsinx(v):
    return v * jnp.sin(v)


def brute_force(code, f, x, s):
    """Every S-subset through the public monte_carlo_loss; returns (max loss, its masks)."""
    n = code.num_workers
    masks = []
    for dead in itertools.combinations(range(n), s):
        m = np.ones(n, bool)
        m[list(dead)] = False
        masks.append(m)
    masks = np.stack(masks)
    loss = gcc.monte_carlo_loss(code, f, x, masks)
    return float(loss.max()), masks[loss == loss.max()]


CODES = {
    "GCC": lambda n: gcc.SplineCode.chebyshev(num_inputs=4, num_workers=n),
    "BACC": lambda n: gcc.BerrutCode.chebyshev(num_inputs=4, num_workers=n),
}


@pytest.fixture(scope="module")
def x():
    return jax.random.uniform(jax.random.key(0), (4, 1), minval=-3.0, maxval=3.0)


@pytest.mark.parametrize("name", ["GCC", "BACC"])
def test_exhaustive_equals_brute_force(name, x):
    code = CODES[name](11)
    wc = gcc.worst_case_mask(code, xsinx, x, stragglers=3)
    assert wc.exhaustive and wc.num_evaluated == math.comb(11, 3)
    best, argmax = brute_force(code, xsinx, x, 3)
    np.testing.assert_allclose(wc.loss, best, rtol=1e-12)
    assert any(np.array_equal(wc.mask, m) for m in argmax)
    assert int((~wc.mask).sum()) == 3 and wc.status == 0


@pytest.mark.parametrize("name", ["GCC", "BACC"])
def test_heuristic_is_a_lower_bound_and_finds_the_brute_force_maximum(name, x):
    code = CODES[name](11)  # the exhaustive test's sizes: its compiled programs serve
    best, _ = brute_force(code, xsinx, x, 3)
    budget = THOROUGH_SEARCH._replace(max_exhaustive=0, proposals=64)
    wc = gcc.worst_case_mask(code, xsinx, x, stragglers=3, key=jax.random.key(1), search=budget)
    assert not wc.exhaustive and int((~wc.mask).sum()) == 3
    # decodes: the N − S + 1 contiguous blocks, the restarts, then S(N − S) swaps per chain and
    # step (the full neighbourhood: 24 ≤ 64 proposals) for at most max_iters steps
    steps, extra = divmod(wc.num_evaluated - (11 - 3 + 1) - budget.restarts, budget.restarts * 24)
    assert extra == 0 and 1 <= steps <= budget.max_iters
    assert wc.loss <= best * (1 + 1e-12)
    np.testing.assert_allclose(wc.loss, best, rtol=1e-9)


def test_heuristic_full_neighbourhood_and_determinism(x):
    code = CODES["BACC"](12)
    # a mapping overrides some fields of the default budget
    kw = dict(stragglers=2, search=dict(max_exhaustive=0, proposals=1000), key=jax.random.key(3))
    a = gcc.worst_case_mask(code, xsinx, x, **kw)  # S(N−S) = 20 ≤ proposals: full swaps
    b = gcc.worst_case_mask(code, xsinx, x, **kw)
    assert a.loss == b.loss and np.array_equal(a.mask, b.mask)
    best, _ = brute_force(code, xsinx, x, 2)
    np.testing.assert_allclose(a.loss, best, rtol=1e-12)


def test_undecodable_patterns_are_the_worst():
    code = gcc.LagrangeCode.chebyshev(num_inputs=3, num_workers=7, degree=2)  # r = 5
    x = jnp.array([[0.1], [0.5], [-0.4]])
    ok = gcc.worst_case_mask(code, jnp.square, x, stragglers=2)
    assert ok.loss < 1e-20 and ok.status == 0
    bad = gcc.worst_case_mask(code, jnp.square, x, stragglers=3)
    assert bad.loss == np.inf and bad.status == gcc.Status.BELOW_RECOVERY_THRESHOLD


def test_edge_cases_and_validation(x):
    code = CODES["BACC"](6)
    none = gcc.worst_case_mask(code, xsinx, x, stragglers=0)
    assert none.mask.all() and none.num_evaluated == 1
    with pytest.raises(ValueError, match="stragglers"):
        gcc.worst_case_mask(code, xsinx, x, stragglers=7)
    with pytest.raises(ValueError, match="restarts"):
        gcc.worst_case_mask(code, xsinx, x, stragglers=1, search=SearchBudget(restarts=0))
    with pytest.raises(ValueError, match="unknown settings"):
        gcc.worst_case_mask(code, xsinx, x, stragglers=1, search=dict(restart=2))
    with pytest.raises(TypeError, match="SearchBudget"):
        gcc.worst_case_mask(code, xsinx, x, stragglers=1, search=[1, 2])


def test_local_search_is_one_compiled_program_reused_for_new_lams(x):
    """The heuristic search runs as one compiled program (its steps a ``lax.while_loop`` on the
    device); a code with new λs and nodes of the same structure reuses it, and the result still
    matches brute force."""
    from gcc_jax.evaluation import _worst_case

    budget = dict(max_exhaustive=0, proposals=1000)  # the full neighbourhood: S(N − S) = 24
    search = _worst_case._local_search_on(())
    a = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=11, lam_dec=1e-3)
    gcc.worst_case_mask(a, xsinx, x, stragglers=3, search=budget)
    size = search._cache_size()
    assert size >= 1  # this is the program the search ran
    b = gcc.SplineCode(alpha=a.alpha * 0.9, beta=a.beta, lam_enc=1e-4, lam_dec=1e-2)
    wc = gcc.worst_case_mask(b, xsinx, x, stragglers=3, search=budget)
    assert search._cache_size() == size
    best, _ = brute_force(b, xsinx, x, 3)
    assert wc.loss <= best * (1 + 1e-12)
