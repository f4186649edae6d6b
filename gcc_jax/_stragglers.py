"""Straggler patterns as fixed-shape boolean masks (True = the worker returned in time)."""

from __future__ import annotations

import jax.numpy as jnp
import jax.random as jr

from ._types import Array as _Array
from ._types import Bool, PRNGKeyArray


def _check_int(value, name: str, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"`{name}` must be a Python int; got {type(value).__name__} {value!r}")
    if value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"`{name}` must be {rng}; got {value}")
    return value


def sample_masks(
    key: PRNGKeyArray,
    n: int,
    *,
    num: int,
    stragglers: int | None = None,
    p: float | None = None,
) -> Bool[_Array, "p n"]:
    """Random straggler patterns over ``n`` workers.

    Exactly one of ``stragglers`` and ``p`` must be given:

    * ``stragglers=S``: each row has exactly ``S`` dead workers (``False``), a uniformly random
      ``S``-subset, independently per row.
    * ``p=q``: each worker straggles independently with probability ``q`` (a row may then have
      fewer than 2 live workers; decoders report that in their status).

    Args:
        key: a JAX PRNG key.
        n: number of workers.
        num: number of patterns ``M``.
        stragglers: exact number of dead workers per row, ``0 <= S <= n``.
        p: independent straggling probability, ``0 <= p <= 1``.

    Returns:
        Boolean array of shape ``(num, n)``.

    Example:
        >>> import jax, gcc_jax as gcc
        >>> m = gcc.sample_masks(jax.random.key(0), 10, num=4, stragglers=3)
        >>> m.shape, (~m).sum(axis=1).tolist()
        ((4, 10), [3, 3, 3, 3])
    """
    n = _check_int(n, "n", 1)
    num = _check_int(num, "num", 0)
    if (stragglers is None) == (p is None):
        raise ValueError("give exactly one of `stragglers` (exactly S per row) or `p` (iid)")
    if stragglers is not None:
        s = _check_int(stragglers, "stragglers", 0, n)
        u = jr.uniform(key, (num, n))
        ranks = jnp.argsort(jnp.argsort(u, axis=1), axis=1)
        return ranks >= s
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"`p` must be a probability in [0, 1]; got {p}")
    return ~jr.bernoulli(key, p, (num, n))


def contiguous_masks(n: int, stragglers: int) -> Bool[_Array, "p n"]:
    """Every pattern of ``S`` adjacent dead workers (in ascending node order).

    Row ``i`` kills workers ``i, …, i+S−1``, for ``i = 0 … n−S`` (``n − S + 1`` rows; one all-live
    row when ``S = 0``). Blocks of adjacent stragglers open the widest gap in the live nodes, so
    they are the natural first guess for a spline code's worst case.

    Example:
        >>> import gcc_jax as gcc
        >>> gcc.contiguous_masks(4, 2).astype(int).tolist()
        [[0, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 0]]
    """
    n = _check_int(n, "n", 1)
    s = _check_int(stragglers, "stragglers", 0, n)
    start = jnp.arange(n - s + 1)[:, None]
    idx = jnp.arange(n)[None, :]
    return ~((idx >= start) & (idx < start + s))
