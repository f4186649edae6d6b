"""The coded inference service on the in-process executor: answers against the plain pipeline."""

import concurrent.futures
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import gcc_jax as gcc
from gcc_jax.distributed import (
    CodedInferenceService,
    DelayModel,
    Executor,
    Fault,
    LocalExecutor,
    poisson_arrivals,
)


def smooth(x):
    """A smooth map R^3 -> R^2."""
    return jnp.array([jnp.sin(x[0]) + x[1] * x[2], jnp.tanh(x[1] - x[0])])


def _queries(num, seed=0):
    return np.asarray(jax.random.uniform(jax.random.key(seed), (num, 3), minval=-1, maxval=1))


def _reference(code, answers, queries):
    """Re-run each batch through encode → f → decode with the answer's mask (gcc.coded_apply)."""
    k, n = code.num_inputs, code.num_workers
    batches = {}
    for a in answers:
        batches.setdefault(a.batch_id, []).append(a)
    for group in batches.values():
        group.sort(key=lambda a: a.slot)
        assert [a.slot for a in group] == list(range(len(group)))
        xs = [queries[a.query_id] for a in group]
        xs += [xs[-1]] * (k - len(xs))
        mask = np.zeros(n, bool)
        mask[list(group[0].workers_answered)] = True
        yield group, np.asarray(gcc.coded_apply(code, smooth, jnp.asarray(np.stack(xs)), mask))


def test_gcc_answers_equal_the_pipeline_with_the_reported_mask():
    k, n, s = 2, 6, 2  # one code shape for the spline tests: one compilation
    code = gcc.SplineCode.chebyshev(num_inputs=k, num_workers=n)
    dm = DelayModel(num_workers=n, shift=0.001, scale=0.002, straggle_prob=0.2, seed=3)
    ex = LocalExecutor(smooth, num_workers=n, delays=dm, sleep=True)
    queries = _queries(20)
    with CodedInferenceService(ex, code, stragglers=s, max_wait_s=0.05, max_in_flight=3) as svc:
        answers = svc.serve(queries)
    assert [a.query_id for a in answers] == list(range(20))
    assert all(a.ok for a in answers)
    for group, ref in _reference(code, answers, queries):
        assert len(group[0].workers_answered) == n - s
        for a in group:
            np.testing.assert_allclose(a.value, ref[a.slot], rtol=1e-10, atol=1e-12)
            assert a.batch_queries == len(group)
            assert 0 <= a.queue_s <= a.latency_s


def test_a_lone_query_is_not_held_longer_than_max_wait():
    code = gcc.SplineCode.chebyshev(num_inputs=2, num_workers=6)
    with CodedInferenceService(
        LocalExecutor(smooth, num_workers=6), code, stragglers=1, max_wait_s=0.05
    ) as svc:
        svc.submit(np.zeros(3)).result()  # compile
        t0 = time.monotonic()
        a = svc.submit(np.full(3, 0.3)).result(timeout=5)
        waited = time.monotonic() - t0
    assert a.ok and a.batch_queries == 1 and a.slot == 0
    assert 0.05 <= a.queue_s < 0.5 and waited < 1.0
    # a batch of one repeats its query: all slots decode near f(x)
    np.testing.assert_allclose(a.value, np.asarray(smooth(jnp.full(3, 0.3))), atol=1e-6)


def test_uncoded_hang_gives_explicit_errors_and_the_rest_exact():
    k = 4
    code = gcc.UncodedCode(num_inputs=k)
    ex = LocalExecutor(smooth, num_workers=k, faults=[Fault(2, "hang")])
    queries = _queries(8, seed=1)
    with CodedInferenceService(ex, code, timeout_s=0.2, max_wait_s=1.0) as svc:
        answers = svc.serve(queries)
    for a in answers:
        if a.slot == 2:
            assert not a.ok and a.value is None
            assert "no estimate of this query" in a.error and a.timed_out
            assert a.worker_issues[2].startswith("late")
        else:
            assert a.ok
            np.testing.assert_allclose(a.value, np.asarray(smooth(queries[a.query_id])), 1e-12)


def test_replication_survives_a_nan_copy_and_a_dead_copy():
    code = gcc.ReplicationCode(num_inputs=2, num_workers=4)  # worker n holds input n mod 2
    ex = LocalExecutor(smooth, num_workers=4, faults=[Fault(0, "nan"), Fault(1, "crash")])
    queries = _queries(6, seed=2)
    with CodedInferenceService(ex, code, max_wait_s=1.0, release="batch") as svc:
        answers = svc.serve(queries)
    for a in answers:
        assert a.ok, a.error
        np.testing.assert_allclose(a.value, np.asarray(smooth(queries[a.query_id])), rtol=1e-12)
        assert a.workers_answered == (2, 3) and a.source == "decoder"
        assert a.worker_issues[0].startswith("nonfinite")
        assert a.worker_issues[1].startswith("dead")


def test_undecodable_batch_reports_the_status():
    code = gcc.SplineCode.chebyshev(num_inputs=2, num_workers=6)
    faults = [Fault(w, "error") for w in range(5)]  # one live worker: a spline needs two
    ex = LocalExecutor(smooth, num_workers=6, faults=faults)
    with CodedInferenceService(ex, code, stragglers=1, timeout_s=0.1) as svc:
        answers = svc.serve(_queries(2))
    for a in answers:
        assert not a.ok
        assert a.status == int(gcc.Status.TOO_FEW_LIVE)
        assert gcc.describe_status(gcc.Status.TOO_FEW_LIVE) in a.error
        assert a.worker_issues[0].startswith("error")


def test_bad_queries_are_answered_at_once_and_do_not_poison_their_neighbours():
    code = gcc.SplineCode.chebyshev(num_inputs=2, num_workers=6)
    queries = list(_queries(4, seed=4))
    queries.insert(1, np.array([0.0, np.nan, 0.0]))
    queries.insert(3, np.zeros(5))
    queries.insert(4, "not a number")
    with CodedInferenceService(LocalExecutor(smooth, num_workers=6), code, stragglers=0) as svc:
        answers = svc.serve(queries)
    assert [a.ok for a in answers] == [True, False, True, False, False, True, True]
    assert "NaN" in answers[1].error and "shape" in answers[3].error
    assert "numeric" in answers[4].error
    for a in answers:
        if a.ok:
            truth = np.asarray(smooth(jnp.asarray(queries[a.query_id])))
            np.testing.assert_allclose(a.value, truth, atol=1e-3)
    with pytest.raises(RuntimeError, match="closed"):
        svc.submit(np.zeros(3))


class _BrokenExecutor(Executor):
    num_workers = 6

    def run_round(self, xt, *, wait_for, timeout_s=10.0, round_id=None):
        raise ConnectionError("lost the cluster")


def test_a_failing_round_answers_every_query_with_the_error():
    code = gcc.SplineCode.chebyshev(num_inputs=2, num_workers=6)
    with CodedInferenceService(_BrokenExecutor(), code, stragglers=1) as svc:
        answers = svc.serve(_queries(5))
    assert len(answers) == 5
    assert all(a.error == "round failed: ConnectionError: lost the cluster" for a in answers)


def test_serve_follows_arrival_times_and_stops_at_max_seconds():
    code = gcc.SplineCode.chebyshev(num_inputs=2, num_workers=6)
    arrivals = np.array([0.0, 0.05, 0.1, 0.15, 5.0])
    with CodedInferenceService(LocalExecutor(smooth, num_workers=6), code, stragglers=1) as svc:
        t0 = time.monotonic()
        answers = svc.serve(_queries(5), arrivals, max_seconds=0.5)
        wall = time.monotonic() - t0
    assert len(answers) == 4 and 0.15 <= wall < 5.0  # the fifth is never submitted
    with pytest.raises(ValueError, match="non-decreasing"):
        svc.serve(_queries(2), [0.1, 0.0])


def test_concurrent_submitters_all_get_their_own_answers():
    code = gcc.ReplicationCode(num_inputs=3, num_workers=6)  # exact: each answer is f(x)
    queries = _queries(30, seed=5)
    with CodedInferenceService(LocalExecutor(smooth, num_workers=6), code, max_in_flight=3) as svc:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            futures = list(pool.map(svc.submit, queries))
        answers = [f.result(timeout=30) for f in futures]
    assert sorted(a.query_id for a in answers) == list(range(30))
    for x, a in zip(queries, answers, strict=True):
        np.testing.assert_allclose(a.value, np.asarray(smooth(jnp.asarray(x))), atol=1e-3)


def test_poisson_arrivals_have_exponential_gaps():
    rate = 40.0
    t = poisson_arrivals(rate, 5000, seed=3)
    gaps = np.diff(np.concatenate([[0.0], t]))
    assert scipy.stats.kstest(gaps, scipy.stats.expon(scale=1 / rate).cdf).pvalue > 1e-4
    np.testing.assert_array_equal(t, poisson_arrivals(rate, 5000, seed=3))
    with pytest.raises(ValueError, match="rate"):
        poisson_arrivals(0.0, 3)


def test_service_argument_checks():
    code = gcc.SplineCode.chebyshev(num_inputs=2, num_workers=4)
    with pytest.raises(ValueError, match="needs 4"):
        CodedInferenceService(LocalExecutor(smooth, num_workers=5), code, stragglers=1)
    ex = LocalExecutor(smooth, num_workers=4)
    with pytest.raises(ValueError, match="wait_for"):
        CodedInferenceService(ex, code, wait_for=9)
    with pytest.raises(ValueError, match="max_wait_s"):
        CodedInferenceService(ex, code, stragglers=1, max_wait_s=-1.0)
    with pytest.raises(ValueError, match="timeout_s"):
        CodedInferenceService(ex, code, stragglers=1, timeout_s=0.0)
