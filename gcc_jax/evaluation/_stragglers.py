"""Straggler patterns as fixed-shape boolean masks (True = the worker returned in time)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import jax.random as jr
from jax import lax

from .._core.checks import as_int, as_prob, check_key
from .._core.types import Array as _Array
from .._core.types import Bool, PRNGKeyArray


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
    key = check_key(key)
    n = as_int(n, "n", 1)
    num = as_int(num, "num", 0)
    if (stragglers is None) == (p is None):
        raise ValueError("give exactly one of `stragglers` (exactly S per row) or `p` (iid)")
    if stragglers is not None:
        s = as_int(stragglers, "stragglers", 0, n)
        return _blockwise(key, num, lambda k, rows: _exact_block(k, rows, n, s))
    p = as_prob(p, "p")
    return _blockwise(key, num, lambda k, rows: ~jr.bernoulli(k, p, (rows, n)))


_BLOCK = 1 << 16


def _blockwise(key, num: int, sample) -> Bool[_Array, "p n"]:
    """Sample ``num`` rows in blocks of 65536 (block ``i`` from ``fold_in(key, i)``).

    Bounds the temporary memory of sampling many patterns.
    """
    if num <= _BLOCK:
        return sample(key, num)
    parts = [
        sample(jr.fold_in(key, i), min(_BLOCK, num - start))
        for i, start in enumerate(range(0, num, _BLOCK))
    ]
    return jnp.concatenate(parts, axis=0)


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _exact_block(key, rows: int, n: int, s: int):
    """Exactly ``s`` dead per row: the ``s`` largest of ``n`` iid uniforms form a uniform subset."""
    if s == 0 or rows == 0:
        return jnp.ones((rows, n), bool)
    u = jr.uniform(key, (rows, n), dtype=jnp.float32)
    _, dead = lax.top_k(u, s)
    return jnp.ones((rows, n), bool).at[jnp.arange(rows)[:, None], dead].set(False)


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
    n = as_int(n, "n", 1)
    s = as_int(stragglers, "stragglers", 0, n)
    start = jnp.arange(n - s + 1)[:, None]
    idx = jnp.arange(n)[None, :]
    return ~((idx >= start) & (idx < start + s))
