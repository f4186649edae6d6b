"""LCC: Lagrange coded computing (polynomial encoder, polynomial-interpolation decoder)."""

import dataclasses
import functools

import jax
import jax.numpy as jnp

from .._core.checks import as_int, as_mask, float_dtype, node_status
from .._core.status import Status, combine
from .._core.types import Array, ArrayLike, Bool, Float, Int
from ._barycentric import (
    AbstractBarycentricCode,
    barycentric_matrix,
    lagrange_weights,
    live_ranks,
)
from ._base import (
    jit_method,
    live_message,
    pytree_dataclass,
    recovery_message,
)

_BELOW = ("nan", "interpolate")


# Kernels: plain pure functions, jitted so that eager calls compile once per shape (a nested
# jit inside the caller's jit/vmap is inlined).


def _selection(mask: Array, r: int) -> Array:
    """The ``r`` live workers used (evenly spread live ranks), or all live ones below ``r``."""
    n_live = jnp.sum(mask)
    rank = live_ranks(mask)
    j = jnp.arange(r)
    targets = jnp.round(j * (n_live - 1) / max(r - 1, 1)).astype(rank.dtype)
    chosen = mask & jnp.any(rank[:, None] == targets[None, :], axis=1)
    return jnp.where(n_live >= r, chosen, mask)


@functools.partial(jax.jit, static_argnames="threshold")
def _decoder_matrix(beta: Array, alpha: Array, mask: Array, threshold: int) -> Array:
    sel = _selection(mask, threshold)
    return barycentric_matrix(beta, lagrange_weights(beta, sel), sel, alpha)


@pytree_dataclass
class LagrangeCode(AbstractBarycentricCode):
    """Lagrange coded computing (LCC; Yu et al., AISTATS 2019), over the reals.

    Encoder: the interpolating polynomial of degree ``K − 1`` through ``(alpha_k, x_k)``,
    ``u(z) = Σ_k x_k ℓ_k(z)`` with the Lagrange basis ``ℓ_k`` on ``alpha``; worker ``n`` receives
    ``x~_n = u(beta_n)``. For a polynomial ``f`` of degree ``deg`` the workers' results are
    samples of ``f∘u``, a polynomial of degree ``(K − 1)·deg``, so any
    ``r = (K − 1)·deg + 1`` live results determine it and ``f(x_k) = (f∘u)(alpha_k)`` is
    recovered *exactly* (the recovery threshold; up to ``S = N − r`` stragglers).

    Decoder: barycentric interpolation (second, "true" form, stable on Chebyshev-like nodes)

        p(z) = Σ_i' w_i y_i / (z − beta_i)  /  Σ_i' w_i / (z − beta_i),
        w_i = 1 / Π_{j≠i} (beta_i − beta_j),

    over ``r`` selected live workers, evaluated at ``alpha``. The selection is made with masks
    (static shapes): among the ``L`` live workers in ascending order, those of rank
    ``round(j (L − 1)/(r − 1))``, ``j = 0 … r − 1`` — evenly spread ranks, which keeps the
    selected nodes close to a Chebyshev distribution (small Lebesgue constant).

    Below the threshold (``L < r``), ``below_threshold`` decides:

    * ``"nan"`` (default): the value is NaN and the status carries
      ``Status.BELOW_RECOVERY_THRESHOLD`` (``decode`` raises in eager calls).
    * ``"interpolate"``: LeTCC App. D's adaptation — fit the lower-degree polynomial (degree
      ``L − 1``) through *all* live results. The status stays OK since this is a deliberate
      approximation; :meth:`recovers` tells whether a pattern is exact.

    For non-polynomial ``f``, or ``deg`` understated, the decoder still interpolates but is
    not exact. Over the reals LCC becomes ill-conditioned once ``(K − 1)·deg`` is large
    (LeTCC App. D: ≳ 25) and stragglers open gaps in the nodes.

    Attributes:
        alpha: ascending input nodes, shape ``(K,)``.
        beta: ascending worker nodes, shape ``(N,)``.
        degree: ``deg f ≥ 1`` (static).
        below_threshold: ``"nan"`` or ``"interpolate"`` (static).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.LagrangeCode.chebyshev(num_inputs=3, num_workers=8, degree=2)
        >>> code.recovery_threshold
        5
        >>> f = lambda v: v**2 + 1.0
        >>> x = jnp.array([[0.5], [-1.0], [2.0]])
        >>> mask = jnp.array([True, False, True, True, False, True, True, False])
        >>> bool(jnp.allclose(code.decode(f(code.encode(x)), mask), f(x)))
        True
    """

    alpha: Float[ArrayLike, " k"]  # a JAX or NumPy array
    beta: Float[ArrayLike, " n"]
    degree: int = dataclasses.field(default=1, metadata=dict(static=True))
    below_threshold: str = dataclasses.field(default="nan", metadata=dict(static=True))

    def __post_init__(self):
        object.__setattr__(self, "degree", as_int(self.degree, "degree", 1))
        if self.below_threshold not in _BELOW:
            raise ValueError(
                f"`below_threshold` must be one of {_BELOW}; got {self.below_threshold!r}"
            )
        self.check_nodes()

    @classmethod
    def chebyshev(
        cls,
        *,
        num_inputs: int,
        num_workers: int,
        degree: int,
        below_threshold: str = "nan",
        dtype=None,
    ) -> "LagrangeCode":
        """LCC with ``alpha`` Chebyshev-1 (K points) and ``beta`` Chebyshev-2 (N), ascending.

        Args:
            num_inputs: ``K ≥ 2``.
            num_workers: ``N ≥ 2`` (LCC tolerates ``N − (K − 1)·degree − 1`` stragglers).
            degree: degree of the polynomial ``f`` to be computed exactly.
            below_threshold: ``"nan"`` or ``"interpolate"`` (see the class docstring).
            dtype: float dtype of the nodes (default: JAX's default float).
        """
        alpha, beta = cls.chebyshev_nodes(num_inputs, num_workers, dtype)
        return cls(alpha=alpha, beta=beta, degree=degree, below_threshold=below_threshold)

    @property
    def recovery_threshold(self) -> int:
        """``(K − 1)·deg + 1``: the number of live results that makes decoding exact."""
        return (self.num_inputs - 1) * self.degree + 1

    @property
    def min_live(self) -> int:
        """:attr:`recovery_threshold` with ``below_threshold="nan"``; 1 with ``"interpolate"``
        (a constant through one live worker)."""
        return self.recovery_threshold if self.below_threshold == "nan" else 1

    def status_message(self, flag: Status) -> str | None:
        """Names :attr:`recovery_threshold` for ``BELOW_RECOVERY_THRESHOLD`` (see
        :meth:`gcc_jax.AbstractCode.status_message`)."""
        if flag == Status.BELOW_RECOVERY_THRESHOLD:
            return recovery_message(self, "(K−1)·deg f + 1")
        if flag == Status.TOO_FEW_LIVE:  # raised with no live worker at all
            return live_message(self, 1, "to interpolate at all")
        return super().status_message(flag)

    @property
    def max_stragglers(self) -> int:
        """``N − recovery_threshold`` (negative when even no straggler can be tolerated)."""
        return self.num_workers - self.recovery_threshold

    def recovers(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, ""]:
        """Whether ``mask`` has at least :attr:`recovery_threshold` live workers."""
        return jnp.sum(as_mask(mask, self.num_workers)) >= self.recovery_threshold

    def available(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, " k"]:
        """Every estimate when the pattern is decodable under ``below_threshold``.

        With ``"nan"`` all are ``False`` below the recovery threshold (nothing is decoded);
        with ``"interpolate"`` all are ``True`` whenever one worker is live.
        """
        mask = as_mask(mask, self.num_workers)
        ok = self.recovers(mask) if self.below_threshold == "nan" else jnp.any(mask)
        return jnp.broadcast_to(ok, (self.num_inputs,))

    # -- encoder ----------------------------------------------------------------------------

    node_weights = staticmethod(lagrange_weights)  # the encoder is the Lagrange basis on alpha

    # -- decoder ----------------------------------------------------------------------------

    @jit_method
    def decoder_matrix_with_status(
        self, mask: Bool[ArrayLike, " n"]
    ) -> tuple[Float[Array, "k n"], Int[Array, ""]]:
        """``D(mask)`` with ``Y^ = D Y~``; only the selected live workers have non-zero columns.

        Status flags: ``BELOW_RECOVERY_THRESHOLD`` (fewer than ``(K − 1)·deg + 1`` live
        workers, with ``below_threshold="nan"``), ``TOO_FEW_LIVE`` (no live worker; LCC needs
        one), ``BAD_NODES``. :meth:`decode_with_status` adds ``NONFINITE_DATA`` (NaN/Inf from a
        live worker) and ``NONFINITE_RESULT``; the value is NaN wherever the status is not OK.
        """
        mask = as_mask(mask, self.num_workers)
        dtype = float_dtype(self.alpha, self.beta)
        beta, alpha = self.beta.astype(dtype), self.alpha.astype(dtype)
        n_live = jnp.sum(mask)
        strict = self.below_threshold == "nan"
        status = (
            combine((n_live < 1, Status.TOO_FEW_LIVE))
            | combine(
                ((n_live < self.recovery_threshold) & strict, Status.BELOW_RECOVERY_THRESHOLD)
            )
            | node_status(beta)
        )
        return _decoder_matrix(beta, alpha, mask, self.recovery_threshold), status
