"""The coded inference service on the in-process executor: answers against the plain pipeline."""

import concurrent.futures
import threading
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
    Outcome,
    Overloaded,
    poisson_arrivals,
)
from gcc_jax.distributed import _service as _service_mod


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

    def _run(self, xt, spec):
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


# -- batching and backpressure (issue 13's reproducers) -----------------------------------------


def _burst_service(**kwargs):
    ex = LocalExecutor(
        jnp.tanh, num_workers=12, delays=DelayModel(num_workers=12, shift=0.004), sleep=True
    )
    code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=12)
    return CodedInferenceService(ex, code, stragglers=2, max_wait_s=0.01, **kwargs)


def test_a_burst_is_served_in_full_batches():
    """400 submits at once: 100 rounds of 4 (it was 397 rounds, 396 of one query)."""
    with _burst_service() as svc:
        first = svc.submit(np.zeros(1)).result()  # compiles
        futures = [svc.submit(np.full(1, i / 400)) for i in range(400)]
        answers = [f.result(timeout=60) for f in futures]
        stats = svc.stats()
    assert first.ok and all(a.ok for a in answers)
    sizes = {a.batch_id: a.batch_queries for a in answers}
    assert sorted(sizes.values()).count(4) >= 99 and len(sizes) <= 101
    assert stats["rounds"] == len(sizes) + 1 and stats["batched"] == 401
    # the burst's queries get their own estimates: f = tanh decoded within GCC's accuracy
    x = np.arange(400) / 400
    got = np.array([a.value[0] for a in answers])
    np.testing.assert_allclose(got, np.tanh(x), atol=5e-3)


def test_past_max_queue_submit_fails_fast_with_overloaded_and_nothing_is_lost():
    with _burst_service(max_queue=8, max_in_flight=1) as svc:
        svc.submit(np.zeros(1)).result()
        futures, rejected = [], 0
        t0 = time.monotonic()
        for i in range(60):
            try:
                futures.append(svc.submit(np.full(1, i / 60)))
            except Overloaded as err:
                rejected += 1
                assert err.limit == 8 and err.queued == 8 and "max_queue=8" in str(err)
        submit_s = time.monotonic() - t0
        answers = [f.result(timeout=30) for f in futures]
        stats = svc.stats()
    assert submit_s < 0.5  # rejecting never waits for a round
    assert rejected > 0 and len(futures) + rejected == 60
    assert stats["rejected"] == rejected and stats["submitted"] == len(futures) + 1
    assert all(a.ok for a in answers)
    # an accepted query waits behind at most max_queue/K batches and the round in flight
    assert max(a.queue_s for a in answers) < (8 / 4 + 2) * 0.004 + 0.2


def test_on_overload_block_waits_for_room_and_serve_records_rejections():
    with _burst_service(max_queue=4, max_in_flight=1, on_overload="block") as svc:
        answers = svc.serve(np.linspace(0, 1, 40)[:, None])
        assert svc.stats()["rejected"] == 0
    assert len(answers) == 40 and all(a.ok for a in answers)
    with _burst_service(max_queue=4, max_in_flight=1) as svc:
        answers = svc.serve(np.linspace(0, 1, 40)[:, None])
        stats = svc.stats()
    over = [a for a in answers if not a.ok]
    assert len(answers) == 40 and len(over) == stats["rejected"] > 0
    assert all(a.error.startswith("the service is overloaded") for a in over)


# -- per-worker fault isolation and warm-up -----------------------------------------------------


def _raises(x):
    raise FloatingPointError("worker 1 is broken")


def _wrong_shape(x):
    return jnp.concatenate([smooth(x), x[:1]])


def _nan(x):
    return smooth(x) * jnp.nan


def test_local_per_worker_faults_are_stragglers_not_failed_queries():
    """Worker functions that raise, give the wrong shape or NaN: 0 failed queries (was 200/200)."""
    n, s = 6, 3
    code = gcc.SplineCode.chebyshev(num_inputs=2, num_workers=n)
    fns = [smooth, _raises, _wrong_shape, _nan, smooth, smooth]
    queries = _queries(12, seed=7)
    with CodedInferenceService(LocalExecutor(fns, num_workers=n), code, stragglers=s) as svc:
        answers = svc.serve(queries)
    assert all(a.ok for a in answers), answers[0].error
    for group, ref in _reference(code, answers, queries):
        issues = group[0].worker_issues
        assert group[0].workers_answered == (0, 4, 5)
        assert issues[1] == "error: raised FloatingPointError: worker 1 is broken"
        assert issues[2] == "invalid: returned shape (3,), expected (2,)"
        assert issues[3].startswith("nonfinite")
        for a in group:
            np.testing.assert_allclose(a.value, ref[a.slot], rtol=1e-10, atol=1e-12)


def test_a_hanging_worker_function_is_late_for_the_round():
    gate, hang = threading.Event(), threading.Event()

    def host(v):
        if hang.is_set():
            gate.wait(30)
        return v

    def slow(x):  # hangs at run time once `hang` is set (compiled before)
        return smooth(jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x))

    ex = LocalExecutor([smooth, smooth, slow, smooth], num_workers=4)
    xt = _queries(4, seed=8)
    ex.run_round(xt, wait_for=4)  # compiles; no hang yet
    hang.set()
    t0 = time.monotonic()
    res = ex.run_round(xt, wait_for=3, timeout_s=0.3)
    took = time.monotonic() - t0
    gate.set()
    assert res.answered == (0, 1, 3) and res.workers_with(Outcome.LATE) == (2,)
    assert "did not return" in res.messages[2] and took < 2.0
    np.testing.assert_allclose(res.outputs[[0, 1, 3]], np.stack([smooth(v) for v in xt[[0, 1, 3]]]))


def test_warmup_compiles_everything_a_round_needs():
    traces = []

    def f(x):
        traces.append(x.shape)
        return smooth(x)

    code = gcc.BerrutCode.chebyshev(num_inputs=3, num_workers=7)
    ex = LocalExecutor(f, num_workers=7)
    svc = CodedInferenceService(ex, code, stragglers=2, input_shape=(3,), max_wait_s=0.0)
    svc.warmup()
    assert traces  # f compiled by warmup
    n_traces = len(traces)
    sizes = (_service_mod._encode._cache_size(), _service_mod._decode._cache_size())
    with svc:
        a = svc.submit(np.full(3, 0.2)).result(timeout=30)
    assert a.ok and len(traces) == n_traces
    assert (_service_mod._encode._cache_size(), _service_mod._decode._cache_size()) == sizes


# -- per-query release ---------------------------------------------------------------------------


def _slow_worker_delays(n, slow, shift=0.005, factor=40.0):
    slowdown = tuple(factor if i in slow else 1.0 for i in range(n))
    return DelayModel(num_workers=n, shift=shift, slowdown=slowdown)


@pytest.mark.parametrize("release", ["query", "batch"])
def test_uncoded_releases_each_query_when_its_worker_answers(release):
    k = 4
    ex = LocalExecutor(smooth, num_workers=k, delays=_slow_worker_delays(k, {2}), sleep=True)
    queries = _queries(8, seed=9)
    code = gcc.UncodedCode(num_inputs=k)
    with CodedInferenceService(ex, code, release=release, max_wait_s=1.0, input_shape=(3,)) as svc:
        svc.warmup()
        answers = svc.serve(queries)
    for a in answers:
        np.testing.assert_allclose(a.value, np.asarray(smooth(queries[a.query_id])), rtol=1e-12)
        early = release == "query" and a.slot != 2  # the slow worker takes 0.2 s
        assert (a.round_s < 0.1) == early, (a.slot, a.round_s)
        assert a.source == (f"worker {a.slot}" if release == "query" else "decoder")


def test_replication_releases_at_the_first_replica():
    ex = LocalExecutor(smooth, num_workers=4, delays=_slow_worker_delays(4, {0, 3}), sleep=True)
    code = gcc.ReplicationCode(num_inputs=2, num_workers=4)  # input 0 on 0, 2; input 1 on 1, 3
    queries = _queries(4, seed=10)
    with CodedInferenceService(ex, code, max_wait_s=1.0, input_shape=(3,)) as svc:
        svc.warmup()
        answers = svc.serve(queries)
    for a in answers:
        assert a.source == ("worker 2" if a.slot == 0 else "worker 1") and a.round_s < 0.1
        np.testing.assert_allclose(a.value, np.asarray(smooth(queries[a.query_id])), rtol=1e-12)


W_LIN = np.array([[1.0, -0.5, 2.0], [0.3, 0.2, -1.0]])


def _linear(params, x):
    return params @ x


def test_parm_releases_its_own_output_at_once_and_reconstructs_the_missing_one():
    """k = 2, base worker 1 slow: query 0 at worker 0's answer, query 1 at parity + worker 0."""
    code = gcc.ParityModelCode(jnp.asarray(W_LIN), _linear, num_inputs=2)  # exact parity
    fns = [lambda v: jnp.asarray(W_LIN) @ v] * 2 + [lambda p: _linear(jnp.asarray(W_LIN), p)]
    # worker 1 answers after 2 s: far beyond the decode even on a loaded machine (0.6 s seen)
    delays = DelayModel(num_workers=3, shift=0.005, slowdown=(1.0, 400.0, 2.0))
    ex = LocalExecutor(fns, num_workers=3, delays=delays, sleep=True)
    queries = _queries(6, seed=11)
    with CodedInferenceService(ex, code, stragglers=1, max_wait_s=1.0, input_shape=(3,)) as svc:
        svc.warmup()
        answers = svc.serve(queries)
    for a in answers:
        np.testing.assert_allclose(a.value, W_LIN @ queries[a.query_id], rtol=1e-12, atol=1e-12)
        if a.slot == 0:
            assert a.source == "worker 0" and a.workers_answered == (0,)
        else:  # decoded from the parity (at 10 ms) and worker 0, not worker 1's 2 s
            assert a.source == "decoder" and a.workers_answered == (0, 2)
            assert a.round_s < 1.0


def test_gcc_releases_at_its_wait_rule_and_has_no_systematic_workers():
    code = gcc.SplineCode.chebyshev(num_inputs=2, num_workers=6)
    ex = LocalExecutor(smooth, num_workers=6)
    queries = _queries(4, seed=12)
    with CodedInferenceService(ex, code, stragglers=1) as svc:
        answers = svc.serve(queries)
    assert all(a.source == "decoder" and len(a.workers_answered) == 5 for a in answers)


# -- deadline decoding ---------------------------------------------------------------------------


def test_deadline_decodes_with_whoever_answered():
    n, s = 6, 1
    code = gcc.SplineCode.chebyshev(num_inputs=2, num_workers=n)
    ex = LocalExecutor(smooth, num_workers=n, delays=_slow_worker_delays(n, {1, 3, 4}), sleep=True)
    queries = _queries(4, seed=13)
    with CodedInferenceService(
        ex, code, stragglers=s, deadline_s=0.05, max_wait_s=1.0, input_shape=(3,)
    ) as svc:
        svc.warmup()
        answers = svc.serve(queries)
    assert svc.rule == "wait for 5 or 50 ms"
    for group, ref in _reference(code, answers, queries):
        assert group[0].workers_answered == (0, 2, 5) and group[0].timed_out
        for a in group:
            assert a.ok and a.round_s == pytest.approx(0.05)
            np.testing.assert_allclose(a.value, ref[a.slot], rtol=1e-10, atol=1e-12)


def test_deadline_with_one_live_worker_is_an_explicit_error_for_a_spline():
    n = 6  # the code shape of the other spline tests: no new compilation
    code = gcc.SplineCode.chebyshev(num_inputs=2, num_workers=n)
    ex = LocalExecutor(smooth, num_workers=n, delays=_slow_worker_delays(n, {0, 1, 2, 4, 5}))
    with CodedInferenceService(ex, code, stragglers=0, deadline_s=0.05) as svc:
        a = svc.serve(_queries(1))[0]
    assert not a.ok and a.status == int(gcc.Status.TOO_FEW_LIVE) and a.workers_answered == (3,)


# -- the deadline sweep of serve-bench -----------------------------------------------------------


def test_deadline_sweep_matches_a_loop_over_rounds():
    """Accuracy at each deadline against eager decodes of each round's mask, in a loop."""
    from gcc_jax.experiments.serve import deadline_sweep

    w = np.asarray(jax.random.normal(jax.random.key(20), (4, 3)))

    def f(x):
        return jax.nn.softmax(jnp.asarray(w) @ x)

    k, n, s = 2, 6, 1
    code = gcc.SplineCode.chebyshev(num_inputs=k, num_workers=n)
    queries = _queries(24, seed=21)
    labels = np.arange(24) % 4
    base = np.asarray(jax.vmap(f)(jnp.asarray(queries))).argmax(-1)
    dm = DelayModel(num_workers=n, shift=0.002, scale=0.004, straggle_prob=0.2, seed=22)
    deadlines = (1.0, 4.0, 8.0, 100.0)
    got = deadline_sweep({"gcc": code}, f, queries, labels, base, dm, deadlines, s)["gcc"]
    for rule in ("n-s", "deadline"):
        correct = np.zeros(len(deadlines))
        agree = np.zeros(len(deadlines))
        bad = np.zeros(len(deadlines))
        for r in range(len(queries) // k):
            x = queries[r * k : (r + 1) * k]
            yt = np.stack([np.asarray(f(jnp.asarray(v))) for v in np.asarray(code.encode(x))])
            lat = dm.sample(r)
            for j, t in enumerate(np.asarray(deadlines) / 1e3):
                cut = min(t, np.sort(lat)[n - s - 1]) if rule == "n-s" else t
                mask = lat <= cut
                if mask.sum() < 2:  # a spline needs two live workers
                    bad[j] += k
                    continue
                pred = np.asarray(code.decode(yt, mask)).argmax(-1)
                correct[j] += np.sum(pred == labels[r * k : (r + 1) * k])
                agree[j] += np.sum(pred == base[r * k : (r + 1) * k])
        np.testing.assert_allclose(got[rule]["accuracy"], correct / 24, rtol=1e-12)
        np.testing.assert_allclose(got[rule]["agreement"], agree / 24, rtol=1e-12)
        np.testing.assert_allclose(got[rule]["undecodable"], bad / 24, rtol=1e-12)
    assert got["n-s"]["undecodable"][0] > 0  # 1 ms is before anyone answers
    assert got["deadline"]["agreement"][-1] == 1.0  # every worker in: GCC agrees with f


# -- any AbstractCode ----------------------------------------------------------------------------


def test_exact_and_approximate_codes_are_told_apart_by_the_contract():
    """`AbstractCode.is_exact` (a class constant, no probing) sets the default wait rule."""
    from gcc_jax.distributed import default_wait_for

    parm = gcc.ParityModelCode(jnp.asarray(W_LIN), _linear, num_inputs=2)
    exact = (gcc.UncodedCode(num_inputs=3), gcc.ReplicationCode(num_inputs=2, num_workers=5), parm)
    for code in exact:
        assert code.is_exact, type(code).__name__
        rule = default_wait_for(code)
        assert callable(rule), type(code).__name__  # wait until every input is available
        n = code.num_workers
        assert rule(np.ones(n, bool)) and not rule(np.zeros(n, bool))
    for code in (
        gcc.SplineCode.chebyshev(num_inputs=2, num_workers=6),
        gcc.BerrutCode.chebyshev(num_inputs=3, num_workers=7),
        # N = 7 Chebyshev-2 nodes contain the K = 3 Chebyshev-1 nodes, but LCC is exact only
        # for a polynomial f of its degree: approximate, whatever the nodes
        gcc.LagrangeCode.chebyshev(num_inputs=3, num_workers=7, degree=2),
        gcc.codes.ApproxIFERCode.chebyshev(num_inputs=3, num_workers=9, num_adversaries=1),
        gcc.RobustSplineCode.chebyshev(num_inputs=2, num_workers=8, lam_dec=1e-4),
    ):
        assert not code.is_exact, type(code).__name__
        assert default_wait_for(code) == code.num_workers  # wait for everyone


@pytest.mark.usefixtures("without_jaxtyping")  # gcc_jax's own message, not the annotation's
def test_default_wait_for_rejects_a_non_code():
    from gcc_jax.distributed import default_wait_for

    with pytest.raises(TypeError, match="`code` must be a gcc_jax code"):
        default_wait_for(object())


def test_a_byzantine_robust_code_serves_through_the_same_service():
    """ApproxIFER (error location) as a plain code: answers = its decode of the mask.

    ``release="batch"``: with Byzantine workers, per-query release would trust a systematic
    worker's own output (here K=2, N=9 Chebyshev nodes coincide, so workers 2 and 6 are).
    """
    n = 9
    code = gcc.codes.ApproxIFERCode.chebyshev(num_inputs=2, num_workers=n, num_adversaries=1)
    ex = LocalExecutor(smooth, num_workers=n, faults=[Fault(4, "garbage")])
    queries = _queries(6, seed=23)
    with CodedInferenceService(ex, code, stragglers=1, release="batch") as svc:
        answers = svc.serve(queries)
    for group, ref in _reference(code, answers, queries):
        assert 4 in group[0].workers_answered  # garbage is finite: only the decoder can tell
        for a in group:
            assert a.source == "decoder"
            np.testing.assert_allclose(a.value, ref[a.slot], rtol=1e-10, atol=1e-12)
