"""Flax NNX image classifiers: MLP, LeNet-5, a small CNN and a small ViT.

All take a batch of channels-last images ``(b, H, W, C)`` and return logits ``(b, num_classes)``.
Parameters are float32; the computation runs in the dtype of the input (see `make_model`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

__all__ = ["MLP", "LeNet5", "SmallCNN", "ViT"]

_F32 = jnp.float32
_HIGHEST = jax.lax.Precision.HIGHEST  # full float32 products on every backend


def check_input_shape(input_shape: Sequence[int]) -> tuple[int, int, int]:
    shape = tuple(int(s) for s in input_shape)
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"`input_shape` must be (H, W, C) with positive sizes; got {input_shape}")
    return shape


def linear(a: int, b: int, *, rngs: nnx.Rngs) -> nnx.Linear:
    """A float32 dense layer ``a -> b`` with full-precision products."""
    return nnx.Linear(a, b, param_dtype=_F32, precision=_HIGHEST, rngs=rngs)


def conv(c_in: int, c_out: int, kernel: tuple[int, int], *, rngs: nnx.Rngs, **kwargs) -> nnx.Conv:
    """A float32 convolution with full-precision products (``kwargs``: padding, strides)."""
    return nnx.Conv(c_in, c_out, kernel, param_dtype=_F32, precision=_HIGHEST, rngs=rngs, **kwargs)


def _pool(x: jax.Array) -> jax.Array:
    """2x2 max pooling with stride 2 ('VALID': an odd last row/column is dropped)."""
    return nnx.max_pool(x, window_shape=(2, 2), strides=(2, 2), padding="VALID")


class MLP(nnx.Module):
    """Multi-layer perceptron on the flattened image; ParM's base MLP is 784-200-100-10.

    ``logits = W3 relu(W2 relu(W1 flatten(x) + b1) + b2) + b3`` with the hidden sizes given.

    Args:
        input_shape: ``(H, W, C)`` of one image; the first layer has ``H*W*C`` inputs.
        num_classes: number of outputs.
        hidden: hidden-layer widths.
        rngs: NNX random streams for the initialisation.

    Example:
        >>> model = MLP((28, 28, 1), 10, rngs=nnx.Rngs(0))  # ParM's base MLP
        >>> sum(p.size for p in jax.tree.leaves(nnx.state(model, nnx.Param)))  # weights + biases
        178110
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        num_classes: int,
        *,
        hidden: Sequence[int] = (200, 100),
        rngs: nnx.Rngs,
    ):
        self.input_shape = check_input_shape(input_shape)
        sizes = [math.prod(self.input_shape), *(int(h) for h in hidden), int(num_classes)]
        self.layers = nnx.List([linear(a, b, rngs=rngs) for a, b in zip(sizes, sizes[1:])])

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x.reshape(x.shape[0], -1)
        for layer in self.layers[:-1]:
            x = jax.nn.relu(layer(x))
        return self.layers[-1](x)


class _TwoStageCNN(nnx.Module):
    """Two convolution-relu-pool stages (``conv1``, ``conv2``) on images of at least 4x4,
    flattened; subclasses build the layers and the head."""

    def _check_size(self, input_shape: Sequence[int]) -> tuple[int, int, int]:
        h, w, c = self.input_shape = check_input_shape(input_shape)
        if min(h, w) < 4:
            name = type(self).__name__
            raise ValueError(f"{name} needs images of at least 4x4; got `input_shape`={(h, w, c)}")
        return h, w, c

    def features(self, x: jax.Array) -> jax.Array:
        x = _pool(jax.nn.relu(self.conv1(x)))
        x = _pool(jax.nn.relu(self.conv2(x)))
        return x.reshape(x.shape[0], -1)


class LeNet5(_TwoStageCNN):
    """LeNet-5 (about 6.2e4 parameters on 28x28 inputs), with ReLU and max pooling.

    ``conv5x5(6, 'SAME') - relu - pool2 - conv5x5(16) - relu - pool2 - fc120 - relu - fc84 - relu
    - fc(num_classes)``. On 28x28 inputs this is the classic 28 -> 14 -> 10 -> 5 geometry
    (5*5*16 = 400 features). The second convolution is 'VALID' when the map after the first
    pooling is at least 10 pixels on each side, and 'SAME' otherwise, so small images work too:
    8x8 digits go 8 -> 4 -> 4 -> 2 (2*2*16 = 64 features).

    Args:
        input_shape: ``(H, W, C)`` of one image, at least 4x4.
        num_classes: number of outputs.
        rngs: NNX random streams for the initialisation.

    Example:
        >>> model = LeNet5((8, 8, 1), 10, rngs=nnx.Rngs(0))
        >>> model(jnp.zeros((2, 8, 8, 1))).shape
        (2, 10)
    """

    def __init__(self, input_shape: Sequence[int], num_classes: int, *, rngs: nnx.Rngs):
        h, w, c = self._check_size(input_shape)
        h, w = h // 2, w // 2
        self.conv2_padding = "VALID" if min(h, w) >= 10 else "SAME"
        if self.conv2_padding == "VALID":
            h, w = h - 4, w - 4
        h, w = h // 2, w // 2
        self.conv1 = conv(c, 6, (5, 5), padding="SAME", rngs=rngs)
        self.conv2 = conv(6, 16, (5, 5), padding=self.conv2_padding, rngs=rngs)
        self.fc1 = linear(h * w * 16, 120, rngs=rngs)
        self.fc2 = linear(120, 84, rngs=rngs)
        self.fc3 = linear(84, int(num_classes), rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = jax.nn.relu(self.fc1(self.features(x)))
        x = jax.nn.relu(self.fc2(x))
        return self.fc3(x)


class SmallCNN(_TwoStageCNN):
    """A small VGG-style CNN: two 3x3 'SAME' conv-relu-pool stages and a two-layer head.

    ``conv3x3(c1) - relu - pool2 - conv3x3(c2) - relu - pool2 - fc(hidden) - relu -
    fc(num_classes)``; with the defaults about 1.1e5 parameters on 28x28 inputs.

    Args:
        input_shape: ``(H, W, C)`` of one image, at least 4x4.
        num_classes: number of outputs.
        channels: output channels of the two convolutions.
        hidden: width of the hidden fully connected layer.
        rngs: NNX random streams for the initialisation.

    Example:
        >>> localizer = SmallCNN((40, 40, 1), 4, rngs=nnx.Rngs(0))  # a box from a 40x40 canvas
        >>> boxes = localizer(jnp.zeros((3, 40, 40, 1)))
        >>> boxes.shape
        (3, 4)
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        num_classes: int,
        *,
        channels: Sequence[int] = (16, 32),
        hidden: int = 64,
        rngs: nnx.Rngs,
    ):
        h, w, c = self._check_size(input_shape)
        c1, c2 = (int(k) for k in channels)
        self.conv1 = conv(c, c1, (3, 3), padding="SAME", rngs=rngs)
        self.conv2 = conv(c1, c2, (3, 3), padding="SAME", rngs=rngs)
        self.fc1 = linear((h // 4) * (w // 4) * c2, int(hidden), rngs=rngs)
        self.fc2 = linear(int(hidden), int(num_classes), rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.fc2(jax.nn.relu(self.fc1(self.features(x))))


class _Block(nnx.Module):
    """Pre-norm transformer encoder block: ``x + MHA(LN(x))``, then ``x + MLP(LN(x))``."""

    def __init__(self, dim: int, num_heads: int, mlp_dim: int, *, rngs: nnx.Rngs):
        self.norm1 = nnx.LayerNorm(dim, param_dtype=_F32, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(
            num_heads,
            dim,
            decode=False,
            param_dtype=_F32,
            precision=_HIGHEST,
            rngs=rngs,
            keep_rngs=False,
        )
        self.norm2 = nnx.LayerNorm(dim, param_dtype=_F32, rngs=rngs)
        self.mlp1 = linear(dim, mlp_dim, rngs=rngs)
        self.mlp2 = linear(mlp_dim, dim, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.attn(self.norm1(x), deterministic=True)
        return x + self.mlp2(jax.nn.gelu(self.mlp1(self.norm2(x))))


class ViT(nnx.Module):
    """A small Vision Transformer: patch embedding, a class token, pre-norm blocks, linear head.

    Images are cut into non-overlapping ``patch_size`` squares, each linearly embedded to ``dim``
    (a strided convolution); a learned class token is prepended and learned position embeddings
    added; ``depth`` pre-norm blocks (multi-head self-attention, GELU MLP) follow; the logits are
    a linear map of the final layer-normed class token. No dropout, so the model is a
    deterministic function of its parameters.

    Args:
        input_shape: ``(H, W, C)`` of one image; ``H`` and ``W`` must be multiples of
            ``patch_size``.
        num_classes: number of outputs.
        patch_size: side of a patch; default 4 for images of at least 16 pixels a side
            (28x28 -> 49 patches), else 2 (8x8 -> 16 patches).
        dim: embedding width.
        depth: number of transformer blocks.
        num_heads: attention heads (must divide ``dim``).
        mlp_dim: hidden width of the blocks' MLPs.
        rngs: NNX random streams for the initialisation.

    Example:
        >>> model = ViT((8, 8, 1), 10, rngs=nnx.Rngs(0))
        >>> model(jnp.zeros((2, 8, 8, 1))).shape
        (2, 10)
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        num_classes: int,
        *,
        patch_size: int | None = None,
        dim: int = 64,
        depth: int = 2,
        num_heads: int = 4,
        mlp_dim: int = 128,
        rngs: nnx.Rngs,
    ):
        h, w, c = self.input_shape = check_input_shape(input_shape)
        if patch_size is None:
            patch_size = 4 if min(h, w) >= 16 else 2
        if h % patch_size or w % patch_size:
            raise ValueError(
                f"`patch_size`={patch_size} must divide the image sides; got `input_shape`="
                f"{(h, w, c)}"
            )
        if dim % num_heads:
            raise ValueError(f"`num_heads`={num_heads} must divide `dim`={dim}")
        self.patch_size = int(patch_size)
        num_tokens = (h // patch_size) * (w // patch_size) + 1
        p = self.patch_size
        self.embed = conv(c, dim, (p, p), strides=(p, p), padding="VALID", rngs=rngs)
        init = jax.nn.initializers.normal(0.02)
        self.cls_token = nnx.Param(init(rngs.params(), (1, 1, dim), _F32))
        self.pos_embed = nnx.Param(init(rngs.params(), (1, num_tokens, dim), _F32))
        self.blocks = nnx.List(
            [_Block(dim, num_heads, mlp_dim, rngs=rngs) for _ in range(int(depth))]
        )
        self.norm = nnx.LayerNorm(dim, param_dtype=_F32, rngs=rngs)
        self.head = linear(dim, int(num_classes), rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b = x.shape[0]
        tokens = self.embed(x).reshape(b, -1, self.embed.out_features)
        cls = jnp.broadcast_to(self.cls_token[...], (b, 1, tokens.shape[-1])).astype(x.dtype)
        tokens = jnp.concatenate([cls, tokens], axis=1) + self.pos_embed[...].astype(x.dtype)
        for block in self.blocks:
            tokens = block(tokens)
        return self.head(self.norm(tokens[:, 0]))
