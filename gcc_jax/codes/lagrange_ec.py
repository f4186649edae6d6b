"""LCC with error correction: Reed–Solomon decoding over the reals (Berlekamp–Welch)."""

import dataclasses

import jax
import jax.numpy as jnp

from .._core.checks import as_int, check_node_leaves, check_outputs, float_dtype
from .._core.status import Status, combine
from .._core.types import Array, ArrayLike, Bool, Float, Shaped
from ._base import (
    AbstractErrorLocatingCode,
    AbstractNodeCode,
    Decoded,
    Encoded,
    jit_method,
    pytree_dataclass,
)
from .approxifer import chebyshev_basis
from .lagrange import LagrangeCode

__all__ = ["LagrangeECCode", "locate_polynomial"]


def locate_polynomial(
    z: Float[Array, " n"], y: Float[Array, " n"], mask: Bool[Array, " n"], degree: int, errors: int
) -> Float[Array, " n"]:
    """Berlekamp–Welch error-locator magnitudes ``|E(z_n)|`` over the live nodes (dead: ``+inf``).

    If the honest values are a polynomial ``p`` of degree ``≤ degree`` and at most ``errors``
    live values are wrong, there are ``E`` of degree ``errors`` with fixed leading coefficient
    (``E = T_e + Σ_{l<e} e_l T_l``, Chebyshev basis) and ``Q = p E`` of degree
    ``≤ degree + errors`` with ``Q(z_n) = y_n E(z_n)`` at every live node: a linear system in
    the coefficients of ``Q`` and ``E``, solved in least squares (minimum norm). With at least
    ``degree + 2·errors + 1`` live nodes every solution has ``Q/E = p``, so ``E`` vanishes at
    every wrong value (Reed–Solomon's unique-decoding radius). ``y`` is scaled by its largest
    live magnitude first.
    """
    scale = jnp.max(jnp.where(mask, jnp.abs(y), 0.0))
    ys = jnp.where(mask, y, 0.0) / jnp.where(scale > 0, scale, 1.0)
    tq = chebyshev_basis(z, degree + errors)
    te = tq[:, : errors + 1]
    a = jnp.concatenate([tq, -ys[:, None] * te[:, :errors]], axis=1) * mask[:, None]
    b = ys * te[:, errors] * mask
    coef, *_ = jnp.linalg.lstsq(a, b)
    e = (
        jnp.matmul(te[:, :errors], coef[degree + errors + 1 :], precision=jax.lax.Precision.HIGHEST)
        + te[:, errors]
    )
    return jnp.where(mask, jnp.abs(e), jnp.inf)


@pytree_dataclass
class LagrangeECCode(AbstractErrorLocatingCode):
    """Lagrange coded computing with error correction (LCC; Yu et al., AISTATS 2019).

    Encoder: LCC's (:class:`gcc_jax.LagrangeCode`). For a polynomial ``f`` of degree ``deg`` the
    workers' results are values of ``f∘u``, a polynomial of degree ``D = (K − 1)·deg``: a
    Reed–Solomon codeword over the reals. With ``L`` live workers of which at most ``A`` lie,
    decoding is exact when ``L ≥ D + 2A + 1`` (LCC's ``N ≥ (K − 1)·deg + S + 2A + 1``).

    Decoder, per output coordinate (each coordinate is its own codeword, and an adversary may
    corrupt any subset of them): :func:`locate_polynomial` (Berlekamp–Welch as a least-squares
    linear system) gives the error locator, the ``A`` live workers with the smallest
    ``|E(beta_n)|`` are dropped, and the remaining ``L − A ≥ D + A + 1`` values are interpolated
    by LCC's barycentric decoder (:meth:`gcc_jax.LagrangeCode.decoder_matrix_with_status` with the
    reduced mask), which is exact since none of them is wrong. For non-polynomial ``f`` (or
    ``deg`` understated) the locator is meaningless and so is the decode. Over the reals the
    system becomes ill-conditioned as ``D + A`` grows (≳ 25, as LCC itself).

    Attributes:
        alpha: ascending input nodes ``(K,)``.
        beta: ascending worker nodes ``(N,)``.
        degree: ``deg f ≥ 1`` (static).
        num_adversaries: ``A`` (static).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.LagrangeECCode.chebyshev(
        ...     num_inputs=3, num_workers=12, degree=2, num_adversaries=2)
        >>> f = lambda v: v**2 - v
        >>> x = jnp.array([[0.5], [-1.0], [2.0]])
        >>> y = f(code.encode(x)).at[jnp.array([3, 8])].set(7.0)  # 2 liars
        >>> bool(jnp.allclose(code.decode(y, jnp.ones(12, bool)), f(x)))
        True
    """

    alpha: Float[ArrayLike, " k"]  # a JAX or NumPy array
    beta: Float[ArrayLike, " n"]
    degree: int = dataclasses.field(default=1, metadata=dict(static=True))
    num_adversaries: int = dataclasses.field(default=1, metadata=dict(static=True))

    def __post_init__(self):
        object.__setattr__(self, "degree", as_int(self.degree, "degree", 1))
        object.__setattr__(
            self, "num_adversaries", as_int(self.num_adversaries, "num_adversaries", 0)
        )
        check_node_leaves(self, ("alpha", "beta"))

    @classmethod
    def chebyshev(
        cls, *, num_inputs: int, num_workers: int, degree: int, num_adversaries: int, dtype=None
    ) -> "LagrangeECCode":
        """Chebyshev-1 ``alpha`` (K) and Chebyshev-2 ``beta`` (N), ascending, as LCC."""
        alpha, beta = AbstractNodeCode.chebyshev_nodes(num_inputs, num_workers, dtype)
        return cls(alpha=alpha, beta=beta, degree=degree, num_adversaries=num_adversaries)

    @property
    def lagrange(self) -> LagrangeCode:
        """Plain LCC on the same nodes (no error correction)."""
        return LagrangeCode(self.alpha, self.beta, degree=self.degree)

    @property
    def recovery_threshold(self) -> int:
        """``(K − 1)·deg + 2A + 1`` live workers."""
        return (self.num_inputs - 1) * self.degree + 2 * self.num_adversaries + 1

    recovery_rule = "(K−1)·deg f + 2A + 1"  # the formula of recovery_threshold, for messages

    @jit_method
    def encode_with_status(self, x: Shaped[ArrayLike, "k *d"]) -> Encoded:
        """LCC's encoder."""
        return self.lagrange.encode_with_status(x)

    def _locate(self, y_flat: Array, mask: Array, dtype) -> Array:
        """Workers dropped per coordinate: boolean ``(n, m)`` (``A`` live ones per column)."""
        a = self.num_adversaries
        if a == 0:
            return jnp.zeros(y_flat.shape, bool)
        beta = self.beta.astype(dtype)
        deg = (self.num_inputs - 1) * self.degree

        def column(col):
            e = locate_polynomial(beta, col, mask, deg, a)
            rank = jnp.argsort(jnp.argsort(e))
            return (rank < a) & mask

        return jax.vmap(column, in_axes=1, out_axes=1)(y_flat)

    @jit_method
    def decode_with_status(
        self, y: Shaped[ArrayLike, "n *m"], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """Locate per coordinate, drop, interpolate; never raises on value problems.

        Status flags: ``BELOW_RECOVERY_THRESHOLD`` (fewer than ``(K − 1)·deg + 2A + 1`` live
        workers), ``NONFINITE_DATA``, ``BAD_NODES``, ``NONFINITE_RESULT``.
        """
        y, mask = check_outputs(y, mask, self.num_workers)
        n = self.num_workers
        dtype = float_dtype(self.alpha, self.beta, y)
        y_flat = y.reshape(n, -1).astype(dtype)
        finite = jnp.all(jnp.isfinite(y_flat), axis=1)
        safe = jnp.where(mask[:, None] & finite[:, None], y_flat, 0.0)
        dropped = self._locate(jax.lax.stop_gradient(safe), mask, dtype)  # (n, m)
        lcc = self.lagrange

        def column(col, drop):
            d, st = lcc.decoder_matrix_with_status(mask & ~drop)
            return jnp.matmul(d.astype(dtype), col, precision=jax.lax.Precision.HIGHEST), st

        value, st = jax.vmap(column, in_axes=(1, 1), out_axes=(1, 0))(safe, dropped)
        status = (
            combine((jnp.sum(mask) < self.recovery_threshold, Status.BELOW_RECOVERY_THRESHOLD))
            | combine((jnp.any(mask & ~finite), Status.NONFINITE_DATA))
            | jnp.bitwise_or.reduce(st)
        )
        status = status | combine((~jnp.all(jnp.isfinite(value)), Status.NONFINITE_RESULT))
        value = jnp.where(status == 0, value, jnp.nan)
        return Decoded(value.reshape((self.num_inputs, *y.shape[1:])), status)
