"""A RepVGG-style classifier: multi-branch 3x3/1x1/identity blocks, re-parameterisable.

RepVGG (Ding et al., CVPR 2021) trains each block as three parallel branches and deploys it as
one 3x3 convolution. Here, without batch normalisation (gcc_jax models hold parameters only),
a training-form block computes

    y = relu(conv3x3(x) + conv1x1(x) + x)        (identity only when stride 1 and C_in = C_out)

and :func:`reparameterize_repvgg` folds it into the deploy form ``y = relu(conv3x3'(x))`` with
``K' = K₃ + pad(K₁) + I`` (the 1x1 kernel placed at the centre tap, the identity a centre-tap
delta per channel) and ``b' = b₃ + b₁`` — the same function, one convolution per block.
"""

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

__all__ = ["RepVGG", "reparameterize_repvgg"]

from ._modules import check_input_shape, conv, linear


class _RepBlock(nnx.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, deploy: bool, *, rngs: nnx.Rngs):
        self.stride = int(stride)
        self.identity = stride == 1 and c_in == c_out
        self.deploy = bool(deploy)
        kw = dict(strides=(stride, stride), rngs=rngs)
        self.conv3 = conv(c_in, c_out, (3, 3), padding=((1, 1), (1, 1)), **kw)
        if not self.deploy:
            self.conv1 = conv(c_in, c_out, (1, 1), padding="VALID", **kw)

    def __call__(self, x: jax.Array) -> jax.Array:
        y = self.conv3(x)
        if not self.deploy:
            y = y + self.conv1(x)
            if self.identity:
                y = y + x
        return jax.nn.relu(y)


class RepVGG(nnx.Module):
    """A small RepVGG-style network: stages of re-parameterisable blocks, average pool, linear.

    Stage ``i`` has ``depths[i]`` blocks of width ``widths[i]``; its first block has stride 2
    (no identity branch), the others stride 1 (with the identity branch). Then global average
    pooling and a linear head. ``deploy=True`` builds the single-branch form whose parameters
    :func:`reparameterize_repvgg` computes from the training form's.

    Args:
        input_shape: ``(H, W, C)`` of one image.
        num_classes: number of outputs.
        widths: channels per stage.
        depths: blocks per stage.
        deploy: the single-3x3-convolution form.
        rngs: NNX random streams for the initialisation.

    Example:
        >>> model = RepVGG((16, 16, 3), 5, widths=(8, 16), depths=(1, 2), rngs=nnx.Rngs(0))
        >>> len(model.blocks), model(jnp.zeros((2, 16, 16, 3))).shape
        (3, (2, 5))
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        num_classes: int,
        *,
        widths: Sequence[int] = (16, 32, 64),
        depths: Sequence[int] = (1, 2, 2),
        deploy: bool = False,
        rngs: nnx.Rngs,
    ):
        shape = check_input_shape(input_shape)
        widths, depths = tuple(int(w) for w in widths), tuple(int(d) for d in depths)
        if len(widths) != len(depths) or not widths or min(widths) < 1 or min(depths) < 1:
            raise ValueError(
                f"`widths` and `depths` must be equally long lists of positive ints; got "
                f"{widths} and {depths}"
            )
        self.input_shape = shape
        blocks, c_in = [], shape[2]
        for width, depth in zip(widths, depths, strict=True):
            for j in range(depth):
                blocks.append(_RepBlock(c_in, width, 2 if j == 0 else 1, deploy, rngs=rngs))
                c_in = width
        self.blocks = nnx.List(blocks)
        self.head = linear(c_in, int(num_classes), rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        for block in self.blocks:
            x = block(x)
        return self.head(jnp.mean(x, axis=(1, 2)))


def reparameterize_repvgg(
    params: dict, *, input_channels: int, depths: Sequence[int] = (1, 2, 2)
) -> dict:
    """Deploy-form parameters of a training-form :class:`RepVGG` (one 3x3 conv per block).

    ``K' = K₃ + pad₁(K₁) + I`` and ``b' = b₃ + b₁`` per block, ``I`` the centre-tap identity
    kernel where the block has an identity branch (stride 1, ``C_in = C_out``); the head is
    unchanged. ``make_model("repvgg", ..., deploy=True)``'s apply on the result computes the
    same logits as the training form on ``params``.

    Args:
        params: the training form's parameters (``make_model("repvgg", ...)[1]``).
        input_channels: ``C`` of the input images.
        depths: the ``depths`` the model was built with (the first block of each stage has
            stride 2 and no identity branch).

    Returns:
        The deploy form's parameters (a new nested dict; ``params`` is not modified). The
        fused kernels are summed in float64 and stored in JAX's default float dtype, so under
        x64 the deploy form reproduces the training form to round-off.

    Example:
        >>> from gcc_jax.nn.models import make_model
        >>> train, p = make_model("repvgg", input_shape=(8, 8, 1), num_classes=3)
        >>> deploy, _ = make_model("repvgg", input_shape=(8, 8, 1), num_classes=3, deploy=True)
        >>> x = jnp.linspace(0.0, 1.0, 128).reshape(2, 8, 8, 1)
        >>> q = reparameterize_repvgg(p, input_channels=1)
        >>> bool(jnp.allclose(deploy(q, x), train(p, x), atol=1e-5))
        True
    """
    out = {"head": jax.tree.map(lambda a: a, params["head"]), "blocks": {}}
    c_in = int(input_channels)
    blocks = params["blocks"]
    starts = set(np.cumsum([0, *(int(d) for d in depths)])[:-1].tolist())
    keys = sorted(blocks, key=int)
    if len(keys) != sum(int(d) for d in depths):
        raise ValueError(
            f"`depths` {tuple(depths)} do not match the {len(keys)} blocks of `params`"
        )
    for pos, i in enumerate(keys):
        b = blocks[i]
        k3 = np.asarray(b["conv3"]["kernel"], np.float64)  # (3, 3, C_in, C_out)
        k1 = np.asarray(b["conv1"]["kernel"], np.float64)  # (1, 1, C_in, C_out)
        c_out = k3.shape[3]
        if k3.shape[2] != c_in:
            raise ValueError(f"block {i}: kernel has {k3.shape[2]} input channels, expected {c_in}")
        kernel = k3.copy()
        kernel[1, 1] += k1[0, 0]
        if pos not in starts and c_in == c_out:  # stride 1 with an identity branch
            kernel[1, 1] += np.eye(c_in)
        bias = np.asarray(b["conv3"]["bias"], np.float64) + np.asarray(b["conv1"]["bias"])
        # summed in float64 and kept in JAX's default float dtype: exact fusion under x64
        out["blocks"][i] = {"conv3": {"kernel": jnp.asarray(kernel), "bias": jnp.asarray(bias)}}
        c_in = c_out
    return out
