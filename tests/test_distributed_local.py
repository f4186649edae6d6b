"""`DelayModel` against its closed-form distribution; `LocalExecutor` rounds against loops."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import gcc_jax as gcc
from gcc_jax.distributed import (
    DelayModel,
    Fault,
    LocalExecutor,
    Outcome,
    default_wait_for,
    probability_check,
)


def _scipy_cdf(dm: DelayModel, t, worker):
    """The mixture CDF built from SciPy's expon / lomax (independent of DelayModel.cdf)."""
    s = dm.slowdowns[worker]
    if dm.tail == "exponential":
        base = scipy.stats.expon(loc=dm.shift, scale=dm.scale)
    else:
        base = scipy.stats.lomax(c=dm.pareto_shape, loc=dm.shift, scale=dm.scale)
    p, q, f = dm.straggle_prob, dm.fail_prob, dm.straggle_factor
    return (1 - q) * ((1 - p) * base.cdf(t / s) + p * base.cdf(t / (s * f)))


MODELS = {
    "exponential": DelayModel(num_workers=3, shift=0.01, scale=0.02, seed=1),
    "pareto": DelayModel(num_workers=3, shift=0.005, scale=0.01, tail="pareto", pareto_shape=1.5),
    "stragglers": DelayModel(
        num_workers=3, shift=0.01, scale=0.005, straggle_prob=0.2, straggle_factor=10.0, seed=2
    ),
    "slow_and_failing": DelayModel(
        num_workers=3, shift=0.01, scale=0.01, slowdown=(1.0, 4.0, 1.0), fail_prob=0.1, seed=3
    ),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_cdf_matches_scipy_mixture(name):
    dm = MODELS[name]
    t = np.linspace(0.0, 0.6, 301)
    for w in range(dm.num_workers):
        np.testing.assert_allclose(dm.cdf(t, w), _scipy_cdf(dm, t, w), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", list(MODELS))
def test_samples_follow_the_closed_form(name):
    """Kolmogorov distance of 6000 draws per worker within the DKW bound at level 1e-6."""
    dm = MODELS[name]
    rounds = 6000
    t = np.stack([dm.sample(r) for r in range(rounds)])  # (rounds, n)
    eps = np.sqrt(np.log(2 / 1e-6) / (2 * rounds))
    for w in range(dm.num_workers):
        x = np.sort(t[:, w])
        finite = x[np.isfinite(x)]
        ecdf_hi = np.arange(1, finite.size + 1) / rounds  # ECDF just after each finite draw
        ecdf_lo = np.arange(0, finite.size) / rounds
        model = dm.cdf(finite, w)
        dist = max(np.max(np.abs(ecdf_hi - model)), np.max(np.abs(model - ecdf_lo)))
        assert dist < eps, (w, dist, eps)
        # the mass at infinity is the failure probability
        assert abs(np.mean(~np.isfinite(t[:, w])) - dm.fail_prob) < eps
    if dm.straggle_prob == dm.fail_prob == 0 and dm.tail == "exponential":
        pvalue = scipy.stats.kstest(t[:, 0], lambda v: dm.cdf(v, 0)).pvalue
        assert pvalue > 1e-4


def test_sampling_is_reproducible_by_seed_and_round():
    dm = DelayModel(num_workers=6, shift=0.01, scale=0.01, straggle_prob=0.3, seed=7)
    a = [dm.sample(r) for r in (5, 2, 9)]
    b = [dm.sample(r) for r in (9, 5, 2)]  # any call order
    np.testing.assert_array_equal(a[0], b[1])
    np.testing.assert_array_equal(a[2], b[0])
    assert not np.array_equal(dm.sample(0), dm.sample(1))
    other = DelayModel(num_workers=6, shift=0.01, scale=0.01, straggle_prob=0.3, seed=8)
    assert not np.array_equal(dm.sample(0), other.sample(0))


def test_with_slow_workers_picks_by_seed():
    dm = DelayModel.with_slow_workers(8, 3, 10.0, shift=0.01, seed=4)
    assert sorted(dm.slowdown) == [1.0] * 5 + [10.0] * 3
    assert DelayModel.with_slow_workers(8, 3, 10.0, seed=4).slowdown == dm.slowdown
    # a persistent slow worker is exactly `factor` times slower than with no slowdown
    fast = DelayModel(num_workers=8, shift=0.01, seed=4)
    slow = np.flatnonzero(dm.slowdowns == 10.0)
    np.testing.assert_allclose(dm.sample(3)[slow], 10.0 * fast.sample(3)[slow], rtol=1e-15)


def test_wait_for_n_minus_s_matches_order_statistic_closed_form():
    """E[T_(N−S):N] = shift + scale (H_N − H_S) for i.i.d. shifted exponentials."""
    n, s, rounds = 10, 3, 1000
    dm = DelayModel(num_workers=n, shift=0.002, scale=0.01, seed=11)
    ex = LocalExecutor(lambda v: v * 2.0, num_workers=n, delays=dm)
    xt = jnp.arange(float(n))[:, None]
    elapsed = np.empty(rounds)
    for r in range(rounds):
        res = ex.run_round(xt, wait_for=n - s, timeout_s=10.0)
        assert res.round_id == r
        # the cut-off is the (N−S)-th smallest sampled latency, exactly
        assert res.elapsed == np.sort(dm.sample(r))[n - s - 1]
        elapsed[r] = res.elapsed
    harmonic = lambda m: np.sum(1.0 / np.arange(1, m + 1))  # noqa: E731
    expected = dm.shift + dm.scale * (harmonic(n) - harmonic(s))
    se = elapsed.std(ddof=1) / np.sqrt(rounds)
    assert abs(elapsed.mean() - expected) < 4 * se, (elapsed.mean(), expected, se)


def test_round_outputs_mask_and_latencies_match_a_loop():
    n = 7
    dm = DelayModel(num_workers=n, shift=0.01, scale=0.02, straggle_prob=0.3, seed=5)
    f = lambda v: jnp.array([jnp.sin(v[0]), v[0] * v[1]])  # noqa: E731
    ex = LocalExecutor(f, num_workers=n, delays=dm)
    xt = jax.random.normal(jax.random.key(0), (n, 2))
    res = ex.run_round(xt, wait_for=4, timeout_s=10.0, round_id=12)
    lat = dm.sample(12)
    order = np.argsort(lat, kind="stable")
    first = np.zeros(n, bool)
    first[order[:4]] = True
    np.testing.assert_array_equal(res.mask, first)
    ref = np.stack([np.asarray(f(x)) for x in xt])
    np.testing.assert_allclose(res.outputs[first], ref[first], rtol=1e-12)
    np.testing.assert_array_equal(res.outputs[~first], 0.0)
    np.testing.assert_array_equal(res.latencies[first], lat[first])
    assert np.all(np.isinf(res.latencies[~first]))
    assert res.rule_met and not res.timed_out
    assert set(res.workers_with(Outcome.LATE)) == set(np.flatnonzero(~first))
    assert res.summary().startswith("4/7 workers answered")


def test_faults_are_stragglers_and_the_round_waits_for_good_results():
    n = 8
    dm = DelayModel(num_workers=n, shift=0.01, seed=0)  # equal latencies: arrival by index
    faults = [
        Fault(0, "nan"),
        Fault(1, "garbage"),
        Fault(2, "malformed"),
        Fault(3, "error"),
        Fault(4, "crash", first_round=0, last_round=0),
        Fault(5, "hang"),
    ]
    f = lambda v: jax.nn.softmax(v)  # noqa: E731
    ex = LocalExecutor(f, num_workers=n, delays=dm, faults=faults, validate=probability_check())
    xt = jax.random.normal(jax.random.key(1), (n, 3))
    res = ex.run_round(xt, wait_for=2, timeout_s=1.0)
    assert res.answered == (6, 7), res.issues()  # the bad ones did not count towards the two
    expected = {
        0: Outcome.NONFINITE,
        1: Outcome.INVALID,
        2: Outcome.INVALID,
        3: Outcome.ERROR,
        4: Outcome.DEAD,
        5: Outcome.LATE,
    }
    for w, outcome in expected.items():
        assert res.outcomes[w] == outcome, (w, res.issues())
    assert res.restarted == (4,)
    assert "NaN" in res.messages[0] and "shape" in res.messages[2]
    np.testing.assert_allclose(res.outputs[6:], np.asarray(jax.vmap(f)(xt[6:])), rtol=1e-12)
    # the crash was round 0 only; the hang never answers, so waiting for all times out
    res = ex.run_round(xt, wait_for=n, timeout_s=0.5)
    assert res.outcomes[4] == Outcome.OK and res.outcomes[5] == Outcome.LATE
    assert res.timed_out and not res.rule_met and res.elapsed == 0.5
    # without a validator, finite garbage cannot be told apart from an answer
    ex = LocalExecutor(f, num_workers=n, delays=dm, faults=[Fault(1, "garbage")])
    res = ex.run_round(xt, wait_for=n, timeout_s=1.0)
    assert res.outcomes[1] == Outcome.OK and np.abs(res.outputs[1]).max() > 1.5


def test_all_arrived_without_meeting_the_rule_is_not_a_timeout():
    ex = LocalExecutor(jnp.tanh, num_workers=3, faults=[Fault(0, "nan"), Fault(1, "nan")])
    res = ex.run_round(jnp.ones((3, 2)), wait_for=2, timeout_s=5.0)
    assert not res.rule_met and not res.timed_out and res.answered == (2,)
    assert res.elapsed == 0.0


def test_one_function_per_worker():
    fns = [jnp.sin, jnp.cos, jnp.sin, jnp.exp]
    ex = LocalExecutor(fns, num_workers=4)
    xt = jnp.linspace(0.1, 0.4, 4)[:, None]
    res = ex.run_round(xt, wait_for=4)
    ref = np.stack([np.asarray(g(x)) for g, x in zip(fns, xt, strict=True)])
    np.testing.assert_allclose(res.outputs, ref, rtol=1e-12)


def test_sleep_makes_the_round_take_its_model_time():
    import time

    dm = DelayModel(num_workers=3, shift=0.05, seed=0)
    ex = LocalExecutor(jnp.tanh, num_workers=3, delays=dm, sleep=True)
    ex.run_round(jnp.ones((3, 1)), wait_for=3)  # compile
    t0 = time.perf_counter()
    res = ex.run_round(jnp.ones((3, 1)), wait_for=3)
    assert res.elapsed == pytest.approx(0.05)
    assert time.perf_counter() - t0 >= 0.05


def test_default_wait_rules_follow_the_codes():
    spline = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=9)
    assert default_wait_for(spline, 2) == 7
    assert default_wait_for(spline) == 9
    rep = gcc.ReplicationCode(num_inputs=3, num_workers=7)
    rule = default_wait_for(rep)
    masks = np.asarray(gcc.sample_masks(jax.random.key(2), 7, num=200, p=0.5))
    for m in masks:  # "every input has a live copy": worker n holds input n mod 3
        assert rule(m) == all(any(m[w] for w in range(7) if w % 3 == k) for k in range(3))
    assert rule(masks[0]) == bool(np.all(np.asarray(rep.available(jnp.asarray(masks[0])))))
    unc = default_wait_for(gcc.UncodedCode(num_inputs=4))
    assert unc(np.ones(4, bool)) and not unc(np.array([True, True, False, True]))
    assert repr(unc) == "wait for all 4"


def test_probability_check():
    ok = probability_check(atol=1e-6)
    assert ok(np.array([0.25, 0.75]))
    assert not ok(np.array([0.5, 0.6]))
    assert not ok(np.array([1.5, -0.5]))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_workers=0), "num_workers"),
        (dict(num_workers=2, shift=-1.0), "shift"),
        (dict(num_workers=2, scale=float("inf")), "scale"),
        (dict(num_workers=2, tail="gamma"), "tail"),
        (dict(num_workers=2, straggle_prob=1.5), "straggle_prob"),
        (dict(num_workers=2, straggle_factor=0.5), "straggle_factor"),
        (dict(num_workers=2, slowdown=(1.0,)), "slowdown"),
        (dict(num_workers=2, slowdown=(1.0, 0.0)), "slowdown"),
        (dict(num_workers=2, fail_prob=-0.1), "fail_prob"),
        (dict(num_workers=2, pareto_shape=0.0), "pareto_shape"),
    ],
)
def test_delay_model_rejects_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DelayModel(**kwargs)


def test_bad_arguments_give_clear_errors():
    with pytest.raises(ValueError, match="kind"):
        Fault(0, "explode")
    with pytest.raises(ValueError, match="last_round"):
        Fault(0, "nan", first_round=3, last_round=2)
    with pytest.raises(ValueError, match="only 2 workers"):
        LocalExecutor(jnp.sin, num_workers=2, faults=[Fault(5, "nan")])
    with pytest.raises(ValueError, match="models 3 workers"):
        LocalExecutor(jnp.sin, num_workers=2, delays=DelayModel(num_workers=3))
    with pytest.raises(ValueError, match="sequence of 3"):
        LocalExecutor([jnp.sin], num_workers=3)
    ex = LocalExecutor(jnp.sin, num_workers=3)
    with pytest.raises(ValueError, match="one row per worker"):
        ex.run_round(jnp.ones((4, 1)), wait_for=2)
    with pytest.raises(ValueError, match="wait_for"):
        ex.run_round(jnp.ones((3, 1)), wait_for=4)
    with pytest.raises(TypeError, match="wait_for"):
        ex.run_round(jnp.ones((3, 1)), wait_for=2.5)
    with pytest.raises(ValueError, match="timeout_s"):
        ex.run_round(jnp.ones((3, 1)), wait_for=2, timeout_s=float("inf"))
    with pytest.raises(ValueError, match="round_id"):
        ex.run_round(jnp.ones((3, 1)), wait_for=2, round_id=-1)
    with pytest.raises(ValueError, match="stragglers"):
        default_wait_for(gcc.SplineCode.chebyshev(num_inputs=2, num_workers=4), 4)
