"""The networks of learned codes (:class:`gcc_jax.LearnedCode`): pure functions of parameters.

A learned code's encoder ``E_θ`` (an MLP on the concatenated flattened inputs, or a dilated
convolution stack on the images stacked on the channel axis) and decoder ``D_φ`` (an MLP on the
masked outputs). Parameters are plain pytrees (lists of ``{"w", "b"}`` dicts) initialised with
PyTorch's default ``U(±1/√fan_in)`` from a NumPy generator (no compilation, bit-identical for a
seed); the code (:mod:`gcc_jax.codes.learned`) and its training
(:func:`gcc_jax.nn.training.train_learned_code`) both apply them through this module. It needs
only JAX and NumPy.
"""

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core.types import Array

__all__ = [
    "CONV_DILATIONS",
    "conv_apply",
    "conv_init",
    "decode_outputs",
    "encode_parities",
    "mlp_apply",
    "mlp_init",
    "uniform_init",
]

CONV_DILATIONS = (1, 1, 2, 4, 8, 1)
"""Dilations of the 3×3 layers of the convolutional encoder (then one 1×1 layer)."""


def uniform_init(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int, dtype) -> Array:
    """PyTorch's default initialisation ``U(±1/√fan_in)`` (drawn with NumPy: no compilation)."""
    bound = 1.0 / math.sqrt(fan_in)
    return jnp.asarray(rng.uniform(-bound, bound, size=shape), dtype)


def mlp_init(rng: np.random.Generator, sizes: tuple[int, ...], dtype) -> list[dict]:
    """Dense layers ``sizes[0] → … → sizes[-1]``: ``[{"w": (a, b), "b": (b,)}, ...]``."""
    return [
        {"w": uniform_init(rng, (a, b), a, dtype), "b": uniform_init(rng, (b,), a, dtype)}
        for a, b in zip(sizes[:-1], sizes[1:])
    ]


def mlp_apply(layers: list[dict], h: Array) -> Array:
    """``h @ w + b`` per layer with ReLU between layers (none after the last)."""
    for layer in layers[:-1]:
        h = jax.nn.relu(_affine(layer, h))
    return _affine(layers[-1], h)


def _affine(layer: dict, h: Array) -> Array:
    """``h @ w + b`` at full precision."""
    w = layer["w"].astype(h.dtype)
    return jnp.matmul(h, w, precision=jax.lax.Precision.HIGHEST) + layer["b"].astype(h.dtype)


def conv_init(rng: np.random.Generator, in_ch: int, channels: int, out_ch: int, dtype):
    """The dilated encoder's layers: six 3×3 convolutions (``channels`` wide), then a 1×1."""
    shapes = [(3, 3, in_ch, channels)] + [(3, 3, channels, channels)] * (len(CONV_DILATIONS) - 1)
    shapes.append((1, 1, channels, out_ch))
    layers = []
    for shape in shapes:
        fan_in = shape[0] * shape[1] * shape[2]
        layers.append(
            {
                "w": uniform_init(rng, shape, fan_in, dtype),
                "b": uniform_init(rng, shape[3:], fan_in, dtype),
            }
        )
    return layers


def conv_apply(layers: list[dict], h: Array) -> Array:
    """Dilated 3×3 stack then a 1×1 layer on one image ``(H, W, C_in)`` → ``(H, W, C_out)``."""
    h = h[None]
    for i, layer in enumerate(layers):
        d = CONV_DILATIONS[i] if i < len(CONV_DILATIONS) else 1
        h = jax.lax.conv_general_dilated(
            h,
            layer["w"].astype(h.dtype),
            window_strides=(1, 1),
            padding="SAME",
            rhs_dilation=(d, d),
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
            precision=jax.lax.Precision.HIGHEST,
        ) + layer["b"].astype(h.dtype)
        if i < len(layers) - 1:
            h = jax.nn.relu(h)
    return h[0]


@functools.partial(jax.jit, static_argnums=(0, 3))
def encode_parities(encoder: str, params: Any, x: Array, r: int) -> Array:
    """``E_θ(x_1..x_k)``: ``(k, *d)`` → ``(r, *d)``."""
    k, shape = x.shape[0], x.shape[1:]
    if encoder == "mlp":
        return mlp_apply(params, x.reshape(-1)).reshape((r, *shape))
    _, h, w, c = x.shape
    stacked = jnp.moveaxis(x, 0, 2).reshape(h, w, k * c)  # channel i·C + c = image i, channel c
    out = conv_apply(params, stacked).reshape(h, w, r, c)
    return jnp.moveaxis(out, 2, 0)


def decode_outputs(params: Any, y_masked: Array, k: int) -> Array:
    """``D_φ``: ``(k + r, m)`` outputs (unavailable ones zero) → ``(k, m)`` estimates."""
    return mlp_apply(params, y_masked.reshape(-1)).reshape(k, -1)
