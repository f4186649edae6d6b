"""Input ordering: the order in which the ``K`` inputs are laid along the encoder's line.

GCC's encoder fits a spline through the pairs ``(α_k, x_k)`` with ``α_1 < … < α_K`` fixed, so
the order of the inputs is part of the encoding: inputs in an arbitrary order make the encoder
path jagged (long jumps between consecutive ``α``), a good order makes it short and smooth.
Manifold-aware GCC (Moradi and Maddah-Ali, arXiv 2609.00552) encodes along a graph of the
data; :func:`input_order` computes such orders from the inputs alone (no ``f``, no labels):

* ``"given"``: ``0, 1, …, K − 1``;
* ``"sort"``: scalar inputs by value;
* ``"pca"``: by the score on the first principal component of the flattened inputs;
* ``"spectral"``: by the Fiedler vector (the eigenvector of the second-smallest eigenvalue) of
  the Laplacian ``L = D − W`` of the symmetric ``k``-nearest-neighbour graph with Gaussian
  weights ``W_ij = exp(−‖x_i − x_j‖² / σ²)`` (``σ²`` the median squared neighbour distance);
  a weak complete graph (weights ``10⁻⁶ · mean W``) keeps it connected;
* ``"greedy"``: a nearest-neighbour path, from the input with the lowest PCA score, each step
  to the nearest input not yet visited.

A permutation ``order`` means "encode ``x[order]``": position ``j`` on the line holds input
``order[j]``. :func:`gcc_jax.coded_apply` and :func:`gcc_jax.monte_carlo_loss` take it as
``order=`` and give results in the caller's order. The order is an array, not a static value,
so a new order never recompiles.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import as_float_array
from .._core.scalars import as_choice, as_int
from .._core.types import Array, ArrayLike, Float, Int

__all__ = ["ORDERS", "check_order", "input_order", "inverse_order"]

ORDERS = ("given", "sort", "pca", "spectral", "greedy")
"""Methods of :func:`input_order`."""

_HIGHEST = jax.lax.Precision.HIGHEST


def input_order(
    x: Float[ArrayLike, "k *d"], method: str = "spectral", *, neighbors: int | None = None
) -> Int[Array, " k"]:
    """A permutation of the ``K`` inputs to encode them in: encode ``x[order]``.

    See the module docstring for the methods. Every method uses the inputs only; each is one
    compiled call per shape (``method`` and ``neighbors`` static).

    Args:
        x: inputs ``(K, ...)``, flattened per input.
        method: one of :data:`ORDERS`; ``"sort"`` needs one number per input.
        neighbors: ``k`` of the ``"spectral"`` method's graph (default
            ``min(K − 1, max(4, ⌈log₂ K⌉ + 1))``).

    Returns:
        int32 ``(K,)``, a permutation of ``0 … K − 1``.

    Raises:
        ValueError: an unknown method, ``"sort"`` on inputs of more than one number, or a bad
            ``neighbors``.

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> x = jnp.array([[0.3], [-1.0], [2.0], [0.0]])
        >>> gcc.input_order(x, "sort").tolist()
        [1, 3, 0, 2]
        >>> t = jnp.array([0.3, -1.0, 2.0, 0.0, 1.1])
        >>> pts = jnp.stack([jnp.cos(t), jnp.sin(t)], axis=1)        # points on an arc
        >>> [gcc.input_order(pts, m).tolist() in ([1, 3, 0, 4, 2], [2, 4, 0, 3, 1])
        ...  for m in ("pca", "spectral", "greedy")]
        [True, True, True]
    """
    method = as_choice(method, "method", ORDERS)
    x = as_float_array(x, "x")
    if x.ndim < 1 or x.shape[0] < 1:
        raise ValueError(f"`x` must have shape (K, ...) with K >= 1; got {x.shape}")
    k = x.shape[0]
    flat = x.reshape(k, -1)
    if method == "sort" and flat.shape[1] != 1:
        raise ValueError(
            f"method 'sort' needs scalar inputs (one number each); got inputs of shape "
            f"{x.shape[1:]}: use 'pca', 'spectral' or 'greedy'"
        )
    if neighbors is None:
        neighbors = min(k - 1, max(4, (k - 1).bit_length() + 1))
    neighbors = as_int(neighbors, "neighbors", 1 if k > 1 else 0, max(k - 1, 0))
    if k < 3 and method != "given":  # one or two inputs: every order is a straight line
        return jnp.arange(k, dtype=jnp.int32) if method != "sort" else _sort(flat)
    return _ORDER[method](flat, neighbors)


def inverse_order(order: Int[ArrayLike, " k"]) -> Int[Array, " k"]:
    """The inverse permutation: ``y[inverse_order(order)]`` puts results computed on
    ``x[order]`` back in the caller's order.

    Example:
        >>> import jax.numpy as jnp
        >>> inverse_order(jnp.array([2, 0, 1])).tolist()
        [1, 2, 0]
    """
    order = jnp.asarray(order)
    return jnp.zeros_like(order).at[order].set(jnp.arange(order.shape[0], dtype=order.dtype))


def check_order(order, k: int) -> Int[Array, " k"] | None:
    """``order`` (``None`` or a permutation of ``0 … k − 1``) as an int32 array.

    A concrete order is checked to be a permutation; a traced one only for its shape.
    """
    if order is None:
        return None
    order = jnp.asarray(order)
    if order.shape != (k,) or not jnp.issubdtype(order.dtype, jnp.integer):
        raise ValueError(
            f"`order` must be an integer permutation of shape ({k},); got {order.dtype} "
            f"{order.shape}"
        )
    if not isinstance(order, jax.core.Tracer):
        if not np.array_equal(np.sort(np.asarray(order)), np.arange(k)):
            raise ValueError(f"`order` must be a permutation of 0 … {k - 1}; got {order}")
    return order.astype(jnp.int32)


def _sort(flat: Array) -> Array:
    return jnp.argsort(flat[:, 0], stable=True).astype(jnp.int32)


def _gram(flat: Array) -> tuple[Array, Array]:
    """Centred inputs' Gram matrix ``Xc Xcᵀ`` and squared distances ``‖x_i − x_j‖²``."""
    xc = flat - jnp.mean(flat, axis=0)
    g = jnp.matmul(xc, xc.T, precision=_HIGHEST)
    sq = jnp.diag(g)
    return g, jnp.maximum(sq[:, None] + sq[None, :] - 2.0 * g, 0.0)


def _pca_scores(g: Array) -> Array:
    """Scores on the first principal component, from the Gram matrix (``K × K``, any ``d``);
    the sign makes the largest-magnitude score positive (a deterministic direction)."""
    _, vecs = jnp.linalg.eigh(g)
    u = vecs[:, -1]
    return u * jnp.sign(u[jnp.argmax(jnp.abs(u))])


@functools.partial(jax.jit, static_argnums=1)
def _given(flat: Array, neighbors: int) -> Array:
    return jnp.arange(flat.shape[0], dtype=jnp.int32)


@functools.partial(jax.jit, static_argnums=1)
def _sorted(flat: Array, neighbors: int) -> Array:
    return _sort(flat)


@functools.partial(jax.jit, static_argnums=1)
def _pca(flat: Array, neighbors: int) -> Array:
    g, _ = _gram(flat)
    return jnp.argsort(_pca_scores(g), stable=True).astype(jnp.int32)


@functools.partial(jax.jit, static_argnums=1)
def _spectral(flat: Array, neighbors: int) -> Array:
    g, d2 = _gram(flat)
    k = flat.shape[0]
    far = jnp.where(jnp.eye(k, dtype=bool), jnp.inf, d2)
    kth = jnp.sort(far, axis=1)[:, neighbors - 1]  # each input's k-th neighbour distance
    knn = far <= kth[:, None]
    adj = knn | knn.T
    sigma2 = jnp.median(kth)
    sigma2 = jnp.where(sigma2 > 0, sigma2, jnp.maximum(jnp.max(d2), 1.0))
    w = jnp.where(adj, jnp.exp(-d2 / sigma2), 0.0)
    off = ~jnp.eye(k, dtype=bool)
    w = w + jnp.where(off, 1e-6 * jnp.sum(w) / (k * (k - 1)) + 1e-300, 0.0)
    lap = jnp.diag(jnp.sum(w, axis=1)) - w
    _, vecs = jnp.linalg.eigh(lap)
    fiedler = vecs[:, 1]
    # a deterministic direction: the end with the lower PCA score first
    pca = _pca_scores(g)
    fiedler = fiedler * jnp.where(jnp.sum(fiedler * pca) < 0, -1.0, 1.0)
    return jnp.argsort(fiedler, stable=True).astype(jnp.int32)


@functools.partial(jax.jit, static_argnums=1)
def _greedy(flat: Array, neighbors: int) -> Array:
    g, d2 = _gram(flat)
    k = flat.shape[0]
    start = jnp.argmin(_pca_scores(g)).astype(jnp.int32)

    def step(j, carry):
        order, visited = carry
        here = order[j - 1]
        nxt = jnp.argmin(jnp.where(visited, jnp.inf, d2[here])).astype(jnp.int32)
        return order.at[j].set(nxt), visited.at[nxt].set(True)

    order = jnp.zeros((k,), jnp.int32).at[0].set(start)
    visited = jnp.zeros((k,), bool).at[start].set(True)
    order, _ = jax.lax.fori_loop(1, k, step, (order, visited))
    return order


_ORDER = {"given": _given, "sort": _sorted, "pca": _pca, "spectral": _spectral, "greedy": _greedy}
