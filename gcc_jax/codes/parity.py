"""ParM: parity models (Kosaian, Rashmi & Venkataraman, SOSP 2019) as a gcc_jax code.

``k`` queries ``x_1..x_k`` go to ``k`` workers that run the base model ``F``; one extra worker
runs a *parity model* ``F_P`` on the parity query ``P = E(x_1..x_k)``. ``F_P`` has the base
model's architecture and is trained so that ``F_P(P) ≈ Σ_i F(x_i)``; when one base output
``F(x_j)`` is unavailable, the subtraction decoder estimates it as
``F^(x_j) = F_P(P) − Σ_{i≠j} F(x_i)``. ``r = 1``: one unavailable output
is recovered; more give ``Status.TOO_MANY_ERASURES``.

Encoders ``E``:

* ``"sum"``: ``P = Σ_i x_i`` (element-wise; any input shape);
* ``"concat"`` (images ``(H, W, C)`` with even ``H``, ``W``; ``k ∈ {2, 4}``): each image is
  downsampled by 2×2 (``k = 4``) or 1×2 (``k = 2``, width only) area averaging and the pieces
  are tiled into one ``(H, W, C)`` image — side by side for ``k = 2``, in the quadrants
  (top-left, top-right, bottom-left, bottom-right = ``x_1..x_4``) for ``k = 4``. Channels are
  encoded separately (R with R, ...).

Training: :func:`gcc_jax.nn.training.train_parity_model` (ParM's ``parity_model_trainer``).
"""

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from .._core.checks import (
    as_int,
    as_mask,
    check_inputs,
    check_outputs,
    data_status,
    float_dtype,
    input_status,
)
from .._core.status import Status, combine
from .._core.types import Array, ArrayLike, Bool, Float, Shaped
from ._base import (
    AbstractCode,
    AbstractVar,
    Decoded,
    Encoded,
    ParitySizes,
    jit_method,
    pytree_dataclass,
)

__all__ = [
    "ENCODERS",
    "AbstractSystematicCode",
    "ParityModelCode",
    "parity_input",
    "systematic_decode",
]

ENCODERS = ("sum", "concat")
"""Parity encoders of :class:`ParityModelCode`."""


def check_num_inputs(value, lo: int = 2) -> int:
    return as_int(value, "num_inputs", lo)


def check_encoder(encoder: str, k: int) -> str:
    if encoder not in ENCODERS:
        raise ValueError(f"`encoder` must be one of {ENCODERS}; got {encoder!r}")
    if encoder == "concat" and k not in (2, 4):
        raise ValueError(f"the concatenation encoder needs num_inputs in (2, 4); got {k}")
    return encoder


def parity_input(x: Float[ArrayLike, "k *d"], encoder: str = "sum") -> Float[Array, "*d"]:
    """The parity query ``P = E(x_1..x_k)`` of ParM's encoders (module docstring).

    Args:
        x: ``k`` inputs, shape ``(k, ...)``; for ``"concat"``, images ``(k, H, W, C)`` with even
            ``H`` and ``W`` and ``k ∈ {2, 4}``.
        encoder: ``"sum"`` or ``"concat"``.

    Returns:
        One input of shape ``x.shape[1:]``.

    Raises:
        ValueError: an unknown encoder, or shapes the concatenation encoder cannot take.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.stack([jnp.ones((2, 4, 1)), 3 * jnp.ones((2, 4, 1))])
        >>> parity_input(x, "sum")[..., 0].tolist()
        [[4.0, 4.0, 4.0, 4.0], [4.0, 4.0, 4.0, 4.0]]
        >>> parity_input(x, "concat")[..., 0].tolist()      # left half x_1, right half x_2
        [[1.0, 1.0, 3.0, 3.0], [1.0, 1.0, 3.0, 3.0]]
    """
    x = jnp.asarray(x)
    k = x.shape[0] if x.ndim else 0
    check_encoder(encoder, check_num_inputs(k))
    if encoder == "sum":
        return jnp.sum(x, axis=0)
    if x.ndim != 4 or x.shape[1] % 2 or x.shape[2] % 2:
        raise ValueError(
            "the concatenation encoder needs images of shape (k, H, W, C) with even H and W; "
            f"got {x.shape}"
        )
    _, h, w, c = x.shape
    if k == 2:  # H x W/2 each, side by side
        half = x.reshape(2, h, w // 2, 2, c).mean(axis=3)
        return jnp.concatenate([half[0], half[1]], axis=1)
    quarter = x.reshape(4, h // 2, 2, w // 2, 2, c).mean(axis=(2, 4))
    top = jnp.concatenate([quarter[0], quarter[1]], axis=1)
    bottom = jnp.concatenate([quarter[2], quarter[3]], axis=1)
    return jnp.concatenate([top, bottom], axis=0)


def systematic_decode(
    y: Array, mask: Array, num_parities: int, reconstruct: Callable[[Array], Array]
) -> tuple[Array, Array]:
    """Decoding of ``k`` systematic and ``r`` parity outputs ``y`` (k+r, m), with its status.

    A live base output is its own estimate; a missing one is taken from
    ``reconstruct(y_ok)`` (``(k, m)`` or ``(m,)``), where ``y_ok`` is ``y`` with every missing or
    non-finite output set to 0, so that it never reaches the arithmetic or the gradient. Status:
    ``TOO_MANY_ERASURES`` (more than ``r`` missing), ``NONFINITE_DATA``, ``NONFINITE_RESULT``;
    the value is NaN wherever the status is not OK.
    """
    k = y.shape[0] - num_parities
    dtype = float_dtype(y)
    y = y.astype(dtype)
    finite = jnp.all(jnp.isfinite(y), axis=1)
    erased = jnp.sum(~mask) > num_parities
    status = combine((erased, Status.TOO_MANY_ERASURES)) | data_status(y, mask)
    y_ok = jnp.where((mask & finite)[:, None], y, 0.0)
    value = jnp.where(mask[:k, None], y_ok[:k], reconstruct(y_ok))
    status = status | combine((~jnp.all(jnp.isfinite(value)), Status.NONFINITE_RESULT))
    return jnp.where(status == 0, value, jnp.nan), status


@functools.partial(jax.jit, static_argnames="num_inputs")
def _subtract_decode(y: Array, mask: Array, num_inputs: int) -> tuple[Array, Array]:
    """Subtraction decoding of ``y`` (k+1, m) with its status; NaN value where it is bad."""
    k = num_inputs

    def reconstruct(y_ok):
        return y_ok[k] - jnp.sum(y_ok[:k], axis=0)  # F_P(P) − Σ_{i live} F(x_i)

    return systematic_decode(y, mask, 1, reconstruct)


class AbstractSystematicCode(ParitySizes, AbstractCode):
    """``k`` workers on the inputs themselves and ``r`` parity workers (ParM, the learned code).

    An estimate is a base worker's own output, or, when that worker is missing, a
    reconstruction from the others (:func:`systematic_decode`); up to ``r`` missing outputs are
    recovered. A subclass provides ``num_inputs`` and ``num_parities``.
    """

    num_parities: AbstractVar[int]

    def reconstructed(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, " k"]:
        """Which estimates are reconstructions (their base worker is missing): ``~mask[:k]``."""
        return ~as_mask(mask, self.num_workers)[: self.num_inputs]

    def available(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, " k"]:
        """Every estimate when at most ``r`` outputs are missing, none otherwise."""
        mask = as_mask(mask, self.num_workers)
        return jnp.broadcast_to(jnp.sum(~mask) <= self.num_parities, (self.num_inputs,))


@pytree_dataclass
class ParityModelCode(AbstractSystematicCode):
    """ParM: ``k`` systematic workers plus one parity-model worker, subtraction decoding.

    Workers ``0..k−1`` compute ``F(x_k)`` on the inputs themselves (``x~_n = x_n``); worker
    ``k`` computes the parity model ``F_P`` on the parity query ``P = E(x_1..x_k)``
    (:func:`parity_input`): ``y~ = (F(x_1), …, F(x_k), F_P(P))``. Decoding, with ``mask``
    flagging the ``k + 1`` workers that returned:

    * nothing missing, or only the parity: ``F^(x_j) = F(x_j)`` (exact);
    * one base output ``j`` missing: ``F^(x_j) = F_P(P) − Σ_{i≠j} F(x_i)`` (exact whenever
      ``F_P(P) = Σ_i F(x_i)``, e.g. a linear ``F`` with ``F_P = F`` and the sum encoder), the
      others exact;
    * more than ``r = 1`` missing: ``Status.TOO_MANY_ERASURES`` (value NaN), as is a NaN/Inf
      output from a live worker (``NONFINITE_DATA``).

    The parity worker runs a different function than the others, so its output cannot come
    from applying one ``f`` to :meth:`encode`'s rows: use :meth:`worker_outputs` (or
    :meth:`parity_output` on ``encode(x)[k]``). ``parity_params`` are array leaves
    (differentiable; new values never recompile); ``parity_apply``, ``num_inputs`` and
    ``encoder`` are static.

    Attributes:
        parity_params: the parity model's parameters (a pytree of arrays).
        parity_apply: ``parity_apply(params, x) -> output`` for one input (the base model's
            architecture, e.g. a :class:`gcc_jax.nn.models.ModelApply`); hashable.
        num_inputs: ``k ≥ 2`` (static).
        encoder: ``"sum"`` (default) or ``"concat"`` (images, ``k ∈ {2, 4}``).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> w = jnp.array([[1.0, 2.0], [0.0, 1.0], [3.0, -1.0]])     # a linear f(x) = w x
        >>> lin = lambda params, x: params @ x                        # F_P = F: exact parity
        >>> code = gcc.ParityModelCode(w, lin, num_inputs=2)
        >>> x = jnp.array([[1.0, 1.0], [2.0, -1.0]])
        >>> y = code.worker_outputs(lambda v: w @ v, x)               # (3, 3): F, F, F_P
        >>> code.decode(y, jnp.array([True, False, True])).tolist()   # F(x_2) by subtraction
        [[3.0, 1.0, 2.0], [0.0, -1.0, 7.0]]
    """

    is_exact: ClassVar[bool] = True  # parity decoding is final when available (AbstractCode)

    parity_params: Any
    parity_apply: Callable = dataclasses.field(metadata=dict(static=True))
    num_inputs: int = dataclasses.field(metadata=dict(static=True))
    encoder: str = dataclasses.field(default="sum", metadata=dict(static=True))

    def __post_init__(self):
        k = check_num_inputs(self.num_inputs)
        object.__setattr__(self, "num_inputs", k)
        check_encoder(self.encoder, k)
        if not callable(self.parity_apply):
            raise TypeError(
                f"`parity_apply` must be callable as parity_apply(params, x); got "
                f"{type(self.parity_apply).__name__}"
            )

    @property
    def num_parities(self) -> int:
        """``r = 1``: one parity-model worker beside the ``k`` base-model workers."""
        return 1

    # -- encoder ----------------------------------------------------------------------------

    def parity_input(self, x: Float[ArrayLike, "k *d"]) -> Float[Array, "*d"]:
        """The parity query ``P = E(x_1..x_k)`` (see :func:`parity_input`)."""
        x = check_inputs(x, self.num_inputs)
        return parity_input(x, self.encoder)

    @jit_method
    def encode_with_status(self, x: Shaped[ArrayLike, " k *d"]) -> Encoded:
        """The ``k + 1`` queries: ``x_1..x_k`` for the base workers, ``P`` for the parity one."""
        x = check_inputs(x, self.num_inputs)
        p = parity_input(x, self.encoder)
        return Encoded(jnp.concatenate([x.astype(p.dtype), p[None]], axis=0), input_status(x))

    def parity_output(self, p: Float[ArrayLike, "*d"]) -> Float[Array, " *m"]:
        """What the parity worker returns: ``F_P(p) = parity_apply(parity_params, p)``."""
        return self.parity_apply(self.parity_params, jnp.asarray(p))

    def worker_outputs(
        self, f: Callable[[Array], Array], x: Float[ArrayLike, "k *d"]
    ) -> Float[Array, " n *m"]:
        """All ``k + 1`` worker outputs: ``(f(x_1), …, f(x_k), F_P(P))``.

        ``f`` must be the base model's function the parity model was trained for (its raw
        outputs when trained by :func:`train_parity_model`); it is vmapped over the inputs.
        """
        x = check_inputs(x, self.num_inputs)
        base = jax.vmap(f)(x)
        parity = self.parity_output(parity_input(x, self.encoder))
        if parity.shape != base.shape[1:]:
            raise ValueError(
                f"the parity model's output {parity.shape} differs from f's {base.shape[1:]}"
            )
        dtype = float_dtype(base, parity)
        return jnp.concatenate([base.astype(dtype), parity[None].astype(dtype)], axis=0)

    # -- decoder ----------------------------------------------------------------------------

    @jit_method
    def decode_with_status(
        self, y: Shaped[ArrayLike, " n *m"], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """Subtraction decoding; value problems reported as data (never raises on them).

        Status flags: ``TOO_MANY_ERASURES`` (more than one worker missing), ``NONFINITE_DATA``
        (NaN/Inf from a live worker), ``NONFINITE_RESULT``. The value is NaN wherever the
        status is not OK. Use under ``jit``/``vmap`` over masks.
        """
        y, mask = check_outputs(y, mask, self.num_workers)
        value, status = _subtract_decode(
            y.reshape(self.num_workers, -1), mask, num_inputs=self.num_inputs
        )
        return Decoded(value.reshape((self.num_inputs, *y.shape[1:])), status)
