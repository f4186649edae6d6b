"""GCC: the smoothing-spline code (encoder and decoder are cubic smoothing splines)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .._nodes import chebyshev_nodes
from .._spline import (
    _as_lam,
    _as_nodes,
    _float_dtype,
    fit_smoothing_spline_with_status,
    smoother_matrix_with_status,
)
from .._status import is_concrete, raise_if_bad
from .._types import Array, ArrayLike, Bool, Float, Shaped
from ._base import Decoded, apply_rows, check_inputs, check_outputs

_SOLVERS = ("banded", "kernel")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class SplineCode:
    """General coded computing with smoothing-spline encoder and decoder (GCC / LeTCC).

    Encoder: ``u_enc`` = cubic smoothing spline through ``(alpha_k, x_k)`` with ``lam_enc``;
    worker ``n`` receives ``x~_n = u_enc(beta_n)``, i.e. ``X~ = E X`` with ``E`` of shape
    ``(N, K)``. Decoder: ``u_dec`` = cubic smoothing spline through the live
    ``(beta_n, y~_n)`` with ``lam_dec``; ``f(x_k) ≈ u_dec(alpha_k)``, i.e. ``Y^ = D(mask) Y~``.
    Both splines follow the binding convention of :func:`gcc_jax.fit_smoothing_spline`
    (mean data term over live points, natural spline, linear outside the live hull).

    ``alpha``, ``beta``, ``lam_enc`` and ``lam_dec`` are array leaves: changing them never
    recompiles and gradients flow to them. ``solver`` is static.

    Attributes:
        alpha: ascending input nodes, shape ``(K,)``.
        beta: ascending worker nodes, shape ``(N,)``.
        lam_enc: encoder smoothing parameter ``≥ 0`` (0 = natural interpolation).
        lam_dec: decoder smoothing parameter ``≥ 0``.
        solver: ``"banded"`` (default; O(N) per pattern) or ``"kernel"`` (the Gram-form
            reference, O(N³) per pattern). See :func:`gcc_jax.fit_smoothing_spline`.

    Example:
        >>> import jax, jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=12)
        >>> x = jnp.linspace(0.0, 1.0, 4)[:, None] * jnp.ones((4, 3))
        >>> xt = code.encode(x)                      # (12, 3)
        >>> yh = code.decode(xt, jnp.ones(12, bool))  # f = id, no stragglers
        >>> bool(jnp.allclose(yh, x, atol=1e-3))
        True
    """

    alpha: Float[Array, " k"]
    beta: Float[Array, " n"]
    lam_enc: Float[Array, ""]
    lam_dec: Float[Array, ""]
    solver: str = dataclasses.field(default="banded", metadata=dict(static=True))

    def __post_init__(self):
        # Only check real arrays: JAX rebuilds pytrees with tracers and placeholders too.
        if self.solver not in _SOLVERS:
            raise ValueError(f"`solver` must be one of {_SOLVERS}; got {self.solver!r}")
        shapes = [getattr(a, "shape", None) for a in (self.alpha, self.beta)]
        if any(s is None for s in shapes):
            return
        for name, s, lo in (("alpha", shapes[0], 2), ("beta", shapes[1], 2)):
            if len(s) != 1 or s[0] < lo:
                raise ValueError(f"`{name}` must be 1-D with at least {lo} nodes; got shape {s}")
        if is_concrete(self.alpha, self.beta, self.lam_enc, self.lam_dec) and all(
            isinstance(a, jax.Array | np.ndarray)
            for a in (self.alpha, self.beta, self.lam_enc, self.lam_dec)
        ):
            dtype = _float_dtype(self.alpha, self.beta)
            _as_nodes(self.alpha, "alpha", dtype)
            _as_nodes(self.beta, "beta", dtype)
            _as_lam(self.lam_enc, "lam_enc", dtype)
            _as_lam(self.lam_dec, "lam_dec", dtype)

    # -- constructors -----------------------------------------------------------------------

    @classmethod
    def chebyshev(
        cls,
        *,
        num_inputs: int,
        num_workers: int,
        lam_enc: float | ArrayLike = 0.0,
        lam_dec: float | ArrayLike = 0.0,
        solver: str = "banded",
        dtype=None,
    ) -> SplineCode:
        """The papers' placement: ``alpha`` Chebyshev-1 (K points), ``beta`` Chebyshev-2 (N).

        Args:
            num_inputs: ``K ≥ 2``.
            num_workers: ``N ≥ 2``.
            lam_enc: encoder smoothing (default 0: natural interpolation, the noiseless optimum).
            lam_dec: decoder smoothing (default 0; the noiseless theory's optimum).
            solver: see the class docstring.
            dtype: float dtype of the leaves (default: JAX's default float).
        """
        for name, v in (("num_inputs", num_inputs), ("num_workers", num_workers)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 2:
                raise ValueError(f"`{name}` must be an int >= 2; got {v!r}")
        dtype = jnp.dtype(dtype) if dtype is not None else jnp.zeros(()).dtype
        return cls(
            alpha=chebyshev_nodes(num_inputs, kind=1, dtype=dtype),
            beta=chebyshev_nodes(num_workers, kind=2, dtype=dtype),
            lam_enc=jnp.asarray(lam_enc, dtype),
            lam_dec=jnp.asarray(lam_dec, dtype),
            solver=solver,
        )

    @property
    def num_inputs(self) -> int:
        return self.alpha.shape[0]

    @property
    def num_workers(self) -> int:
        return self.beta.shape[0]

    # -- encoder ----------------------------------------------------------------------------

    def encoder_matrix(self) -> Float[Array, "n k"]:
        """``E`` with ``X~ = E X``: the encoder spline's values at ``beta`` per unit input."""
        e, status = smoother_matrix_with_status(
            self.alpha, self.beta, self.lam_enc, solver=self.solver
        )
        raise_if_bad(status, "SplineCode.encoder_matrix")
        return e

    def encode(self, x: Shaped[ArrayLike, "k ..."]) -> Float[Array, "n ..."]:
        """Coded inputs ``x~_n = u_enc(beta_n)`` for ``x`` of shape ``(K, ...)`` → ``(N, ...)``."""
        x = check_inputs(x, self.num_inputs)
        e = self.encoder_matrix()
        return apply_rows(e.astype(_float_dtype(e, x)), x.astype(_float_dtype(e, x)))

    # -- decoder ----------------------------------------------------------------------------

    def decoder_matrix(self, mask: Bool[ArrayLike, " n"]) -> Float[Array, "k n"]:
        """``D(mask)`` with ``Y^ = D Y~``; columns of stragglers are zero."""
        _, mask = check_outputs(jnp.zeros((self.num_workers,)), mask, self.num_workers)
        d, status = smoother_matrix_with_status(
            self.beta, self.alpha, self.lam_dec, mask, solver=self.solver
        )
        raise_if_bad(status, "SplineCode.decoder_matrix")
        return d

    def decode_with_status(
        self, y: Shaped[ArrayLike, "n ..."], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """Decode and report value problems as data (never raises on them).

        Returns ``Decoded(value, status)``; use under ``jit``/``vmap`` over masks.
        """
        y, mask = check_outputs(y, mask, self.num_workers)
        spline = fit_smoothing_spline_with_status(
            self.beta, y, self.lam_dec, mask, solver=self.solver
        )
        return Decoded(spline(self.alpha), spline.status)

    def decode(self, y: Shaped[ArrayLike, "n ..."], mask: Bool[ArrayLike, " n"]) -> Array:
        """Estimates ``u_dec(alpha_k) ≈ f(x_k)`` from worker outputs ``y`` of shape ``(N, ...)``.

        Only live workers (``mask[n] = True``) are used; whatever a straggler returned, even
        NaN/Inf, changes neither the result nor its gradient.

        Raises:
            ValueError/TypeError: wrong shapes, a non-boolean mask.
            GCCValueError: in eager calls, fewer than 2 live workers or NaN/Inf from a live
                worker. Under ``jit``/``vmap`` the value is NaN instead; use
                :meth:`decode_with_status` to get the per-pattern status.
        """
        out = self.decode_with_status(y, mask)
        raise_if_bad(out.status, "SplineCode.decode")
        return out.value
