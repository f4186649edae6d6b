"""BACC: Berrut approximated coded computing (rational-interpolation encoder and decoder)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .._nodes import chebyshev_nodes
from .._spline import _as_nodes, _float_dtype
from .._status import Status, combine, is_concrete, raise_if_bad
from .._types import Array, ArrayLike, Bool, Float, Shaped
from ._barycentric import barycentric_matrix, berrut_weights, data_status, node_status
from ._base import Decoded, apply_rows, check_inputs, check_outputs


def _check_node_leaves(code, names: tuple[str, ...]) -> None:
    """Static checks on node leaves (1-D, ≥ 2 nodes); value checks only on concrete arrays."""
    arrays = [getattr(code, name) for name in names]
    shapes = [getattr(a, "shape", None) for a in arrays]
    if any(s is None for s in shapes):  # JAX rebuilds pytrees with placeholders too
        return
    for name, s in zip(names, shapes, strict=True):
        if len(s) != 1 or s[0] < 2:
            raise ValueError(f"`{name}` must be 1-D with at least 2 nodes; got shape {s}")
    if is_concrete(*arrays) and all(isinstance(a, jax.Array | np.ndarray) for a in arrays):
        dtype = _float_dtype(*arrays)
        for name, a in zip(names, arrays, strict=True):
            _as_nodes(a, name, dtype)


# Kernels: plain pure functions, jitted so that eager calls compile once per shape (a nested
# jit inside the caller's jit/vmap is inlined).


@jax.jit
def _encoder_matrix(alpha: Array, beta: Array) -> Array:
    live = jnp.ones(alpha.shape, bool)
    return barycentric_matrix(alpha, berrut_weights(live, alpha.dtype), live, beta)


@jax.jit
def _decoder_matrix(beta: Array, alpha: Array, mask: Array) -> Array:
    return barycentric_matrix(beta, berrut_weights(mask, beta.dtype), mask, alpha)


@jax.jit
def _decode(beta: Array, alpha: Array, y_flat: Array, mask: Array) -> tuple[Array, Array]:
    """Berrut decode of ``y_flat`` (n, m) with its status; NaN value where the status is bad."""
    status = (
        combine((jnp.sum(mask) < 1, Status.TOO_FEW_LIVE))
        | node_status(beta)
        | data_status(y_flat, mask)
    )
    # A straggler's output (even NaN/Inf) never reaches the arithmetic or the gradient.
    y_ok = jnp.where(mask[:, None] & jnp.isfinite(y_flat), y_flat, 0.0)
    value = _decoder_matrix(beta, alpha, mask) @ y_ok
    status = status | combine((~jnp.all(jnp.isfinite(value)), Status.NONFINITE_RESULT))
    return jnp.where(status == 0, value, jnp.nan), status


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class BerrutCode:
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

    alpha: Float[Array, " k"]
    beta: Float[Array, " n"]

    def __post_init__(self):
        _check_node_leaves(self, ("alpha", "beta"))

    @classmethod
    def chebyshev(cls, *, num_inputs: int, num_workers: int, dtype=None) -> BerrutCode:
        """BACC with ``alpha`` Chebyshev-1 (K points) and ``beta`` Chebyshev-2 (N), ascending.

        Args:
            num_inputs: ``K ≥ 2``.
            num_workers: ``N ≥ 2``.
            dtype: float dtype of the nodes (default: JAX's default float).
        """
        for name, v in (("num_inputs", num_inputs), ("num_workers", num_workers)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 2:
                raise ValueError(f"`{name}` must be an int >= 2; got {v!r}")
        dtype = jnp.dtype(dtype) if dtype is not None else jnp.zeros(()).dtype
        return cls(
            alpha=chebyshev_nodes(num_inputs, kind=1, dtype=dtype),
            beta=chebyshev_nodes(num_workers, kind=2, dtype=dtype),
        )

    @property
    def num_inputs(self) -> int:
        return self.alpha.shape[0]

    @property
    def num_workers(self) -> int:
        return self.beta.shape[0]

    # -- encoder ----------------------------------------------------------------------------

    def encoder_matrix(self) -> Float[Array, "n k"]:
        """``E`` with ``X~ = E X``: Berrut's interpolant on ``alpha`` evaluated at ``beta``."""
        return _encoder_matrix(self.alpha, self.beta.astype(self.alpha.dtype))

    def encode(self, x: Shaped[ArrayLike, " k *d"]) -> Float[Array, " n *d"]:
        """Coded inputs ``x~_n = u_enc(beta_n)`` for ``x`` of shape ``(K, ...)`` → ``(N, ...)``."""
        x = check_inputs(x, self.num_inputs)
        e = self.encoder_matrix()
        dtype = _float_dtype(e, x)
        return apply_rows(e.astype(dtype), x.astype(dtype))

    # -- decoder ----------------------------------------------------------------------------

    def decoder_matrix(self, mask: Bool[ArrayLike, " n"]) -> Float[Array, "k n"]:
        """``D(mask)`` with ``Y^ = D Y~``; columns of stragglers are zero."""
        _, mask = check_outputs(jnp.zeros((self.num_workers,)), mask, self.num_workers)
        dtype = _float_dtype(self.alpha, self.beta)
        return _decoder_matrix(self.beta.astype(dtype), self.alpha.astype(dtype), mask)

    def decode_with_status(
        self, y: Shaped[ArrayLike, " n *m"], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """Decode and report value problems as data (never raises on them).

        Status flags: ``TOO_FEW_LIVE`` (no live worker), ``NONFINITE_DATA`` (NaN/Inf from a live
        worker), ``BAD_NODES`` (``beta`` not increasing), ``NONFINITE_RESULT``. The value is NaN
        wherever the status is not OK. Use under ``jit``/``vmap`` over masks.
        """
        y, mask = check_outputs(y, mask, self.num_workers)
        dtype = _float_dtype(self.beta, y)
        y_flat = y.reshape(self.num_workers, -1).astype(dtype)
        value, status = _decode(self.beta.astype(dtype), self.alpha.astype(dtype), y_flat, mask)
        return Decoded(value.reshape((self.num_inputs, *y.shape[1:])), status)

    def decode(self, y: Shaped[ArrayLike, " n *m"], mask: Bool[ArrayLike, " n"]) -> Array:
        """Estimates ``r(alpha_k) ≈ f(x_k)`` from worker outputs ``y`` of shape ``(N, ...)``.

        Only live workers (``mask[n] = True``) are used; a straggler's output, even NaN/Inf,
        changes neither the result nor its gradient.

        Raises:
            ValueError/TypeError: wrong shapes, a non-boolean mask.
            GCCValueError: in eager calls, no live worker or NaN/Inf from a live worker. Under
                ``jit``/``vmap`` the value is NaN instead; see :meth:`decode_with_status`.
        """
        out = self.decode_with_status(y, mask)
        raise_if_bad(out.status, "BerrutCode.decode")
        return out.value
