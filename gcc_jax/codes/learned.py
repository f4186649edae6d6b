"""Learning-based coded computation: a learned encoder and decoder around a frozen base model.

Kosaian, Rashmi & Venkataraman, "Learning-Based Coded Computation" (JSAIT 2020; arXiv
1806.01259). ``k`` workers compute the base model ``F`` on the queries
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

The networks are pure JAX functions of their parameters (no Flax): :func:`encode_parities` and
:func:`decode_outputs`.
"""

import dataclasses
import functools
import itertools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import (
    as_int,
    check_inputs,
    check_outputs,
    float_dtype,
    input_status,
)
from .._core.status import Status, combine
from .._core.types import Array, ArrayLike, Bool, Float, PRNGKeyArray, Shaped
from . import _coder
from ._base import Decoded, Encoded, jit_method, pytree_dataclass
from ._coder import decode_outputs as decode_outputs
from ._coder import encode_parities as encode_parities
from .parity import AbstractSystematicCode, systematic_decode

__all__ = ["ENCODERS", "LearnedCode", "decode_outputs", "encode_parities", "erasure_patterns"]

ENCODERS = ("mlp", "conv")
"""Learned encoders of :class:`LearnedCode`."""


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


@functools.partial(jax.jit, static_argnames=("num_inputs", "num_parities"))
def _learned_decode(
    decoder_params: Any, y: Array, mask: Array, num_inputs: int, num_parities: int
) -> tuple[Array, Array]:
    def reconstruct(y_ok):
        return _coder.decode_outputs(decoder_params, y_ok, num_inputs)

    return systematic_decode(y, mask, num_parities, reconstruct)


def check_size(value, name: str, lo: int) -> int:
    return as_int(value, name, lo)


@pytree_dataclass
class LearnedCode(AbstractSystematicCode):
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
        object.__setattr__(self, "num_inputs", check_size(self.num_inputs, "num_inputs", 2))
        object.__setattr__(self, "num_parities", check_size(self.num_parities, "num_parities", 1))
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
        k = check_size(num_inputs, "num_inputs", 2)
        r = check_size(num_parities, "num_parities", 1)
        m = check_size(output_size, "output_size", 1)
        shape = tuple(int(s) for s in input_shape)
        if not shape or min(shape) < 1:
            raise ValueError(f"`input_shape` must be a non-empty shape; got {input_shape!r}")
        d = math.prod(shape)
        if isinstance(key, int | np.integer) and not isinstance(key, bool):
            seed = [int(key)]
        else:  # a JAX PRNG key: its bits seed NumPy's generator
            seed = np.asarray(jax.random.key_data(key)).ravel().tolist()
        rng = np.random.default_rng([*seed, 0x1EA])
        nets = _coder
        if encoder == "mlp":
            hidden = (d,) if encoder_hidden is None else tuple(int(h) for h in encoder_hidden)
            enc = nets.mlp_init(rng, (k * d, *hidden, r * d), jnp.dtype(dtype))
        elif encoder == "conv":
            if len(shape) != 3:
                raise ValueError(f"the conv encoder needs images (H, W, C); got {shape}")
            ch = 20 * k if channels is None else check_size(channels, "channels", 1)
            enc = nets.conv_init(rng, k * shape[2], ch, r * shape[2], jnp.dtype(dtype))
        else:
            raise ValueError(f"`encoder` must be one of {ENCODERS}; got {encoder!r}")
        width = 4 * (k + r) * m
        dec_hidden = (width, width) if decoder_hidden is None else tuple(decoder_hidden)
        dec_sizes = ((k + r) * m, *(int(h) for h in dec_hidden), k * m)
        dec = nets.mlp_init(rng, dec_sizes, jnp.dtype(dtype))
        return cls(enc, dec, num_inputs=k, num_parities=r, encoder=encoder)

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
        return _coder.encode_parities(self.encoder, self.encoder_params, x, self.num_parities)

    @jit_method
    def encode_with_status(self, x: Shaped[ArrayLike, " k *d"]) -> Encoded:
        """The ``k + r`` queries ``(x_1, …, x_k, p_1, …, p_r)``; all ``k + r`` workers run ``F``."""
        p = self.parities(x)
        x = jnp.asarray(x)
        status = input_status(x) | combine((~jnp.all(jnp.isfinite(p)), Status.NONFINITE_RESULT))
        return Encoded(jnp.concatenate([x.astype(p.dtype), p], axis=0), status)

    # -- decoder ----------------------------------------------------------------------------

    @jit_method
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
