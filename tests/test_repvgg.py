"""The RepVGG-style model: its re-parameterisation against the multi-branch definition."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import signal

from gcc_jax.nn.models import make_model, reparameterize_repvgg


def _conv_same(x, kernel, bias, stride):
    """NumPy reference: zero-padded ('SAME' for 3x3 / 'VALID' for 1x1) cross-correlation."""
    kh = kernel.shape[0]
    pad = kh // 2
    xp = np.pad(x, ((pad, pad), (pad, pad), (0, 0)))
    h_out = (x.shape[0] - 1) // stride + 1
    w_out = (x.shape[1] - 1) // stride + 1
    out = np.zeros((h_out, w_out, kernel.shape[3]))
    for o in range(kernel.shape[3]):
        acc = sum(
            signal.correlate2d(xp[:, :, c], kernel[:, :, c, o], mode="valid")
            for c in range(x.shape[2])
        )
        out[:, :, o] = acc[::stride, ::stride][:h_out, :w_out] + bias[o]
    return out


def _reference_logits(params, x, depths):
    """The training form by its definition: relu(conv3 + conv1 + identity) per block."""
    starts = set(np.cumsum([0, *depths])[:-1].tolist())
    blocks = params["blocks"]
    h = x
    for pos, i in enumerate(sorted(blocks, key=int)):
        b = {k: {n: np.asarray(v, np.float64) for n, v in d.items()} for k, d in blocks[i].items()}
        stride = 2 if pos in starts else 1
        y = _conv_same(h, b["conv3"]["kernel"], b["conv3"]["bias"], stride)
        y = y + _conv_same(h, b["conv1"]["kernel"], b["conv1"]["bias"], stride)
        if stride == 1 and h.shape[2] == y.shape[2]:
            y = y + h
        h = np.maximum(y, 0.0)
    head = params["head"]
    return h.mean(axis=(0, 1)) @ np.asarray(head["kernel"]) + np.asarray(head["bias"])


@pytest.mark.parametrize("depths,widths", [((1, 2, 2), (8, 16, 16)), ((2, 1), (4, 4))])
def test_training_form_matches_numpy_and_reparameterisation_is_exact(depths, widths):
    kw = dict(input_shape=(9, 9, 2), num_classes=5, depths=depths, widths=widths, key=3)
    train, params = make_model("repvgg", **kw)
    deploy, deploy_init = make_model("repvgg", deploy=True, **kw)
    x = np.random.default_rng(0).normal(size=(3, 9, 9, 2))
    got = np.asarray(train(params, jnp.asarray(x)))
    ref = np.stack([_reference_logits(params, xi, depths) for xi in x])
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-10)
    fused = reparameterize_repvgg(params, input_channels=2, depths=depths)
    assert set(fused["blocks"][0]) == {"conv3"}  # one convolution per block
    np.testing.assert_allclose(np.asarray(deploy(fused, jnp.asarray(x))), ref, atol=1e-9)
    # the fused parameters have exactly the deploy form's structure
    shapes = lambda p: {k: np.shape(v) for k, v in _flat(p)}  # noqa: E731
    assert shapes(fused) == shapes(deploy_init)


def _flat(tree, prefix=""):
    for k, v in tree.items():
        if isinstance(v, dict):
            yield from _flat(v, f"{prefix}{k}/")
        else:
            yield f"{prefix}{k}", v


def test_bad_layouts_raise():
    with pytest.raises(ValueError, match="widths"):
        make_model("repvgg", input_shape=(8, 8, 1), num_classes=2, widths=(4,), depths=(1, 1))
    # 3 blocks (the second layout above: its initialisation is compiled already)
    kw = dict(input_shape=(9, 9, 2), num_classes=5, depths=(2, 1), widths=(4, 4), key=3)
    _, params = make_model("repvgg", **kw)
    with pytest.raises(ValueError, match="depths"):
        reparameterize_repvgg(params, input_channels=2, depths=(1, 1))
