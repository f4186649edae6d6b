"""Adversaries: fixed strategies against NumPy, the gradient attack against vertex enumeration,
the worst-case position search against a brute-force loop."""

import itertools

import jax
import jax.numpy as jnp
import jaxtyping
import numpy as np
import pytest

import gcc_jax as gcc

KEY = jax.random.key(0)


def _job(n=12, k=3, lam=1e-3):
    code = gcc.SplineCode.chebyshev(num_inputs=k, num_workers=n, lam_dec=lam)
    x = np.linspace(-1.0, 1.0, k)[:, None] * np.array([[1.0, 0.5]])
    return code, np.asarray(code.worker_outputs(jnp.sin, x)), np.sin(x)


def _loss(code, y, fx, mask=None):
    mask = np.ones(code.num_workers, bool) if mask is None else mask
    return float(np.sum((np.asarray(code.decode(y, mask)) - fx) ** 2) / fx.shape[0])


@pytest.mark.parametrize("strategy", ["max", "sign_flip", "random", "bias"])
def test_fixed_strategies_match_numpy(strategy):
    code, yt, fx = _job()
    adv = np.zeros(12, bool)
    adv[[2, 3, 9]] = True
    m = 0.8
    y = np.asarray(gcc.attack(code, yt, fx, adv, gcc.Adversary(m, strategy), key=KEY))
    np.testing.assert_array_equal(y[~adv], yt[~adv])
    assert np.all(np.abs(y[adv]) <= m + 1e-15)
    if strategy == "max":
        np.testing.assert_array_equal(y[adv], m)
    elif strategy == "sign_flip":
        np.testing.assert_allclose(y[adv], np.clip(-yt[adv], -m, m))
    elif strategy == "bias":
        np.testing.assert_allclose(y[adv], np.clip(yt[adv] + m, -m, m))
    else:
        assert np.unique(y[adv]).size == y[adv].size  # random, all distinct
    loss, status = gcc.attack_loss(code, yt, fx, adv, gcc.Adversary(m, strategy), key=KEY)
    assert int(status) == 0
    assert float(loss) == pytest.approx(_loss(code, y, fx), rel=1e-10)


def test_pgd_reaches_the_best_vertex_of_a_linear_decoder():
    # For a linear decoder the loss is a convex quadratic in the adversaries' outputs, so its
    # maximum over the box is at a vertex: enumerate all 2^(γ m) = 16 vertices.
    code, yt, fx = _job()
    adv = np.zeros(12, bool)
    adv[[4, 7]] = True
    m = 1.0
    best = 0.0
    for signs in itertools.product([-m, m], repeat=4):
        y = yt.copy()
        y[adv] = np.reshape(signs, (2, 2))
        best = max(best, _loss(code, y, fx))
    adversary = gcc.Adversary(m, "pgd", steps=60)
    y = np.asarray(gcc.attack(code, yt, fx, adv, adversary, key=KEY))
    assert np.all(np.abs(y[adv]) <= m + 1e-12)
    assert _loss(code, y, fx) >= 0.999 * best
    for s in ["max", "sign_flip", "random", "bias"]:
        fixed, _ = gcc.attack_loss(code, yt, fx, adv, gcc.Adversary(m, s), key=KEY)
        assert _loss(code, y, fx) >= float(fixed) - 1e-12


def test_worst_case_positions_match_brute_force():
    code, yt, fx = _job()  # n = 12, the other tests' job: their compiled programs serve
    adversary = gcc.Adversary(1.0, "max")
    res = gcc.worst_case_adversaries(code, yt, fx, adversary, 2)
    losses = {}
    for pos in itertools.combinations(range(12), 2):
        adv = np.zeros(12, bool)
        adv[list(pos)] = True
        y = yt.copy()
        y[adv] = 1.0
        losses[pos] = _loss(code, y, fx)
    worst = max(losses, key=losses.get)
    assert res.exhaustive and res.num_evaluated == 66  # C(12, 2)
    assert tuple(np.flatnonzero(res.adversaries)) == worst
    assert res.loss == pytest.approx(losses[worst], rel=1e-10)
    np.testing.assert_allclose(res.outputs[res.adversaries], 1.0)
    # heuristic search (forced) finds a lower bound no larger than the exact worst case
    heur = gcc.worst_case_adversaries(code, yt, fx, adversary, 2, search={"max_exhaustive": 0})
    assert not heur.exhaustive and heur.loss <= res.loss + 1e-12


def test_positions_and_errors():
    adv = np.asarray(gcc.adversary_positions(KEY, 20, 5))
    assert adv.sum() == 5
    block = np.flatnonzero(gcc.adversary_positions(KEY, 20, 5, kind="contiguous"))
    assert block.size == 5 and np.all(np.diff(block) == 1)
    with pytest.raises(ValueError, match="kind"):
        gcc.adversary_positions(KEY, 20, 5, kind="spread")
    with pytest.raises(ValueError, match="strategy"):
        gcc.Adversary(1.0, "nope")
    with pytest.raises(ValueError, match="bound"):
        gcc.Adversary(-1.0, "max")
    code, yt, fx = _job()
    with pytest.raises(ValueError, match="fx"):
        gcc.attack(code, yt, fx[:2], np.zeros(12, bool), gcc.Adversary(1.0, "max"), key=KEY)
    with pytest.raises(TypeError, match="adversaries"):
        gcc.attack(code, yt, fx, np.zeros(12), gcc.Adversary(1.0, "max"), key=KEY)


def test_targeted_attack_is_the_exact_worst_case_of_one_estimate():
    # K = 2, one output coordinate, n = 9, γ = 2: brute force over all 36 position sets and
    # their 4 vertices (the loss is convex in the values, so vertices suffice).
    n, k, g, m = 9, 2, 2, 1.5
    code = gcc.SplineCode.chebyshev(num_inputs=k, num_workers=n, lam_dec=1e-3)
    x = np.array([[-0.7], [0.4]])
    yt, fx = np.asarray(code.worker_outputs(jnp.sin, x)), np.sin(x)
    d = np.asarray(code.decoder_matrix_with_status(np.ones(n, bool))[0])
    worst_loss, worst_dev = 0.0, 0.0
    for pos in itertools.combinations(range(n), g):
        for vals in itertools.product([-m, m], repeat=g):
            y = yt.copy()
            y[list(pos), 0] = vals
            dev = d @ y - fx
            worst_loss = max(worst_loss, float(np.sum(dev**2) / k))
            worst_dev = max(worst_dev, float(np.abs(dev).max()))
    res = gcc.targeted_attack(code, yt, fx, m, g)
    assert int(res.adversaries.sum()) == g and res.status == 0
    y = np.asarray(res.outputs)
    assert np.all(np.abs(y[res.adversaries]) == m)
    np.testing.assert_array_equal(y[~res.adversaries], yt[~res.adversaries])
    assert res.loss == pytest.approx(float(np.sum((d @ y - fx) ** 2) / k), rel=1e-10)
    # it reaches the largest deviation of any one estimate, and never exceeds the true worst
    dev = np.abs(d @ y - fx).max()
    assert dev == pytest.approx(worst_dev, rel=1e-10)
    assert worst_dev**2 / k <= res.loss * (1 + 1e-10) and res.loss <= worst_loss * (1 + 1e-10)


def test_targeted_attack_transfers_to_a_robust_decoder_and_checks_its_surrogate():
    code, yt, fx = _job()
    rob = gcc.RobustSplineCode.from_spline(code, loss="trim", trim=2)
    res = gcc.targeted_attack(rob, yt, fx, 1.0, 2, surrogate=code)
    assert res.loss == pytest.approx(_loss(rob, np.asarray(res.outputs), fx), rel=1e-10)
    with pytest.raises(TypeError, match="`surrogate` must be a linear code"):
        gcc.targeted_attack(rob, yt, fx, 1.0, 2)
    small = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=10)
    with pytest.raises(ValueError, match="`surrogate` must have the sizes"):
        gcc.targeted_attack(rob, yt, fx, 1.0, 2, surrogate=small)


_PUBLIC = {  # every public adversary function, called with `code` and honest outputs (n = 12)
    "attack": lambda c, yt, fx: gcc.attack(
        c, yt, fx, np.eye(12, dtype=bool)[0], gcc.Adversary(1.0, "max"), key=KEY
    ),
    "attack_loss": lambda c, yt, fx: gcc.attack_loss(
        c, yt, fx, np.eye(12, dtype=bool)[0], gcc.Adversary(1.0, "max"), key=KEY
    ),
    "attack_losses": lambda c, yt, fx: gcc.attack_losses(
        c, yt, fx, np.eye(12, dtype=bool)[:2], gcc.Adversary(1.0, "max"), key=KEY
    ),
    "worst_case_adversaries": lambda c, yt, fx: gcc.worst_case_adversaries(
        c, yt, fx, gcc.Adversary(1.0, "max"), 1
    ),
    "targeted_attack": lambda c, yt, fx: gcc.targeted_attack(c, yt, fx, 1.0, 1),
}


@pytest.mark.parametrize("name", list(_PUBLIC))
def test_code_is_annotated_abstract_code(name, request):
    """`code` is annotated :class:`gcc_jax.AbstractCode` (checked at run time under ``make
    test``'s jaxtyping hook); a real code passes the check."""
    code, yt, fx = _job()
    _PUBLIC[name](code, yt, fx)
    with pytest.raises(TypeError) as info:
        _PUBLIC[name](object(), yt, fx)
    if request.config.getoption("jaxtyping_packages", None):
        assert isinstance(info.value, jaxtyping.TypeCheckError)
        assert "parameter 'code'" in str(info.value) and "AbstractCode" in str(info.value)
    else:  # no runtime annotation checks: gcc_jax's own message
        assert "`code` must be a gcc_jax code" in str(info.value)


@pytest.mark.parametrize("name", list(_PUBLIC))
@pytest.mark.usefixtures("without_jaxtyping")  # gcc_jax's own messages, not the annotations'
def test_a_non_code_gets_gcc_jax_own_message(name):
    _, yt, fx = _job()
    with pytest.raises(TypeError, match="`code` must be a gcc_jax code"):
        _PUBLIC[name](object(), yt, fx)
