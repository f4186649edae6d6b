"""ApproxIFER: Berrut coded inference with Byzantine error location (Soleymani et al., AAAI 2022).

Implemented from the paper's description (arXiv 2109.09868) and the structure of its public code
(read, not copied): the encoder is BACC's Berrut interpolant; before decoding, the master
*locates* up to ``A`` adversarial workers with a Welch–Berlekamp-style rational fit and drops
them, then decodes BACC-style over the remaining live workers.
"""

import dataclasses

import jax
import jax.numpy as jnp

from .._core.checks import (
    as_int,
    as_real,
    check_node_leaves,
    check_outputs,
    float_dtype,
    node_status,
)
from .._core.status import Status, combine
from .._core.types import Array, ArrayLike, Bool, Float, Shaped
from ._barycentric import barycentric_matrix, berrut_weights
from ._base import (
    AbstractErrorLocatingCode,
    AbstractNodeCode,
    Decoded,
    Encoded,
    jit_method,
    pytree_dataclass,
)
from .berrut import BerrutCode

__all__ = ["ApproxIFERCode", "chebyshev_basis", "locate_rational"]


def chebyshev_basis(z: Float[Array, " n"], degree: int) -> Float[Array, "n p"]:
    """``[T_0(z), …, T_degree(z)]`` (Chebyshev polynomials; a well-conditioned basis on [−1, 1])."""
    cols = [jnp.ones_like(z), z]
    for _ in range(2, degree + 1):
        cols.append(2.0 * z * cols[-1] - cols[-2])
    return jnp.stack(cols[: degree + 1], axis=1)


def locate_rational(
    z: Float[Array, " n"], y: Float[Array, " n"], mask: Bool[Array, " n"], degree: int
) -> Float[Array, " n"]:
    """Error-locator magnitudes ``|Q(z_n)|`` of the rational fit ``y ≈ P/Q`` over the live nodes.

    Welch–Berlekamp for rational functions, in least squares: find polynomials ``P`` and ``Q``
    of degree ``≤ degree`` minimising ``Σ_live (P(z_n) − y_n Q(z_n))²`` subject to
    ``‖(p, q)‖ = 1`` (coefficients in the Chebyshev basis): the right singular vector of the
    smallest singular value of ``[T(z), −diag(y) T(z)]`` with dead rows zeroed. If the honest
    values follow a rational ``P₀/Q₀`` of degree ``d₀`` and ``A`` workers lie, ``P = P₀ E``,
    ``Q = Q₀ E`` with ``E`` vanishing at the liars solves it exactly for
    ``degree = d₀ + A``, so liars have the smallest ``|Q|``. ``y`` is scaled by its largest live
    magnitude first (the locator is scale-free). Dead nodes get ``+inf``.
    """
    scale = jnp.max(jnp.where(mask, jnp.abs(y), 0.0))
    ys = jnp.where(mask, y, 0.0) / jnp.where(scale > 0, scale, 1.0)
    t = chebyshev_basis(z, degree)
    a = jnp.concatenate([t, -ys[:, None] * t], axis=1) * mask[:, None]
    _, _, vt = jnp.linalg.svd(a, full_matrices=False)
    q = vt[-1, degree + 1 :]
    return jnp.where(mask, jnp.abs(jnp.matmul(t, q, precision=jax.lax.Precision.HIGHEST)), jnp.inf)


def _inconsistent(
    beta: Float[Array, " n"],
    y: Float[Array, "n m"],
    mask: Bool[Array, " n"],
    keep: Bool[Array, " n"],
    ratio: float,
) -> Bool[Array, " n"]:
    """The live workers whose outputs the other live workers do not predict:
    ``‖y_n − ŷ_n‖ > ratio · s``.

    ``ŷ_n`` is Berrut's interpolant at ``beta_n`` through every live worker but ``n``, and ``s``
    the median of the leave-one-out errors of the ``keep`` workers (those the locator does not
    suspect), each predicted from the other ``keep`` workers: the honest workers' scale, with a
    floor of ``ε`` times the outputs' magnitude where they fit exactly. The locator's
    candidates are dropped only when inconsistent in this sense, so that honest workers are not
    dropped when no one lies.
    """
    eye = jnp.eye(beta.shape[0], dtype=bool)
    others = jnp.where(keep[:, None], keep, mask) & ~eye  # row j: the workers predicting j
    weights = jax.vmap(lambda o: berrut_weights(o, beta.dtype))(others)
    rows = jax.vmap(lambda w, o, q: barycentric_matrix(beta, w, o, q[None])[0])(
        weights, others, beta
    )
    err = jnp.linalg.norm(y - jnp.matmul(rows, y, precision=jax.lax.Precision.HIGHEST), axis=1)
    # the local scale: the larger leave-one-out error of the two nearest other keep workers
    idx = jnp.arange(beta.shape[0])
    near = jnp.where(keep[None, :] & ~eye, jnp.abs(idx[:, None] - idx[None, :]), idx.size + 1)
    nearest = jnp.argsort(near, axis=1, stable=True)[:, :2]
    scale = jnp.max(err[nearest], axis=1)
    floor = jnp.finfo(y.dtype).eps * jnp.max(jnp.where(keep[:, None], jnp.abs(y), 0.0))
    return mask & (err > ratio * jnp.maximum(scale, floor))


@pytree_dataclass
class ApproxIFERCode(AbstractErrorLocatingCode):
    """ApproxIFER: BACC with error location against ``A`` Byzantine workers.

    Encoder: Berrut's rational interpolant through ``(alpha_k, x_k)`` evaluated at ``beta``
    (:class:`gcc_jax.BerrutCode`). Decoder, for worker outputs ``y~`` and a straggler mask:

    1. for every output coordinate ``j``, :func:`locate_rational` fits ``y~_{·j} ≈ P_j/Q_j``
       with ``deg P_j, deg Q_j ≤ K + A − 1`` (BACC's interpolant of the honest values is a
       rational function of type ``(K − 1, K − 1)``; ``A`` errors multiply both by the error
       locator) and the ``A`` live workers with the smallest ``|Q_j(beta_n)|`` get a vote;
    2. the ``A`` workers with the most votes over the coordinates are the candidates (ties
       broken by the mean rank of ``|Q_j|``);
    3. a candidate is declared adversarial only if the other live workers do not predict it:
       its leave-one-out error under Berrut's interpolant, ``‖y~_n − ŷ_n‖``, exceeds
       ``outlier_ratio`` times the larger leave-one-out error of its two nearest
       non-candidates (the honest variation there). The locator always names ``A``
       candidates; without this check honest workers would be dropped when fewer than ``A``
       lie, which costs accuracy next to an input node where the interpolant bends most;
    4. Berrut decoding (:class:`gcc_jax.BerrutCode`) over the live workers minus those declared.

    The rational fit has ``2(K + A) − 1`` free coefficients, so location needs at least
    ``2K + 2A − 1`` live workers (ApproxIFER's ``N ≥ 2K + 2A − 1 + S``); below that the status
    carries ``BELOW_RECOVERY_THRESHOLD``. Honest values are only approximately rational for a
    general ``f``, so location is approximate (exact for large errors on smooth ``f``). Two
    deliberate differences from the authors' script: the Chebyshev basis instead of monomials
    (same function space, better conditioned) and the unit-norm (SVD) normalisation instead of
    fixing ``Q``'s constant term to 1 (which fails when a liar sits at ``z = 0``). Location is
    discrete: gradients flow through the final Berrut decode only (``stop_gradient`` on the
    locator).

    Attributes:
        alpha: ascending input nodes ``(K,)``.
        beta: ascending worker nodes ``(N,)``.
        num_adversaries: ``A``, the most workers located and dropped (static).
        outlier_ratio: how many times its neighbours' leave-one-out error a candidate's must
            exceed to be dropped (static, ``≥ 1``; default 3).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.ApproxIFERCode.chebyshev(num_inputs=3, num_workers=16, num_adversaries=2)
        >>> x = jnp.linspace(-1.0, 1.0, 3)[:, None]
        >>> y = code.worker_outputs(jnp.sin, x).at[jnp.array([4, 11])].set(5.0)  # 2 liars
        >>> [int(i) for i in jnp.flatnonzero(code.locate(y, jnp.ones(16, bool)))]
        [4, 11]
    """

    alpha: Float[ArrayLike, " k"]  # a JAX or NumPy array
    beta: Float[ArrayLike, " n"]
    num_adversaries: int = dataclasses.field(default=1, metadata=dict(static=True))
    outlier_ratio: float = dataclasses.field(default=3.0, metadata=dict(static=True))

    def __post_init__(self):
        object.__setattr__(
            self, "num_adversaries", as_int(self.num_adversaries, "num_adversaries", 0)
        )
        object.__setattr__(self, "outlier_ratio", as_real(self.outlier_ratio, "outlier_ratio", 1.0))
        check_node_leaves(self, ("alpha", "beta"))

    @classmethod
    def chebyshev(
        cls, *, num_inputs: int, num_workers: int, num_adversaries: int, dtype=None
    ) -> "ApproxIFERCode":
        """Chebyshev-1 ``alpha`` (K) and Chebyshev-2 ``beta`` (N), ascending, as BACC."""
        alpha, beta = AbstractNodeCode.chebyshev_nodes(num_inputs, num_workers, dtype)
        return cls(alpha=alpha, beta=beta, num_adversaries=num_adversaries)

    @property
    def berrut(self) -> BerrutCode:
        """The plain BACC code on the same nodes (no error location)."""
        return BerrutCode(self.alpha, self.beta)

    @property
    def recovery_threshold(self) -> int:
        """``2K + 2A − 1`` live workers: enough equations for the rational locator."""
        return 2 * self.num_inputs + 2 * self.num_adversaries - 1

    recovery_rule = "2K + 2A − 1"  # the formula of recovery_threshold, for messages

    @jit_method
    def encode_with_status(self, x: Shaped[ArrayLike, "k *d"]) -> Encoded:
        """BACC's encoder."""
        return self.berrut.encode_with_status(x)

    def _locate(self, y_flat: Array, mask: Array, dtype) -> Array:
        """The workers declared adversarial (boolean ``(n,)``, ``A`` of the live ones)."""
        n, a = self.num_workers, self.num_adversaries
        if a == 0:
            return jnp.zeros((n,), bool)
        beta = self.beta.astype(dtype)
        degree = self.num_inputs + a - 1
        q = jax.vmap(lambda col: locate_rational(beta, col, mask, degree), in_axes=1, out_axes=1)(
            y_flat
        )  # (n, m)
        rank = jnp.argsort(jnp.argsort(q, axis=0), axis=0)  # 0 = smallest |Q| (dead: last)
        votes = jnp.sum(rank < a, axis=1).astype(dtype)
        score = votes + 0.5 * (1.0 - jnp.mean(rank, axis=1) / n)  # tie-break < 1 vote
        score = jnp.where(mask, score, -jnp.inf)
        order = jnp.argsort(-score)
        chosen = (jnp.argsort(order) < a) & mask
        return chosen & _inconsistent(beta, y_flat, mask, mask & ~chosen, self.outlier_ratio)

    @jit_method
    def decode_with_status(
        self, y: Shaped[ArrayLike, "n *m"], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """Locate, drop, and Berrut-decode; never raises on value problems.

        Status flags: ``BELOW_RECOVERY_THRESHOLD`` (fewer than ``2K + 2A − 1`` live workers),
        plus BACC's (``TOO_FEW_LIVE``, ``NONFINITE_DATA``, ``BAD_NODES``, ``NONFINITE_RESULT``).
        """
        y, mask = check_outputs(y, mask, self.num_workers)
        dtype = float_dtype(self.alpha, self.beta, y)
        y_flat = y.reshape(self.num_workers, -1).astype(dtype)
        safe = jnp.where(mask[:, None] & jnp.isfinite(y_flat), y_flat, 0.0)
        located = self._locate(jax.lax.stop_gradient(safe), mask, dtype)
        short = jnp.sum(mask) < self.recovery_threshold
        dec = self.berrut.decode_with_status(y, mask & ~located)
        # a live worker's NaN/Inf is reported even if it was located (it is not an adversary
        # within the bound; it is a broken worker)
        finite = jnp.all(jnp.isfinite(y_flat), axis=1)
        status = (
            dec.status
            | combine((short, Status.BELOW_RECOVERY_THRESHOLD))
            | combine((jnp.any(mask & ~finite), Status.NONFINITE_DATA))
            | node_status(self.beta)
        )
        return Decoded(jnp.where(status == 0, dec.value, jnp.nan), status)
