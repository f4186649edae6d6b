"""Straggler models for tuning and evaluation: exactly ``S``, iid ``p``, or worst case ``S``."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import jax.random as jr

from .._core.checks import as_int, as_prob, check_key
from .._core.types import Array, Bool, PRNGKeyArray
from ..evaluation import contiguous_masks, sample_masks

__all__ = ["StragglerModel"]

KINDS = ("exact", "iid", "worst")


@dataclasses.dataclass(frozen=True)
class StragglerModel:
    """Which straggler patterns a code is tuned and evaluated against.

    * ``StragglerModel.exact(S)``: uniformly random patterns with exactly ``S`` stragglers; the
      objective is the mean loss over patterns.
    * ``StragglerModel.iid(p)``: every worker straggles independently with probability ``p``;
      mean loss over the decodable patterns (fewer than 2 live workers cannot be decoded and
      are counted apart).
    * ``StragglerModel.worst(S)``: the adversary picks the pattern of ``S`` stragglers with the
      largest loss; the objective is the **maximum** over candidate patterns. :meth:`sample`
      gives the candidates every search starts from — all ``N − S + 1`` blocks of adjacent
      stragglers (the widest gaps, the usual worst case of a spline code) and random
      ``S``-subsets; tuning and evaluation add patterns found by the local search of
      :func:`gcc_jax.worst_case_mask` for the current code.

    Attributes:
        kind: ``"exact"``, ``"iid"`` or ``"worst"``.
        stragglers: ``S`` (``exact`` and ``worst``).
        p: straggling probability (``iid``).

    Example:
        >>> import jax
        >>> from gcc_jax.tuning import StragglerModel
        >>> model = StragglerModel.worst(2)
        >>> masks = model.sample(jax.random.key(0), 6, num=8)
        >>> masks.shape, model.reduce, (~masks).sum(axis=1).tolist()
        ((8, 6), 'max', [2, 2, 2, 2, 2, 2, 2, 2])
    """

    kind: str
    stragglers: int = 0
    p: float = 0.0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"`kind` must be one of {KINDS}; got {self.kind!r}")
        object.__setattr__(self, "stragglers", as_int(self.stragglers, "stragglers", 0))
        if self.kind == "iid":
            object.__setattr__(self, "p", as_prob(self.p, "p", upper_open=True))
        elif self.p != 0.0:
            raise ValueError(f"`p` is only used by kind='iid'; got p={self.p} for {self.kind!r}")

    @classmethod
    def exact(cls, stragglers: int) -> StragglerModel:
        """Random patterns with exactly ``stragglers`` dead workers."""
        return cls("exact", stragglers=stragglers)

    @classmethod
    def iid(cls, p: float) -> StragglerModel:
        """Independent stragglers with probability ``p``."""
        return cls("iid", p=p)

    @classmethod
    def worst(cls, stragglers: int) -> StragglerModel:
        """Worst-case patterns of ``stragglers`` dead workers."""
        return cls("worst", stragglers=stragglers)

    @property
    def reduce(self) -> str:
        """How per-pattern losses combine: ``"max"`` for ``worst``, else ``"mean"``."""
        return "max" if self.kind == "worst" else "mean"

    def check(self, n: int) -> None:
        """Raise ``ValueError`` unless the model fits ``n`` workers (at least 2 stay live)."""
        if self.kind != "iid" and self.stragglers > n - 2:
            raise ValueError(
                f"`stragglers`={self.stragglers} leaves fewer than 2 of N={n} workers; "
                f"use S <= {n - 2}"
            )

    def sample(self, key: PRNGKeyArray, n: int, *, num: int) -> Bool[Array, "p n"]:
        """``num`` patterns over ``n`` workers (True = live), drawn with ``key``.

        For ``worst``: the contiguous blocks first (all of them if ``num ≥ N − S + 1``, else
        ``num`` of them at random), then random ``S``-subsets.
        """
        key = check_key(key)
        self.check(n)
        num = as_int(num, "num", 1)
        if self.kind == "iid":
            return sample_masks(key, n, num=num, p=self.p)
        if self.kind == "exact":
            return sample_masks(key, n, num=num, stragglers=self.stragglers)
        k_blocks, k_rand = jr.split(key)
        blocks = contiguous_masks(n, self.stragglers)
        if num <= blocks.shape[0]:
            pick = jr.permutation(k_blocks, blocks.shape[0])[:num]
            return blocks[pick]
        rest = sample_masks(k_rand, n, num=num - blocks.shape[0], stragglers=self.stragglers)
        return jnp.concatenate([blocks, rest], axis=0)

    def describe(self) -> str:
        """Short label, e.g. ``"worst S=4"`` or ``"iid p=0.1"``."""
        return f"iid p={self.p:g}" if self.kind == "iid" else f"{self.kind} S={self.stragglers}"


jax.tree_util.register_static(StragglerModel)
