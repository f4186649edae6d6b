"""RobustSplineCode against liars at every position: the sweep of all pairs of garbage workers.

The setting of the coded inference service's adversarial tests: N = 12 workers, K = 3 inputs,
a smooth 4-class softmax classifier on R³, 12 queries (4 batches of K) with a top-2 margin of at
least 0.1. A wrong answer is a query whose decoded class (argmax) differs from the model's own
prediction on the true input. Every placement is one row of a single jitted, vmapped decode.
Tukey and trimming share that compiled program (the loss is an array leaf).
"""

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.interpolate import make_smoothing_spline

import gcc_jax as gcc

N, K, M, GAMMA = 12, 3, 4, 2
_W = np.random.default_rng(0).normal(size=(M, 3))


def model(v):
    return jax.nn.softmax(jnp.asarray(_W, v.dtype) @ v)


def _queries():
    """``(4, K, 3)`` inputs and the model's class of each ``(4, K)``."""
    x = np.random.default_rng(1).uniform(-1, 1, size=(16 * 12, 3))
    p = np.sort(np.asarray(jax.vmap(model)(jnp.asarray(x))), axis=1)
    x = x[p[:, -1] - p[:, -2] >= 0.1][:12]
    truth = np.argmax(np.asarray(jax.vmap(model)(jnp.asarray(x))), axis=1)
    return x.reshape(4, K, 3), truth.reshape(4, K)


def _code(loss, dtype=jnp.float64):
    # the paper's λ rule with c = 10⁻³: with c = 10⁻² even the oracle decoder (liars known and
    # dropped) is wrong on one query when the liars are the two workers around the middle input
    lam = gcc.adversarial_lam_dec(N, GAMMA, 1.0, constant=1e-3)
    return gcc.RobustSplineCode.chebyshev(
        num_inputs=K,
        num_workers=N,
        lam_dec=lam,
        loss=loss,
        trim=GAMMA,
        min_scale=1e-2,
        dtype=dtype,
    )


def _lies(clean, placements, kind):
    """Worker outputs ``(P, 4, N, M)`` with the workers of each placement lying: ``"garbage"``
    (finite, ~10³, reproducible per batch and worker) or ``"swap"`` (its top-2 classes swapped)."""
    ys = np.repeat(clean[None], len(placements), axis=0)
    for i, liars in enumerate(placements):
        for w in liars:
            for b in range(clean.shape[0]):
                if kind == "garbage":
                    ys[i, b, w] = 1e3 * np.random.default_rng([b, w, 0x6A]).standard_normal(M)
                else:
                    top = np.argsort(clean[b, w])[::-1][:2]
                    ys[i, b, w, top] = clean[b, w, top[::-1]]
    return ys


@jax.jit
def _decode_all(code, ys):
    """Decoded values ``(P, 4, K, M)`` and final weights ``(P, 4, N)``, every worker live."""
    live = jnp.ones(N, bool)

    def one(y):
        return code.decode_with_status(y, live).value

    return jax.vmap(jax.vmap(one))(ys)


def _oracle_wrong(clean, placements, truth):
    """Wrong answers of the plain spline decode (same λ) with each placement's liars dropped,
    by SciPy on the live workers."""
    code = _code("trim")
    beta, alpha, lam = (np.asarray(a) for a in (code.beta, code.alpha, code.lam_dec))
    wrong = 0
    for liars in placements:
        live = ~np.isin(np.arange(N), liars)
        for b in range(clean.shape[0]):
            spl = make_smoothing_spline(beta[live], clean[b, live], lam=live.sum() * lam, axis=0)
            wrong += int(np.sum(np.argmax(spl(alpha), axis=1) != truth[b]))
    return wrong


def test_no_pair_of_garbage_workers_and_no_adjacent_swap_lie_wins():
    x, truth = _queries()
    code = _code("trim")
    clean = np.stack([np.asarray(code.worker_outputs(model, jnp.asarray(xb))) for xb in x])
    pairs = list(itertools.combinations(range(N), 2))
    adjacent = [(i, i + 1) for i in range(N - 1)]
    ys = np.concatenate(
        [clean[None], _lies(clean, pairs, "garbage"), _lies(clean, adjacent, "swap")]
    )
    assert _oracle_wrong(clean, pairs, truth) == 0  # the liars, once known, cost nothing
    for loss in ("trim", "tukey"):
        out = np.asarray(_decode_all(_code(loss), jnp.asarray(ys)))
        wrong = np.argmax(out, axis=-1) != truth[None]
        assert np.all(np.isfinite(out)), loss
        assert wrong[0].sum() == 0, loss  # no liar: every answer right
        assert wrong[1 : 1 + len(pairs)].sum() == 0, (loss, np.flatnonzero(wrong[1:67].any((1, 2))))
        assert wrong[1 + len(pairs) :].sum() <= 1, loss  # the in-range swap lie


@jax.jit
def _decode_and_grad(code, y):
    """The decode of ``y`` (every worker live) and the gradient of its sum w.r.t. ``y``."""
    live = jnp.ones(N, bool)
    out = code.decode_with_status(y, live)
    return out, jax.grad(lambda yy: code.decode_with_status(yy, live).value.sum())(y)


def _scipy_decoder_matrix(code):
    """``D`` ``(K, N)``: the plain spline decode at ``alpha`` of each unit vector (SciPy)."""
    beta, alpha, lam = (np.asarray(a, float) for a in (code.beta, code.alpha, code.lam_dec))
    eye = np.eye(beta.size)
    return make_smoothing_spline(beta, eye, lam=beta.size * lam, axis=0)(alpha)


@pytest.mark.parametrize(
    ("dtype", "power"),
    [(jnp.float64, 600), pytest.param(jnp.float32, 100, marks=pytest.mark.slow)],
)
def test_zero_and_extreme_outputs_decode_with_finite_gradients(dtype, power):
    # all-zero outputs: no residual anywhere, so every loss keeps every worker with weight 1
    # and the weights are flat there: the gradient of Σ decode is the plain spline decoder's
    # column sums (SciPy). min_scale = 0: the decoder is positively homogeneous,
    # decode(2^e y) = 2^e decode(y) with the same gradient, also where y·y overflows or
    # underflows (2^±600 ≈ 1e±180; 2^±100 ≈ 1e±30 in float32), two garbage workers included
    ref = np.repeat(_scipy_decoder_matrix(_code("trim")).sum(axis=0)[:, None], M, 1)
    x, _ = _queries()
    tol = 1e-9 if dtype == jnp.float64 else 2e-4
    for loss in ("huber", "tukey", "trim"):
        code = dataclasses.replace(_code("trim", dtype), loss=loss, tuning=None, min_scale=0.0)
        out, grad = _decode_and_grad(code, jnp.zeros((N, M), dtype))
        assert int(out.status) == 0 and np.all(np.asarray(out.value) == 0), loss
        np.testing.assert_allclose(grad, ref, rtol=tol, atol=tol)
        y = np.array(code.worker_outputs(model, jnp.asarray(x[0], dtype)))
        y[[5, 6]] = [[3.0, -2.0, 1.0, 0.5], [-1.0, 2.5, 0.0, 1.0]]
        y = jnp.asarray(y, dtype)
        small, g_small = _decode_and_grad(code, y)
        assert int(small.status) == 0, loss
        for e in (power, -power):
            big, g_big = _decode_and_grad(code, y * jnp.asarray(2.0, dtype) ** e)
            assert int(big.status) == 0 and np.all(np.isfinite(g_big)), (loss, e)
            np.testing.assert_allclose(
                np.asarray(big.value, float) / 2.0**e, small.value, rtol=tol, atol=tol
            )
            np.testing.assert_allclose(g_big, g_small, rtol=tol, atol=tol)


@pytest.mark.usefixtures("without_jaxtyping")  # gcc_jax's own messages, not the annotations'
def test_complex_lam_and_bad_tuning_are_refused():
    code = _code("trim")
    args = dict(alpha=code.alpha, beta=code.beta, lam_enc=0.0)
    with pytest.raises(TypeError, match="`lam_dec`"):
        gcc.RobustSplineCode(**args, lam_dec=1 + 1j)
    with pytest.raises(TypeError, match="`lam_dec`"):
        dataclasses.replace(code, lam_dec=jnp.asarray(1 + 1j))
    for loss in ("huber", "tukey", "trim"):
        for bad in (-1.0, np.float64(-1.0), np.asarray(-1.0), jnp.asarray(-1.0), np.nan):
            with pytest.raises(ValueError, match="`tuning`"):
                gcc.RobustSplineCode(**args, lam_dec=1e-4, loss=loss, tuning=bad)
        with pytest.raises(TypeError, match="`tuning`"):
            gcc.RobustSplineCode(**args, lam_dec=1e-4, loss=loss, tuning=np.ones(2))
    with pytest.raises(ValueError, match="`tuning`"):
        gcc.RobustSplineCode(**args, lam_dec=1e-4, loss="tukey", tuning=0.0)
    gcc.RobustSplineCode(**args, lam_dec=1e-4, loss="trim", tuning=0.0)  # trim: 0 = plain LTS

    # under jit a traced tuning is checked in the status
    y = jnp.zeros((N, M)).at[3].set(1.0)
    live = jnp.ones(N, bool)

    @jax.jit
    def decode(c):
        code = dataclasses.replace(_code("tukey"), tuning=c)
        return code.decode_with_status(y, live)

    for c, ok in ((-1.0, False), (0.0, False), (np.inf, False), (4.685, True)):
        out = decode(jnp.asarray(c))
        assert bool(int(out.status) & int(gcc.Status.BAD_ARGUMENT)) is not ok, c
        assert bool(np.all(np.isfinite(out.value))) is ok, c


def test_gradient_through_the_lts_start_matches_finite_differences():
    # the start's choice is piecewise constant in y (no gradient through it); the IRLS steps
    # and the final fit carry the gradient: directional central differences of Σ decode
    # (the gradient w.r.t. λ through the start: tests/test_robust.py's check_grads)
    x, _ = _queries()
    rng = np.random.default_rng(3)
    for loss in ("huber", "tukey", "trim"):
        code = dataclasses.replace(_code("trim"), loss=loss, tuning=None, min_scale=0.0)
        y = np.array(code.worker_outputs(model, jnp.asarray(x[1])))
        y[[0, 1]] = [[3.0, -2.0, 1.0, 0.5], [-1.0, 2.5, 0.0, 1.0]]  # beside an input node
        y = jnp.asarray(y)
        out, grad = _decode_and_grad(code, y)
        assert int(out.status) == 0, loss
        if loss != "huber":  # rejected liars: no influence (Huber's bounded influence is not 0)
            assert np.all(np.asarray(grad)[[0, 1]] == 0), loss
        for _ in range(3):
            v = jnp.asarray(rng.normal(size=(N, M)))
            eps = 1e-6
            up = float(_decode_and_grad(code, y + eps * v)[0].value.sum())
            down = float(_decode_and_grad(code, y - eps * v)[0].value.sum())
            fd = (up - down) / (2 * eps)
            assert abs(fd - float(jnp.sum(grad * v))) < 1e-6 * (1 + abs(fd)), loss


def _berrut(nodes, values, z):
    """Berrut's first-form interpolant through ``(nodes, values)`` (ascending) at the points
    ``z`` off the nodes, in NumPy: ``Σ (−1)^i v_i/(z − t_i) / Σ (−1)^i/(z − t_i)``."""
    c = (-1.0) ** np.arange(nodes.size) / (z[:, None] - nodes[None, :])
    return (c @ values) / c.sum(axis=1, keepdims=True)


def test_approxifer_drops_exactly_the_garbage_pair_and_no_honest_worker():
    """ApproxIFER (A = 2) in the same setting: with no liar it drops no one (BACC's answers);
    with garbage on any pair it locates that pair, so its decode equals BACC's through the
    honest workers (a NumPy Berrut interpolant), whatever the oracle gets right or wrong."""
    code = gcc.ApproxIFERCode.chebyshev(num_inputs=K, num_workers=N, num_adversaries=2)
    x, _ = _queries()
    clean = np.stack([np.asarray(code.worker_outputs(model, jnp.asarray(xb))) for xb in x])
    pairs = list(itertools.combinations(range(N), 2))
    ys = np.concatenate([clean[None], _lies(clean, pairs, "garbage")])
    out = np.asarray(_decode_all(code, jnp.asarray(ys)))
    beta, alpha = np.asarray(code.beta), np.asarray(code.alpha)
    for i, liars in enumerate([(), *pairs]):
        live = ~np.isin(np.arange(N), liars)
        for b in range(clean.shape[0]):
            ref = _berrut(beta[live], clean[b, live], alpha)
            np.testing.assert_allclose(out[i, b], ref, rtol=1e-9, atol=1e-12, err_msg=str(liars))
