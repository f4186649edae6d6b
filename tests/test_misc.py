"""Validation shared by the whole API (``gcc_jax/_core/checks.py``) and defects found by fuzzing.

Static problems (complex or string data, non-numeric λ, ints passed as PRNG keys, non-boolean
masks) raise ``TypeError``/``ValueError`` naming the argument; any integral type is a valid
size; value problems are status flags under ``jit`` (the encoder's too) and error messages name
the code and what it needs.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gcc_jax as gcc
from gcc_jax import tuning
from gcc_jax.evaluation import SearchBudget

# These tests check gcc_jax's own validation (what users see), not the annotations.
pytestmark = pytest.mark.usefixtures("without_jaxtyping")

T = np.linspace(-1.0, 1.0, 8)
X = np.random.default_rng(0).normal(size=(3, 2))


def _spline(**kw):
    return gcc.SplineCode.chebyshev(num_inputs=3, num_workers=7, **kw)


# -- complex and string data ----------------------------------------------------------------------


@pytest.mark.parametrize("solver", ["banded", "kernel"])
def test_complex_data_is_rejected_not_cut_to_its_real_part(solver):
    with pytest.raises(TypeError, match="`y` must be real; got complex"):
        gcc.fit_smoothing_spline(T, np.sin(T) + 1j, 0.1, solver=solver)
    with pytest.raises(TypeError, match="`t` must be real; got complex"):
        gcc.fit_smoothing_spline(T + 0j, np.sin(T), 0.1, solver=solver)
    code = _spline(solver=solver)
    with pytest.raises(TypeError, match="`x` must be real"):
        gcc.coded_apply(code, jnp.sin, X + 1j, np.ones(7, bool))
    with pytest.raises(TypeError, match="`x` must be real"):
        gcc.monte_carlo_loss(code, jnp.sin, X * (1 + 0j), np.ones((2, 7), bool))


def test_strings_are_rejected_naming_the_argument():
    code = _spline()
    with pytest.raises(TypeError, match="`y`"):
        gcc.fit_smoothing_spline(T, ["a"] * 8, 0.1)
    with pytest.raises(TypeError, match="`x`"):
        code.encode("abc")
    with pytest.raises(TypeError, match="`x`"):
        gcc.coded_apply(code, jnp.sin, [["a", "b"]] * 3, np.ones(7, bool))
    with pytest.raises(TypeError, match="`mask`"):
        code.decode(np.ones((7, 2)), "abc")
    with pytest.raises(TypeError, match="`mask`"):
        code.decode(np.ones((7, 2)), ["a"] * 7)
    with pytest.raises(TypeError, match="`masks`"):
        gcc.monte_carlo_loss(code, jnp.sin, X, [["x"] * 7])
    with pytest.raises(TypeError, match="`p`"):
        gcc.sample_masks(jax.random.key(0), 10, num=3, p="0.2")
    with pytest.raises(TypeError, match="`p`"):
        gcc.sample_masks(jax.random.key(0), 10, num=3, p=0.2j)
    with pytest.raises(TypeError, match="`p`"):
        tuning.StragglerModel.iid("0.2")


@pytest.mark.parametrize("bad", ["0.1", b"0.1", 0.1 + 0j, 1j, True, np.array([0.1, 0.2])])
def test_non_numeric_lambda_is_rejected_everywhere(bad):
    err = ValueError if isinstance(bad, np.ndarray) else TypeError
    with pytest.raises(err, match="`lam_dec`"):
        _spline(lam_dec=bad)
    with pytest.raises(err, match="`lam_enc`"):
        _spline(lam_enc=bad)
    code = _spline()
    with pytest.raises(err, match="`lam_dec`"):
        dataclasses.replace(code, lam_dec=bad)
    with pytest.raises(err, match="`lam_dec`"):
        gcc.SplineCode(alpha=code.alpha, beta=code.beta, lam_enc=0.0, lam_dec=bad)
    with pytest.raises(err, match="`lam`"):
        gcc.fit_smoothing_spline(T, np.sin(T), bad)


# -- integral sizes of any type -------------------------------------------------------------------


@pytest.mark.parametrize("integer", [np.int64, np.int32, np.uint8, lambda v: np.asarray(v)])
def test_numpy_integers_are_valid_sizes(integer):
    i = integer
    pairs = [
        (
            gcc.SplineCode.chebyshev(num_inputs=i(5), num_workers=i(9)),
            gcc.SplineCode.chebyshev(num_inputs=5, num_workers=9),
        ),
        (
            gcc.BerrutCode.chebyshev(num_inputs=i(5), num_workers=i(9)),
            gcc.BerrutCode.chebyshev(num_inputs=5, num_workers=9),
        ),
        (
            gcc.LagrangeCode.chebyshev(num_inputs=i(3), num_workers=i(9), degree=i(2)),
            gcc.LagrangeCode.chebyshev(num_inputs=3, num_workers=9, degree=2),
        ),
        (gcc.UncodedCode(num_inputs=i(3)), gcc.UncodedCode(num_inputs=3)),
        (
            gcc.ReplicationCode(num_inputs=i(3), num_workers=i(6)),
            gcc.ReplicationCode(num_inputs=3, num_workers=6),
        ),
        (
            gcc.ReplicationCode.with_replicas(num_inputs=i(3), replicas=i(2)),
            gcc.ReplicationCode(num_inputs=3, num_workers=6),
        ),
        (
            gcc.ParityModelCode(jnp.eye(2), jnp.matmul, num_inputs=i(2)),
            gcc.ParityModelCode(jnp.eye(2), jnp.matmul, num_inputs=2),
        ),
        (
            gcc.LearnedCode.init(
                key=0, num_inputs=i(2), input_shape=(i(3),), output_size=i(2), num_parities=i(1)
            ),
            gcc.LearnedCode.init(key=0, num_inputs=2, input_shape=(3,), output_size=2),
        ),
    ]
    for got, ref in pairs:
        assert type(got.num_inputs) is int and type(got.num_workers) is int
        assert (got.num_inputs, got.num_workers) == (ref.num_inputs, ref.num_workers)
        assert jax.tree.structure(got) == jax.tree.structure(ref)  # static fields are ints
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(ref), strict=True):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(gcc.chebyshev_nodes(i(5)), gcc.chebyshev_nodes(5))
    key = jax.random.key(1)
    np.testing.assert_array_equal(
        gcc.sample_masks(key, i(10), num=i(4), stragglers=i(2)),
        gcc.sample_masks(key, 10, num=4, stragglers=2),
    )
    np.testing.assert_array_equal(gcc.contiguous_masks(i(5), i(2)), gcc.contiguous_masks(5, 2))
    model = tuning.StragglerModel.exact(i(2))
    assert model.stragglers == 2 and type(model.stragglers) is int
    np.testing.assert_array_equal(
        model.sample(key, 10, num=i(3)), tuning.StragglerModel.exact(2).sample(key, 10, num=3)
    )


def test_numpy_integers_in_worst_case_and_lambda_selection():
    code = _spline()
    budget = SearchBudget(max_exhaustive=np.int64(50))
    wc = gcc.worst_case_mask(code, jnp.sin, X, stragglers=np.int64(2), search=budget)
    ref = gcc.worst_case_mask(code, jnp.sin, X, stragglers=2, search={"max_exhaustive": 50})
    np.testing.assert_array_equal(wc.mask, ref.mask)
    y = np.sin(3 * np.asarray(code.beta))
    mask = np.ones(7, bool)
    a = tuning.cv_lam_dec(code, y, mask, folds=np.int64(3), refine=np.int64(2))
    b = tuning.cv_lam_dec(code, y, mask, folds=3, refine=2)
    assert float(a.lam) == float(b.lam)


def test_non_integral_sizes_are_rejected():
    with pytest.raises(TypeError, match="`num_inputs`"):
        gcc.SplineCode.chebyshev(num_inputs=5.0, num_workers=9)
    with pytest.raises(TypeError, match="`stragglers`"):
        gcc.sample_masks(jax.random.key(0), 10, num=2, stragglers=True)
    with pytest.raises(TypeError, match="`num_workers`"):
        gcc.ReplicationCode(num_inputs=2, num_workers="4")


# -- PRNG keys ------------------------------------------------------------------------------------


def test_an_int_is_not_a_prng_key():
    code = _spline()
    with pytest.raises(TypeError, match=r"`key` must be a JAX PRNG key \(jax.random.key"):
        gcc.sample_masks(0, 10, num=3, stragglers=2)
    with pytest.raises(TypeError, match="`key` must be a JAX PRNG key"):
        gcc.worst_case_mask(code, jnp.sin, X, stragglers=1, key=0)
    with pytest.raises(TypeError, match="`key` must be a JAX PRNG key"):
        tuning.StragglerModel.exact(1).sample(0, 7, num=2)
    with pytest.raises(TypeError, match="`key` must be a JAX PRNG key"):
        tuning.evaluate(
            code, jnp.sin, X[None], key=0, straggler_model=tuning.StragglerModel.exact(1)
        )
    with pytest.raises(TypeError, match="`key` must be a JAX PRNG key"):
        tuning.tune(
            code,
            jnp.sin,
            np.stack([X, X]),
            key=0,
            straggler_model=tuning.StragglerModel.exact(1),
            steps=0,
        )
    # legacy uint32[2] keys stay valid
    legacy = jax.random.PRNGKey(0)
    assert gcc.sample_masks(legacy, 10, num=2, stragglers=1).shape == (2, 10)


# -- the encoder's status under jit ---------------------------------------------------------------


def _linear_codes():
    return [
        _spline(),
        gcc.BerrutCode.chebyshev(num_inputs=3, num_workers=7),
        gcc.LagrangeCode.chebyshev(num_inputs=3, num_workers=7, degree=1),
    ]


@pytest.mark.parametrize("code", _linear_codes(), ids=lambda c: type(c).__name__)
def test_encode_with_status_flags_bad_nodes_and_data_under_jit(code):
    enc = jax.jit(lambda alpha, x: dataclasses.replace(code, alpha=alpha).encode_with_status(x))
    ok = enc(code.alpha, X)
    assert int(ok.status) == 0
    unsorted = code.alpha[jnp.array([1, 0, 2])]
    for bad in (code.alpha.at[1].set(jnp.nan), unsorted):
        out = enc(bad, X)
        assert int(out.status) & int(gcc.Status.BAD_NODES)
        assert bool(jnp.all(jnp.isnan(out.value)))
    out = enc(code.alpha, jnp.asarray(X).at[2, 1].set(jnp.inf))
    assert int(out.status) & int(gcc.Status.NONFINITE_DATA)
    assert bool(jnp.all(jnp.isnan(out.value)))
    # eager: the same problems raise
    with pytest.raises(gcc.GCCValueError, match="`alpha`"):
        dataclasses.replace(code, alpha=unsorted)


def test_negative_lam_enc_is_flagged_under_jit():
    code = _spline()
    enc = jax.jit(lambda lam: dataclasses.replace(code, lam_enc=lam).encode_with_status(X))
    assert int(enc(jnp.asarray(1e-3)).status) == 0
    for bad in (-1e-3, np.nan):
        out = enc(jnp.asarray(bad))
        assert int(out.status) & int(gcc.Status.NEGATIVE_LAM)
        assert bool(jnp.all(jnp.isnan(out.value)))
    out = enc(jnp.asarray(np.inf))  # flagged (NEGATIVE_LAM or NONFINITE_RESULT), never silent
    assert int(out.status) != 0 and bool(jnp.all(jnp.isnan(out.value)))
    with pytest.raises(gcc.GCCValueError, match="`lam_enc`"):
        _spline(lam_enc=-1e-3)


# -- GCV flags non-finite live outputs ------------------------------------------------------------


def test_gcv_flags_nonfinite_output_of_a_live_worker():
    code = _spline()  # the file's one size, and cv_lam_dec's folds and refine as in the test
    # above: the λ selections compile once for the file
    y = np.sin(3 * np.asarray(code.beta)) + 0.1 * np.random.default_rng(1).normal(size=7)
    mask = np.ones(7, bool)
    mask[5] = False
    clean = tuning.gcv_lam_dec(code, y, mask)
    assert int(clean.status) == 0
    gcv_jit = jax.jit(lambda y: tuning.gcv_lam_dec(code, y, mask))  # compiled once, not per loop
    for bad in (np.nan, np.inf):
        y_bad = y.copy()
        y_bad[3] = bad  # a live worker
        for choice in (
            tuning.gcv_lam_dec(code, y_bad, mask),
            gcv_jit(y_bad),
            tuning.cv_lam_dec(code, y_bad, mask, folds=3, refine=2),
        ):
            assert int(choice.status) & int(gcc.Status.NONFINITE_DATA)
        score = tuning.gcv_score(code, y_bad, mask, 1e-4)
        assert np.isnan(float(score))
        y_dead = y.copy()
        y_dead[5] = bad  # the straggler: ignored
        choice = tuning.gcv_lam_dec(code, y_dead, mask)
        assert int(choice.status) == 0 and float(choice.lam) == float(clean.lam)


# -- code-specific messages ------------------------------------------------------------------------


def test_messages_name_the_code_and_its_requirement():
    y = np.ones((6, 2))
    none = np.zeros(6, bool)
    cases = [
        (
            gcc.BerrutCode.chebyshev(num_inputs=3, num_workers=6),
            none,
            "BerrutCode needs at least 1",
        ),
        (
            gcc.LagrangeCode.chebyshev(
                num_inputs=3, num_workers=6, degree=1, below_threshold="interpolate"
            ),
            none,
            "LagrangeCode needs at least 1",
        ),
        (
            gcc.LagrangeCode.chebyshev(num_inputs=3, num_workers=6, degree=2),
            np.array([1, 1, 0, 1, 1, 0], bool),
            r"LagrangeCode's recovery threshold: it needs 5 live workers",
        ),
        (
            gcc.SplineCode.chebyshev(num_inputs=3, num_workers=6),
            np.eye(6, dtype=bool)[2],
            "fewer than 2 live workers .SplineCode needs at least 2",
        ),
        (
            gcc.ParityModelCode(jnp.eye(2), jnp.matmul, num_inputs=5),
            np.array([0, 0, 1, 1, 1, 1], bool),
            r"more than 1 output missing \(ParityModelCode recovers at most r = 1",
        ),
    ]
    for code, mask, text in cases:
        with pytest.raises(gcc.GCCValueError, match=text):
            code.decode(y, mask)
        status = code.decode_with_status(y, mask).status
        assert "smoothing spline" not in gcc.describe_status(status, code) or isinstance(
            code, gcc.SplineCode
        )
    # without a code: the generic text, which names every code's requirement
    generic = gcc.describe_status(gcc.Status.TOO_FEW_LIVE)
    assert "SplineCode" in generic and "BerrutCode" in generic
    # monte_carlo_loss names the code too
    code = gcc.BerrutCode.chebyshev(num_inputs=3, num_workers=6)
    with pytest.raises(gcc.GCCValueError, match="BerrutCode needs at least 1"):
        gcc.monte_carlo_loss(code, jnp.sin, X, np.zeros((2, 6), bool))
