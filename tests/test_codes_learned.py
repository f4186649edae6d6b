"""LearnedCode: encoders and decoder against NumPy loops, erasure patterns, statuses.

References: brute-force enumeration of erasure patterns, NumPy MLPs, a loop-based dilated
convolution, and the end-to-end loss written out in NumPy.
"""

import itertools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import gcc_jax as gcc


def mlp_np(layers, h):
    h = np.asarray(h, np.float64)
    for i, layer in enumerate(layers):
        h = h @ np.asarray(layer["w"], np.float64) + np.asarray(layer["b"], np.float64)
        if i < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return h


def conv_np(layers, img):
    """The dilated encoder by loops: 'SAME' zero padding, dilations (1, 1, 2, 4, 8, 1), 1x1."""
    h = np.asarray(img, np.float64)
    dil = [1, 1, 2, 4, 8, 1, 1]  # the documented dilations, then the 1x1 layer
    for li, layer in enumerate(layers):
        w, b = np.asarray(layer["w"], np.float64), np.asarray(layer["b"], np.float64)
        kh, kw, _, c_out = w.shape
        d = dil[li]
        rows, cols = h.shape[:2]
        out = np.tile(b, (rows, cols, 1))
        for i in range(rows):
            for j in range(cols):
                for a in range(kh):
                    for c in range(kw):
                        ii, jj = i + (a - kh // 2) * d, j + (c - kw // 2) * d
                        if 0 <= ii < rows and 0 <= jj < cols:
                            out[i, j] += h[ii, jj] @ w[a, c]
        h = np.maximum(out, 0.0) if li < len(layers) - 1 else out
    return h


@pytest.mark.parametrize("k,r", [(2, 1), (3, 1), (3, 2), (4, 2)])
def test_erasure_patterns_match_brute_force(k, r):
    expect = [
        m
        for m in itertools.product([False, True], repeat=k + r)
        if 1 <= m.count(False) <= r and not all(m[:k])
    ]
    got = gcc.codes.erasure_patterns(k, r)
    assert sorted(map(tuple, got.tolist())) == sorted(expect)
    size = sum(math.comb(k + r, s) - math.comb(r, s) for s in range(1, r + 1))
    assert got.shape == (size, k + r)


def test_mlp_encoder_and_decoder_match_numpy():
    rng = np.random.default_rng(0)
    k, r, m = 3, 2, 4
    code = gcc.LearnedCode.init(
        key=1, num_inputs=k, num_parities=r, input_shape=(2, 3), output_size=m, dtype=jnp.float64
    )
    assert code.num_workers == k + r
    x = rng.normal(size=(k, 2, 3))
    xt = np.asarray(code.encode(jnp.asarray(x)))
    np.testing.assert_array_equal(xt[:k], x)
    expect = mlp_np(code.encoder_params, x.reshape(-1)).reshape(r, 2, 3)
    np.testing.assert_allclose(xt[k:], expect, rtol=1e-12, atol=1e-12)
    y = rng.normal(size=(k + r, m))
    y[1] = np.nan  # a straggler's garbage
    mask = np.array([True, False, True, True, False])
    out = np.asarray(code.decode(jnp.asarray(y), jnp.asarray(mask)))
    y_in = np.where(mask[:, None], y, 0.0)
    recon = mlp_np(code.decoder_params, y_in.reshape(-1)).reshape(k, m)
    np.testing.assert_allclose(out[1], recon[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(out[[0, 2]], y[[0, 2]])
    np.testing.assert_array_equal(code.reconstructed(mask), [False, True, False])


def test_conv_encoder_matches_loop():
    rng = np.random.default_rng(1)
    k = 2
    code = gcc.LearnedCode.init(
        key=2,
        num_inputs=k,
        input_shape=(9, 9, 2),
        output_size=3,
        encoder="conv",
        channels=3,
        dtype=jnp.float64,
    )
    assert len(code.encoder_params) == 7  # six dilated 3x3 layers and a 1x1 layer
    x = rng.normal(size=(k, 9, 9, 2))
    stacked = np.concatenate([x[0], x[1]], axis=-1)  # channel i*C + c = image i, channel c
    expect = conv_np(code.encoder_params, stacked)
    np.testing.assert_allclose(code.encode(jnp.asarray(x))[k], expect, rtol=1e-10, atol=1e-12)


def test_more_than_r_missing_gives_the_status_and_bad_input_raises():
    k, r = 2, 2
    code = gcc.LearnedCode.init(
        key=0, num_inputs=k, num_parities=r, input_shape=(3,), output_size=2
    )
    y = jnp.ones((k + r, 2))
    masks = np.array(list(itertools.product([False, True], repeat=k + r)))
    out = jax.vmap(code.decode_with_status, in_axes=(None, 0))(y, jnp.asarray(masks))
    expect = np.where((~masks).sum(1) > r, int(gcc.Status.TOO_MANY_ERASURES), 0)
    np.testing.assert_array_equal(out.status, expect)
    assert np.all(np.isnan(np.asarray(out.value)[expect != 0]))
    with pytest.raises(gcc.GCCValueError, match=r"more than \d outputs? missing"):
        code.decode(y, jnp.array([False, False, False, True]))
    with pytest.raises(gcc.GCCValueError, match="NaN or Inf"):
        code.decode(y.at[0, 0].set(jnp.inf), jnp.ones(k + r, bool))
    with pytest.raises(ValueError, match="values for this decoder"):
        code.decode(jnp.ones((k + r, 3)), jnp.ones(k + r, bool))
    with pytest.raises(ValueError, match="values for this encoder"):
        code.encode(jnp.ones((k, 4)))
    with pytest.raises(ValueError, match="encoder"):
        gcc.LearnedCode.init(key=0, num_inputs=2, input_shape=(3,), output_size=2, encoder="rnn")
    with pytest.raises(ValueError, match="images"):
        gcc.LearnedCode.init(key=0, num_inputs=2, input_shape=(3,), output_size=2, encoder="conv")
    with pytest.raises(ValueError, match="num_parities"):
        gcc.LearnedCode.init(key=0, num_inputs=2, input_shape=(3,), output_size=2, num_parities=0)


def test_generic_pipeline_jit_vmap_grads_compile_once():
    rng = np.random.default_rng(3)
    k = 2
    code = gcc.LearnedCode.init(key=3, num_inputs=k, input_shape=(3,), output_size=2)
    f = lambda v: jnp.tanh(v[:2]) + v[2]  # noqa: E731
    x = jnp.asarray(rng.normal(size=(k, 3)))
    masks = jnp.asarray(gcc.codes.erasure_patterns(k, 1))
    # All workers run the same f: the generic pipeline applies.
    for mask in masks:
        yt = jax.vmap(f)(code.encode(x))
        np.testing.assert_array_equal(gcc.coded_apply(code, f, x, mask), code.decode(yt, mask))
    yt = jax.vmap(f)(code.encode(x))
    batched = jax.vmap(code.decode, in_axes=(None, 0))(yt, masks)
    jitted = jax.jit(lambda c, y, m: c.decode(y, m))
    for i, mask in enumerate(masks):
        np.testing.assert_allclose(batched[i], code.decode(yt, mask), rtol=1e-6)
        np.testing.assert_allclose(jitted(code, yt, mask), code.decode(yt, mask), rtol=1e-6)

    def pipeline(x, y_par):
        c = gcc.LearnedCode(y_par, code.decoder_params, num_inputs=k)
        return c.decode_with_status(jax.vmap(f)(c.encode(x)), masks[0]).value

    # Forward mode to second order here; reverse mode is what the training test descends with.
    enc64 = jax.tree.map(lambda a: a.astype(jnp.float64), code.encoder_params)
    check_grads(jax.jit(pipeline), (x, enc64), order=2, modes=("fwd",), atol=1e-4, rtol=1e-4)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def run(code, y, mask):
        return code.decode_with_status(y, mask)

    for mask in masks:
        run(code, yt, mask)
    moved = gcc.LearnedCode(
        code.encoder_params, jax.tree.map(lambda a: a * 2, code.decoder_params), num_inputs=k
    )
    run(moved, yt, masks[0])
    chex.clear_trace_counter()
