"""Tests for gcc_jax.nn.models: shapes, purity, nnx split/merge faithfulness, worker functions."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from gcc_jax.nn.models import (
    MLP,
    MODEL_NAMES,
    LeNet5,
    RepVGG,
    SmallCNN,
    ViT,
    count_params,
    make_model,
    predict_proba,
    worker_function,
)

MODULES = {"mlp": MLP, "lenet5": LeNet5, "cnn": SmallCNN, "vit": ViT, "repvgg": RepVGG}
SHAPES = [(8, 8, 1), (28, 28, 1)]


def images(shape, b=3, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).random((b, *shape)).astype(dtype)


class _Built(dict):
    """(name, input_shape) -> make_model(...), built on first use and shared by the tests."""

    def __missing__(self, item):
        name, shape = item
        self[item] = make_model(name, input_shape=shape, num_classes=10, key=0)
        return self[item]


@pytest.fixture(scope="module")
def built():
    return _Built()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_output_shapes(built, name, shape):
    apply, params = built[name, shape]
    x = images(shape)
    logits = jax.jit(apply)(params, x)
    assert logits.shape == (3, 10) and logits.dtype == jnp.float32
    assert bool(jnp.all(jnp.isfinite(logits)))


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_single_input_equals_batch_row(built, name):
    apply, params = built[name, (8, 8, 1)]
    x = images((8, 8, 1))
    single = jax.jit(apply)(params, x[1])
    assert single.shape == (10,)
    # float32; a GPU sums in a different order for one row than for a batch
    rtol = 1e-5 if jax.default_backend() == "cpu" else 1e-4
    np.testing.assert_allclose(single, jax.jit(apply)(params, x)[1], rtol=rtol, atol=rtol / 10)


def test_colour_input():
    apply, params = make_model("lenet5", input_shape=(32, 32, 3), num_classes=7, key=1)
    assert jax.jit(apply)(params, images((32, 32, 3), b=2)).shape == (2, 7)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_params_are_float32_dict_of_arrays(built, name):
    _, params = built[name, (8, 8, 1)]
    assert isinstance(params, dict)
    leaves = jax.tree.leaves(params)
    assert leaves and all(leaf.dtype == jnp.float32 for leaf in leaves)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_apply_is_pure(built, name):
    apply, params = built[name, (8, 8, 1)]
    x = images((8, 8, 1), seed=1)
    f = jax.jit(apply)
    np.testing.assert_array_equal(f(params, x), f(params, x))
    # the parameters are an argument, not captured state: new values give new outputs
    shifted = jax.tree.map(lambda p: p + 0.01, params)
    assert not np.array_equal(f(params, x), f(shifted, x))
    assert np.array_equal(f(params, x), f(params, x))


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_split_merge_round_trip_equals_module(built, name):
    """make_model's apply reproduces the NNX module it was split from."""
    shape = (8, 8, 1)
    module = MODULES[name](shape, 10, rngs=nnx.Rngs(0))
    apply, params = built[name, shape]
    x = jnp.asarray(images(shape, seed=2))
    # one compiled call for the module and its split/merged copy (eagerly, every layer's
    # operations would compile one by one)
    call = nnx.jit(lambda m, v: m(v))
    expected = call(module, x)
    np.testing.assert_allclose(jax.jit(apply)(params, x), expected, rtol=1e-5, atol=1e-6)
    graphdef, state = nnx.split(module)
    np.testing.assert_array_equal(call(nnx.merge(graphdef, state), x), expected)


def test_float64_inputs_compute_in_float64(built):
    apply, params = built["lenet5", (8, 8, 1)]
    x = images((8, 8, 1), dtype=np.float64)
    out = jax.jit(apply)(params, x)
    expected = np.float64 if jax.config.jax_enable_x64 else np.float32
    assert out.dtype == expected
    expected = jax.jit(apply)(params, x.astype(np.float32))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_key_changes_initialisation():
    _, a = make_model("mlp", input_shape=(8, 8, 1), num_classes=10, key=0)
    _, b = make_model("mlp", input_shape=(8, 8, 1), num_classes=10, key=0)
    _, c = make_model("mlp", input_shape=(8, 8, 1), num_classes=10, key=jax.random.key(1))
    jax.tree.map(np.testing.assert_array_equal, a, b)
    assert not np.array_equal(a["layers"][0]["kernel"], c["layers"][0]["kernel"])


def test_parameter_counts_match_the_papers_architectures(built):
    _, mlp = built["mlp", (28, 28, 1)]
    assert count_params(mlp) == 784 * 200 + 200 + 200 * 100 + 100 + 100 * 10 + 10
    _, lenet = built["lenet5", (28, 28, 1)]
    conv = (5 * 5 * 1 * 6 + 6) + (5 * 5 * 6 * 16 + 16)
    dense = (400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10)
    assert count_params(lenet) == conv + dense == 61706


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_worker_function_is_single_input_softmax(built, name):
    apply, params = built[name, (8, 8, 1)]
    x = images((8, 8, 1))
    probs = jax.jit(jax.vmap(worker_function(apply, params)))(x)
    assert probs.shape == (3, 10)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
    expected = jax.nn.softmax(jax.jit(apply)(params, x), axis=-1)
    np.testing.assert_allclose(probs, expected, rtol=1e-5, atol=1e-7)


def test_worker_function_options(built):
    apply, params = built["mlp", (8, 8, 1)]
    x = images((8, 8, 1))
    probs = predict_proba(apply, params, x)
    f = worker_function(apply, params)
    np.testing.assert_allclose(f(x[0].reshape(-1)), probs[0], rtol=1e-5, atol=1e-7)
    logits = worker_function(apply, params, output="logits")(x[0])
    np.testing.assert_allclose(jax.nn.softmax(logits), probs[0], rtol=1e-5, atol=1e-7)
    log_probs = worker_function(apply, params, output="log_probs")(x[0])
    np.testing.assert_allclose(jnp.exp(log_probs), probs[0], rtol=1e-5, atol=1e-7)


def test_worker_function_is_differentiable_in_its_input(built):
    apply, params = built["cnn", (8, 8, 1)]
    f = worker_function(apply, params)
    x = jnp.asarray(images((8, 8, 1), b=1)[0])
    g = jax.jit(jax.grad(lambda x: f(x)[3]))(x)
    assert g.shape == x.shape and bool(jnp.all(jnp.isfinite(g))) and float(jnp.abs(g).sum()) > 0


def test_apply_is_differentiable_in_params(built):
    apply, params = built["mlp", (8, 8, 1)]
    x = images((8, 8, 1))
    grads = jax.jit(jax.grad(lambda p: apply(p, x).sum()))(params)
    assert jax.tree.structure(grads) == jax.tree.structure(params)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))


def test_errors_name_the_problem(built):
    apply, params = built["mlp", (8, 8, 1)]
    with pytest.raises(ValueError, match=r"`x` must have shape \(8, 8, 1\)"):
        apply(params, np.zeros((2, 8, 8, 3), np.float32))
    with pytest.raises(ValueError, match="`x` must be one input"):
        worker_function(apply, params)(np.zeros(10, np.float32))
    with pytest.raises(ValueError, match="`output`"):
        worker_function(apply, params, output="argmax")
    with pytest.raises(ValueError, match="must be one of"):
        make_model("resnet", input_shape=(8, 8, 1), num_classes=10)
    with pytest.raises(ValueError, match="patch_size"):
        make_model("vit", input_shape=(8, 8, 1), num_classes=10, patch_size=3)
    with pytest.raises(ValueError, match="input_shape"):
        make_model("lenet5", input_shape=(8, 8), num_classes=10)


@pytest.mark.parametrize("alias, name", [("LeNet-5", "lenet5"), ("small_cnn", "cnn")])
def test_aliases(alias, name):
    apply, _ = make_model(alias, input_shape=(8, 8, 1), num_classes=3)
    assert apply.name == name and apply.num_classes == 3 and apply.input_shape == (8, 8, 1)


def test_vit_token_count():
    assert math.prod(ViT((28, 28, 1), 10, rngs=nnx.Rngs(0)).pos_embed.shape) == (49 + 1) * 64
    assert ViT((8, 8, 1), 10, rngs=nnx.Rngs(0)).patch_size == 2
