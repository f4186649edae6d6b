"""Numerics a user can trust: scale-free smoothing (degrees of freedom), the float32 warning,
λ as an array leaf on every path, and monte_carlo_loss under jit.

References: the trace of the hat matrix built column by column with SciPy's
``make_smoothing_spline`` (``lam_scipy = n_live · λ``, DESIGN §1), closed-form limits
(``λ = 0`` interpolates: trace ``n_live``; ``λ → ∞`` is the straight line: trace 2), and float64
runs of the same computation for the float32 warning.
"""

import dataclasses
import warnings

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.interpolate import make_smoothing_spline

import gcc_jax as gcc


def scipy_dof(t, lam, mask=None):
    """tr H: fit each live unit vector with SciPy, evaluate at its own node."""
    t = np.asarray(t, np.float64)
    mask = np.ones(t.size, bool) if mask is None else np.asarray(mask)
    tl = t[mask]
    n = tl.size
    eye = np.eye(n)
    return sum(float(make_smoothing_spline(tl, eye[i], lam=n * lam)(tl[i])) for i in range(n))


@pytest.mark.parametrize("lam", [1e-7, 1e-5, 1e-3])
@pytest.mark.parametrize("solver", ["kalman", "kernel"])
def test_effective_dof_matches_scipy_hat_matrix(lam, solver):
    t = gcc.chebyshev_nodes(30, kind=2)
    mask = np.ones(30, bool)
    mask[[3, 11, 12, 29]] = False
    ref = scipy_dof(t, lam, mask)
    got = float(gcc.effective_dof(t, lam, mask, solver=solver))
    np.testing.assert_allclose(got, ref, rtol=1e-7)
    assert 2.0 < got < mask.sum()


def test_effective_dof_limits():
    t = gcc.equispaced_nodes(30)  # n = 30 as above: the compiled trace is shared
    mask = np.arange(30) % 4 != 1
    assert float(gcc.effective_dof(t, 0.0, mask)) == pytest.approx(mask.sum(), abs=1e-8)
    assert float(gcc.effective_dof(t, 1e6, mask)) == pytest.approx(2.0, abs=1e-6)
    # more than one block of 256 columns (the blocked trace)
    t = gcc.chebyshev_nodes(300, kind=2)
    assert float(gcc.effective_dof(t, 0.0)) == pytest.approx(300.0, abs=1e-6)


@pytest.mark.parametrize("frac", [0.3, 0.9])
def test_lam_from_dof_inverts_the_scipy_trace(frac):
    t = gcc.chebyshev_nodes(40, kind=2)
    dof = frac * 40
    lam = float(gcc.lam_from_dof(t, dof))
    assert lam > 0
    np.testing.assert_allclose(scipy_dof(t, lam), dof, rtol=1e-7)


def test_lam_from_dof_is_scale_free_under_stretching():
    """Stretching the nodes by c scales λ by c³ and leaves the degrees of freedom unchanged."""
    t = gcc.chebyshev_nodes(40, kind=2)  # n = 40 as above: the compiled search is shared
    lam1 = float(gcc.lam_from_dof(t, 24.0))
    lam3 = float(gcc.lam_from_dof(3.0 * t, 24.0))
    np.testing.assert_allclose(lam3, 27.0 * lam1, rtol=1e-7)


def test_lam_from_dof_edges_and_errors():
    t = gcc.chebyshev_nodes(10, kind=2)
    mask = np.ones(10, bool)
    mask[0] = False
    assert float(gcc.lam_from_dof(t, 10.0)) == 0.0  # interpolation
    assert float(gcc.lam_from_dof(t, 9.0, mask)) == 0.0  # n_live = 9
    for bad in (2.0, 1.0, 10.5, float("nan")):
        with pytest.raises(ValueError, match="`dof` must be in"):
            gcc.lam_from_dof(t, bad)
    with pytest.raises(ValueError, match=r"\(2, 9\]"):
        gcc.lam_from_dof(t, 9.5, mask)


@pytest.mark.usefixtures("without_jaxtyping")  # gcc_jax's own message, not the annotation's
def test_lam_from_dof_rejects_a_non_scalar_dof():
    with pytest.raises(ValueError, match="`dof` must be a scalar"):
        gcc.lam_from_dof(gcc.chebyshev_nodes(10, kind=2), jnp.ones(2))


def test_lam_from_dof_under_jit_compiles_once():
    t = gcc.chebyshev_nodes(16, kind=2)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def go(dof, mask):
        return gcc.lam_from_dof(t, dof, mask)

    chex.clear_trace_counter()
    full = jnp.ones(16, bool)
    lam_a = go(jnp.asarray(8.0), full)
    lam_b = go(jnp.asarray(12.0), full.at[2].set(False))
    assert float(lam_a) > float(lam_b) > 0
    np.testing.assert_allclose(scipy_dof(t, float(lam_a)), 8.0, rtol=1e-7)
    np.testing.assert_allclose(
        scipy_dof(t, float(lam_b), np.asarray(full.at[2].set(False))), 12.0, rtol=1e-7
    )


def test_fixed_lam_smooths_more_as_n_grows_but_dof_fraction_does_not():
    """The reason for lam_from_dof: one λ means very different smoothing at different N."""
    lam = 1e-6
    fracs = [scipy_dof(gcc.chebyshev_nodes(n, kind=2), lam) / n for n in (10, 40)]
    assert fracs[0] > 0.7 and fracs[1] < 0.5
    for n in (10, 40):
        t = gcc.chebyshev_nodes(n, kind=2)
        np.testing.assert_allclose(scipy_dof(t, float(gcc.lam_from_dof(t, 0.8 * n))) / n, 0.8)


# -- float32 warning ---------------------------------------------------------------------------


def _losses(dtype, num_workers, lam):
    code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=num_workers, lam_dec=lam, dtype=dtype)
    x = jnp.linspace(-1.0, 1.0, 3, dtype=dtype)[:, None]
    masks = gcc.sample_masks(jax.random.key(1), num_workers, num=4, stragglers=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss = gcc.monte_carlo_loss(code, jnp.sin, x, masks)
    warned = [w for w in caught if issubclass(w.category, gcc.Float32PrecisionWarning)]
    return float(np.mean(loss)), warned


def test_float32_warning_fires_exactly_where_float32_loses_accuracy():
    # N = 64, λ = 0: the float64 loss (~7e-16) is below float32's floor; float32 reports ~40x it.
    l64, w64 = _losses(jnp.float64, 64, 0.0)
    l32, w32 = _losses(jnp.float32, 64, 0.0)
    assert l32 > 5 * l64  # float32 measurably wrong ...
    assert len(w32) == 1 and not w64  # ... and says so; float64 never warns
    assert "float32" in str(w32[0].message) and "jax_enable_x64" in str(w32[0].message)
    # λ = 1e-3: the loss (~1e-5) is approximation error; float32 agrees with float64, no warning
    l64, _ = _losses(jnp.float64, 64, 1e-3)
    l32, w32 = _losses(jnp.float32, 64, 1e-3)
    np.testing.assert_allclose(l32, l64, rtol=1e-3)
    assert not w32


def test_precision_floor_scales_with_eps_and_outputs():
    fx32 = np.full((4, 3), 2.0, np.float32)
    eps = float(np.finfo(np.float32).eps)
    # 25 · eps² · mean_k ‖f(x_k)‖², ‖f(x_k)‖² = 3 · 4 = 12
    assert gcc.precision_floor(fx32) == pytest.approx(25 * eps**2 * 12.0, rel=1e-6)
    assert gcc.precision_floor(fx32.astype(np.float64)) == 0.0


# -- λ is an array leaf on every path ----------------------------------------------------------


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_replace_lam_gives_an_array_leaf_and_no_recompile(dtype):
    code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=12, dtype=dtype)
    code2 = dataclasses.replace(code, lam_dec=1e-4)
    code3 = dataclasses.replace(code, lam_enc=2e-4, lam_dec=0)
    for c in (code2, code3):
        for leaf in (c.lam_enc, c.lam_dec):
            assert isinstance(leaf, jax.Array) and leaf.shape == () and leaf.dtype == dtype
    assert float(code2.lam_dec) == pytest.approx(1e-4, rel=1e-6)
    assert float(code3.lam_enc) == pytest.approx(2e-4, rel=1e-6)

    y = jnp.sin(jnp.linspace(-1.0, 1.0, 12, dtype=dtype))[:, None]
    mask = jnp.ones(12, bool)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def decode(c):
        return c.decode_with_status(y, mask).value

    chex.clear_trace_counter()
    outs = [decode(c) for c in (code, code2, code3)]
    # λ_dec > 0 changes the decoded values (it really is used), λ_dec = 0 reproduces code's
    assert not np.allclose(outs[0], outs[1])
    np.testing.assert_allclose(outs[2], outs[0], rtol=1e-12 if dtype == jnp.float64 else 1e-5)
    with pytest.raises(gcc.GCCValueError, match="lam_dec"):
        dataclasses.replace(code, lam_dec=-1.0)
    with pytest.raises(TypeError, match="lam_dec"):
        dataclasses.replace(code, lam_dec="1e-4")


# -- monte_carlo_loss under jit; the jittable per-chunk function -------------------------------


def test_monte_carlo_loss_under_jit_raises_a_clear_error_and_mask_losses_is_the_jittable_core():
    code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=10)
    x = jnp.linspace(-1.0, 1.0, 3)[:, None]
    masks = gcc.sample_masks(jax.random.key(0), 10, num=5, stragglers=2)
    with pytest.raises(TypeError, match="mask_losses"):
        jax.jit(lambda c: gcc.monte_carlo_loss(c, jnp.sin, x, masks))(code)
    eager = gcc.monte_carlo_loss(code, jnp.sin, x, masks)
    yt, fx = code.worker_outputs(jnp.sin, x), jax.vmap(jnp.sin)(x)
    loss, status = jax.jit(gcc.mask_losses)(code, yt, fx, masks)
    assert not np.any(np.asarray(status))
    # reference: a Python loop of eager decodes
    ref = [float(jnp.sum((code.decode(yt, m) - fx) ** 2)) / 3 for m in masks]
    np.testing.assert_allclose(loss, ref, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(eager, ref, rtol=1e-10, atol=1e-300)
