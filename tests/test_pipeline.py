"""monte_carlo_loss and coded_apply against a plain Python loop."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gcc_jax as gcc


def f(v):
    return jnp.concatenate([v * jnp.sin(v), jnp.tanh(v)])


def _setup(k=6, n=40, lam_dec=1e-6):
    code = gcc.SplineCode.chebyshev(num_inputs=k, num_workers=n, lam_dec=lam_dec)
    x = jnp.asarray(np.random.default_rng(0).uniform(-2, 2, size=(k, 3)))
    return code, x


def _loop_loss(code, x, masks):
    fx = np.stack([np.asarray(f(xi)) for xi in x])
    out = []
    for m in np.asarray(masks):
        yh = np.asarray(gcc.coded_apply(code, f, x, m))
        out.append(np.sum((yh - fx) ** 2) / x.shape[0])
    return np.array(out)


@pytest.mark.parametrize("chunk_size", [1, 7, 64])
def test_matches_python_loop_for_any_chunking(chunk_size):
    code, x = _setup()
    masks = gcc.sample_masks(jax.random.key(0), 40, num=13, stragglers=5)
    got = gcc.monte_carlo_loss(code, f, x, masks, chunk_size=chunk_size)
    np.testing.assert_allclose(got, _loop_loss(code, x, masks), rtol=1e-9, atol=1e-15)


def test_f_is_applied_once_and_compiles_once():
    code, x = _setup()
    calls = []

    def counted(v):
        calls.append(1)  # runs at trace time only
        return f(v)

    # chunks of 7 and 9 to 14 masks: two chunks per call, in the block shape of
    # test_matches_python_loop_for_any_chunking[7] (compiled once for the file)
    masks = gcc.sample_masks(jax.random.key(1), 40, num=13, stragglers=3)
    gcc.monte_carlo_loss(code, counted, x, masks, chunk_size=7)
    first = len(calls)
    assert first <= 2  # one trace for the N coded inputs, one for the K true inputs
    # new masks and new lambdas: neither f nor the decoder is traced again
    gcc.monte_carlo_loss(
        gcc.SplineCode.chebyshev(num_inputs=6, num_workers=40, lam_dec=1e-3, lam_enc=1e-4),
        counted,
        x,
        gcc.sample_masks(jax.random.key(2), 40, num=13, p=0.2),
        chunk_size=7,
    )
    assert len(calls) - first <= 1  # vmap(f)(x) outside jit re-traces f once, never per mask
    size_before = gcc.evaluation._evaluator._blocks._cache_size()
    gcc.monte_carlo_loss(
        code, f, x, gcc.sample_masks(jax.random.key(3), 40, num=9, stragglers=9), chunk_size=7
    )
    assert gcc.evaluation._evaluator._blocks._cache_size() == size_before


def test_an_evaluator_given_new_lambdas_reuses_its_compiled_blocks():
    """Assigning ``evaluator.code`` (same structure, new λs) neither recompiles nor goes stale."""
    code, x = _setup(lam_dec=1e-6)
    yt, fx = code.worker_outputs(f, x), jax.vmap(f)(x)
    # 16 masks: the block shape of test_matches_python_loop_for_any_chunking[64] (one compile)
    masks = np.asarray(gcc.sample_masks(jax.random.key(4), 40, num=16, stragglers=5))
    ev = gcc.MaskEvaluator(code, yt, fx)
    ev(masks)
    size_before = gcc.evaluation._evaluator._blocks._cache_size()
    smoother = gcc.SplineCode.chebyshev(num_inputs=6, num_workers=40, lam_dec=1e-2)
    ev.code = smoother
    loss, status = ev(masks)
    assert gcc.evaluation._evaluator._blocks._cache_size() == size_before
    for mask, got, st in zip(masks, loss, status, strict=True):  # loop reference, new λ
        dec = smoother.decode_with_status(yt, mask)
        assert int(st) == int(dec.status) == 0
        np.testing.assert_allclose(got, np.sum((dec.value - fx) ** 2) / fx.shape[0], rtol=1e-10)


def _first_rows(n, s):
    """Three masks of ``n`` workers whose first ``s`` straggle."""
    return np.arange(n)[None, :] >= np.full((3, 1), s)


@pytest.mark.cpu_only("XLA CPU compiler options of the CPU evaluator policy")
def test_cpu_policy_compiler_options_follow_the_state_and_the_user(monkeypatch):
    """The CPU policy asks for XLA's classic CPU emitters where the code's decode_init state is a
    downdate plan (SplineCode, 64 ≤ N ≤ 1024, S ≤ 24 in the first mask), and never against an
    ``XLA_FLAGS`` that names the option; other backends' default policy asks for nothing."""
    classic = {"xla_cpu_use_fusion_emitters": False}
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_parallel_codegen_split_count=1")
    spline = gcc.SplineCode.chebyshev
    cpu = gcc.evaluation.policy_for("cpu")

    def options(code, n, s):
        return cpu.compiler_options(code.decode_init(_first_rows(n, s)))

    assert options(spline(num_inputs=4, num_workers=100), 100, 10) == classic
    assert options(spline(num_inputs=4, num_workers=1024), 1024, 24) == classic
    assert options(spline(num_inputs=4, num_workers=100, solver="auto"), 100, 10) == classic
    assert options(spline(num_inputs=4, num_workers=100), 100, 25) == {}
    assert options(spline(num_inputs=4, num_workers=63), 63, 5) == {}
    assert options(spline(num_inputs=4, num_workers=1025), 1025, 5) == {}
    assert options(spline(num_inputs=4, num_workers=100, solver="kernel"), 100, 10) == {}
    assert options(gcc.BerrutCode.chebyshev(num_inputs=4, num_workers=100), 100, 10) == {}
    plan = spline(num_inputs=4, num_workers=100).decode_init(_first_rows(100, 10))
    assert gcc.evaluation.policy_for("no-such-backend").compiler_options(plan) == {}
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=true")
    assert cpu.compiler_options(plan) == {}


def test_policy_chunk_size_follows_the_state_and_the_backend():
    """The CPU policy cuts 64-mask chunks where the code's state is a downdate plan, else
    auto_chunk_size's (256 here, fewer only for huge N); a backend without an entry keeps the
    default chunk for every state."""
    spline = gcc.SplineCode.chebyshev
    cpu = gcc.evaluation.policy_for("cpu")
    other = gcc.evaluation.policy_for("no-such-backend")

    def chunk(policy, code, n, s):
        return policy.chunk_size(n, 10, code.decode_init(_first_rows(n, s)))

    assert chunk(cpu, spline(num_inputs=4, num_workers=100), 100, 10) == 64
    assert chunk(cpu, spline(num_inputs=4, num_workers=512), 512, 24) == 64
    assert chunk(cpu, spline(num_inputs=4, num_workers=1024), 1024, 10) == 64
    assert chunk(cpu, spline(num_inputs=4, num_workers=100), 100, 25) == 256
    assert chunk(cpu, spline(num_inputs=4, num_workers=1025), 1025, 10) == 256
    assert chunk(cpu, spline(num_inputs=4, num_workers=63), 63, 5) == 256
    assert chunk(cpu, spline(num_inputs=4, num_workers=100, solver="kernel"), 100, 10) == 256
    assert chunk(cpu, gcc.BerrutCode.chebyshev(num_inputs=4, num_workers=100), 100, 10) == 256
    assert chunk(other, spline(num_inputs=4, num_workers=100), 100, 10) == 256
    # auto_chunk_size reads the policy: a power of two, narrower once a chunk's grid arrays
    # would pass the memory budget
    assert gcc.auto_chunk_size(100, 10, platform="cpu") == cpu.chunk_size(100, 10) == 256
    sizes = [gcc.auto_chunk_size(n, 10, platform="cpu") for n in (10**3, 10**5, 10**6, 10**7)]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] == 256 and sizes[-1] < 64
    assert all(c & (c - 1) == 0 for c in sizes)
    # a policy with a large cap (an accelerator's) is bounded by the memory budget instead:
    # 512 MiB over 16 N + 16 (4 m + 13)(⌊√N⌋ + 1) bytes a mask, rounded down to a power of two
    wide = gcc.evaluation.BackendPolicy(max_chunk=1 << 20)
    per_mask = 16 * 100 + 16 * (4 * 10 + 13) * 11
    assert wide.chunk_size(100, 10) == 1 << (((512 << 20) // per_mask).bit_length() - 1) == 32768


@pytest.mark.cpu_only("the evaluator reads the CPU policy on CPU devices only")
def test_evaluator_cuts_chunks_of_its_policy_unless_told(monkeypatch):
    """With no chunk_size the evaluator decodes chunks of its backend policy's size for the
    code's state (capped by the default chunk); a chunk_size given wins; the losses are the
    same. The code's decode_init state is passed to its decode_chunks, unless the policy does
    not precompute."""
    code, x = _setup(n=64)
    yt, fx = code.worker_outputs(f, x), jax.vmap(f)(x)
    masks = np.asarray(gcc.sample_masks(jax.random.key(7), 64, num=96, stragglers=6))
    widths, states = [], []
    decode_chunks = gcc.SplineCode.decode_chunks

    def spy(self, y, chunks, then, state=None):
        widths.append(chunks.shape[1])  # at trace time: the chunk's width
        states.append(None if state is None else state.p.shape)  # and the code's state
        return decode_chunks(self, y, chunks, then, state)

    policies = gcc.evaluation._policy.POLICIES
    monkeypatch.setattr(gcc.SplineCode, "decode_chunks", spy)
    monkeypatch.setitem(policies, "cpu", policies["cpu"]._replace(downdate_chunk=32))
    hinted, status = gcc.MaskEvaluator(code, yt, fx)(masks)
    assert widths == [32] and not status.any()
    assert states == [(64, 64)]  # the evaluator passes SplineCode.decode_init on
    told, _ = gcc.MaskEvaluator(code, yt, fx, chunk_size=16)(masks)
    assert widths == [32, 16]
    monkeypatch.setitem(policies, "cpu", policies["cpu"]._replace(downdate_chunk=4096))
    capped, _ = gcc.MaskEvaluator(code, yt, fx)(masks)
    assert widths[-1] == 128  # the batch's size rounded up to a power of two (auto: 256)
    monkeypatch.setitem(policies, "cpu", policies["cpu"]._replace(precompute=False))
    lazy, _ = gcc.MaskEvaluator(code, yt, fx)(masks)
    assert states[-1] is None and widths[-1] == 128  # no state: the default chunk
    ref = _loop_loss(code, x, masks[:16])  # the loop on a few; the four ways on all
    np.testing.assert_allclose(hinted[:16], ref, rtol=1e-9, atol=1e-15)
    for got in (told, capped, lazy):
        np.testing.assert_allclose(got, hinted, rtol=1e-12, atol=1e-15)


def test_decode_init_is_made_once_per_code_and_straggler_count():
    """SplineCode's decode_init state is computed once per code object and straggler count (the
    same object again; another code object with equal values gets its own, equal one), only
    where the downdate applies (the evaluator passing it on: the next test)."""
    spline = gcc.SplineCode.chebyshev
    code = spline(num_inputs=4, num_workers=100)
    state = code.decode_init(_first_rows(100, 10))
    assert isinstance(state, gcc.spline.DowndatePlan)
    assert code.decode_init(_first_rows(100, 10)) is state and int(state.dead) == 10
    other_s = code.decode_init(_first_rows(100, 12))
    assert other_s is not state and int(other_s.dead) == 12
    twin = gcc.SplineCode(
        alpha=jnp.array(code.alpha),
        beta=jnp.array(code.beta),
        lam_enc=jnp.array(code.lam_enc),
        lam_dec=jnp.array(code.lam_dec),
    )
    twin_state = twin.decode_init(_first_rows(100, 10))
    assert twin_state is not state
    chex.assert_trees_all_close(twin_state, state, rtol=0, atol=0)
    assert code.decode_init(_first_rows(100, 25)) is None
    assert spline(num_inputs=4, num_workers=63).decode_init(_first_rows(63, 5)) is None
    kernel = spline(num_inputs=4, num_workers=100, solver="kernel")
    assert kernel.decode_init(_first_rows(100, 10)) is None
    berrut = gcc.BerrutCode.chebyshev(num_inputs=4, num_workers=100)
    assert berrut.decode_init(_first_rows(100, 10)) is None


def test_decode_init_state_reused_gives_the_values_without_it():
    """decode_chunks with the state of decode_init equals decode_chunks without one (to
    rounding) and a state made for another straggler count is recomputed, not misused."""
    code, x = _setup(n=64)
    yt = code.worker_outputs(f, x)
    masks = np.asarray(gcc.sample_masks(jax.random.key(3), 64, num=64, stragglers=6))
    chunks = masks.reshape(2, 32, 64)
    plain = code.decode_chunks(yt, chunks, lambda d: d.value)
    for state in (code.decode_init(masks[:1]), code.decode_init(_first_rows(64, 9))):
        got = code.decode_chunks(yt, chunks, lambda d: d.value, state)
        np.testing.assert_allclose(got, plain, rtol=1e-10, atol=1e-14)


@pytest.mark.cpu_only("compiles with XLA CPU compiler options")
def test_blocks_compiled_with_a_codes_options_match_a_loop_and_compile_once(monkeypatch):
    """The evaluator compiles a SplineCode block on the downdate with the code's CPU options
    (here the suite's XLA_FLAGS are hidden so that the code asks for them): the same values as
    the per-mask loop, one compilation for new masks."""
    monkeypatch.setenv("XLA_FLAGS", "")
    code, x = _setup(n=64)
    masks = np.asarray(gcc.sample_masks(jax.random.key(5), 64, num=64, stragglers=6))
    options = gcc.evaluation.policy_for("cpu").compiler_options(code.decode_init(masks))
    assert options
    run = gcc.evaluation._evaluator._blocks_on(tuple(jax.devices()), tuple(sorted(options.items())))
    assert run is not gcc.evaluation._evaluator._blocks
    yt, fx = code.worker_outputs(f, x), jax.vmap(f)(x)
    ev = gcc.MaskEvaluator(code, yt, fx, chunk_size=32)
    loss, status = ev(masks)
    assert not status.any()
    np.testing.assert_allclose(loss, _loop_loss(code, x, masks), rtol=1e-9, atol=1e-15)
    size = run._cache_size()
    assert size >= 1
    ev(np.asarray(gcc.sample_masks(jax.random.key(6), 64, num=64, stragglers=6)))
    assert run._cache_size() == size
    other_s = np.asarray(gcc.sample_masks(jax.random.key(6), 64, num=64, stragglers=9))
    loss, status = ev(other_s)  # another straggler count: another plan, the same program
    assert run._cache_size() == size and not status.any()
    np.testing.assert_allclose(loss[:8], _loop_loss(code, x, other_s[:8]), rtol=1e-9, atol=1e-15)
    # a code of the same structure with new λs and nodes decodes the same outputs: no new
    # compilation, and the values of a per-mask loop with that code
    nodes = 0.9 * code.beta + 0.1 * code.beta**3  # increasing: another node placement
    other = gcc.SplineCode(alpha=code.alpha, beta=nodes, lam_enc=0.0, lam_dec=1e-3)
    ev.code = other
    loss, _ = ev(masks)
    assert run._cache_size() == size
    for mask, got in zip(masks, loss, strict=True):
        dec = other.decode_with_status(yt, mask)
        assert int(dec.status) == 0
        np.testing.assert_allclose(got, np.sum((dec.value - fx) ** 2) / fx.shape[0], rtol=1e-9)


def test_status_and_errors_for_undecodable_patterns():
    code, x = _setup()
    masks = np.ones((4, 40), bool)
    masks[1] = False
    masks[1, 7] = True  # one live worker
    with pytest.raises(gcc.GCCValueError, match="1 of 4 patterns"):
        gcc.monte_carlo_loss(code, f, x, masks)
    res = gcc.monte_carlo_loss(code, f, x, masks, return_status=True)
    assert np.isnan(res.loss[1]) and res.status[1] & int(gcc.Status.TOO_FEW_LIVE)
    assert np.all(np.isfinite(res.loss[[0, 2, 3]])) and np.all(res.status[[0, 2, 3]] == 0)


def test_nonfinite_live_worker_output_is_reported():
    code, x = _setup()

    xt = code.encode(x)
    bad_workers = np.array([3, 17])

    def nan_at_edge(v):  # workers 3 and 17 return NaN (identified by their coded input)
        hit = jnp.min(jnp.sum((xt[bad_workers] - v) ** 2, axis=1)) < 1e-20
        return jnp.where(hit, jnp.nan, f(v))

    masks = np.ones((3, 40), bool)
    masks[2, bad_workers] = False  # pattern 2 drops exactly the misbehaving workers
    res = gcc.monte_carlo_loss(code, nan_at_edge, x, masks, return_status=True)
    assert res.status[0] & int(gcc.Status.NONFINITE_DATA)
    assert res.status[2] == 0 and np.isfinite(res.loss[2])


def test_nonfinite_targets_raise_even_with_statuses():
    """f NaN on an uncoded input (the workers' coded inputs are all finite): the loss is
    undefined, so monte_carlo_loss raises, with or without return_status."""
    code, x = _setup()

    def nan_at_x0(v):
        return jnp.where(jnp.sum((v - x[0]) ** 2) < 1e-20, jnp.nan, f(v))

    yt = code.worker_outputs(nan_at_x0, x)
    assert bool(jnp.all(jnp.isfinite(yt)))
    masks = gcc.sample_masks(jax.random.key(8), 40, num=5, stragglers=3)
    for return_status in (False, True):
        with pytest.raises(gcc.GCCValueError, match="not finite"):
            gcc.monte_carlo_loss(code, nan_at_x0, x, masks, return_status=return_status)


@pytest.mark.usefixtures("without_jaxtyping")  # gcc_jax's own messages, not the annotations'
def test_bad_input():
    code, x = _setup()
    with pytest.raises(ValueError, match=r"\(p, 40\)"):
        gcc.monte_carlo_loss(code, f, x, np.ones((3, 39), bool))
    with pytest.raises(TypeError, match="boolean"):
        gcc.monte_carlo_loss(code, f, x, np.ones((3, 40)))
    with pytest.raises(ValueError, match="chunk_size"):
        gcc.monte_carlo_loss(code, f, x, np.ones((3, 40), bool), chunk_size=0)
    with pytest.raises(ValueError, match="one row per input"):
        gcc.monte_carlo_loss(code, f, x[:4], np.ones((3, 40), bool))


def test_vmap_decode_compiles_once_across_masks():
    code, x = _setup()
    _, yt = gcc.apply_workers(code, f, x)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def batch(code, masks):
        return jax.vmap(lambda m: code.decode_with_status(yt, m).value)(masks)

    for i, s in enumerate([0, 5, 20]):
        batch(code, gcc.sample_masks(jax.random.key(i), 40, num=8, stragglers=s))
    chex.clear_trace_counter()


def _parm(params):
    """ParM with a linear base model f(v) = W v (k = 2) and a linear parity model P @ v."""
    w = jnp.array([[1.0, 2.0], [0.0, 1.0], [3.0, -1.0]])
    code = gcc.ParityModelCode(params, lambda p, v: p @ v, num_inputs=2)
    x = jnp.array([[1.0, 1.0], [2.0, -1.0]])
    return code, (lambda v: w @ v), x, w


def test_parm_runs_its_parity_model_through_the_pipeline():
    # An all-zero parity model: with worker 1 missing, the honest ParM answer is
    # F_P(P) - f(x_0) = -f(x_0), not the exact f(x_1) that running f on P would give.
    code, f, x, w = _parm(jnp.zeros((3, 2)))
    mask = jnp.array([True, False, True])
    yh = np.asarray(gcc.coded_apply(code, f, x, mask))
    fx = np.asarray(x @ w.T)
    np.testing.assert_allclose(yh[0], fx[0], rtol=0, atol=0)
    np.testing.assert_allclose(yh[1], -fx[0], rtol=0, atol=0)
    masks = np.array([[True, True, True], [True, False, True], [False, True, True]])
    loss = gcc.monte_carlo_loss(code, f, x, masks)
    expected = [0.0, np.sum((fx[0] + fx[1]) ** 2) / 2, np.sum((fx[1] + fx[0]) ** 2) / 2]
    np.testing.assert_allclose(loss, expected, rtol=1e-12)
    assert loss[1] > 0


def test_parm_with_an_exact_parity_model_has_zero_loss():
    # f linear and F_P = f with the sum encoder: F_P(x_0 + x_1) = f(x_0) + f(x_1) exactly.
    _, f, x, w = _parm(None)
    code = gcc.ParityModelCode(w, lambda p, v: p @ v, num_inputs=2)
    masks = np.array([[True, True, True], [True, False, True], [False, True, True]])
    loss = gcc.monte_carlo_loss(code, f, x, masks)
    np.testing.assert_allclose(loss, 0.0, atol=1e-12)
    xt, yt = gcc.apply_workers(code, f, x)
    np.testing.assert_allclose(yt[2], f(x[0] + x[1]), rtol=1e-12)
