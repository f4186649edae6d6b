"""Interpolation nodes on Ω = [−1, 1]: Chebyshev points of both kinds and equispaced points.

The nodes are computed on the host in float64 (NumPy) and then cast: building a code compiles
nothing, and float32 nodes are the correctly rounded float64 ones.
"""

import functools

import jax.numpy as jnp
import numpy as np

from .._core.checks import as_int
from .._core.types import Array, Float


def _check_count(n: int, minimum: int, name: str = "n") -> int:
    return as_int(n, name, minimum)


def chebyshev_nodes(n: int, kind: int = 1, *, dtype=None) -> Float[Array, " n"]:
    """Chebyshev points on [−1, 1], sorted ascending.

    Kind 1 (zeros of ``T_n``): ``cos((2j − 1)π / (2n))``, ``j = 1..n``; all strictly inside
    (−1, 1). Kind 2 (extrema of ``T_{n−1}``, Chebyshev–Lobatto): ``cos((j − 1)π / (n − 1))``,
    ``j = 1..n``; includes both end points −1 and 1. The papers list them decreasing; gcc_jax
    always stores nodes ascending. Computed as ``−cos(·)`` of the ascending angles, which equals
    ``sin`` of a symmetric grid, so the set is exactly symmetric about 0.

    Args:
        n: number of points (``n ≥ 1`` for kind 1, ``n ≥ 2`` for kind 2).
        kind: 1 or 2.
        dtype: floating dtype; defaults to JAX's default float (float64 under x64).

    Returns:
        Ascending array of shape ``(n,)``.

    Raises:
        ValueError: if ``kind`` is not 1 or 2, ``n`` is too small, or ``n`` is above
            :func:`max_chebyshev_nodes` for ``dtype`` (two nodes near ±1 would round to one).

    Example:
        >>> import gcc_jax as gcc
        >>> gcc.chebyshev_nodes(3, kind=2).tolist()
        [-1.0, 0.0, 1.0]
    """
    if kind not in (1, 2):
        raise ValueError(f"`kind` must be 1 or 2; got {kind!r}")
    n = _check_count(n, 1 if kind == 1 else 2)
    check_chebyshev_count(n, kind, _node_dtype(dtype))
    return _as_nodes_array(_chebyshev64(n, kind), dtype)


def _chebyshev64(n: int, kind: int) -> np.ndarray:
    """The ascending Chebyshev points of ``kind`` in float64 (the host computation)."""
    j = np.arange(n, dtype=np.float64)
    # sin((2j + 1 − n) π / (2n)) = −cos((2j + 1) π / (2n)): ascending, exactly symmetric.
    denom = 2 * n if kind == 1 else 2 * (n - 1)
    return np.sin((2 * j + 1 - n) * np.pi / denom)


def _node_dtype(dtype) -> np.dtype:
    return jnp.dtype(dtype) if dtype is not None else jnp.dtype(jnp.result_type(float))


def _increasing(n: int, kind: int, dtype: np.dtype) -> bool:
    """Whether the ``n`` Chebyshev points of ``kind``, rounded to ``dtype``, stay increasing."""
    return bool(np.all(np.diff(_chebyshev64(n, kind).astype(dtype)) > 0))


@functools.cache
def _max_count(kind: int, dtype: np.dtype) -> int | None:
    # gaps shrink monotonically with n, fastest at ±1 (≈ π² / (2 (n − 1)²) for kind 2), so
    # "increasing" holds up to one n and fails after it: a doubling then a bisection find it
    if np.finfo(dtype).bits >= 64:
        return None  # float64 nodes stay distinct up to counts no memory holds
    lo, hi = 2, 4
    while _increasing(hi, kind, dtype):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # _increasing(lo) and not _increasing(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _increasing(mid, kind, dtype) else (lo, mid)
    return lo


def max_chebyshev_nodes(dtype, kind: int = 2) -> int | None:
    """The largest ``n`` whose Chebyshev points of ``kind``, rounded to ``dtype``, are strictly
    increasing (``None`` for float64 and wider: no practical bound).

    The points crowd at ±1, where the gap of the kind-2 points, ``1 − cos(π / (n − 1))``, falls
    below the ``dtype``'s resolution: two nodes then round to the same value and no code can
    use them. Use a wider dtype, or equispaced nodes (gaps ``2 / (n − 1)``), beyond it.

    Example:
        >>> import numpy as np, gcc_jax as gcc
        >>> n = gcc.spline.max_chebyshev_nodes(np.float32)
        >>> bool(np.all(np.diff(gcc.chebyshev_nodes(n, kind=2, dtype=np.float32)) > 0))
        True
    """
    if kind not in (1, 2):
        raise ValueError(f"`kind` must be 1 or 2; got {kind!r}")
    return _max_count(kind, jnp.dtype(dtype))


def check_chebyshev_count(n: int, kind: int, dtype, name: str = "n") -> None:
    """Raise a ``ValueError`` naming ``name`` when ``n`` Chebyshev points of ``kind`` in
    ``dtype`` would round to repeated nodes (``n`` above :func:`max_chebyshev_nodes`)."""
    dtype = jnp.dtype(dtype)
    largest = max_chebyshev_nodes(dtype, kind)
    if largest is not None and n > largest:
        raise ValueError(
            f"`{name}` = {n} Chebyshev-{kind} nodes are not distinct in {dtype.name}: near ±1 "
            f"their spacing is below {dtype.name}'s resolution, so {dtype.name} holds at most "
            f"{largest} of them. Use dtype=float64 (jax.config.update('jax_enable_x64', True)) "
            "or equispaced nodes (gcc_jax.equispaced_nodes), whose spacing 2/(n − 1) stays "
            f"representable in {dtype.name}."
        )


def _as_nodes_array(t: np.ndarray, dtype) -> Float[Array, " n"]:
    """Host nodes ``t`` (float64) as a JAX array of ``dtype`` (default: JAX's default float)."""
    return jnp.asarray(t.astype(jnp.dtype(dtype) if dtype is not None else jnp.result_type(float)))


def equispaced_nodes(n: int, *, dtype=None) -> Float[Array, " n"]:
    """``n ≥ 2`` equispaced points on [−1, 1] including both end points, ascending.

    Example:
        >>> import gcc_jax as gcc
        >>> gcc.equispaced_nodes(5).tolist()
        [-1.0, -0.5, 0.0, 0.5, 1.0]
    """
    n = _check_count(n, 2)
    return _as_nodes_array(np.linspace(-1.0, 1.0, n), dtype)
