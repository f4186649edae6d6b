"""SplineCode (GCC): encode/decode against explicit matrices, SciPy, and its invariants."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from scipy.interpolate import CubicSpline, make_smoothing_spline

import gcc_jax as gcc

SOLVERS = ["kalman", "kernel"]


def _code(k=6, n=30, lam_enc=0.0, lam_dec=0.0, solver="kalman"):
    return gcc.SplineCode.chebyshev(
        num_inputs=k, num_workers=n, lam_enc=lam_enc, lam_dec=lam_dec, solver=solver
    )


def test_nodes_and_leaves():
    code = _code()
    np.testing.assert_allclose(code.alpha, gcc.chebyshev_nodes(6, kind=1))
    np.testing.assert_allclose(code.beta, gcc.chebyshev_nodes(30, kind=2))
    leaves = jax.tree_util.tree_leaves(code)
    assert len(leaves) == 4  # alpha, beta, lam_enc, lam_dec are leaves; solver is static
    assert code.num_inputs == 6 and code.num_workers == 30


@pytest.mark.parametrize("solver", SOLVERS)
def test_encode_is_spline_through_inputs_at_workers(solver):
    code = _code(lam_enc=1e-4, solver=solver)
    a, b = np.asarray(code.alpha), np.asarray(code.beta)
    x = np.random.default_rng(0).normal(size=(6, 2, 3))
    xt = code.encode(x)
    assert xt.shape == (30, 2, 3)
    ref = make_smoothing_spline(a, x.reshape(6, -1), lam=6 * 1e-4, axis=0)
    inside = (b >= a[0]) & (b <= a[-1])
    np.testing.assert_allclose(
        np.asarray(xt).reshape(30, -1)[inside], ref(b[inside]), rtol=1e-8, atol=1e-10
    )
    np.testing.assert_allclose(
        code.encoder_matrix() @ x.reshape(6, -1),
        np.asarray(xt).reshape(30, -1),
        rtol=1e-10,
        atol=1e-12,
    )


@pytest.mark.parametrize("solver", SOLVERS)
def test_decode_is_natural_spline_through_live_workers(solver):
    code = _code(solver=solver)
    a, b = np.asarray(code.alpha), np.asarray(code.beta)
    y = np.random.default_rng(1).normal(size=(30, 3))  # (30, 3) in every decode: one compile
    mask = np.ones(30, bool)
    mask[[3, 4, 17]] = False
    if solver == "kernel":
        # the kernel form is ill-conditioned at lam = 0: it agrees to 1e-8 or refuses
        status = int(code.decode_with_status(y, mask).status)
        if status == int(gcc.Status.ILL_CONDITIONED):
            with pytest.raises(gcc.GCCValueError, match="ill-conditioned"):
                code.decode(y, mask)
            return
    yh = code.decode(y, mask)
    ref = CubicSpline(b[mask], y[mask], bc_type="natural")(a)
    tol = 1e-10 if solver == "kalman" else 1e-8
    np.testing.assert_allclose(yh, ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(code.decoder_matrix(mask) @ y, yh, rtol=tol, atol=tol)
    assert np.all(np.asarray(code.decoder_matrix(mask))[:, ~mask] == 0)


@pytest.mark.parametrize("k, n, bound", [(5, 50, 1e-3), (10, 200, 1e-4), (20, 400, 1e-4)])
def test_identity_round_trip_without_stragglers(k, n, bound):
    # f = id, no stragglers, lam = 0: u_dec interpolates the encoder spline at the betas, so the
    # error is the interpolation error of a cubic spline with knots at alpha sampled at beta.
    # Measured max relative errors are well below the stated bounds (about 1e-4, 1e-5, 3e-5).
    code = _code(k=k, n=n)
    x = np.random.default_rng(k).normal(size=(k, 8))
    yh = code.decode(code.encode(x), np.ones(n, bool))
    assert np.max(np.abs(np.asarray(yh) - x)) / np.max(np.abs(x)) < bound


def test_smooth_function_is_recovered_with_stragglers():
    code = _code(k=8, n=120)
    x = np.linspace(-1, 1, 8)[:, None] * np.ones((8, 3))
    mask = np.array(gcc.sample_masks(jax.random.key(0), 120, num=1, stragglers=10)[0])
    mask[[0, -1]] = True
    yh = gcc.coded_apply(code, jnp.sin, x, mask)
    assert np.max(np.abs(np.asarray(yh) - np.sin(x))) < 1e-4


@pytest.mark.parametrize("lam_dec", [0.0, 1e-6, 1e-3])
def test_solvers_agree(lam_dec):
    y = np.random.default_rng(2).normal(size=(30, 3))
    mask = np.ones(30, bool)
    mask[[0, 1, 12]] = False
    a = _code(lam_dec=lam_dec, solver="kalman").decode(y, mask)
    b = _code(lam_dec=lam_dec, solver="kernel").decode_with_status(y, mask)
    if lam_dec == 0.0 and int(b.status) == int(gcc.Status.ILL_CONDITIONED):
        return  # the kernel form refuses rather than return a wrong number (test_kernel.py)
    assert int(b.status) == 0
    np.testing.assert_allclose(a, b.value, rtol=1e-8, atol=1e-8)


@pytest.mark.slow  # whole-code gradients also in test_code_transforms (make test)
def test_gradients_flow_to_lambdas_and_nodes():
    x = jnp.linspace(-1.0, 1.0, 5)[:, None] * jnp.ones((5, 2))
    mask = jnp.ones(20, bool).at[6].set(False)

    def loss(log_lam_enc, log_lam_dec, alpha):  # log scale: finite differences stay at lam > 0
        code = gcc.SplineCode(
            alpha=alpha,
            beta=gcc.chebyshev_nodes(20, kind=2),
            lam_enc=jnp.exp(log_lam_enc),
            lam_dec=jnp.exp(log_lam_dec),
        )
        yt = jnp.sin(code.encode(x))
        return jnp.sum((code.decode_with_status(yt, mask).value - jnp.sin(x)) ** 2)

    loss = jax.jit(loss)
    args = (jnp.log(1e-3), jnp.log(1e-4), gcc.chebyshev_nodes(5, kind=1))
    check_grads(loss, args, order=1, modes=("fwd", "rev"), atol=1e-5, rtol=1e-4)
    grads = jax.grad(loss, argnums=(0, 1, 2))(*args)
    assert all(np.all(np.isfinite(g)) and np.any(g != 0) for g in grads)


def test_bad_input():
    with pytest.raises(ValueError, match="num_inputs"):
        gcc.SplineCode.chebyshev(num_inputs=1, num_workers=10)
    with pytest.raises(ValueError, match="num_workers"):
        gcc.SplineCode.chebyshev(num_inputs=3, num_workers=1)
    with pytest.raises(gcc.GCCValueError, match="lam_dec"):
        gcc.SplineCode.chebyshev(num_inputs=3, num_workers=10, lam_dec=-1.0)
    with pytest.raises(gcc.GCCValueError, match="strictly increasing"):
        gcc.SplineCode(
            alpha=jnp.array([0.5, 0.1, 0.2]),
            beta=jnp.linspace(-1, 1, 5),
            lam_enc=jnp.asarray(0.0),
            lam_dec=jnp.asarray(0.0),
        )
    with pytest.raises(ValueError, match="solver"):
        gcc.SplineCode.chebyshev(num_inputs=3, num_workers=10, solver="nope")
    code = _code()
    with pytest.raises(gcc.GCCValueError, match="SplineCode needs at least 2 live"):
        code.decode(np.zeros((30, 3)), np.eye(30, dtype=bool)[4])
    # under jit: status, not an exception
    out = jax.jit(code.decode_with_status)(jnp.zeros((30, 3)), jnp.eye(30, dtype=bool)[4])
    assert int(out.status) & int(gcc.Status.TOO_FEW_LIVE) and np.all(np.isnan(out.value))


def test_float32_code():
    code32 = gcc.SplineCode.chebyshev(num_inputs=6, num_workers=30, dtype=jnp.float32)
    x = np.random.default_rng(5).normal(size=(6, 3)).astype(np.float32)
    y32 = code32.decode(code32.encode(x), np.ones(30, bool))
    y64 = _code().decode(_code().encode(x.astype(np.float64)), np.ones(30, bool))
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, y64, rtol=0, atol=1e-5 * np.abs(x).max())
