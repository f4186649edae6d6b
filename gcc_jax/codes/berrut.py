"""BACC: Berrut approximated coded computing (rational-interpolation encoder and decoder)."""

import jax
import jax.numpy as jnp

from .._core.checks import as_mask, float_dtype, node_status
from .._core.status import Status, combine
from .._core.types import Array, ArrayLike, Bool, Float, Int
from ._barycentric import AbstractBarycentricCode, barycentric_matrix, berrut_weights
from ._base import jit_method, pytree_dataclass

# Kernels: plain pure functions, jitted so that eager calls compile once per shape (a nested
# jit inside the caller's jit/vmap is inlined).


@jax.jit
def _decoder_matrix(beta: Array, alpha: Array, mask: Array) -> Array:
    return barycentric_matrix(beta, berrut_weights(mask, beta.dtype), mask, alpha)


@pytree_dataclass
class BerrutCode(AbstractBarycentricCode):
    """Berrut approximated coded computing (BACC; Jahani-Nezhad & Maddah-Ali, 2022).

    Encoder: Berrut's first-form rational interpolant through ``(alpha_k, x_k)``,

        u_enc(z) = Σ_k (−1)^k x_k / (z − alpha_k)  /  Σ_k (−1)^k / (z − alpha_k),

    and worker ``n`` receives ``x~_n = u_enc(beta_n)`` (``X~ = E X``, ``E`` of shape ``(N, K)``).
    Decoder: the same interpolant through the live ``(beta_n, y~_n)`` taken in ascending order of
    ``beta``, with the signs alternating over the *live* nodes (the ``l``-th live node, counted
    from 0, gets ``(−1)^l``): ``f(x_k) ≈ r(alpha_k)``, i.e. ``Y^ = D(mask) Y~``. The rank of a
    live node is the masked cumulative sum of ``mask``, so shapes never depend on the pattern.

    Berrut's interpolant has no real poles for any distinct nodes and is interpolatory:
    at a query point equal to a live node it returns that node's value exactly (no division by
    zero; gradients stay finite too). Each output coordinate is interpolated separately with the
    same weights. Decoding needs at least one live worker. Error (as quoted in LeTCC App. C.1):
    ``‖f^ − f∘u_enc‖_∞ ≤ 2(1 + R) sin((S+1)π/(2N)) ‖(f∘u_enc)''‖_∞`` with
    ``R = (S+1)(S+3)π²/4`` for ``N − S`` odd, i.e. a squared loss of ``O(S⁴N⁻²)``.

    ``alpha`` and ``beta`` are array leaves (differentiable, no recompilation when they change).

    Attributes:
        alpha: ascending input nodes, shape ``(K,)``.
        beta: ascending worker nodes, shape ``(N,)``.

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.BerrutCode.chebyshev(num_inputs=4, num_workers=12)
        >>> x = jnp.linspace(-1.0, 1.0, 4)[:, None]
        >>> yh = code.decode(code.encode(x), jnp.ones(12, bool))  # f = id
        >>> yh.shape, bool(jnp.max(jnp.abs(yh - x)) < 0.2)
        ((4, 1), True)
    """

    alpha: Float[ArrayLike, " k"]  # a JAX or NumPy array
    beta: Float[ArrayLike, " n"]
    min_live = 1  # Berrut's interpolant through one live node is a constant

    def __post_init__(self):
        self.check_nodes()

    @classmethod
    def chebyshev(cls, *, num_inputs: int, num_workers: int, dtype=None) -> "BerrutCode":
        """BACC with ``alpha`` Chebyshev-1 (K points) and ``beta`` Chebyshev-2 (N), ascending.

        Args:
            num_inputs: ``K ≥ 2``.
            num_workers: ``N ≥ 2``.
            dtype: float dtype of the nodes (default: JAX's default float).
        """
        alpha, beta = cls.chebyshev_nodes(num_inputs, num_workers, dtype)
        return cls(alpha=alpha, beta=beta)

    # -- encoder ----------------------------------------------------------------------------

    @staticmethod
    def node_weights(t: Float[Array, " n"], mask: Bool[Array, " n"]) -> Float[Array, " n"]:
        """Berrut's weights ``(−1)^{rank}`` over the live nodes (ascending), 0 at dead nodes."""
        return berrut_weights(mask, t.dtype)

    # -- decoder ----------------------------------------------------------------------------

    @jit_method
    def decoder_matrix_with_status(
        self, mask: Bool[ArrayLike, " n"]
    ) -> tuple[Float[Array, "k n"], Int[Array, ""]]:
        """``D(mask)`` with ``Y^ = D Y~``; columns of stragglers are zero.

        Status flags: ``TOO_FEW_LIVE`` (no live worker; Berrut needs one), ``BAD_NODES``.
        A live worker's NaN/Inf is flagged by :meth:`decode_with_status` (``NONFINITE_DATA``).
        """
        mask = as_mask(mask, self.num_workers)
        dtype = float_dtype(self.alpha, self.beta)
        beta, alpha = self.beta.astype(dtype), self.alpha.astype(dtype)
        status = combine((jnp.sum(mask) < 1, Status.TOO_FEW_LIVE)) | node_status(beta)
        return _decoder_matrix(beta, alpha, mask), status
