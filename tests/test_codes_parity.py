"""ParityModelCode (ParM): encoders, the subtraction decoder, statuses (training: test_training).

References: NumPy loops for the encoders and the decoder, a linear base model (whose exact
parity model is itself) for exact recovery, and the least-squares loss written out in NumPy.
"""

import itertools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import gcc_jax as gcc


def linear_apply(params, x):
    """A bias-free linear base model on one input: ``F(x) = W vec(x)``; F(Σx) = Σ F(x)."""
    return params["w"] @ jnp.ravel(x).astype(params["w"].dtype)


def masks_with(n: int, missing: int) -> np.ndarray:
    rows = []
    for dead in itertools.combinations(range(n), missing):
        m = np.ones(n, bool)
        m[list(dead)] = False
        rows.append(m)
    return np.stack(rows)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_exact_parity_model_recovers_missing_output_exactly(k):
    rng = np.random.default_rng(k)
    params = {"w": jnp.asarray(rng.normal(size=(5, 12)))}
    code = gcc.ParityModelCode(params, linear_apply, num_inputs=k)
    assert (code.num_workers, code.num_parities) == (k + 1, 1)
    x = jnp.asarray(rng.normal(size=(k, 3, 4)))
    y = code.worker_outputs(lambda v: linear_apply(params, v), x)
    truth = np.stack([np.asarray(params["w"]) @ np.ravel(np.asarray(xi)) for xi in x])
    np.testing.assert_allclose(y[k], truth.sum(axis=0), rtol=1e-13, atol=1e-13)
    for mask in masks_with(k + 1, 1):
        out = code.decode(y, jnp.asarray(mask))
        np.testing.assert_allclose(out, truth, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(code.reconstructed(mask), ~mask[:k])
    np.testing.assert_array_equal(code.decode(y, jnp.ones(k + 1, bool)), y[:k])  # as returned


def test_subtraction_decoder_matches_loop_for_any_outputs():
    rng = np.random.default_rng(1)
    k, m = 3, 4
    code = gcc.ParityModelCode({"w": jnp.zeros((m, 2))}, linear_apply, num_inputs=k)
    y = rng.normal(size=(k + 1, 2, 2))  # any trailing shape
    for j in range(k + 1):
        mask = np.ones(k + 1, bool)
        mask[j] = False
        out = np.asarray(code.decode(jnp.asarray(y), jnp.asarray(mask)))
        expect = y[:k].copy()
        if j < k:
            expect[j] = y[k] - sum(y[i] for i in range(k) if i != j)
        np.testing.assert_allclose(out, expect, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("k", [2, 4])
def test_concat_encoder_matches_loop(k):
    rng = np.random.default_rng(k)
    x = rng.random((k, 6, 8, 2))
    p = np.asarray(gcc.codes.parity_input(jnp.asarray(x), "concat"))
    expect = np.zeros((6, 8, 2))
    for i in range(6):
        for j in range(8):
            if k == 2:  # width halved by averaging column pairs, images side by side
                img, jj = divmod(j, 4)
                expect[i, j] = (x[img, i, 2 * jj] + x[img, i, 2 * jj + 1]) / 2
            else:  # both halved (2x2 means), quadrants TL, TR, BL, BR
                img = 2 * (i // 3) + j // 4
                ii, jj = i % 3, j % 4
                block = x[img, 2 * ii : 2 * ii + 2, 2 * jj : 2 * jj + 2]
                expect[i, j] = block.mean(axis=(0, 1))
    np.testing.assert_allclose(p, expect, rtol=1e-14)
    code = gcc.ParityModelCode({}, lambda params, v: v.sum(), num_inputs=k, encoder="concat")
    xt = code.encode(jnp.asarray(x))
    np.testing.assert_array_equal(xt[:k], x)
    np.testing.assert_allclose(xt[k], expect, rtol=1e-14)
    np.testing.assert_allclose(
        gcc.codes.parity_input(jnp.asarray(x), "sum"), x.sum(axis=0), rtol=1e-14
    )


@pytest.mark.usefixtures("without_jaxtyping")  # gcc_jax's own messages, not the annotations'
def test_bad_configurations_raise():
    with pytest.raises(ValueError, match="num_inputs in \\(2, 4\\)"):
        gcc.ParityModelCode({}, linear_apply, num_inputs=3, encoder="concat")
    with pytest.raises(ValueError, match="encoder"):
        gcc.ParityModelCode({}, linear_apply, num_inputs=2, encoder="xor")
    with pytest.raises(ValueError, match="num_inputs"):
        gcc.ParityModelCode({}, linear_apply, num_inputs=1)
    with pytest.raises(TypeError, match="callable"):
        gcc.ParityModelCode({}, None, num_inputs=2)
    code = gcc.ParityModelCode({}, linear_apply, num_inputs=2, encoder="concat")
    with pytest.raises(ValueError, match="even H and W"):
        code.encode(jnp.zeros((2, 5, 4, 1)))
    with pytest.raises(ValueError, match="one row per input"):
        code.encode(jnp.zeros((3, 4, 4, 1)))
    with pytest.raises(ValueError, match="one row per worker"):
        code.decode(jnp.zeros((2, 3)), jnp.ones(2, bool))
    with pytest.raises(TypeError, match="boolean"):
        code.decode(jnp.zeros((3, 3)), jnp.ones(3))


def test_more_than_r_missing_gives_the_status():
    k = 3
    rng = np.random.default_rng(2)
    code = gcc.ParityModelCode({"w": jnp.zeros((2, 2))}, linear_apply, num_inputs=k)
    y = jnp.asarray(rng.normal(size=(k + 1, 2)))
    all_masks = np.concatenate([masks_with(k + 1, s) for s in range(k + 2)])
    out = jax.jit(jax.vmap(code.decode_with_status, in_axes=(None, 0)))(y, jnp.asarray(all_masks))
    missing = (~all_masks).sum(axis=1)
    expect = np.where(missing > 1, int(gcc.Status.TOO_MANY_ERASURES), 0)
    np.testing.assert_array_equal(out.status, expect)
    assert np.all(np.isnan(np.asarray(out.value)[missing > 1]))
    assert np.all(np.isfinite(np.asarray(out.value)[missing <= 1]))
    with pytest.raises(gcc.GCCValueError, match=r"more than \d outputs? missing"):
        code.decode(y, jnp.array([True, False, False, True]))
    assert "redundancy r" in gcc.describe_status(gcc.Status.TOO_MANY_ERASURES)


def test_straggler_garbage_never_leaks_but_live_nan_is_flagged():
    code = gcc.ParityModelCode({"w": jnp.zeros((2, 2))}, linear_apply, num_inputs=2)
    y = jnp.array([[1.0, 2.0], [jnp.nan, jnp.inf], [4.0, 5.0]])
    mask = jnp.array([True, False, True])
    np.testing.assert_array_equal(code.decode(y, mask), [[1.0, 2.0], [3.0, 3.0]])
    g = jax.grad(lambda y: code.decode_with_status(y, mask).value.sum())(y)
    assert np.all(np.isfinite(np.asarray(g)))
    out = code.decode_with_status(y, jnp.ones(3, bool))
    assert int(out.status) == int(gcc.Status.NONFINITE_DATA)
    with pytest.raises(gcc.GCCValueError, match="NaN or Inf"):
        code.decode(y, jnp.ones(3, bool))


def test_jit_vmap_grads_and_compile_once():
    rng = np.random.default_rng(3)
    k = 2
    params = {"w": jnp.asarray(rng.normal(size=(3, 4)))}
    code = gcc.ParityModelCode(params, linear_apply, num_inputs=k)
    y = jnp.asarray(rng.normal(size=(k + 1, 3)))
    masks = jnp.asarray(masks_with(k + 1, 1))
    batched = jax.vmap(code.decode, in_axes=(None, 0))(y, masks)
    jitted = jax.jit(lambda code, y, mask: code.decode(y, mask))
    for i, mask in enumerate(masks):
        np.testing.assert_array_equal(batched[i], code.decode(y, mask))
        np.testing.assert_array_equal(jitted(code, y, mask), code.decode(y, mask))

    x = jnp.asarray(rng.normal(size=(k, 4)))

    def pipeline(w, x):
        c = gcc.ParityModelCode({"w": w}, linear_apply, num_inputs=k)
        y = c.worker_outputs(lambda v: jnp.tanh(params["w"] @ v), x)
        return c.decode_with_status(y, masks[0]).value

    # Forward mode to second order here; reverse mode is what the training test descends with.
    check_grads(jax.jit(pipeline), (params["w"], x), order=2, modes=("fwd",))

    @jax.jit
    @chex.assert_max_traces(n=1)
    def run(code, y, mask):
        return code.decode_with_status(y, mask)

    for mask in masks:
        run(code, y, mask)
    run(gcc.ParityModelCode({"w": params["w"] * 2}, linear_apply, num_inputs=k), y, masks[0])
    chex.clear_trace_counter()
