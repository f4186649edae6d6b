"""Turn an NNX model into a pure ``apply(params, x)`` and a single-input worker function."""

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray, PyTree

from ._modules import MLP, LeNet5, SmallCNN, ViT
from ._repvgg import RepVGG

__all__ = [
    "MODEL_NAMES",
    "ModelApply",
    "count_params",
    "make_model",
    "predict_proba",
    "worker_function",
]

_MODELS: dict[str, type[nnx.Module]] = {
    "mlp": MLP,
    "lenet5": LeNet5,
    "cnn": SmallCNN,
    "vit": ViT,
    "repvgg": RepVGG,
}
_ALIASES = {"lenet": "lenet5", "lenet_5": "lenet5", "small_cnn": "cnn", "smallcnn": "cnn"}
MODEL_NAMES = tuple(_MODELS)
"""Names accepted by `make_model`: ``"mlp"``, ``"lenet5"``, ``"cnn"``, ``"vit"``, ``"repvgg"``."""

Params = PyTree[Float[Array, "..."]]


def canonical_model_name(name: str) -> str:
    """Normalise a model name (case, hyphens, aliases) or raise a ValueError naming the choices."""
    key = name.lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key not in _MODELS:
        raise ValueError(f"`name` must be one of {MODEL_NAMES}; got {name!r}")
    return key


@dataclasses.dataclass(frozen=True)
class ModelApply:
    """The pure forward function of an NNX model: ``apply(params, x) -> logits``.

    Holds only the static structure (an NNX ``GraphDef``); the parameters are an explicit
    argument, a nested dict of float32 arrays (``nnx.to_pure_dict`` of the ``nnx.Param``
    state). Calling it merges the two (``nnx.merge``) and runs the module, so it is a pure
    function of ``(params, x)``: jit it, vmap it, differentiate it w.r.t. either argument.

    Input and output:

    - a batch ``x: (b, H, W, C)`` gives logits ``(b, num_classes)``;
    - one image ``x: (H, W, C)`` gives logits ``(num_classes,)``.

    The computation runs in the input's floating dtype (the float32 parameters are cast to it),
    so float64 inputs under ``jax_enable_x64`` are computed in float64; integer inputs are cast
    to float32.

    Two instances of the same architecture compare (and hash) equal, so jitted functions that
    take ``apply`` as a static argument compile once per architecture.

    Attributes:
        graphdef: the NNX graph definition of the module.
        name: the model name (``"mlp"``, ``"lenet5"``, ``"cnn"``, ``"vit"``).
        input_shape: ``(H, W, C)`` of one input.
        num_classes: size of the output.
    """

    graphdef: Any
    name: str
    input_shape: tuple[int, int, int]
    num_classes: int

    def __call__(
        self, params: Params, x: Float[ArrayLike, "*b H W C"]
    ) -> Float[Array, "*b num_classes"]:
        """Logits of one image ``(H, W, C)`` or of a batch ``(b, H, W, C)``."""
        x = jnp.asarray(x)
        rank = len(self.input_shape)
        if x.shape[-rank:] != self.input_shape or x.ndim not in (rank, rank + 1):
            raise ValueError(
                f"`x` must have shape {self.input_shape} or (b, *{self.input_shape}) for "
                f"model {self.name!r}; got {x.shape}"
            )
        if not jnp.issubdtype(x.dtype, jnp.floating):
            x = x.astype(jnp.float32)
        params = jax.tree.map(lambda p: jnp.asarray(p).astype(x.dtype), params)
        module = nnx.merge(self.graphdef, params)
        # Inputs and parameters now share one dtype; Flax's layers still promote internally
        # (e.g. LayerNorm statistics against float32), which "strict" promotion would reject.
        with jax.numpy_dtype_promotion("standard"):
            if x.ndim == rank:
                return module(x[None])[0]
            return module(x)


def make_model(
    name: str,
    *,
    input_shape: Sequence[int],
    num_classes: int,
    key: int | PRNGKeyArray = 0,
    **kwargs,
) -> tuple[ModelApply, Params]:
    """Build a freshly initialised model as a pure function and its parameters.

    The NNX module is split (``nnx.split``) into its static graph and its ``nnx.Param`` state;
    the state becomes a nested dict of float32 arrays, so the coded pipeline and the training
    loop see only a function and a pytree.

    Args:
        name: ``"mlp"`` (784-200-100-10 on 28x28), ``"lenet5"``, ``"cnn"`` or ``"vit"``
            (case-insensitive; ``"lenet"`` and ``"small_cnn"`` are aliases).
        input_shape: ``(H, W, C)`` of one input image.
        num_classes: number of output logits.
        key: a PRNG key or an integer seed for the initialisation.
        **kwargs: architecture options of the module (e.g. ``hidden`` for the MLP; ``dim``,
            ``depth``, ``num_heads``, ``patch_size`` for the ViT).

    Returns:
        ``(apply, params)``: ``apply(params, x)`` maps a batch ``(b, H, W, C)`` to logits
        ``(b, num_classes)`` (or one image ``(H, W, C)`` to ``(num_classes,)``); see
        `ModelApply`.

    Raises:
        ValueError: for an unknown name or an input shape the architecture cannot take.

    Example:
        >>> apply, params = make_model("lenet5", input_shape=(8, 8, 1), num_classes=10)
        >>> apply(params, jnp.zeros((3, 8, 8, 1))).shape
        (3, 10)
    """
    key_name = canonical_model_name(name)
    module = _MODELS[key_name](input_shape, num_classes, rngs=nnx.Rngs(key), **kwargs)
    graphdef, state, *rest = nnx.split(module, nnx.Param, ...)
    leftovers = [leaf for r in rest for leaf in jax.tree.leaves(r)]
    if leftovers:  # pragma: no cover - the models above hold parameters only
        raise ValueError(f"model {key_name!r} holds non-parameter state; it cannot be pure")
    apply = ModelApply(graphdef, key_name, tuple(module.input_shape), int(num_classes))
    return apply, nnx.to_pure_dict(state)


def predict_proba(
    apply: Callable, params: Params, x: Float[ArrayLike, "*b H W C"]
) -> Float[Array, "*b num_classes"]:
    """Class probabilities ``softmax(apply(params, x))`` over the last axis.

    Args:
        apply: a model's forward function (from `make_model`).
        params: its parameters.
        x: one image or a batch (see `ModelApply`).

    Returns:
        Probabilities, summing to one over the last axis.

    Example:
        >>> apply, params = make_model("mlp", input_shape=(8, 8, 1), num_classes=10)
        >>> round(float(predict_proba(apply, params, jnp.zeros((8, 8, 1))).sum()), 5)
        1.0
    """
    return jax.nn.softmax(apply(params, x), axis=-1)


def worker_function(
    apply: ModelApply, params: Params, *, output: str = "probs"
) -> Callable[[Float[Array, "*shape"]], Float[Array, " m"]]:
    """The function a coded-computing worker evaluates: one input in, one output vector out.

    ``f(x) = softmax(apply(params, x))`` (the LeTCC protocol: the worker output is the softmax
    vector), for a single input of shape ``(H, W, C)`` or flattened ``(H*W*C,)``; the coded
    pipeline vmaps ``f`` over workers. ``params`` are closed over; to differentiate w.r.t. them
    use ``apply`` directly.

    Args:
        apply: a `ModelApply` from `make_model` (it knows the input shape).
        params: its parameters.
        output: ``"probs"`` (softmax, default), ``"log_probs"`` or ``"logits"``.

    Returns:
        ``f: (H, W, C) or (d,) -> (num_classes,)``, a pure function of its input.

    Raises:
        ValueError: for an unknown ``output``.

    Example:
        >>> apply, params = make_model("mlp", input_shape=(8, 8, 1), num_classes=10)
        >>> f = worker_function(apply, params)
        >>> f(jnp.zeros(64)).shape
        (10,)
    """
    finals = {"probs": jax.nn.softmax, "log_probs": jax.nn.log_softmax, "logits": lambda z: z}
    if output not in finals:
        raise ValueError(f"`output` must be one of {tuple(finals)}; got {output!r}")
    final = finals[output]
    input_shape = apply.input_shape
    size = math.prod(input_shape)

    def f(x: Float[ArrayLike, "*shape"]) -> Float[Array, " m"]:
        x = jnp.asarray(x)
        if x.size != size:
            raise ValueError(
                f"`x` must be one input of shape {input_shape} or ({size},); got {x.shape}"
            )
        return final(apply(params, x.reshape(input_shape)))

    return f


def count_params(params: Params) -> int:
    """Total number of scalar parameters in a pytree.

    Example:
        >>> _, params = make_model("lenet5", input_shape=(28, 28, 1), num_classes=10)
        >>> count_params(params)
        61706
    """
    return sum(int(math.prod(jnp.shape(p))) for p in jax.tree.leaves(params))
