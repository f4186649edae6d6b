"""The code contract (:class:`gcc_jax.AbstractCode`), checked for every code in ``ALL_CODES``.

For each code: jit equals eager; vmap over masks equals a Python loop; a straggler's NaN/Inf
changes neither the value nor the gradient; one compilation serves every mask and new leaf
values; bad shapes and non-boolean masks raise naming the argument; value problems are status
flags under jit; ``available`` agrees with ``decode``; ``decode_chunks`` equals the per-mask
loop; linear codes' matrix decoder equals their decoder. References are eager calls, Python
loops and ``f`` itself, in float64.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import ALL_CODES, CodeCase, random_mask

import gcc_jax as gcc

NONFINITE = [np.nan, np.inf, -np.inf]


# Module scope: pytest then runs every test of one code before the next code, so under
# pytest-xdist a code's tests (and its compiled programs) mostly stay on one worker.
@pytest.fixture(params=ALL_CODES, ids=lambda c: c.name, scope="module")
def case(request) -> CodeCase:
    return request.param


_BUILT: dict[str, tuple] = {}


def _setup(case: CodeCase):
    """The code and its worker outputs, built once per session (codes are immutable)."""
    if case.name not in _BUILT:
        code = case.build()
        _BUILT[case.name] = code, code.worker_outputs(case.f, case.x)
    return _BUILT[case.name]


# One jitted function per operation, shared by the tests: compiled once per code (the code is an
# argument, so its static fields and leaf shapes key the cache).
_ENC = jax.jit(lambda c, x: c.encode_with_status(x))
_DEC = jax.jit(lambda c, y, m: c.decode_with_status(y, m))
_AVAILABLE = jax.jit(lambda c, m: c.available(m))
_VDEC = jax.jit(jax.vmap(lambda c, y, m: c.decode_with_status(y, m), in_axes=(None, None, 0)))


def _loss(y, code, mask, weights):
    return jnp.sum(code.decode_with_status(y, mask).value * weights)


_GRAD = jax.jit(jax.grad(_loss))


def _masks(case: CodeCase, n: int, seed: int = 0) -> np.ndarray:
    """Decodable patterns (0 … max_stragglers dead) plus the undecodable one."""
    rng = np.random.default_rng(seed)
    rows = [random_mask(rng, n, s) for s in range(case.max_stragglers + 1)]
    rows.append(random_mask(rng, n, case.max_stragglers))
    rows.append(case.undecodable)
    return np.stack(rows)


def _close(a, b, **kw):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), **{"rtol": 1e-12, "atol": 1e-12, **kw})


def test_is_an_abstract_code(case):
    code = case.build()
    assert isinstance(code, gcc.AbstractCode)
    assert isinstance(code, gcc.codes.AbstractCode)
    assert isinstance(code.num_inputs, int) and isinstance(code.num_workers, int)
    assert code.num_inputs == case.x.shape[0]


def test_worker_outputs_shape_and_no_straggler_accuracy(case):
    code, y = _setup(case)
    fx = jax.vmap(case.f)(jnp.asarray(case.x))
    assert y.shape == (code.num_workers, *fx.shape[1:]) and y.dtype == jnp.float64
    if not isinstance(code, gcc.ParityModelCode):  # ParM's parity worker runs F_P, not f
        _close(y, jax.vmap(case.f)(code.encode(case.x)))
    yh = code.decode(y, np.ones(code.num_workers, bool))
    assert yh.shape == fx.shape and yh.dtype == jnp.float64
    assert float(jnp.max(jnp.abs(yh - fx))) <= case.tol_all_live


def test_encode_jit_equals_eager(case):
    code = case.build()
    eager = code.encode_with_status(case.x)
    jitted = _ENC(code, jnp.asarray(case.x))
    assert int(eager.status) == int(jitted.status) == 0
    assert eager.value.shape == (code.num_workers, *case.x.shape[1:])
    _close(jitted.value, eager.value)
    _close(code.encode(case.x), eager.value, rtol=0, atol=0)


def test_decode_jit_equals_eager(case):
    code, y = _setup(case)
    for mask in _masks(case, code.num_workers):
        eager = code.decode_with_status(y, mask)
        jitted = _DEC(code, y, jnp.asarray(mask))
        assert int(eager.status) == int(jitted.status)
        _close(jitted.value, eager.value, equal_nan=True)


def test_vmap_over_masks_equals_loop(case):
    code, y = _setup(case)
    masks = _masks(case, code.num_workers, seed=1)
    batched = _VDEC(code, y, jnp.asarray(masks))
    assert batched.value.shape == (masks.shape[0], code.num_inputs, *y.shape[1:])
    assert batched.status.shape == (masks.shape[0],)
    value, status = np.asarray(batched.value), np.asarray(batched.status)  # no eager slicing
    for i, mask in enumerate(masks):
        ref = code.decode_with_status(y, mask)
        assert int(status[i]) == int(ref.status)
        _close(value[i], ref.value, equal_nan=True)
    # every decodable pattern is OK, the undecodable one carries the code's flag (or none)
    assert not status[:-1].any()
    expect = 0 if case.flag is None else int(case.flag)
    assert int(status[-1]) == expect


_CHUNKS = jax.jit(
    lambda c, y, chunks, plan: c.decode_chunks(
        y, chunks, lambda d: (d.value, d.status, d.value.sum()), plan
    )
)


def test_decode_chunks_equals_the_per_mask_loop(case):
    """``decode_chunks`` (the mask evaluator's entry) gives ``then`` of every chunk's decode,
    stacked: equal to the per-mask decode loop, whatever a code does once for all chunks (and
    with the code's own ``decode_init`` state for the masks, as the evaluator passes it)."""
    code, y = _setup(case)
    masks = _masks(case, code.num_workers, seed=5)
    chunks = np.stack([masks, masks[::-1]])  # (2, p, n)
    plan = code.decode_init(masks[:1])
    value, status, total = (np.asarray(a) for a in _CHUNKS(code, y, jnp.asarray(chunks), plan))
    assert value.shape == (2, masks.shape[0], code.num_inputs, *y.shape[1:])
    assert status.shape == total.shape[:1] + (masks.shape[0],)
    for g in range(2):
        for i, mask in enumerate(chunks[g]):
            ref = code.decode_with_status(y, mask)
            assert int(status[g, i]) == int(ref.status)
            _close(value[g, i], ref.value, equal_nan=True)
        _close(total[g], value[g].sum(), equal_nan=True)


def test_decode_chunks_bad_chunks_raise_naming_them(case, without_jaxtyping):
    """gcc_jax's own messages (jaxtyping, on under ``make test``, would reject them first)."""
    code, y = _setup(case)
    masks = _masks(case, code.num_workers, seed=5)
    chunks = np.stack([masks, masks])
    with pytest.raises(ValueError, match="`chunks`"):
        code.decode_chunks(y, masks, lambda d: d.value)  # one chunk must keep its chunk axis
    with pytest.raises(TypeError, match="`chunks`.*boolean"):
        code.decode_chunks(y, chunks.astype(int), lambda d: d.value)


def test_straggler_garbage_changes_neither_value_nor_gradient(case):
    code, y = _setup(case)
    rng = np.random.default_rng(2)
    mask = random_mask(rng, code.num_workers, max(case.max_stragglers, 1))
    dead = np.flatnonzero(~mask)
    bad = np.asarray(y).copy()
    for j, i in enumerate(dead):
        bad[i] = NONFINITE[j % 3]
    weights = jnp.asarray(rng.normal(size=(code.num_inputs, *y.shape[1:])))
    clean_out = code.decode_with_status(y, mask)
    bad_out = code.decode_with_status(jnp.asarray(bad), mask)
    assert int(bad_out.status) == int(clean_out.status)
    np.testing.assert_array_equal(bad_out.value, clean_out.value)
    g_clean = np.asarray(_GRAD(y, code, jnp.asarray(mask), weights))
    g_bad = np.asarray(_GRAD(jnp.asarray(bad), code, jnp.asarray(mask), weights))
    np.testing.assert_array_equal(g_bad, g_clean)
    assert np.all(np.isfinite(g_bad)) and not g_bad[dead].any()


def test_compiles_once_across_masks_and_leaves(case):
    # The shared jitted decoder `_DEC` (the code is an argument): once this code's structure and
    # shapes are compiled, new masks and new leaf values add no entry to its cache.
    code, y = _setup(case)
    masks = _masks(case, code.num_workers, seed=3)
    _DEC(code, y, jnp.asarray(masks[0]))
    size = _DEC._cache_size()
    for mask in masks[1:]:
        _DEC(code, y, jnp.asarray(mask))
    # new λs, nodes, learned parameters (every real leaf scaled; nodes stay ascending; an
    # integer leaf, such as RobustSplineCode's loss index, is a choice, not a scale)
    scaled = jax.tree.map(lambda a: a * 0.99 if jnp.issubdtype(a.dtype, jnp.inexact) else a, code)
    _DEC(scaled, y * 1.5, jnp.ones(code.num_workers, bool))
    assert _DEC._cache_size() == size


@pytest.mark.usefixtures("without_jaxtyping")  # gcc_jax's own messages, not the annotations'
def test_bad_shapes_and_masks_raise_naming_the_argument(case):
    code, y = _setup(case)
    n, k = code.num_workers, code.num_inputs
    ok = np.ones(n, bool)
    with pytest.raises(ValueError, match="`y`"):
        code.decode(y[:-1], ok)
    with pytest.raises(ValueError, match="`y`"):
        code.decode_with_status(jnp.zeros(()), ok)
    with pytest.raises(ValueError, match="`mask`"):
        code.decode(y, np.ones(n + 1, bool))
    with pytest.raises(ValueError, match="`mask`"):
        code.decode(y, np.ones((2, n), bool))
    with pytest.raises(TypeError, match="`mask`.*boolean"):
        code.decode(y, np.ones(n))
    with pytest.raises(TypeError, match="`mask`.*boolean"):
        code.available(np.ones(n, int))
    with pytest.raises(TypeError, match="`y`.*complex"):
        code.decode_with_status(y + 0j, ok)
    with pytest.raises(TypeError, match="`y`"):
        code.decode_with_status(np.full(y.shape, "a"), ok)
    with pytest.raises(ValueError, match="`x`"):
        code.encode(case.x[: k - 1])
    with pytest.raises(TypeError, match="`x`.*complex"):
        code.encode_with_status(case.x + 1j)
    with pytest.raises(TypeError, match="`x`"):
        code.encode_with_status(np.full(case.x.shape, "a"))
    with pytest.raises(TypeError, match="`mask`"):  # also under jit: static checks stay static
        _DEC(code, y, jnp.ones(n, jnp.int32))


def test_status_flags_under_jit(case):
    code, y = _setup(case)
    n = code.num_workers

    def dec(y, m):
        return _DEC(code, y, m)

    ok = jnp.ones(n, bool)
    # NaN from a live worker: flagged, value NaN
    out = dec(y.at[0].set(jnp.nan), ok)
    assert int(out.status) & int(gcc.Status.NONFINITE_DATA)
    assert bool(jnp.all(jnp.isnan(out.value)))
    out = dec(y.at[n - 1].set(jnp.inf), ok)
    assert int(out.status) & int(gcc.Status.NONFINITE_DATA)
    # too many stragglers: the code's flag (value NaN), or a fill value with status OK
    out = dec(y, jnp.asarray(case.undecodable))
    if case.flag is None:
        assert int(out.status) == 0
        missing = ~np.asarray(code.available(case.undecodable))
        assert missing.any() and not np.asarray(out.value)[missing].any()  # fill value 0
    else:
        assert int(out.status) == int(case.flag)
        assert bool(jnp.all(jnp.isnan(out.value)))
        with pytest.raises(gcc.GCCValueError, match=f"{type(code).__name__}.*needs|recovers"):
            code.decode(y, case.undecodable)
        assert type(code).__name__ in gcc.describe_status(case.flag, code)
    # the encoder: NaN in x is flagged under jit, value NaN or the NaN passed through
    enc = _ENC(code, jnp.asarray(case.x).at[0, 0].set(jnp.nan))
    assert int(enc.status) & int(gcc.Status.NONFINITE_DATA)
    with pytest.raises(gcc.GCCValueError, match="NaN"):
        code.encode(np.where(np.eye(*case.x.shape, dtype=bool), np.nan, case.x))


def test_available_shape_and_agreement_with_decode(case):
    code, y = _setup(case)
    k = code.num_inputs
    rng = np.random.default_rng(4)
    masks = list(_masks(case, code.num_workers, seed=4))
    masks += [random_mask(rng, code.num_workers, s) for s in range(code.num_workers + 1)]
    for mask in masks:
        avail = code.available(mask)
        assert avail.shape == (k,) and avail.dtype == jnp.bool_
        avail = np.asarray(avail)
        out = code.decode_with_status(y, mask)
        if int(out.status) != 0:
            assert not avail.any()  # nothing usable from an undecodable pattern
        elif case.flag is not None:
            assert avail.all()  # a coded scheme estimates every input
        # an unavailable estimate carries no information about the workers' outputs
        other = code.decode_with_status(2.0 * y + 1.0, mask)
        np.testing.assert_array_equal(
            np.asarray(other.value)[~avail], np.asarray(out.value)[~avail]
        )
    jitted = _AVAILABLE(code, jnp.asarray(case.undecodable))
    np.testing.assert_array_equal(jitted, code.available(case.undecodable))


def test_linear_codes_matrix_decoder_equals_decoder(case):
    code, y = _setup(case)
    if not isinstance(code, gcc.AbstractLinearCode):
        nonlinear = {"uncoded", "replication", "parity-model", "grouped-parity", "learned"}
        nonlinear |= {"robust-tukey", "robust-trim", "approxifer", "lagrange-ec"}  # Byzantine
        assert case.name in nonlinear
        return
    rng = np.random.default_rng(5)
    wide = jnp.asarray(rng.normal(size=(code.num_workers, 3 * code.num_workers)))  # matrix path
    for yy in (y, wide):
        for mask in _masks(case, code.num_workers, seed=5):
            a = code.decode_by_matrix_with_status(yy, mask)
            b = code.decode_with_status(yy, mask)
            assert int(a.status) == int(b.status)
            _close(a.value, b.value, rtol=1e-10, atol=1e-10, equal_nan=True)
    e, status = code.encoder_matrix_with_status()
    assert int(status) == 0 and e.shape == (code.num_workers, code.num_inputs)
    _close(e @ jnp.asarray(case.x), code.encode(case.x), rtol=1e-10, atol=1e-12)


def test_eager_calls_compile_once_and_equal_the_method_traced_inline(case):
    # `code.decode_with_status(y, mask)` called eagerly runs one compiled program per code
    # structure and shapes: new masks and new worker outputs never compile again.
    code, y = _setup(case)
    n = code.num_workers
    cache = type(code).decode_with_status.jitted
    rng = np.random.default_rng(7)
    first = code.decode_with_status(y, random_mask(rng, n, 0))
    size = cache._cache_size()
    for s in range(1, case.max_stragglers + 1):
        mask = random_mask(rng, n, s)
        y2 = y * (1.0 + 0.1 * s)
        out = code.decode_with_status(y2, mask)
        # the same arithmetic as the method traced inside another jit
        np.testing.assert_allclose(out.value, _DEC(code, y2, mask).value, rtol=1e-12, atol=1e-12)
    assert cache._cache_size() == size
    assert int(first.status) == 0


def test_min_live_is_the_fewest_live_workers_that_decode(case):
    """``min_live`` (declared on every code): a pattern with that many live workers decodes
    with status OK; with one fewer, no pattern does and no estimate is available."""
    code, y = _setup(case)
    n, need = code.num_workers, code.min_live
    assert isinstance(need, int) and 0 <= need <= n
    rng = np.random.default_rng(8)
    out = code.decode_with_status(y, random_mask(rng, n, n - need))
    assert int(out.status) == 0, gcc.describe_status(out.status, code)
    if need >= 1:
        mask = random_mask(rng, n, n - need + 1)
        assert int(code.decode_with_status(y, mask).status) != 0
        assert not np.asarray(code.available(mask)).any()
