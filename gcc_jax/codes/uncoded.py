"""Baselines without coding: uncoded computation and replication.

Missing results — the accounting shared by every code in gcc_jax. A *coded* scheme always
returns an estimate of every ``f(x_k)`` (or flags the whole pattern in its status when it cannot
decode at all: too few live workers, NaN from a live worker, LCC below its threshold). Without
coding, an input whose every copy straggled has **no result**. These codes then report the
documented fill value ``fill_value`` (default ``0``) as its estimate and keep the status OK,
because the pattern *was* decoded — the master simply has nothing better for that input. So:

* the loss (:func:`gcc_jax.monte_carlo_loss`, ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²``) counts a
  missing input as ``‖fill_value − f(x_k)‖²`` (``‖f(x_k)‖²`` with the default fill): the
  error of answering "nothing";
* an accuracy metric counts the argmax of the fill as its prediction — with a constant fill
  that is a fixed guess (class 0 for the default), i.e. right only by chance. To count a
  missing result as always wrong, use :meth:`available` (``False`` = missing).

Statuses are reserved for patterns that cannot be decoded: here only ``NONFINITE_DATA`` (a live
worker returned NaN/Inf; the whole value is then NaN, as for every code).
"""

import dataclasses
import functools
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

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
from .._core.types import Array, ArrayLike, Bool, Int, Shaped
from ._base import AbstractCode, AbstractVar, Decoded, Encoded, jit_method, pytree_dataclass


def _check_fill(value) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise TypeError(f"`fill_value` must be a Python float; got {type(value).__name__}")
    if not np.isfinite(value):
        raise ValueError(f"`fill_value` must be finite (it enters the loss); got {value}")
    return float(value)


@functools.partial(jax.jit, static_argnames=("num_inputs", "fill_value"))
def _replica_decode(
    y: Array, mask: Array, num_inputs: int, fill_value: float
) -> tuple[Array, Array, Array]:
    """Mean of the live replicas of each input (round-robin assignment ``n ↦ n mod K``)."""
    n = y.shape[0]
    dtype = float_dtype(y)
    y_flat = y.reshape(n, -1).astype(dtype)
    assign = np.arange(n) % num_inputs
    a = jnp.asarray(assign[None, :] == np.arange(num_inputs)[:, None], dtype)  # (K, N)
    w = mask.astype(dtype)
    count = jnp.matmul(a, w, precision=jax.lax.Precision.HIGHEST)
    status = data_status(y_flat, mask)
    y_ok = jnp.where(mask[:, None] & jnp.isfinite(y_flat), y_flat, 0.0)
    total = jnp.matmul(a, w[:, None] * y_ok, precision=jax.lax.Precision.HIGHEST)
    have = count > 0
    value = jnp.where(have[:, None], total / jnp.where(have, count, 1.0)[:, None], fill_value)
    status = status | combine((~jnp.all(jnp.isfinite(value)), Status.NONFINITE_RESULT))
    value = jnp.where(status == 0, value, jnp.nan).astype(dtype)
    return value.reshape((num_inputs, *y.shape[1:])), status, have


class AbstractReplicaCode(AbstractCode):
    """Worker ``n`` computes ``f(x_{n mod K})``; decoding averages each input's live copies.

    Shared by :class:`ReplicationCode` and :class:`UncodedCode` (one copy per input): the
    round-robin :attr:`assignment`, the copying encoder, :meth:`available` and the decoder. A
    subclass provides ``num_inputs``, ``num_workers`` and the static ``fill_value``.
    """

    is_exact: ClassVar[bool] = True  # systematic copies; see AbstractCode.is_exact
    min_live: ClassVar[int] = 0  # a missing input's estimate is the fill value (status OK)

    fill_value: AbstractVar[float]

    @property
    def assignment(self) -> Int[np.ndarray, " n"]:
        """Index of the input each worker computes: ``n mod K``."""
        return np.arange(self.num_workers) % self.num_inputs

    @jit_method
    def encode_with_status(self, x: Shaped[ArrayLike, " k *d"]) -> Encoded:
        """``x~_n = x_{n mod K}`` (copies; dtype preserved); ``NONFINITE_DATA`` for NaN/Inf."""
        x = check_inputs(x, self.num_inputs)
        return Encoded(x[jnp.asarray(self.assignment)], input_status(x))

    def available(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, " k"]:
        """Which inputs have at least one live copy (``False`` = result missing)."""
        mask = as_mask(mask, self.num_workers)
        a = jnp.asarray(self.assignment[None, :] == np.arange(self.num_inputs)[:, None])
        return jnp.any(a & mask[None, :], axis=1)

    @jit_method
    def decode_with_status(
        self, y: Shaped[ArrayLike, " n *m"], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """Mean of each input's live copies; ``fill_value`` for a missing input (status OK).

        Status: ``NONFINITE_DATA`` if a live worker returned NaN/Inf (value NaN).
        """
        y, mask = check_outputs(y, mask, self.num_workers)
        value, status, _ = _replica_decode(y, mask, self.num_inputs, self.fill_value)
        return Decoded(value, status)


@pytree_dataclass
class ReplicationCode(AbstractReplicaCode):
    """Replication: each input goes to several workers; an input survives if one copy does.

    Worker ``n`` computes ``f(x_{n mod K})`` (round-robin, so input ``k`` has
    ``⌈(N − k)/K⌉`` copies, ``r = N/K`` each when ``K`` divides ``N``; adjacent workers hold
    different inputs). Decoding averages the live copies of each input — for a deterministic
    ``f`` that equals any single copy, i.e. "wait for one replica per input". An input is
    missing only if *all* its copies straggle; it then gets ``fill_value`` (see the module
    docstring for how losses and accuracies count it). Tolerates any ``⌊N/K⌋ − 1`` stragglers.

    Attributes:
        num_inputs: ``K ≥ 1`` (static).
        num_workers: ``N ≥ K`` (static).
        fill_value: the estimate reported for a missing input (static, default 0).

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
    fill_value: float = dataclasses.field(default=0.0, metadata=dict(static=True))

    def __post_init__(self):
        k = as_int(self.num_inputs, "num_inputs", 1)
        n = as_int(self.num_workers, "num_workers", 1)
        if n < k:
            raise ValueError(f"`num_workers` must be >= num_inputs={k} (every input needs a copy)")
        object.__setattr__(self, "num_inputs", k)
        object.__setattr__(self, "num_workers", n)
        object.__setattr__(self, "fill_value", _check_fill(self.fill_value))

    @classmethod
    def with_replicas(cls, *, num_inputs: int, replicas: int, fill_value: float = 0.0):
        """``r`` copies of each of ``K`` inputs on ``N = r·K`` workers."""
        k = as_int(num_inputs, "num_inputs", 1)
        r = as_int(replicas, "replicas", 1)
        return cls(num_inputs=k, num_workers=r * k, fill_value=fill_value)


@pytree_dataclass
class UncodedCode(AbstractReplicaCode):
    """No coding: ``N = K`` workers, worker ``k`` computes ``f(x_k)``.

    A straggler's input has no result; decoding reports ``fill_value`` (default 0) for it with
    status OK — see the module docstring for how losses and accuracies count a missing result,
    and :meth:`available` to tell which are missing. Equivalent to
    ``ReplicationCode(num_inputs=K, num_workers=K)``.

    Attributes:
        num_inputs: ``K ≥ 1`` (static); ``num_workers`` is ``K`` too.
        fill_value: the estimate reported for a missing input (static, default 0).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.UncodedCode(num_inputs=3)
        >>> y = code.encode(jnp.array([[1.0], [2.0], [3.0]])) * 10.0
        >>> mask = jnp.array([True, False, True])
        >>> code.decode(y, mask).ravel().tolist(), code.available(mask).tolist()
        ([10.0, 0.0, 30.0], [True, False, True])
    """

    num_inputs: int = dataclasses.field(metadata=dict(static=True))
    fill_value: float = dataclasses.field(default=0.0, metadata=dict(static=True))

    def __post_init__(self):
        object.__setattr__(self, "num_inputs", as_int(self.num_inputs, "num_inputs", 1))
        object.__setattr__(self, "fill_value", _check_fill(self.fill_value))

    @property
    def num_workers(self) -> int:
        """``K``: one worker per input."""
        return self.num_inputs
