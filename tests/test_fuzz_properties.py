"""Property-based fuzzing (hypothesis) of every code in ``ALL_CODES`` and of the spline API.

Drawn: worker outputs with NaN/Inf/huge values at straggling and at live positions, masks of
every live count, wrong shapes, ranks and dtypes (complex, integer, boolean, strings), smoothing
parameters of every type, query points with NaN/Inf, target degrees of freedom. The invariant,
everywhere: the call raises a clear error that names the argument, or reports a status flag, or
returns a value within tolerance of a reference (the same decoder with the stragglers' values
clean; a fit with λ as a Python float; SciPy's natural cubic spline; the trace of the returned
λ). Never a silent NaN, a silently wrong value, or someone else's message.

Cost: one compiled decoder per code (shared by all its examples: the code is a jit argument)
and tracing only (``jax.eval_shape``) for dtypes and shapes, a few seconds per code.
"""

import contextlib
import re

import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import jaxtyping
import numpy as np
import pytest
import scipy.interpolate
from helpers import ALL_CODES
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import gcc_jax as gcc

CASES = {case.name: case for case in ALL_CODES}
M = 2  # output size of every test model (the learned code's decoder is built for it)
FUZZ = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,  # the same examples on every run (CI)
    suppress_health_check=[HealthCheck.too_slow],
)
ERRORS = (TypeError, ValueError)  # GCCValueError is a ValueError


@contextlib.contextmanager
def _own_checks():
    """gcc_jax's own messages, not jaxtyping's annotation checks (as the fixture
    ``without_jaxtyping``, usable inside a hypothesis example)."""
    jaxtyping.config.update("jaxtyping_disable", True)
    try:
        yield
    finally:
        jaxtyping.config.update("jaxtyping_disable", False)


def _raises_naming(fn, *names: str) -> BaseException | None:
    """Run ``fn``; if it raises, the error must be a TypeError/ValueError naming one of
    ``names`` in backquotes. Returns the error (``None`` when it returned)."""
    try:
        with _own_checks():
            fn()
    except ERRORS as err:
        msg = str(err)
        assert any(f"`{name}`" in msg for name in names), (names, type(err).__name__, msg)
        return err
    return None


_BUILT: dict[str, tuple] = {}


def _code(name: str):
    """The code and clean worker outputs ``(n, M)``, built once per session."""
    if name not in _BUILT:
        code = CASES[name].build()
        y = np.random.default_rng(7).uniform(-0.5, 0.5, size=(code.num_workers, M))
        _BUILT[name] = code, y
    return _BUILT[name]


BAD = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf, "huge": 1e300, "zero": 0.0}


# -- decoders: stragglers' garbage, live NaN/Inf, masks of every live count ----------------------


@pytest.mark.parametrize("name", CASES)
@FUZZ
@given(data=st.data())
def test_decode_values_masks_and_nonfinite_positions(name, data):
    code, y = _code(name)
    n = code.num_workers
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="mask"))
    fill = data.draw(st.sampled_from(sorted(BAD)), label="straggler value")
    live_bad = data.draw(st.none() | st.integers(0, n - 1), label="live non-finite row")
    dirty = y.copy()
    dirty[~mask] = BAD[fill]
    if live_bad is not None and mask[live_bad]:
        dirty[live_bad, data.draw(st.integers(0, M - 1))] = np.nan
    else:
        live_bad = None
    ref = code.decode_with_status(y, mask)  # the stragglers' values clean
    got = code.decode_with_status(dirty, mask)
    status = int(got.status)
    if live_bad is not None:
        assert status & gcc.Status.NONFINITE_DATA, (name, status)
        assert np.all(np.isnan(got.value))
        with pytest.raises(gcc.GCCValueError, match="NaN or Inf in the output of a live"):
            code.decode(dirty, mask)
        return
    assert status == int(ref.status)  # a straggler's value never changes the status
    if int(mask.sum()) < code.min_live:
        assert status != 0, (name, mask)  # below the code's own minimum: flagged
    if status != 0:
        assert np.all(np.isnan(got.value))
        with pytest.raises(gcc.GCCValueError, match=re.escape(f"{type(code).__name__}.decode")):
            code.decode(dirty, mask)
        return
    assert np.all(np.isfinite(got.value))
    np.testing.assert_allclose(got.value, ref.value, rtol=1e-12, atol=1e-12)


def _bad_outputs(n: int):
    """Worker outputs of the wrong shape, rank or dtype, each with the argument it breaks."""
    return st.sampled_from(
        [
            (np.zeros((n + 1, M)), "y"),
            (np.zeros((n - 1, M)), "y"),
            (np.zeros(()), "y"),
            (np.zeros((n, M), complex), "y"),
            (np.full((n, M), "a"), "y"),
            (np.zeros((n, M)).tolist() + [["x"] * M], "y"),
        ]
    )


def _bad_masks(n: int):
    return st.sampled_from(
        [
            (np.ones(n, np.int32), "mask"),
            (np.ones(n, float), "mask"),
            (np.ones(n + 1, bool), "mask"),
            (np.ones((2, n), bool), "mask"),
            ("all", "mask"),
            ([1] * n, "mask"),
        ]
    )


@pytest.mark.parametrize("name", CASES)
@FUZZ
@given(data=st.data())
def test_decode_refuses_bad_shapes_and_dtypes_naming_the_argument(name, data):
    code, y = _code(name)
    n = code.num_workers
    mask = np.ones(n, bool)
    if data.draw(st.booleans(), label="break y (else the mask)"):
        bad, arg = data.draw(_bad_outputs(n), label="y")
        call = lambda: jax.eval_shape(lambda: code.decode_with_status(jnp.asarray(bad), mask))
        if isinstance(bad, list) or (isinstance(bad, np.ndarray) and bad.dtype.kind == "U"):
            call = lambda: code.decode_with_status(bad, mask)  # not an array JAX can hold
    else:
        bad, arg = data.draw(_bad_masks(n), label="mask")
        call = lambda: code.decode_with_status(y, bad)
    assert _raises_naming(call, arg) is not None, (name, arg, bad)


@pytest.mark.parametrize("name", CASES)
@FUZZ
@given(dtype=st.sampled_from([np.float32, np.float64, np.int32, np.int64, np.bool_]))
def test_decode_follows_the_outputs_dtype(name, dtype):
    code, y = _code(name)
    out = jax.eval_shape(
        lambda: code.decode_with_status(jnp.asarray(y.astype(dtype)), jnp.ones(len(y), bool))
    )
    assert out.value.shape == (code.num_inputs, M) and out.status.dtype == jnp.int32
    assert jnp.issubdtype(out.value.dtype, jnp.floating)
    if np.dtype(dtype).kind == "f":  # never less precise than the outputs
        assert jnp.promote_types(dtype, out.value.dtype) == out.value.dtype


# -- encoders: shapes, dtypes and NaN/Inf positions in x -----------------------------------------


@pytest.mark.parametrize("name", CASES)
@FUZZ
@given(data=st.data())
def test_encode_inputs_shapes_dtypes_and_nonfinite_positions(name, data):
    code, _ = _code(name)
    x = np.asarray(CASES[name].x, float)
    k = code.num_inputs
    kind = data.draw(st.sampled_from(["nan", "rows", "rank", "complex", "dtype"]), label="kind")
    if kind == "nan":
        i = data.draw(st.integers(0, x.size - 1), label="position")
        bad = x.copy().reshape(-1)
        bad[i] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]))
        bad = bad.reshape(x.shape)
        with pytest.raises(gcc.GCCValueError, match="`x` contains NaN or Inf"):
            code.encode(bad)
        status = jax.eval_shape(lambda: code.encode_with_status(jnp.asarray(bad)).status)
        assert status.dtype == jnp.int32
    elif kind == "rows":
        rows = data.draw(st.sampled_from([k - 1, k + 1]))
        assert _raises_naming(lambda: code.encode(np.zeros((rows, *x.shape[1:]))), "x")
    elif kind == "rank":
        assert _raises_naming(lambda: code.encode(np.zeros(())), "x")
    elif kind == "complex":
        assert _raises_naming(lambda: code.encode(x.astype(complex)), "x")
    else:
        dtype = data.draw(st.sampled_from([np.float32, np.float64]))
        out = jax.eval_shape(lambda: code.encode_with_status(jnp.asarray(x.astype(dtype))))
        assert out.value.shape[0] == code.num_workers
        assert jnp.issubdtype(out.value.dtype, jnp.floating)


# -- λ of every type: fits and the codes with a smoothing parameter -----------------------------

NOT_REAL = [None, "0.1", b"1", 1j, 1e-3 + 0j, True, [1e-3], np.ones(2), object()]
REAL_TYPES = [np.float32(0.1), np.float64(1e-4), np.array(1e-3), jnp.asarray(2e-2), np.int64(3)]
LAMS = st.one_of(
    st.floats(min_value=0.0, max_value=1e3),
    st.floats(max_value=-1e-12),
    st.sampled_from([np.nan, np.inf, -np.inf]),
    st.integers(0, 5),
    st.integers(-5, -1),
    st.sampled_from(REAL_TYPES),
    st.sampled_from(NOT_REAL),
)


def _every_type(test):
    """Hypothesis examples for every non-real and real-typed λ (besides the drawn ones)."""
    for lam in NOT_REAL + REAL_TYPES + [-1.0, np.nan, np.inf]:
        test = example(lam=lam)(test)
    return test


def _real_value(lam) -> float | None:
    """``float(lam)`` when ``lam`` is a real scalar (not bool), else ``None``."""
    if isinstance(lam, bool | str | bytes | complex) or lam is None:
        return None
    try:
        arr = np.asarray(lam)
    except Exception:
        return None
    if arr.shape != () or arr.dtype.kind not in "iuf":
        return None
    return float(arr)


T8 = np.sort(np.random.default_rng(3).uniform(-1, 1, 8))
Y8 = np.sin(3 * T8)


@FUZZ
@given(lam=LAMS)
@_every_type
def test_fit_takes_any_real_lam_and_names_lam_otherwise(lam):
    value = _real_value(lam)
    err = _raises_naming(lambda: gcc.fit_smoothing_spline(T8, Y8, lam), "lam")
    if value is None or not np.isfinite(value) or value < 0:
        assert err is not None, lam
        if value is not None:  # a real λ of a bad value: flagged by the status form
            status = gcc.fit_smoothing_spline_with_status(T8, Y8, lam).status
            assert status == gcc.Status.NEGATIVE_LAM
        return
    assert err is None, (lam, err)
    got = gcc.fit_smoothing_spline(T8, Y8, lam)
    ref = gcc.fit_smoothing_spline(T8, Y8, value)
    assert int(got.status) == 0
    np.testing.assert_allclose(got.values, ref.values, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("cls", [gcc.SplineCode, gcc.RobustSplineCode], ids=lambda c: c.__name__)
@pytest.mark.parametrize("which", ["lam_enc", "lam_dec"])
@FUZZ
@given(lam=LAMS)
@_every_type
def test_codes_take_any_real_lam_and_name_it_otherwise(cls, which, lam):
    value = _real_value(lam)
    made = []
    alpha, beta = gcc.chebyshev_nodes(3, kind=1), gcc.chebyshev_nodes(6, kind=2)
    lams = dict(lam_enc=0.0, lam_dec=1e-6) | {which: lam}
    err = _raises_naming(lambda: made.append(cls(alpha=alpha, beta=beta, **lams)), which)
    again = _raises_naming(
        lambda: made.append(cls.chebyshev(num_inputs=3, num_workers=6, **{which: lam})), which
    )
    assert (err is None) == (again is None), (cls.__name__, which, lam, err, again)
    if value is None or not np.isfinite(value) or value < 0:
        assert err is not None, (cls.__name__, which, lam)
        return
    assert err is None, (cls.__name__, which, lam, err)
    assert float(getattr(made[0], which)) == pytest.approx(value, rel=1e-6)


# -- query points ----------------------------------------------------------------------------------

SPLINE = gcc.fit_smoothing_spline(T8, Y8, 0.0)  # natural interpolating spline: SciPy's reference
SCIPY = scipy.interpolate.CubicSpline(T8, Y8, bc_type="natural")


def _reference(tq: np.ndarray) -> np.ndarray:
    """SciPy's natural spline inside the nodes, its end tangent lines outside."""
    lo, hi = T8[0], T8[-1]
    out = SCIPY(np.clip(tq, lo, hi))
    out = np.where(tq < lo, SCIPY(lo) + SCIPY(lo, 1) * (tq - lo), out)
    return np.where(tq > hi, SCIPY(hi) + SCIPY(hi, 1) * (tq - hi), out)


QUERIES = st.one_of(
    hnp.arrays(np.float64, st.sampled_from([(), (1,), (3,)]), elements=st.floats(-3, 3)),
    hnp.arrays(
        np.float64,
        st.sampled_from([(1,), (3,)]),
        elements=st.floats(-3, 3) | st.sampled_from([np.nan, np.inf, -np.inf]),
    ),
    st.sampled_from([np.zeros((2, 2)), np.array([1j, 0]), np.array(["a"]), "0.5"]),
)


@FUZZ
@given(tq=QUERIES)
def test_query_points_finite_nonfinite_and_malformed(tq):
    err = _raises_naming(lambda: SPLINE(tq), "tq")
    arr = np.asarray(tq)
    if arr.dtype.kind != "f" or arr.ndim > 1:
        assert err is not None, tq
        return
    finite = np.isfinite(arr)
    with _own_checks():
        value, status = SPLINE.evaluate_with_status(tq)
    if not finite.all():
        assert isinstance(err, gcc.GCCValueError) and status == gcc.Status.BAD_ARGUMENT
        assert np.all(np.isnan(np.asarray(value)[~finite]))
    else:
        assert err is None and status == 0
    np.testing.assert_allclose(
        np.asarray(value)[finite], _reference(arr[finite]), rtol=1e-10, atol=1e-12
    )


# -- degrees of freedom ---------------------------------------------------------------------------

_LAM_FROM_DOF = jax.jit(gcc.lam_from_dof_with_status)
_DOF = jax.jit(gcc.effective_dof_with_status)


@FUZZ
@given(
    dof=st.floats(0.0, 10.0) | st.sampled_from([np.nan, np.inf, 2.0, 8.0]),
    live=st.integers(0, 8),
)
def test_lam_from_dof_under_jit_flags_every_out_of_range_dof(dof, live):
    mask = np.arange(8) < live
    lam, status = _LAM_FROM_DOF(T8, dof, mask)
    valid = np.isfinite(dof) and 2.0 < dof <= live
    if not valid:
        assert int(status) != 0 and np.isnan(lam), (dof, live)
        err = _raises_naming(lambda: gcc.lam_from_dof(T8, dof, mask), "dof", "mask", "t")
        assert isinstance(err, gcc.GCCValueError)
        return
    assert int(status) == 0 and float(lam) >= 0
    got, status = _DOF(T8, lam, mask)
    assert int(status) == 0
    assert float(got) == pytest.approx(dof, rel=1e-6, abs=1e-6)
