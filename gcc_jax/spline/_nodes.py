"""Interpolation nodes on Ω = [−1, 1]: Chebyshev points of both kinds and equispaced points.

The nodes are computed on the host in float64 (NumPy) and then cast: building a code compiles
nothing, and float32 nodes are the correctly rounded float64 ones.
"""

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
        ValueError: if ``kind`` is not 1 or 2, or ``n`` is too small.

    Example:
        >>> import gcc_jax as gcc
        >>> gcc.chebyshev_nodes(3, kind=2).tolist()
        [-1.0, 0.0, 1.0]
    """
    if kind not in (1, 2):
        raise ValueError(f"`kind` must be 1 or 2; got {kind!r}")
    n = _check_count(n, 1 if kind == 1 else 2)
    j = np.arange(n, dtype=np.float64)
    # sin((2j + 1 − n) π / (2n)) = −cos((2j + 1) π / (2n)): ascending, exactly symmetric.
    denom = 2 * n if kind == 1 else 2 * (n - 1)
    return _as_nodes_array(np.sin((2 * j + 1 - n) * np.pi / denom), dtype)


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
