"""BerrutCode (BACC) against a plain NumPy loop, plus invariants and the four transforms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import gcc_jax as gcc


def berrut_loop(t, y, z):
    """Berrut's first-form interpolant through (t_i, y_i), ascending t, evaluated at z (loop)."""
    out = []
    for zz in z:
        hits = [i for i in range(len(t)) if t[i] == zz]
        if hits:
            out.append(y[hits[0]])
            continue
        num = sum((-1) ** i * y[i] / (zz - t[i]) for i in range(len(t)))
        den = sum((-1) ** i / (zz - t[i]) for i in range(len(t)))
        out.append(num / den)
    return np.array(out)


def random_mask(rng, n, s):
    mask = np.ones(n, bool)
    mask[rng.choice(n, s, replace=False)] = False
    return mask


@pytest.mark.parametrize("k,n", [(3, 7), (5, 12), (8, 25)])
@pytest.mark.parametrize("seed", [0, 1])
def test_encode_decode_match_numpy_loop(k, n, seed):
    rng = np.random.default_rng(seed)
    code = gcc.BerrutCode.chebyshev(num_inputs=k, num_workers=n)
    alpha, beta = np.asarray(code.alpha), np.asarray(code.beta)
    x = rng.normal(size=(k, 2))
    np.testing.assert_allclose(code.encode(x), berrut_loop(alpha, x, beta), rtol=1e-12, atol=1e-12)
    y = rng.normal(size=(n, 3))
    for s in (0, 1, n // 3, n - 1):
        mask = random_mask(rng, n, s)
        expect = berrut_loop(beta[mask], y[mask], alpha)
        got = code.decode(y, jnp.asarray(mask))
        np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12)


def test_signs_alternate_over_live_nodes_with_dead_ends():
    code = gcc.BerrutCode.chebyshev(num_inputs=4, num_workers=9)
    mask = np.array([False, True, True, False, False, True, True, True, False])
    d = np.asarray(code.decoder_matrix(jnp.asarray(mask)))
    assert np.all(d[:, ~mask] == 0)
    np.testing.assert_allclose(d.sum(axis=1), 1.0, rtol=1e-14)  # constants reproduced
    # The live nodes' weights alternate: sign of d[k, i] * (alpha_k - beta_i) flips along the live.
    alpha, beta = np.asarray(code.alpha), np.asarray(code.beta)
    live = np.flatnonzero(mask)
    signs = np.sign(d[0, live] * (alpha[0] - beta[live]))
    assert np.all(signs[1:] == -signs[:-1])


def test_exact_at_a_node_no_nan_finite_grads():
    # K = 3 (Chebyshev-1 has 0) and N = 5 (Chebyshev-2 has 0): alpha_1 = beta_2 = 0.
    code = gcc.BerrutCode.chebyshev(num_inputs=3, num_workers=5)
    assert float(code.alpha[1]) == float(code.beta[2]) == 0.0
    y = jnp.arange(5.0)[:, None] ** 2
    mask = jnp.ones(5, bool)
    yh = code.decode(y, mask)
    assert float(yh[1, 0]) == 4.0 and bool(jnp.all(jnp.isfinite(yh)))

    def loss(y, beta, alpha):
        c = gcc.BerrutCode(alpha=alpha, beta=beta)
        return jnp.sum(c.decode_with_status(y, mask).value ** 2)

    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(y, code.beta, code.alpha)  # one program
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in grads)
    # The encoder also hits a node (beta_2 = alpha_1) exactly.
    x = jnp.array([[1.0], [2.0], [3.0]])
    assert float(code.encode(x)[2, 0]) == 2.0


def test_status_and_errors():
    code = gcc.BerrutCode.chebyshev(num_inputs=3, num_workers=6)
    y = jnp.ones((6, 2))
    out = code.decode_with_status(y, jnp.zeros(6, bool))
    assert int(out.status) == gcc.Status.TOO_FEW_LIVE and bool(jnp.all(jnp.isnan(out.value)))
    with pytest.raises(gcc.GCCValueError, match="BerrutCode needs at least 1 live worker"):
        code.decode(y, jnp.zeros(6, bool))
    assert not np.asarray(code.available(jnp.zeros(6, bool))).any()
    one = jnp.zeros(6, bool).at[2].set(True)  # one live worker: a constant, valid
    np.testing.assert_allclose(code.decode(y * 3.0, one), 3.0)
    with pytest.raises(ValueError, match="num_workers"):
        gcc.BerrutCode.chebyshev(num_inputs=3, num_workers=1)
    with pytest.raises(gcc.GCCValueError, match="increasing"):
        gcc.BerrutCode(alpha=jnp.array([0.5, -0.5]), beta=code.beta)


def test_reproduces_constants_and_keeps_trailing_shape():
    code = gcc.BerrutCode.chebyshev(num_inputs=5, num_workers=17)
    x = jnp.full((5, 2, 3), 1.5)
    xt = code.encode(x)
    assert xt.shape == (17, 2, 3)
    np.testing.assert_allclose(xt, 1.5, rtol=1e-14)
    mask = jnp.ones(17, bool).at[jnp.array([3, 8, 9])].set(False)
    np.testing.assert_allclose(code.decode(xt, mask), x, rtol=1e-14)


def test_converges_with_n():
    f = jnp.sin
    x = jnp.linspace(-1.0, 1.0, 6)[:, None]
    errs = []
    for n in (10, 40, 160):
        code = gcc.BerrutCode.chebyshev(num_inputs=6, num_workers=n)
        errs.append(float(jnp.max(jnp.abs(gcc.coded_apply(code, f, x, jnp.ones(n, bool)) - f(x)))))
    assert errs[0] > errs[1] > errs[2]


def test_check_grads_wrt_data_and_nodes():
    code = gcc.BerrutCode.chebyshev(num_inputs=3, num_workers=8)
    mask = jnp.ones(8, bool).at[2].set(False)
    x = jnp.array([[0.3], [-0.7], [1.1]])

    def pipeline(x, alpha, beta):
        c = gcc.BerrutCode(alpha=alpha, beta=beta)
        return c.decode_with_status(jnp.sin(c.encode(x)), mask).value

    # Shift the nodes off each other so the interpolant is smooth in them.
    alpha = code.alpha * 0.97
    # both modes, second order in forward mode (rev-over-rev compiles as much again)
    check_grads(jax.jit(pipeline), (x, alpha, code.beta), order=1, modes=("rev",))
    check_grads(jax.jit(pipeline), (x, alpha, code.beta), order=2, modes=("fwd",))
