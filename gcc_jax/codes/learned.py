"""Learning-based coded computation: a learned encoder and decoder around a frozen base model.

Kosaian, Rashmi & Venkataraman, "Learning-Based Coded Computation" (JSAIT 2020; arXiv
1806.01259), method-notes §3.3. ``k`` workers compute the base model ``F`` on the queries
``x_1..x_k``; ``r`` more compute the *same* ``F`` on ``r`` parity queries produced by a learned
encoder ``(p_1..p_r) = E_θ(x_1..x_k)``. When some outputs are unavailable, a learned decoder
``D_φ`` maps the ``k + r`` outputs, with the unavailable ones set to zero, to estimates of the
``k`` base outputs; an available base output is used as is.

* Encoder ``"mlp"``: ``E_θ`` = MLP on the concatenated flattened inputs (``k·d`` → hidden →
  ``r·d``, ReLU), reshaped to ``r`` inputs.
* Encoder ``"conv"`` (images ``(H, W, C)``): the ``k`` images stacked on the channel axis
  (``k·C`` channels) through six 3×3 'SAME' convolutions with dilations ``1, 1, 2, 4, 8, 1``
  (ReLU, ``channels`` each; ParM uses ``20·k``) and a final 1×1 convolution to ``r·C``
  channels, split into ``r`` images.
* Decoder: MLP on the ``(k + r)·m`` masked outputs (hidden layers ReLU) → ``k·m``.

Training (:func:`train_learned_code`): end to end through the frozen ``F``, minimising the
MSE between the decoded and the true base outputs on the *unavailable* slots, averaged over
every erasure pattern the code must handle (:func:`erasure_patterns`: 1 to ``r`` missing
outputs, at least one of them a base output — patterns that lose only parities need no
decoding).
"""

import dataclasses
import functools
import itertools
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._misc import (
    as_int,
    as_mask,
    check_inputs,
    check_outputs,
    data_status,
    float_dtype,
    input_status,
)
from .._status import Status, combine
from .._types import Array, ArrayLike, Bool, Float, PRNGKeyArray, Shaped
from ._base import AbstractCode, Decoded, Encoded
from .parity import (
    TrainedCode,
    _summary,
    adam_l2,
    base_outputs,
    batched,
    check_train_args,
    split_groups,
)

__all__ = [
    "CONV_DILATIONS",
    "ENCODERS",
    "LearnedCode",
    "erasure_patterns",
    "train_learned_code",
]

ENCODERS = ("mlp", "conv")
"""Learned encoders of :class:`LearnedCode`."""
CONV_DILATIONS = (1, 1, 2, 4, 8, 1)
"""Dilations of the 3×3 layers of the convolutional encoder (then one 1×1 layer)."""


def erasure_patterns(num_inputs: int, num_parities: int = 1) -> Bool[np.ndarray, "p n"]:
    """Every pattern a learned code must decode: 1 to ``r`` of ``k + r`` outputs missing, at
    least one of them a base output (``True`` = available), in lexicographic order.

    For ``r = 1`` these are the ``k`` patterns that erase one base output.

    Example:
        >>> erasure_patterns(2, 1).astype(int).tolist()
        [[0, 1, 1], [1, 0, 1]]
    """
    k, r = int(num_inputs), int(num_parities)
    rows = []
    for size in range(1, r + 1):
        for erased in itertools.combinations(range(k + r), size):
            if min(erased) < k:
                row = np.ones(k + r, bool)
                row[list(erased)] = False
                rows.append(row)
    return np.stack(rows)


# -- the networks (pure functions of parameter pytrees) ------------------------------------------


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int, dtype) -> Array:
    """PyTorch's default initialisation ``U(±1/√fan_in)`` (drawn with NumPy: no compilation)."""
    bound = 1.0 / math.sqrt(fan_in)
    return jnp.asarray(rng.uniform(-bound, bound, size=shape), dtype)


def _mlp_init(rng: np.random.Generator, sizes: tuple[int, ...], dtype) -> list[dict]:
    return [
        {"w": _uniform(rng, (a, b), a, dtype), "b": _uniform(rng, (b,), a, dtype)}
        for a, b in zip(sizes[:-1], sizes[1:])
    ]


def _mlp_apply(layers: list[dict], h: Array) -> Array:
    for layer in layers[:-1]:
        h = jax.nn.relu(h @ layer["w"].astype(h.dtype) + layer["b"].astype(h.dtype))
    return h @ layers[-1]["w"].astype(h.dtype) + layers[-1]["b"].astype(h.dtype)


def _conv_init(rng: np.random.Generator, in_ch: int, channels: int, out_ch: int, dtype):
    shapes = [(3, 3, in_ch, channels)] + [(3, 3, channels, channels)] * (len(CONV_DILATIONS) - 1)
    shapes.append((1, 1, channels, out_ch))
    layers = []
    for shape in shapes:
        fan_in = shape[0] * shape[1] * shape[2]
        layers.append(
            {"w": _uniform(rng, shape, fan_in, dtype), "b": _uniform(rng, shape[3:], fan_in, dtype)}
        )
    return layers


def _conv_apply(layers: list[dict], h: Array) -> Array:
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
        ) + layer["b"].astype(h.dtype)
        if i < len(layers) - 1:
            h = jax.nn.relu(h)
    return h[0]


@functools.partial(jax.jit, static_argnums=(0, 3))
def _encode_parities(encoder: str, params: Any, x: Array, r: int) -> Array:
    """``E_θ(x_1..x_k)``: ``(k, *d)`` → ``(r, *d)``."""
    k, shape = x.shape[0], x.shape[1:]
    if encoder == "mlp":
        return _mlp_apply(params, x.reshape(-1)).reshape((r, *shape))
    _, h, w, c = x.shape
    stacked = jnp.moveaxis(x, 0, 2).reshape(h, w, k * c)  # channel i·C + c = image i, channel c
    out = _conv_apply(params, stacked).reshape(h, w, r, c)
    return jnp.moveaxis(out, 2, 0)


def _decode_outputs(params: Any, y_masked: Array, k: int) -> Array:
    """``D_φ``: ``(k + r, m)`` outputs (unavailable ones zero) → ``(k, m)`` estimates."""
    return _mlp_apply(params, y_masked.reshape(-1)).reshape(k, -1)


@functools.partial(jax.jit, static_argnames=("num_inputs", "num_parities"))
def _learned_decode(
    decoder_params: Any, y: Array, mask: Array, num_inputs: int, num_parities: int
) -> tuple[Array, Array]:
    k = num_inputs
    dtype = float_dtype(y)
    y = y.astype(dtype)
    finite = jnp.all(jnp.isfinite(y), axis=1)
    status = combine((jnp.sum(~mask) > num_parities, Status.TOO_MANY_ERASURES)) | data_status(
        y, mask
    )
    # A missing worker's output (even NaN/Inf) never reaches the decoder or the gradient.
    y_ok = jnp.where((mask & finite)[:, None], y, 0.0)
    recon = _decode_outputs(decoder_params, y_ok, k)
    value = jnp.where(mask[:k, None], y_ok[:k], recon)
    status = status | combine((~jnp.all(jnp.isfinite(value)), Status.NONFINITE_RESULT))
    return jnp.where(status == 0, value, jnp.nan), status


def _check_size(value, name: str, lo: int) -> int:
    return as_int(value, name, lo)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class LearnedCode(AbstractCode):
    """A learned code: ``k`` base queries plus ``r`` learned parity queries, a learned decoder.

    Worker ``n < k`` receives ``x_n``; worker ``k + i`` receives the learned parity query
    ``p_i`` of :meth:`encode` (``(p_1..p_r) = E_θ(x_1..x_k)``, module docstring). *All*
    ``k + r`` workers run the same base function ``F``, so :func:`gcc_jax.coded_apply` and
    :func:`gcc_jax.monte_carlo_loss` apply directly. Decoding, with ``mask`` flagging the
    workers that returned:

    * base output ``j`` available: ``F^(x_j) = F(x_j)`` (exact);
    * base output ``j`` missing: ``F^(x_j) = D_φ(y~ ⊙ mask)_j`` — the decoder MLP on the
      ``(k + r)·m`` outputs with the missing ones zeroed;
    * more than ``r`` outputs missing: ``Status.TOO_MANY_ERASURES`` (value NaN), as is NaN/Inf
      from a live worker (``NONFINITE_DATA``).

    ``encoder_params`` and ``decoder_params`` are array leaves (differentiable, no recompile
    when they change); ``num_inputs``, ``num_parities`` and ``encoder`` are static. Build one
    with :meth:`init` and train it with :func:`train_learned_code`.

    Attributes:
        encoder_params: the encoder's parameters (a list of ``{"w", "b"}`` layers).
        decoder_params: the decoder MLP's parameters (a list of ``{"w", "b"}`` layers).
        num_inputs: ``k ≥ 2`` (static).
        num_parities: ``r ≥ 1`` (static).
        encoder: ``"mlp"`` (default) or ``"conv"`` (static).

    Example:
        >>> import jax, jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.LearnedCode.init(key=0, num_inputs=2, input_shape=(4,), output_size=3)
        >>> x = jnp.ones((2, 4))
        >>> xt = code.encode(x)                          # (3, 4): x_1, x_2, p_1
        >>> y = xt[:, :3] * 2.0                          # any f, e.g. F(v) = 2 v[:3]
        >>> out = code.decode(y, jnp.array([True, False, True]))   # F(x_2) from D_φ
        >>> out.shape, bool(jnp.all(out[0] == 2.0))
        ((2, 3), True)
    """

    encoder_params: Any
    decoder_params: Any
    num_inputs: int = dataclasses.field(metadata=dict(static=True))
    num_parities: int = dataclasses.field(default=1, metadata=dict(static=True))
    encoder: str = dataclasses.field(default="mlp", metadata=dict(static=True))

    def __post_init__(self):
        object.__setattr__(self, "num_inputs", _check_size(self.num_inputs, "num_inputs", 2))
        object.__setattr__(self, "num_parities", _check_size(self.num_parities, "num_parities", 1))
        if self.encoder not in ENCODERS:
            raise ValueError(f"`encoder` must be one of {ENCODERS}; got {self.encoder!r}")

    @classmethod
    def init(
        cls,
        *,
        key: int | PRNGKeyArray,
        num_inputs: int,
        input_shape: Sequence[int],
        output_size: int,
        num_parities: int = 1,
        encoder: str = "mlp",
        encoder_hidden: Sequence[int] | None = None,
        decoder_hidden: Sequence[int] | None = None,
        channels: int | None = None,
        dtype=jnp.float32,
    ) -> "LearnedCode":
        """A freshly initialised code (PyTorch-default uniform initialisation, ``dtype``).

        Weights and biases of each layer are drawn from ``U(±1/√fan_in)`` by a NumPy generator
        seeded with ``key`` (fast, no compilation, bit-identical for a key).

        Args:
            key: integer seed or a JAX PRNG key.
            num_inputs: ``k ≥ 2``.
            input_shape: shape ``d`` of one input (``(H, W, C)`` for the conv encoder).
            output_size: ``m``, the size of one base output (e.g. the number of classes).
            num_parities: ``r ≥ 1``.
            encoder: ``"mlp"`` or ``"conv"``.
            encoder_hidden: MLP encoder hidden widths (default ``(d,)``; ParM's MLPEncoder uses
                ``(k·d,)``).
            decoder_hidden: decoder hidden widths (default ``(4(k+r)m, 4(k+r)m)``).
            channels: conv encoder width (default ``20·k``, as ParM's ConvEncoder).
            dtype: parameter dtype.

        Raises:
            ValueError: bad sizes, or a conv encoder without ``(H, W, C)`` inputs.
        """
        k = _check_size(num_inputs, "num_inputs", 2)
        r = _check_size(num_parities, "num_parities", 1)
        m = _check_size(output_size, "output_size", 1)
        shape = tuple(int(s) for s in input_shape)
        if not shape or min(shape) < 1:
            raise ValueError(f"`input_shape` must be a non-empty shape; got {input_shape!r}")
        d = math.prod(shape)
        if isinstance(key, int | np.integer) and not isinstance(key, bool):
            seed = [int(key)]
        else:  # a JAX PRNG key: its bits seed NumPy's generator
            seed = np.asarray(jax.random.key_data(key)).ravel().tolist()
        rng = np.random.default_rng([*seed, 0x1EA])
        if encoder == "mlp":
            hidden = (d,) if encoder_hidden is None else tuple(int(h) for h in encoder_hidden)
            enc = _mlp_init(rng, (k * d, *hidden, r * d), jnp.dtype(dtype))
        elif encoder == "conv":
            if len(shape) != 3:
                raise ValueError(f"the conv encoder needs images (H, W, C); got {shape}")
            ch = 20 * k if channels is None else _check_size(channels, "channels", 1)
            enc = _conv_init(rng, k * shape[2], ch, r * shape[2], jnp.dtype(dtype))
        else:
            raise ValueError(f"`encoder` must be one of {ENCODERS}; got {encoder!r}")
        width = 4 * (k + r) * m
        dec_hidden = (width, width) if decoder_hidden is None else tuple(decoder_hidden)
        dec_sizes = ((k + r) * m, *(int(h) for h in dec_hidden), k * m)
        dec = _mlp_init(rng, dec_sizes, jnp.dtype(dtype))
        return cls(enc, dec, num_inputs=k, num_parities=r, encoder=encoder)

    @property
    def num_workers(self) -> int:
        """``k + r``."""
        return self.num_inputs + self.num_parities

    # -- encoder ----------------------------------------------------------------------------

    def parities(self, x: Float[ArrayLike, "k *d"]) -> Float[Array, "r *d"]:
        """The ``r`` learned parity queries ``E_θ(x_1..x_k)``."""
        x = check_inputs(x, self.num_inputs)
        if self.encoder == "mlp":
            fan_in = self.encoder_params[0]["w"].shape[0]
            if x.size != fan_in:
                raise ValueError(
                    f"`x` must hold k={self.num_inputs} inputs of {fan_in // self.num_inputs} "
                    f"values for this encoder; got shape {x.shape}"
                )
        else:
            c_in = self.encoder_params[0]["w"].shape[2]
            if x.ndim != 4 or x.shape[0] * x.shape[3] != c_in:
                raise ValueError(
                    f"the conv encoder needs images (k, H, W, {c_in // self.num_inputs}); got "
                    f"{x.shape}"
                )
        x = x.astype(float_dtype(x))
        return _encode_parities(self.encoder, self.encoder_params, x, self.num_parities)

    def encode_with_status(self, x: Shaped[ArrayLike, " k *d"]) -> Encoded:
        """The ``k + r`` queries ``(x_1, …, x_k, p_1, …, p_r)``; all ``k + r`` workers run ``F``."""
        p = self.parities(x)
        x = jnp.asarray(x)
        status = input_status(x) | combine((~jnp.all(jnp.isfinite(p)), Status.NONFINITE_RESULT))
        return Encoded(jnp.concatenate([x.astype(p.dtype), p], axis=0), status)

    # -- decoder ----------------------------------------------------------------------------

    def reconstructed(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, " k"]:
        """Which estimates come from the decoder (their base worker is missing): ``~mask[:k]``."""
        return ~as_mask(mask, self.num_workers)[: self.num_inputs]

    def available(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, " k"]:
        """Every estimate when at most ``r`` outputs are missing, none otherwise."""
        mask = as_mask(mask, self.num_workers)
        return jnp.broadcast_to(jnp.sum(~mask) <= self.num_parities, (self.num_inputs,))

    def decode_with_status(
        self, y: Shaped[ArrayLike, " n *m"], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """Learned decoding; value problems reported as data (never raises on them).

        Status flags: ``TOO_MANY_ERASURES`` (more than ``r`` missing), ``NONFINITE_DATA``
        (NaN/Inf from a live worker), ``NONFINITE_RESULT``. The value is NaN wherever the
        status is not OK. Use under ``jit``/``vmap`` over masks.
        """
        y, mask = check_outputs(y, mask, self.num_workers)
        y_flat = y.reshape(self.num_workers, -1)
        fan_in = self.decoder_params[0]["w"].shape[0]
        if y_flat.size != fan_in:
            raise ValueError(
                f"`y` must hold n={self.num_workers} outputs of {fan_in // self.num_workers} "
                f"values for this decoder; got shape {y.shape}"
            )
        value, status = _learned_decode(
            self.decoder_params,
            y_flat,
            mask,
            num_inputs=self.num_inputs,
            num_parities=self.num_parities,
        )
        return Decoded(value.reshape((self.num_inputs, *y.shape[1:])), status)


# -- training ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class _LearnedTask:
    """Static description of a learned-code training step (hashed by identity: the frozen base
    parameters are compile-time constants of its step)."""

    base_apply: Callable
    base_params: Any
    num_inputs: int
    num_parities: int
    encoder: str
    patterns: tuple[tuple[bool, ...], ...]


def _pattern_terms(task: _LearnedTask, params: dict, x: Array, y: Array):
    """Decoded estimates and squared errors for every erasure pattern on groups ``x (b, k, …)``.

    Returns ``(recon (P, b, k, m), erased (P, k))``.
    """
    k, r = task.num_inputs, task.num_parities
    b, m = x.shape[0], y.shape[-1]
    par = jax.vmap(lambda xi: _encode_parities(task.encoder, params["encoder"], xi, r))(x)
    fp = batched(task.base_apply, task.base_params, par.reshape(b * r, *x.shape[2:]))
    y_all = jnp.concatenate([y, fp.reshape(b, r, m).astype(y.dtype)], axis=1)  # (b, k+r, m)
    masks = jnp.asarray(np.array(task.patterns))  # (P, k+r)

    def one(mask):
        y_in = jnp.where(mask[None, :, None], y_all, 0.0)
        return jax.vmap(lambda v: _decode_outputs(params["decoder"], v, k))(y_in)

    return jax.vmap(one)(masks), ~masks[:, :k]


def _learned_loss(task: _LearnedTask, params: dict, batch) -> Array:
    """Mean over patterns of the MSE on the erased base outputs (module docstring)."""
    k = task.num_inputs
    x = batch.x.reshape(-1, k, *batch.x.shape[1:])
    y = batch.y.reshape(-1, k, batch.y.shape[-1])
    recon, erased = _pattern_terms(task, params, x, y)
    err = jnp.mean((recon - y[None]) ** 2, axis=-1)  # (P, b, k)
    w = jnp.broadcast_to(erased[:, None, :], err.shape).astype(err.dtype)
    per_pattern = jnp.sum(err * w, axis=(1, 2)) / jnp.sum(w, axis=(1, 2))
    return jnp.mean(per_pattern)


@functools.partial(jax.jit, static_argnames="task")
def _learned_val_agreement(task: _LearnedTask, params: dict, x: Array, y: Array) -> Array:
    """Agreement of the decoded argmax with the base argmax on the erased slots (all patterns)."""
    recon, erased = _pattern_terms(task, params, x, y)
    hit = jnp.argmax(recon, axis=-1) == jnp.argmax(y, axis=-1)[None]  # (P, b, k)
    w = jnp.broadcast_to(erased[:, None, :], hit.shape)
    return jnp.sum(hit & w) / jnp.sum(w)


def train_learned_code(
    base_apply: Callable,
    base_params: Any,
    x_train: Float[ArrayLike, "n *d"],
    *,
    num_inputs: int,
    num_parities: int = 1,
    encoder: str = "mlp",
    encoder_hidden: Sequence[int] | None = None,
    decoder_hidden: Sequence[int] | None = None,
    channels: int | None = None,
    epochs: int = 10,
    batch_size: int | None = None,
    lr: float = 1e-3,
    weight_decay: float = 1e-5,
    val_fraction: float = 0.1,
    seed: int = 0,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    progress: bool = True,
) -> TrainedCode:
    """Train a :class:`LearnedCode` end to end through the frozen base model (or load it).

    With ``F = base_apply(base_params, ·)`` frozen (its raw outputs), minimises over the
    encoder and decoder parameters ``(θ, φ)``

        L = (1/|𝒫|) Σ_{M ∈ 𝒫} mean_{groups} mean_{j erased by M} (1/m) ‖D_φ(Y ⊙ M)_j − F(x_j)‖²,

    ``Y = (F(x_1), …, F(x_k), F(E_θ(x)_1), …, F(E_θ(x)_r))`` and ``𝒫`` =
    :func:`erasure_patterns` — the gradient reaches ``θ`` through ``F``. Adam(``lr``) with an
    L2 weight decay (:func:`gcc_jax.codes.parity.adam_l2`), random groups of ``k`` training
    images reshuffled every epoch (:func:`gcc_jax.training.fit`: deterministic for a seed,
    progress bar), a held-out ``val_fraction`` of the images in fixed groups on which the
    degraded-mode reconstruction accuracy is recorded after each epoch, and the checkpoint
    cached (:func:`gcc_jax.training.cached_fit`) under a key hashing every hyper-parameter, the
    base model's parameters and the training images.

    Args:
        base_apply: ``base_apply(params, x)``: one input → raw outputs ``(m,)``.
        base_params: the frozen base model's parameters.
        x_train: training inputs ``(n, ...)``.
        num_inputs: ``k ≥ 2``.
        num_parities: ``r ≥ 1``.
        encoder, encoder_hidden, decoder_hidden, channels: architecture (:meth:`LearnedCode.init`).
        epochs: passes over the training images.
        batch_size: groups per mini-batch (default 64 for ``k = 2``, 32 otherwise, as ParM).
        lr: Adam learning rate.
        weight_decay: L2 weight decay.
        val_fraction: held-out fraction of ``x_train``, in ``(0, 1)``.
        seed: seed of the initialisation, the split and the shuffling.
        cache_dir: cache directory (default ``$GCC_JAX_CACHE`` or the XDG cache).
        use_cache: read and write the cache.
        progress: progress bar and a one-line summary.

    Returns:
        A :class:`gcc_jax.codes.parity.TrainedCode` holding the :class:`LearnedCode`.

    Raises:
        ValueError: bad sizes or hyper-parameters.

    Example:
        >>> import numpy as np, jax.numpy as jnp, gcc_jax as gcc
        >>> from gcc_jax.data import load_digits
        >>> lin = lambda p, x: p @ jnp.ravel(x)
        >>> w = jnp.asarray(np.random.default_rng(0).normal(size=(10, 64)), jnp.float32)
        >>> tc = gcc.train_learned_code(lin, w, load_digits().x_train, num_inputs=2,
        ...                             encoder_hidden=(32,), epochs=2, use_cache=False,
        ...                             progress=False)
        >>> tc.code.num_workers, tc.train_losses[-1] < tc.train_losses[0]
        (3, True)
    """
    from ..training import cached_fit, fit, tree_fingerprint

    k = _check_size(num_inputs, "num_inputs", 2)
    r = _check_size(num_parities, "num_parities", 1)
    groups = batch_size if batch_size is not None else (64 if k == 2 else 32)
    x_train = check_train_args(x_train, k, epochs, groups)
    shape = x_train.shape[1:]
    m = int(np.prod(jax.eval_shape(lambda v: base_apply(base_params, v), x_train[0]).shape))
    init = LearnedCode.init(
        key=int(seed),
        num_inputs=k,
        input_shape=shape,
        output_size=m,
        num_parities=r,
        encoder=encoder,
        encoder_hidden=encoder_hidden,
        decoder_hidden=decoder_hidden,
        channels=channels,
    )
    init_params = {"encoder": init.encoder_params, "decoder": init.decoder_params}
    patterns = erasure_patterns(k, r)
    task = _LearnedTask(
        base_apply, base_params, k, r, encoder, tuple(tuple(bool(v) for v in p) for p in patterns)
    )
    config = {
        "method": "learned",
        "num_inputs": k,
        "num_parities": r,
        "encoder": encoder,
        "architecture": [list(np.shape(v)) for v in jax.tree.leaves(init_params)],
        "base_model": getattr(base_apply, "name", getattr(base_apply, "__name__", "?")),
        "epochs": int(epochs),
        "batch_groups": int(groups),
        "lr": float(lr),
        "weight_decay": float(weight_decay),
        "val_fraction": float(val_fraction),
        "seed": int(seed),
        "base_params": tree_fingerprint(base_params),
        "data": tree_fingerprint(x_train),
    }
    label = f"learned code k={k} r={r} {encoder}"

    def train():
        y = base_outputs(base_apply, base_params, x_train).reshape(x_train.shape[0], -1)
        tr, val = split_groups(x_train.shape[0], k, val_fraction, seed)
        xv, yv = jnp.asarray(x_train[val]), jnp.asarray(y[val])
        res = fit(
            task,
            init_params,
            x_train[tr],
            y[tr],
            optimizer=adam_l2(float(lr), float(weight_decay)),
            epochs=int(epochs),
            batch_size=k * int(groups),
            seed=seed,
            progress=progress,
            desc=f"train {label}",
            loss_fn=_learned_loss,
            validate=lambda p: float(_learned_val_agreement(task, p, xv, yv)),
        )
        meta = {
            "train_losses": list(res.train_losses),
            "val_metrics": list(res.val_accuracies),
            "num_steps": res.num_steps,
        }
        return res.params, meta

    out = cached_fit(
        "learned", config, init_params, train, cache_dir=cache_dir, use_cache=use_cache
    )
    meta = out.metadata
    code = LearnedCode(
        out.params["encoder"], out.params["decoder"], num_inputs=k, num_parities=r, encoder=encoder
    )
    trained = TrainedCode(
        code=code,
        train_time_s=out.train_time_s,
        from_cache=out.from_cache,
        train_losses=tuple(float(v) for v in meta.get("train_losses", ())),
        val_metrics=tuple(float(v) for v in meta.get("val_metrics", ())),
        num_steps=int(meta.get("num_steps", 0)),
        cache_path=out.cache_path,
        config=config,
    )
    if progress:
        _summary(trained, label)
    return trained
