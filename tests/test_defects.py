"""Regressions of a fuzz campaign's defects: every one raises a clear error naming its argument,
or, under ``jit``, returns NaN with a status that says why (``*_with_status``) — never a silent
NaN, a silently wrong value, or someone else's message. Plus what a code says about liars
(``AbstractCode.max_liars``), which docs/adversarial.md lists and the service acts on."""

import re
import types
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import ALL_CODES

import gcc_jax as gcc
from gcc_jax.distributed import (
    CodedInferenceService,
    LocalExecutor,
    UncheckedResultsWarning,
    probability_check,
)

ROOT = Path(__file__).resolve().parents[1]
BETA = gcc.chebyshev_nodes(16, kind=2)
T = jnp.linspace(-1.0, 1.0, 8)


# -- lam_from_dof under jit: a dof outside (2, n_live] is flagged, not a huge λ ----------------


def test_lam_from_dof_outside_its_range_is_nan_with_a_flag_under_jit():
    lam, status = jax.jit(lambda d: gcc.lam_from_dof_with_status(BETA, d))(1.0)
    assert np.isnan(lam) and status == gcc.Status.BAD_ARGUMENT
    assert np.isnan(jax.jit(lambda d: gcc.lam_from_dof(BETA, d))(1.0))  # was 7.9e12
    for bad in (2.0, 16.5, jnp.inf, jnp.nan):
        assert int(jax.jit(gcc.lam_from_dof_with_status)(BETA, bad)[1]) & gcc.Status.BAD_ARGUMENT
    lam, status = jax.jit(lambda d: gcc.lam_from_dof_with_status(BETA, d))(12.0)
    assert status == 0 and float(lam) == pytest.approx(float(gcc.lam_from_dof(BETA, 12.0)))
    with pytest.raises(gcc.GCCValueError, match=r"`dof` must be in \(2, n_live\]"):
        gcc.lam_from_dof(BETA, 1.0)
    with pytest.raises(gcc.GCCValueError, match="`mask` must leave at least 3 live"):
        gcc.lam_from_dof(BETA, 2.5, np.arange(16) < 2)
    # the status form never raises on a value problem
    lam, status = gcc.lam_from_dof_with_status(BETA, 1.0)
    assert np.isnan(lam) and status == gcc.Status.BAD_ARGUMENT


# -- effective_dof: dead masks and negative λ ----------------------------------------------------


def test_effective_dof_of_a_dead_mask_or_a_negative_lam_is_an_error_or_a_flag():
    with pytest.raises(gcc.GCCValueError, match="`mask` must leave at least 2 live nodes"):
        gcc.effective_dof(BETA, 1e-3, np.zeros(16, bool))  # was NaN
    with pytest.raises(gcc.GCCValueError, match="`lam` must be finite and >= 0"):
        gcc.effective_dof(BETA, -1.0)
    go = jax.jit(gcc.effective_dof_with_status)
    dof, status = go(BETA, -1.0)
    assert np.isnan(dof) and status == gcc.Status.NEGATIVE_LAM  # was a bare NaN
    dof, status = go(BETA, 1e-3, jnp.zeros(16, bool))
    assert np.isnan(dof) and status == gcc.Status.TOO_FEW_LIVE
    dof, status = go(BETA, 1e-3)
    assert status == 0 and float(dof) == pytest.approx(float(gcc.effective_dof(BETA, 1e-3)))
    # differentiable in λ through the status form
    grad = jax.grad(lambda lam: gcc.effective_dof_with_status(BETA, lam)[0])(1e-3)
    assert np.isfinite(grad) and grad < 0


# -- expected_loss: no decodable pattern, a non-finite f, a non-code ------------------------------


def _loss_setup():
    code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=8)
    x = jnp.linspace(-1.0, 1.0, 3)[:, None]
    masks = np.ones((4, 8), bool)
    masks[1, :3] = False
    return code, x, masks


def test_expected_loss_with_no_decodable_pattern_or_a_nan_f_raises_or_flags():
    code, x, masks = _loss_setup()
    with pytest.raises(gcc.GCCValueError, match="`masks`: no pattern leaves the 2 live"):
        gcc.expected_loss(code, jnp.sin, x, np.zeros((4, 8), bool))  # was NaN
    with pytest.raises(gcc.GCCValueError, match="`f` returned NaN or Inf on a coded input"):
        gcc.expected_loss(code, lambda v: v * jnp.nan, x, masks)  # was NaN
    with pytest.raises(gcc.GCCValueError, match=r"`f\(x\)` on the inputs is not finite"):
        gcc.expected_loss(code, lambda v: jnp.where(jnp.abs(v) == 1.0, jnp.nan, v), x, masks)
    go = jax.jit(gcc.expected_loss_with_status, static_argnums=1)
    loss, status = go(code, jnp.sin, x, np.zeros((4, 8), bool))
    assert np.isnan(loss) and status == gcc.Status.TOO_FEW_LIVE
    loss, status = go(code, lambda v: v * jnp.nan, x, masks)
    assert np.isnan(loss) and status & gcc.Status.NONFINITE_DATA
    assert status & gcc.Status.BAD_ARGUMENT  # f(x) itself is not finite
    loss, status = go(code, jnp.sin, x, masks)
    assert status == 0 and float(loss) == pytest.approx(
        float(gcc.expected_loss(code, jnp.sin, x, masks)), rel=1e-12
    )
    # jax.grad of the status form, with the status as auxiliary output
    params = gcc.tuning.params_from_code(
        gcc.SplineCode.chebyshev(num_inputs=3, num_workers=8, lam_dec=1e-6)
    )
    g, status = jax.grad(gcc.expected_loss_with_status, has_aux=True)(params, jnp.sin, x, masks)
    assert status == 0 and np.isfinite(g.log_lam_dec)


@pytest.mark.usefixtures("without_jaxtyping")  # gcc_jax's own messages, not the annotations'
def test_none_and_non_codes_are_refused_naming_the_argument():
    code, x, masks = _loss_setup()
    msg = "`params` must be a gcc_jax code .*SplineParams.* got NoneType"
    with pytest.raises(TypeError, match=msg):
        gcc.expected_loss(None, jnp.sin, x, masks)  # was an AttributeError about NoneType
    with pytest.raises(TypeError, match="`params` must be .* got str"):
        gcc.expected_loss("spline", jnp.sin, x, masks)
    with pytest.raises(TypeError, match="`f` must be a function"):
        gcc.expected_loss(code, None, x, masks)
    with pytest.raises(TypeError, match="`lam` must be a real number; got None"):
        gcc.fit_smoothing_spline(T, jnp.sin(T), None)  # was "None is not a valid value ..."
    with pytest.raises(TypeError, match="`lam` must be a real number; got None"):
        gcc.fit_smoothing_spline_with_status(T, jnp.sin(T), None)
    with pytest.raises(TypeError, match="`lam` must be a real number"):
        gcc.effective_dof(BETA, None)
    with pytest.raises(TypeError, match="`lam` must be a real number"):
        gcc.smoother_matrix(T, T, [object()])


# -- query points: NaN in tq is an error or a flag, never a NaN with status 0 ---------------------


def test_a_fit_names_y_or_mask_when_live_points_are_bad():
    y = jnp.sin(T).at[3].set(jnp.nan)
    with pytest.raises(gcc.GCCValueError, match=r"`y` holds NaN or Inf at 1 live point"):
        gcc.fit_smoothing_spline(T, y, 1e-3)
    dead = np.ones(8, bool)
    dead[3] = False
    np.testing.assert_allclose(  # a dead point's NaN is no problem
        gcc.fit_smoothing_spline(T, y, 1e-3, dead).values,
        gcc.fit_smoothing_spline(T, jnp.sin(T), 1e-3, dead).values,
    )
    with pytest.raises(gcc.GCCValueError, match="`mask` leaves fewer than 2 live points"):
        gcc.fit_smoothing_spline(T, jnp.sin(T), 1e-3, np.arange(8) < 1)
    with pytest.raises(gcc.GCCValueError, match="`mask` and `weights` leave"):
        gcc.fit_smoothing_spline(T, jnp.sin(T), 1e-3, weights=np.arange(8) < 1)


def test_nan_query_points_raise_or_are_flagged():
    spline = gcc.fit_smoothing_spline(T, jnp.sin(T), 1e-3)
    with pytest.raises(gcc.GCCValueError, match=r"`tq` \(the query points\) must be finite"):
        spline(jnp.array([jnp.nan, 0.0]))  # was [nan, 0.] with status 0
    value, status = spline.evaluate_with_status(jnp.array([jnp.nan, 0.0]))
    assert np.isnan(value[0]) and np.isfinite(value[1]) and status == gcc.Status.BAD_ARGUMENT
    value, status = jax.jit(lambda s, q: s.evaluate_with_status(q))(spline, jnp.array([0.1, 0.0]))
    assert status == 0
    np.testing.assert_allclose(value, spline(jnp.array([0.1, 0.0])), rtol=1e-14, atol=1e-15)
    with pytest.raises(gcc.GCCValueError, match="`tq` .* contains NaN or Inf"):
        gcc.smoother_matrix(T, jnp.array([0.0, jnp.inf]), 1e-3)
    h, status = gcc.smoother_matrix_with_status(T, jnp.array([0.0, jnp.inf]), 1e-3)
    assert status == gcc.Status.BAD_ARGUMENT and np.all(np.isfinite(h[0]))
    assert "query points" in gcc.describe_status(status)


# -- encode: NaN in x names `x`, for every code ----------------------------------------------------


@pytest.mark.parametrize("case", ALL_CODES, ids=repr)
def test_encode_names_x_when_it_holds_nan(case):
    code = case.build()
    x = np.array(case.x, dtype=float)
    x[0, 0] = np.nan
    with pytest.raises(gcc.GCCValueError, match="`x` contains NaN or Inf"):
        code.encode(x)  # was "NaN or Inf in the output of a live worker … ill-conditioned"
    out = code.encode_with_status(jnp.asarray(x))
    assert out.status & gcc.Status.NONFINITE_DATA


def test_a_linear_codes_encoder_does_not_call_a_nan_input_ill_conditioned():
    code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=8)
    x = jnp.zeros((3, 2)).at[1, 0].set(jnp.nan)
    assert int(code.encode_with_status(x).status) == gcc.Status.NONFINITE_DATA


# -- the service: complex queries, and codes that cannot see liars --------------------------------


def _tanh3(v):
    return jnp.tanh(v[:2])


def test_a_complex_query_is_refused_not_answered_for_its_real_part():
    code = gcc.SplineCode.chebyshev(num_inputs=2, num_workers=4)
    ex = LocalExecutor(_tanh3, num_workers=4)
    with CodedInferenceService(ex, code, stragglers=1, input_shape=(3,), on_liars="ignore") as svc:
        bad = [np.array([1 + 1j, 0, 0]), np.array([True, False, True]), np.array(["1", "2", "3"])]
        answers = [svc.submit(q).result(timeout=60) for q in bad]
        good = svc.submit(np.array([0.5, 0.1, -0.2])).result(timeout=60)
    assert "complex" in answers[0].error  # was tanh of the real part
    assert all(not a.ok and "not a real numeric array" in a.error for a in answers)
    assert good.ok and svc.stats()["malformed"] == 3


def test_the_service_warns_when_nothing_checks_for_liars():
    plain = gcc.SplineCode.chebyshev(num_inputs=2, num_workers=6)
    ex = LocalExecutor(_tanh3, num_workers=6)
    with pytest.warns(UncheckedResultsWarning, match="SplineCode cannot detect corrupted"):
        CodedInferenceService(ex, plain, stragglers=1).close()
    with pytest.raises(ValueError, match="`on_liars`='raise': SplineCode cannot detect"):
        CodedInferenceService(ex, plain, stragglers=1, on_liars="raise")
    with pytest.raises(ValueError, match="`on_liars`: unknown name"):
        CodedInferenceService(ex, plain, stragglers=1, on_liars="maybe")
    quiet = [
        (ex, plain, dict(on_liars="ignore")),  # the caller trusts the workers
        (LocalExecutor(_tanh3, num_workers=6, validate=probability_check()), plain, {}),
        (ex, gcc.ApproxIFERCode.chebyshev(num_inputs=2, num_workers=6, num_adversaries=1), {}),
    ]
    for executor, code, kwargs in quiet:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UncheckedResultsWarning)
            CodedInferenceService(executor, code, stragglers=1, **kwargs).close()


# -- max_liars: declared by the codes, listed in the docs ------------------------------------------


def _documented_liars() -> dict[str, str]:
    text = (ROOT / "docs" / "adversarial.md").read_text()
    section = text.split("## Which codes detect liars", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)`[^|]*\| ([^|]+) \|", section, flags=re.M)
    return {name: value.strip() for name, value in rows}


@pytest.mark.parametrize("case", ALL_CODES, ids=repr)
def test_every_code_declares_its_liars_and_the_docs_list_them(case):
    code = case.build()
    name = type(code).__name__
    documented = _documented_liars()
    assert name in documented, f"docs/adversarial.md does not list {name}"
    liars = code.max_liars
    assert isinstance(liars, int) and liars >= 0
    if documented[name] == "0":
        assert liars == 0, name
    elif "num_adversaries" in documented[name]:
        assert liars == code.num_adversaries > 0, name
    else:
        assert "`trim`" in documented[name] and liars == code.trim > 0, name


# -- a slow RayExecutor start: a timeout naming startup_timeout_s, not Ray's own message --------


def test_a_slow_actor_start_names_startup_timeout_s():
    from gcc_jax.distributed._ray import _ActorPool

    class _Ray:  # a cluster whose actors never finish starting
        @staticmethod
        def wait(refs, num_returns, timeout):
            return [], list(refs)

    pool = object.__new__(_ActorPool)
    pool._ray, pool._info_refs = _Ray(), ["a", "b", "c"]
    with pytest.raises(TimeoutError, match=r"3 of 3 Ray worker actors \(workers \[0, 1, 2\]\)"):
        pool.wait_ready(0.5)
    with pytest.raises(TimeoutError, match="startup_timeout_s=0.5 s"):
        pool.wait_ready(0.5)

    class _Failed(_Ray):  # started, but the actor's constructor raised
        @staticmethod
        def wait(refs, num_returns, timeout):
            return list(refs), []

        @staticmethod
        def get(ref):
            raise RuntimeError("cannot unpickle f")

    pool._ray = types.SimpleNamespace(wait=_Failed.wait, get=_Failed.get)
    with pytest.raises(RuntimeError, match="Ray worker actor 0 failed to start: RuntimeError"):
        pool.wait_ready(0.5)


@pytest.mark.usefixtures("without_jaxtyping")
def test_ray_executor_checks_startup_timeout_s_before_starting_anything():
    pytest.importorskip("ray")
    from gcc_jax.distributed import RayExecutor

    with pytest.raises(ValueError, match="`startup_timeout_s` must be a finite number in"):
        RayExecutor(jnp.sin, num_workers=2, input_shape=(3,), startup_timeout_s=0.0)
