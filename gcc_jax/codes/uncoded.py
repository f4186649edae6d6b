"""Baselines without coding: uncoded computation and replication.

Missing results — the accounting shared by every code in gcc_jax. A *coded* scheme always
returns an estimate of every ``f(x_k)`` (or flags the whole pattern in its status when it cannot
decode at all: too few live workers, NaN from a live worker, LCC below its threshold). Without
coding, an input whose every copy straggled has **no result**. These codes then report an
estimate made by their stated fill rule ``fill`` (:mod:`gcc_jax.codes._fill`: ``"zero"`` the
constant ``fill_value``, ``"mean"`` — the default — the mean of the batch's existing results,
``"interpolate"`` linear interpolation between the nearest existing results in the encoding
order) and keep the status OK, because the pattern *was* decoded — the master simply has
nothing better for that input. So:

* the loss (:func:`gcc_jax.monte_carlo_loss`, ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²``) counts a
  missing input as ``‖fill − f(x_k)‖²``: the error of the fill rule's guess;
* an accuracy metric counts the argmax of the fill as its prediction. To count a missing result
  as always wrong, use :meth:`available` (``False`` = missing).

Statuses are reserved for patterns that cannot be decoded: here only ``NONFINITE_DATA`` (a live
worker returned NaN/Inf; the whole value is then NaN, as for every code).
"""

import dataclasses
import functools
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .._core import checks
from .._core.status import Status, combine
from .._core.types import Array, ArrayLike, Bool, Int, Shaped
from ._base import AbstractCode, AbstractVar, Decoded, Encoded, jit_method, pytree_dataclass
from ._fill import check_fill, check_fill_value, fill_missing


@functools.partial(jax.jit, static_argnames=("num_inputs", "fill", "fill_value"))
def _replica_decode(
    y: Array, mask: Array, num_inputs: int, fill: str, fill_value: float
) -> tuple[Array, Array, Array]:
    """Mean of the live replicas of each input (round-robin assignment ``n ↦ n mod K``); the
    rule ``fill`` for an input without one."""
    n = y.shape[0]
    dtype = checks.float_dtype(y)
    y_flat = y.reshape(n, -1).astype(dtype)
    assign = np.arange(n) % num_inputs
    a = jnp.asarray(assign[None, :] == np.arange(num_inputs)[:, None], dtype)  # (K, N)
    w = mask.astype(dtype)
    count = jnp.matmul(a, w, precision=jax.lax.Precision.HIGHEST)
    status = checks.data_status(y_flat, mask)
    y_ok = jnp.where(mask[:, None] & jnp.isfinite(y_flat), y_flat, 0.0)
    total = jnp.matmul(a, w[:, None] * y_ok, precision=jax.lax.Precision.HIGHEST)
    have = count > 0
    value = fill_missing(total / jnp.where(have, count, 1.0)[:, None], have, fill, fill_value)
    status = status | combine((~jnp.all(jnp.isfinite(value)), Status.NONFINITE_RESULT))
    value = jnp.where(status == 0, value, jnp.nan).astype(dtype)
    return value.reshape((num_inputs, *y.shape[1:])), status, have


class AbstractReplicaCode(AbstractCode):
    """Worker ``n`` computes ``f(x_{n mod K})``; decoding averages each input's live copies.

    Shared by :class:`ReplicationCode` and :class:`UncodedCode` (one copy per input): the
    round-robin :attr:`assignment`, the copying encoder, :meth:`available` and the decoder. A
    subclass provides ``num_inputs``, ``num_workers`` and the static ``fill`` and
    ``fill_value``.
    """

    is_exact: ClassVar[bool] = True  # systematic copies; see AbstractCode.is_exact
    min_live: ClassVar[int] = 0  # a missing input's estimate is the fill value (status OK)

    fill: AbstractVar[str]
    fill_value: AbstractVar[float]

    @property
    def assignment(self) -> Int[np.ndarray, " n"]:
        """Index of the input each worker computes: ``n mod K``."""
        return np.arange(self.num_workers) % self.num_inputs

    @jit_method
    def encode_with_status(self, x: Shaped[ArrayLike, " k *d"]) -> Encoded:
        """``x~_n = x_{n mod K}`` (copies; dtype preserved); ``NONFINITE_DATA`` for NaN/Inf."""
        x = checks.check_inputs(x, self.num_inputs)
        return Encoded(x[jnp.asarray(self.assignment)], checks.input_status(x))

    def available(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, " k"]:
        """Which inputs have at least one live copy (``False`` = result missing)."""
        mask = checks.as_mask(mask, self.num_workers)
        a = jnp.asarray(self.assignment[None, :] == np.arange(self.num_inputs)[:, None])
        return jnp.any(a & mask[None, :], axis=1)

    @jit_method
    def decode_with_status(
        self, y: Shaped[ArrayLike, " n *m"], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """Mean of each input's live copies; the rule ``fill`` for a missing input (status OK).

        Status: ``NONFINITE_DATA`` if a live worker returned NaN/Inf (value NaN).
        """
        y, mask = checks.check_outputs(y, mask, self.num_workers)
        value, status, _ = _replica_decode(y, mask, self.num_inputs, self.fill, self.fill_value)
        return Decoded(value, status)


@pytree_dataclass
class ReplicationCode(AbstractReplicaCode):
    """Replication: each input goes to several workers; an input survives if one copy does.

    Worker ``n`` computes ``f(x_{n mod K})`` (round-robin, so input ``k`` has
    ``⌈(N − k)/K⌉`` copies, ``r = N/K`` each when ``K`` divides ``N``; adjacent workers hold
    different inputs). Decoding averages the live copies of each input — for a deterministic
    ``f`` that equals any single copy, i.e. "wait for one replica per input". An input is
    missing only if *all* its copies straggle; it then gets the estimate of the fill rule
    ``fill`` (see the module docstring for how losses and accuracies count it). Tolerates any
    ``⌊N/K⌋ − 1`` stragglers.

    Attributes:
        num_inputs: ``K ≥ 1`` (static).
        num_workers: ``N ≥ K`` (static).
        fill: ``"mean"`` (default), ``"interpolate"`` or ``"zero"`` (static; module docstring).
        fill_value: the constant of ``"zero"`` and the estimate when no input has a result
            (static, default 0).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.ReplicationCode(num_inputs=2, num_workers=4)   # r = 2 copies
        >>> x = jnp.array([[1.0], [2.0]])
        >>> mask = jnp.array([False, True, True, False])   # input 0 lives on worker 2
        >>> code.decode(code.encode(x) ** 2, mask).ravel().tolist()
        [1.0, 4.0]
    """

    num_inputs: int = dataclasses.field(metadata=dict(static=True))
    num_workers: int = dataclasses.field(metadata=dict(static=True))
    fill: str = dataclasses.field(default="mean", metadata=dict(static=True))
    fill_value: float = dataclasses.field(default=0.0, metadata=dict(static=True))

    def __post_init__(self):
        k = checks.as_int(self.num_inputs, "num_inputs", 1)
        n = checks.as_int(self.num_workers, "num_workers", 1)
        if n < k:
            raise ValueError(f"`num_workers` must be >= num_inputs={k} (every input needs a copy)")
        object.__setattr__(self, "num_inputs", k)
        object.__setattr__(self, "num_workers", n)
        object.__setattr__(self, "fill", check_fill(self.fill))
        object.__setattr__(self, "fill_value", check_fill_value(self.fill_value))

    @classmethod
    def with_replicas(
        cls, *, num_inputs: int, replicas: int, fill: str = "mean", fill_value: float = 0.0
    ):
        """``r`` copies of each of ``K`` inputs on ``N = r·K`` workers."""
        k = checks.as_int(num_inputs, "num_inputs", 1)
        r = checks.as_int(replicas, "replicas", 1)
        return cls(num_inputs=k, num_workers=r * k, fill=fill, fill_value=fill_value)


@pytree_dataclass
class UncodedCode(AbstractReplicaCode):
    """No coding: ``N = K`` workers, worker ``k`` computes ``f(x_k)``.

    A straggler's input has no result; decoding reports the estimate of the fill rule ``fill``
    for it with status OK — see the module docstring for how losses and accuracies count a
    missing result, and :meth:`available` to tell which are missing. Equivalent to
    ``ReplicationCode(num_inputs=K, num_workers=K)``.

    Attributes:
        num_inputs: ``K ≥ 1`` (static); ``num_workers`` is ``K`` too.
        fill: ``"mean"`` (default), ``"interpolate"`` or ``"zero"`` (static; module docstring).
        fill_value: the constant of ``"zero"`` and the estimate when no input has a result
            (static, default 0).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> y = gcc.UncodedCode(num_inputs=3).encode(jnp.array([[1.0], [2.0], [4.0]])) * 10.0
        >>> mask = jnp.array([True, False, True])
        >>> [gcc.UncodedCode(num_inputs=3, fill=r).decode(y, mask).ravel().tolist()
        ...  for r in ("zero", "mean", "interpolate")]
        [[10.0, 0.0, 40.0], [10.0, 25.0, 40.0], [10.0, 25.0, 40.0]]
        >>> gcc.UncodedCode(num_inputs=3).available(mask).tolist()
        [True, False, True]
    """

    num_inputs: int = dataclasses.field(metadata=dict(static=True))
    fill: str = dataclasses.field(default="mean", metadata=dict(static=True))
    fill_value: float = dataclasses.field(default=0.0, metadata=dict(static=True))

    def __post_init__(self):
        object.__setattr__(self, "num_inputs", checks.as_int(self.num_inputs, "num_inputs", 1))
        object.__setattr__(self, "fill", check_fill(self.fill))
        object.__setattr__(self, "fill_value", check_fill_value(self.fill_value))

    @property
    def num_workers(self) -> int:
        """``K``: one worker per input."""
        return self.num_inputs
