"""Grouped ParM: ``g`` independent parity-model groups as one code.

ParM (Kosaian, Rashmi & Venkataraman, SOSP 2019) protects ``k`` queries with one parity worker.
With ``K = g·k`` inputs on ``N = g·(k + 1)`` workers (``N/K = 1 + 1/k``) the inputs form ``g``
groups, each one :class:`gcc_jax.ParityModelCode`.
"""

import dataclasses
from collections.abc import Callable
from typing import ClassVar

import jax
import jax.numpy as jnp

from .._core.checks import as_int, check_inputs, check_instance, check_outputs, float_dtype
from .._core.status import Status
from .._core.types import Array, ArrayLike, Bool, Shaped
from ._base import AbstractCode, Decoded, Encoded, jit_method, pytree_dataclass
from ._fill import check_fill, check_fill_value, fill_missing
from .parity import ParityModelCode

__all__ = ["GroupedParityCode"]


def _or_reduce(status: Array) -> Array:
    return jax.lax.reduce(status, jnp.int32(0), jax.lax.bitwise_or, (0,))


@pytree_dataclass
class GroupedParityCode(AbstractCode):
    """``g`` independent ParM groups as one code: ``K = g·k`` inputs on ``N = g·(k + 1)`` workers.

    Inputs ``x_{jk} … x_{jk+k−1}`` form group ``j``; its workers are ``j(k+1) … j(k+1)+k``, the
    last one running the parity model. Each group decodes by subtraction
    (:class:`gcc_jax.ParityModelCode`). A group with more than one missing worker returns its
    live base outputs exactly and, for each missing one, the estimate of the fill rule ``fill``
    over all ``K`` inputs in their order (the rules of :class:`gcc_jax.UncodedCode`: ``"mean"``
    of the existing results, ``"interpolate"`` between the nearest existing ones, ``"zero"``)
    — the same accounting as uncoded computation — instead of failing the whole pattern;
    :meth:`available` says which.

    Attributes:
        parity: the group's :class:`gcc_jax.ParityModelCode` (``k`` inputs, ``k + 1`` workers).
        groups: ``g ≥ 1`` (static).
        fill: ``"mean"`` (default), ``"interpolate"`` or ``"zero"`` (static).
        fill_value: the constant of ``"zero"`` and the estimate when no input has a result
            (static, default 0).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> from gcc_jax.codes import GroupedParityCode
        >>> lin = lambda p, x: p * x                          # F_P = F: exact parity
        >>> code = GroupedParityCode(gcc.ParityModelCode(2.0, lin, num_inputs=2), groups=2)
        >>> x = jnp.arange(1.0, 5.0)[:, None]                 # K = 4 inputs on N = 6 workers
        >>> y = code.worker_outputs(lambda v: 2.0 * v, x)
        >>> mask = jnp.array([False, True, True, False, False, True])
        >>> code.decode(y, mask).ravel().tolist()             # group 1 lost 2 of its 3 workers
        [2.0, 4.0, 3.0, 3.0]
        >>> GroupedParityCode(code.parity, groups=2, fill="zero").decode(y, mask).ravel().tolist()
        [2.0, 4.0, 0.0, 0.0]
    """

    is_exact: ClassVar[bool] = True  # parity decoding is final when available (AbstractCode)
    min_live: ClassVar[int] = 0  # a group that lost two workers reports fill values (status OK)

    parity: ParityModelCode
    groups: int = dataclasses.field(metadata=dict(static=True))
    fill: str = dataclasses.field(default="mean", metadata=dict(static=True))
    fill_value: float = dataclasses.field(default=0.0, metadata=dict(static=True))

    def __post_init__(self):
        check_instance(self.parity, ParityModelCode, "parity")
        object.__setattr__(self, "groups", as_int(self.groups, "groups", 1))
        object.__setattr__(self, "fill", check_fill(self.fill))
        object.__setattr__(self, "fill_value", check_fill_value(self.fill_value))

    @property
    def num_inputs(self) -> int:
        """``K = g·k``."""
        return self.groups * self.parity.num_inputs

    @property
    def num_workers(self) -> int:
        """``N = g·(k + 1)``."""
        return self.groups * self.parity.num_workers

    def _split(self, a: Array) -> Array:
        return a.reshape(self.groups, -1, *a.shape[1:])

    @jit_method
    def encode_with_status(self, x: Shaped[ArrayLike, "k *d"]) -> Encoded:
        """Each group's ``k`` inputs and its parity query, groups one after the other."""
        x = check_inputs(x, self.num_inputs)
        out = jax.vmap(self.parity.encode_with_status)(self._split(x))
        value = out.value.reshape(self.num_workers, *out.value.shape[2:])
        return Encoded(value, _or_reduce(out.status))

    def worker_outputs(self, f: Callable[[Array], Array], x: Shaped[ArrayLike, "k *d"]) -> Array:
        """``f`` on every input and each group's parity model on its parity query."""
        x = check_inputs(x, self.num_inputs)
        y = jax.vmap(lambda xg: self.parity.worker_outputs(f, xg))(self._split(x))
        return y.reshape(self.num_workers, *y.shape[2:])

    def _group_mask(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, "g k1"]:
        _, mask = check_outputs(jnp.zeros((self.num_workers,)), mask, self.num_workers)
        return mask.reshape(self.groups, self.parity.num_workers)

    def available(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, " k"]:
        """Every result of a group with at most one missing worker; else its live base ones."""
        m = self._group_mask(mask)
        k = self.parity.num_inputs
        whole = jnp.sum(~m, axis=1, keepdims=True) <= 1
        return (whole | m[:, :k]).reshape(self.num_inputs)

    @jit_method
    def decode_with_status(
        self, y: Shaped[ArrayLike, "n *m"], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """Subtraction decoding per group; live base outputs and the rule ``fill`` for a group
        with two or more missing workers (status OK)."""
        y, mask = check_outputs(y, mask, self.num_workers)
        k = self.parity.num_inputs
        yg = self._split(y)
        mg = mask.reshape(self.groups, k + 1)
        dec = jax.vmap(self.parity.decode_with_status)(yg, mg)
        erasures = dec.status == int(Status.TOO_MANY_ERASURES)
        live = mg[:, :k].reshape(self.groups, k, *([1] * (y.ndim - 1)))
        fallback = jnp.where(live, yg[:, :k], 0.0)
        value = jnp.where(erasures.reshape(-1, *([1] * y.ndim)), fallback, dec.value)
        have = (~erasures[:, None] | mg[:, :k]).reshape(self.num_inputs)
        flat = value.reshape(self.num_inputs, -1).astype(float_dtype(yg))  # integer y: float
        value = fill_missing(flat, have, self.fill, self.fill_value)
        status = _or_reduce(jnp.where(erasures, 0, dec.status))
        value = jnp.where(status == 0, value, jnp.nan)
        return Decoded(value.reshape(self.num_inputs, *y.shape[1:]), status)
