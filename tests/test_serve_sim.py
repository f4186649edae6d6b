"""The serving-cluster model (gcc_jax.distributed.simulate) against queueing theory and against
its SimPy reference engine."""

import math

import numpy as np
import pytest

from gcc_jax.distributed import (
    SIM_SCHEMES,
    Background,
    ServiceTime,
    cluster_sizes,
    simulate,
)


def erlang_c_sojourn(c: int, lam: float, mu: float) -> float:
    """Mean time in an M/M/c system (Erlang C waiting probability), by the textbook formula."""
    a = lam / mu
    rho = a / c
    head = sum(a**n / math.factorial(n) for n in range(c))
    tail = a**c / (math.factorial(c) * (1.0 - rho))
    wait_prob = tail / (head + tail)
    return wait_prob / (c * mu - lam) + 1.0 / mu


def batch_means_halfwidth(x: np.ndarray, batches: int = 50) -> float:
    """A 95% half-width for the mean of a correlated sequence (batch means)."""
    means = x[: len(x) // batches * batches].reshape(batches, -1).mean(axis=1)
    return 1.96 * means.std(ddof=1) / math.sqrt(batches)


@pytest.mark.parametrize(("c", "rho"), [(1, 0.5), (4, 0.7)])
def test_mmc_sojourn_matches_erlang_c(c, rho):
    """M/M/1 and M/M/c (uncoded, exponential work, no background) within 2% of theory, with a
    batch-means CI narrower than that tolerance (so the 2% is a real check)."""
    mu = 100.0  # 10 ms mean work
    lam = rho * c * mu
    r = simulate(
        "uncoded",
        instances=c,
        k=1,
        rate=lam,
        num_queries=300_000,
        service=ServiceTime(shift=0.0, scale=1.0 / mu),
        seed=3,
    )
    lat = r.latency_s[10_000:]  # past the empty start
    theory = erlang_c_sojourn(c, lam, mu)
    assert abs(lat.mean() / theory - 1.0) < 0.02
    assert batch_means_halfwidth(lat) / theory < 0.02
    assert abs(r.busy_fraction - rho) < 0.02


def test_mg1_shifted_exponential_matches_pollaczek_khinchine():
    """M/G/1 with work shift + Exp: mean sojourn E[S] + λE[S²]/(2(1 − ρ)) within 2%."""
    shift, scale, lam = 0.004, 0.002, 100.0
    es = shift + scale
    es2 = shift**2 + 2 * shift * scale + 2 * scale**2
    r = simulate(
        "uncoded",
        instances=1,
        k=1,
        rate=lam,
        num_queries=200_000,
        service=ServiceTime(shift, scale),
        seed=5,
    )
    theory = es + lam * es2 / (2 * (1 - lam * es))
    assert abs(r.latency_s[5000:].mean() / theory - 1.0) < 0.02


def test_background_episodes_slow_a_saturated_instance_by_their_long_run_rate():
    """One instance kept busy (all queries at once, in effect) works at rate 1 off-episode and
    1/f on it: the time to clear work W is W / ((1 − p) + p/f) in the long run."""
    bg = Background(fraction=0.2, slowdown=4.0, episode_s=0.05)
    r = simulate(
        "uncoded",
        instances=1,
        k=1,
        rate=1e7,
        num_queries=50_000,
        service=ServiceTime(0.001, 0.0),
        background=bg,
        seed=1,
    )
    work = 50_000 * 0.001
    span = float(r.latency_s[-1] + r.arrival_s[-1])
    assert abs(span / (work / (0.8 + 0.2 / 4.0)) - 1.0) < 0.02


@pytest.mark.parametrize("scheme", SIM_SCHEMES)
def test_heap_engine_equals_simpy_engine(scheme):
    """The heap recursion and the SimPy processes give the same latencies, sources and masks
    (background episodes, deadlines and short groups included)."""
    pytest.importorskip("simpy")
    kw = dict(
        instances=6,
        k=3,
        rate=700.0,
        num_queries=1500,
        service=ServiceTime(0.004, 0.002),
        background=Background(fraction=0.1, slowdown=5.0, episode_s=0.05),
        deadline_s=0.012,
        max_wait_s=0.004,
        seed=2,
    )
    a = simulate(scheme, **kw)
    b = simulate(scheme, engine="simpy", **kw)
    np.testing.assert_allclose(a.latency_s, b.latency_s, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(a.source, b.source)
    np.testing.assert_array_equal(a.mask, b.mask)
    assert abs(a.busy_fraction - b.busy_fraction) < 1e-9


def test_parm_answers_no_later_than_its_own_output_and_decodes_only_when_faster():
    """ParM's base pool is uncoded's (same work, episodes, queue): each query is answered at
    its own output (source 0) or earlier by the decoder (source 1)."""
    kw = dict(
        instances=4,
        k=2,
        rate=400.0,
        num_queries=4000,
        background=Background(fraction=0.1, slowdown=10.0, episode_s=0.1),
        seed=4,
    )
    un = simulate("uncoded", **kw)
    pm = simulate("parm", **kw)
    own = pm.source == 0
    assert own.any() and (~own).any()
    np.testing.assert_array_equal(pm.latency_s[own], un.latency_s[own])
    assert np.all(pm.latency_s[~own] < un.latency_s[~own])
    assert np.all(pm.mask[~own] == 0b111 & ~(1 << pm.slot[~own]))


def test_gcc_release_rule_against_a_loop():
    """Approximate codes: with no deadline a group is answered at its (N − S)-th result; with
    a tiny deadline every group answers at close + deadline with too few results (missed)."""
    kw = dict(instances=4, k=2, rate=300.0, num_queries=600, seed=6)
    r = simulate("gcc", stragglers=1, **kw)
    assert np.all(r.source == 1)
    assert np.all(np.array([bin(m).count("1") for m in r.mask]) >= 2)
    late = simulate("gcc", deadline_s=1e-6, **kw)
    assert np.all(late.source == 2)
    close = np.repeat(late.arrival_s[1::2], 2)  # each group closes at its second query
    np.testing.assert_allclose(late.latency_s + late.arrival_s, close + 1e-6, rtol=0, atol=1e-12)


def test_same_seed_same_run_and_common_random_numbers():
    kw = dict(instances=4, k=2, rate=300.0, num_queries=500, background=Background(0.1))
    a, b = simulate("parm", seed=1, **kw), simulate("parm", seed=1, **kw)
    np.testing.assert_array_equal(a.latency_s, b.latency_s)
    assert not np.array_equal(a.latency_s, simulate("parm", seed=2, **kw).latency_s)
    np.testing.assert_array_equal(a.arrival_s, simulate("equal", seed=1, **kw).arrival_s)


def test_cluster_sizes_and_bad_input():
    assert [cluster_sizes(s, 12, 4) for s in SIM_SCHEMES] == [
        (12, 0),
        (15, 0),
        (12, 3),
        (12, 3),
        (15, 0),
        (15, 0),
    ]
    with pytest.raises(ValueError, match="`instances`"):
        simulate("parm", instances=5, k=2, rate=10.0, num_queries=10)
    with pytest.raises(ValueError, match="`scheme`"):
        simulate("ldpc", instances=4, k=2, rate=10.0, num_queries=10)
    with pytest.raises(ValueError, match="`fraction`"):
        Background(fraction=1.0)
    with pytest.raises(ValueError, match="`rate`"):
        simulate("parm", instances=4, k=2, rate=0.0, num_queries=10)


def test_delay_model_episodes_have_their_fraction_and_mean_length():
    """DelayModel(episode_rounds=L): each worker is slowed on a fraction p of the rounds, in
    runs of mean length L (counted by a loop over the rounds), and a slowed round's latency is
    the quiet one times the factor."""
    from gcc_jax.distributed import DelayModel

    p, length, rounds = 0.1, 20.0, 30_000
    dm = DelayModel(num_workers=2, shift=0.01, straggle_prob=p, episode_rounds=length, seed=3)
    on = np.array([dm.in_episode(r) for r in range(rounds)])  # (rounds, 2)
    for w in range(2):
        runs, current = [], 0
        for flag in on[:, w]:
            if flag:
                current += 1
            elif current:
                runs.append(current)
                current = 0
        assert abs(on[:, w].mean() - p) < 0.03
        assert abs(np.mean(runs) / length - 1.0) < 0.25
    quiet = DelayModel(num_workers=2, shift=0.01, seed=3)
    r = int(np.flatnonzero(on[:, 0])[0])
    assert dm.sample(r)[0] == pytest.approx(10.0 * quiet.sample(r)[0])
