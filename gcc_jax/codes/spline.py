"""GCC: the smoothing-spline code (encoder and decoder are cubic smoothing splines)."""

import dataclasses
import math
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .._core.cache import IdentityCache
from .._core.checks import (
    as_lam,
    as_mask,
    as_mask_rows,
    check_node_leaves,
    check_outputs,
    float_dtype,
)
from .._core.types import Array, ArrayLike, Bool, Float, Int, Real, Shaped
from ..spline import (
    DecodePath,
    DowndatePlan,
    as_solver,
    decode_path,
    downdate_plan,
    fit_smoothing_spline_with_status,
    smooth_chunks,
    smoother_matrix_with_status,
)
from ._base import AbstractNodeCode, Decoded, jit_method, pytree_dataclass

# downdate plans by code arrays and straggler count (SplineCode.decode_init)
_PLANS = IdentityCache(size=8)


@dataclasses.dataclass(frozen=True)
class SplineLeaves:
    """The leaves of the smoothing-spline codes (:class:`SplineCode` and
    :class:`gcc_jax.RobustSplineCode`): input nodes ``alpha``, worker nodes ``beta`` and the
    encoder and decoder smoothing parameters, with their checks."""

    min_live: ClassVar[int] = 2  # a smoothing spline needs 2 live points

    alpha: Float[ArrayLike, " k"]  # a JAX or NumPy array
    beta: Float[ArrayLike, " n"]
    lam_enc: Real[ArrayLike, ""]  # any real scalar; stored as an array leaf (__post_init__)
    lam_dec: Real[ArrayLike, ""]

    def _check_leaves(self):
        """Checks the nodes (1-D, at least 2, strictly increasing and finite when concrete) and
        each λ (a real scalar, finite and ``>= 0`` when concrete); returns the nodes' dtype.

        Runs when a user builds the code, never when JAX rebuilds it (``pytree_dataclass``). A
        λ given as a Python number becomes an array leaf (``dataclasses.replace(code,
        lam_dec=1e-4)`` included): a Python float leaf would retrace jit on every new value.
        """
        check_node_leaves(self, ("alpha", "beta"))
        dtype = float_dtype(*(a for a in (self.alpha, self.beta) if hasattr(a, "dtype")))
        for name in ("lam_enc", "lam_dec"):
            value = getattr(self, name)
            lam = as_lam(value, name, dtype)
            if not isinstance(value, jax.Array | np.ndarray):
                object.__setattr__(self, name, lam)
        return dtype

    @classmethod
    def chebyshev(
        cls,
        *,
        num_inputs: int,
        num_workers: int,
        lam_enc: float | ArrayLike = 0.0,
        lam_dec: float | ArrayLike = 0.0,
        dtype=None,
        **options: Any,
    ) -> "SplineLeaves":
        """The papers' placement: ``alpha`` Chebyshev-1 (K points), ``beta`` Chebyshev-2 (N).

        Args:
            num_inputs: ``K ≥ 2``.
            num_workers: ``N ≥ 2``.
            lam_enc: encoder smoothing (default 0: natural interpolation, the noiseless optimum).
            lam_dec: decoder smoothing (default 0; the noiseless theory's optimum).
            dtype: float dtype of the leaves (default: JAX's default float).
            **options: the class's other fields, by name: ``solver`` (:class:`SplineCode`);
                ``loss``, ``iterations``, ``tuning``, ``trim``, ``min_scale``, ``max_subsets``
                and ``solver`` (:class:`gcc_jax.RobustSplineCode`).
        """
        alpha, beta = AbstractNodeCode.chebyshev_nodes(num_inputs, num_workers, dtype)
        dtype = alpha.dtype
        return cls(
            alpha=alpha,
            beta=beta,
            lam_enc=as_lam(lam_enc, "lam_enc", dtype),
            lam_dec=as_lam(lam_dec, "lam_dec", dtype),
            **options,
        )


@pytree_dataclass
class SplineCode(SplineLeaves, AbstractNodeCode):
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
        solver: ``"kalman"`` (default; O(N) per pattern; ``"banded"`` is an alias),
            ``"parallel"`` (O(log N) depth per pattern: a single large-N decode on a GPU/TPU),
            ``"kernel"`` (the Gram-form reference, O(N³) per pattern) or ``"auto"`` (a single
            decode uses :func:`gcc_jax.resolve_solver`'s pick; a batch of masks the
            batch-native Kalman pass). See :func:`gcc_jax.fit_smoothing_spline`.

    Example:
        >>> import jax, jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=12)
        >>> x = jnp.linspace(0.0, 1.0, 4)[:, None] * jnp.ones((4, 3))
        >>> xt = code.encode(x)                      # (12, 3)
        >>> yh = code.decode(xt, jnp.ones(12, bool))  # f = id, no stragglers
        >>> bool(jnp.allclose(yh, x, atol=1e-3))
        True
    """

    solver: str = dataclasses.field(default="kalman", metadata=dict(static=True))

    def __post_init__(self):
        object.__setattr__(self, "solver", as_solver(self.solver))  # "banded" -> "kalman"
        self._check_leaves()

    # -- encoder ----------------------------------------------------------------------------

    @jit_method
    def encoder_matrix_with_status(self) -> tuple[Float[Array, "n k"], Int[Array, ""]]:
        """``E`` with ``X~ = E X``: the encoder spline's values at ``beta`` per unit input."""
        return smoother_matrix_with_status(self.alpha, self.beta, self.lam_enc, solver=self.solver)

    # -- decoder ----------------------------------------------------------------------------

    @jit_method
    def decoder_matrix_with_status(
        self, mask: Bool[ArrayLike, " n"]
    ) -> tuple[Float[Array, "k n"], Int[Array, ""]]:
        """``D(mask)`` with ``Y^ = D Y~``; columns of stragglers are zero."""
        mask = as_mask(mask, self.num_workers)
        return smoother_matrix_with_status(
            self.beta, self.alpha, self.lam_dec, mask, solver=self.solver
        )

    @jit_method
    def decode_with_status(
        self, y: Shaped[ArrayLike, "n ..."], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """Decode and report value problems as data (never raises on them).

        ``u_dec(alpha_k)`` of the smoothing spline through the live ``(beta_n, y_n)``, by the
        path :func:`gcc_jax.spline.decode_path` picks for one mask: with more columns than
        workers (many outputs or jobs) the ``(k, n)`` decoder matrix is formed once and
        applied; with the ``"parallel"`` or ``"kernel"`` solver (or ``"auto"`` resolving to
        one) each column is fitted directly; else the batch-native Kalman pass of this one
        mask. The same linear map, so the same value. Status flags: ``TOO_FEW_LIVE`` (fewer
        than 2 live workers), ``NONFINITE_DATA``, ``BAD_NODES``, ``NEGATIVE_LAM``,
        ``NONFINITE_RESULT``. Returns ``Decoded(value, status)``; use under ``jit``/``vmap``
        over masks.
        """
        y, mask = check_outputs(y, mask, self.num_workers)
        path = decode_path(self.solver, self.num_workers, columns=math.prod(y.shape[1:]))
        if path is DecodePath.MATRIX:
            return self.decode_by_matrix_with_status(y, mask)
        if path is DecodePath.FIT:
            spline = fit_smoothing_spline_with_status(
                self.beta, y, self.lam_dec, mask, solver=self.solver
            )
            return Decoded(spline(self.alpha), spline.status)
        out = self.decode_batch_with_status(y, mask[None])
        return Decoded(out.value[0], out.status[0])

    @jit_method
    def decode_batch_with_status(
        self, y: Shaped[ArrayLike, "n ..."], masks: Bool[ArrayLike, "p n"]
    ) -> Decoded:
        """:meth:`decode_with_status` for every row of ``masks``, batch-native.

        One chunk of :meth:`decode_chunks`. The path is :func:`gcc_jax.spline.decode_path`'s:
        for at least 32 masks that all have the same number S ≤ 24 of stragglers and
        64 ≤ N ≤ 1024, each mask's fit is a rank-S downdate of one full fit
        (:func:`gcc_jax.spline.smooth_chunks`: an S × S inverse per mask); otherwise the masks
        are the vectorised axis of one forward/backward smoother pass
        (:func:`gcc_jax.spline.smooth_batch_with_status`) that returns the spline only at
        ``alpha``. Values ``(p, k, *m)`` and statuses ``(p,)`` equal the per-mask decode's
        (same flags; NaN where not OK); ``solver="auto"`` takes this path too. The kernel and
        parallel solvers, more columns than workers and a single mask with ``solver="auto"``
        take ``vmap(decode_with_status)``. The example of
        :meth:`gcc_jax.AbstractCode.decode_batch_with_status` holds for this code too.
        """
        n = self.num_workers
        y = check_outputs(y, jnp.ones((n,), bool), n)[0]
        masks = as_mask_rows(masks, n)
        if not self._batch_native(y, masks.shape[0]):
            return super().decode_batch_with_status(y, masks)
        return jax.tree.map(lambda a: a[0], self.decode_chunks(y, masks[None], lambda d: d))

    def decode_chunks(
        self,
        y: Shaped[ArrayLike, "n ..."],
        chunks: Bool[ArrayLike, "g p n"],
        then: Callable[[Decoded], Any],
        state: DowndatePlan | None = None,
    ) -> Any:
        """``then(decode_batch_with_status(y, chunk))`` for every chunk, the shared work done once.

        See :meth:`gcc_jax.AbstractCode.decode_chunks`: on the downdate path
        (:func:`gcc_jax.spline.decode_path`), the fit with every worker live, for the first
        chunk's first valid mask's number of stragglers, is computed once and every chunk is
        downdated from it; the chunks whose masks do not fit it are then smoothed by the Kalman
        pass (the same values to rounding). With a ``state`` (:meth:`decode_init`) for this
        code and that number of stragglers, the fit's part that does not depend on ``y`` is
        taken from it.
        """
        n = self.num_workers
        y = check_outputs(y, jnp.ones((n,), bool), n)[0]
        chunks = as_mask_rows(chunks, n, "chunks", chunked=True)
        if not self._batch_native(y, chunks.shape[1]):
            return AbstractNodeCode.decode_chunks(self, y, chunks, then)
        dtype = float_dtype(self.beta, y)

        def decoded(values, status):
            shape = (values.shape[0], self.num_inputs, *y.shape[1:])
            return then(Decoded(values.reshape(shape), status))

        return smooth_chunks(
            self.beta.astype(dtype),
            self.lam_dec.astype(dtype),
            y.reshape(n, -1).astype(dtype),
            self.alpha.astype(dtype),
            chunks,
            decoded,
            state,
        )

    def decode_init(self, masks: Bool[np.ndarray, "p n"]) -> DowndatePlan | None:
        """The downdate's full fit without the outputs, for the first mask's number of
        stragglers, when :func:`gcc_jax.spline.decode_path` sends chunks of such masks to the
        downdate; else ``None`` (:meth:`gcc_jax.AbstractCode.decode_init`).

        A :class:`gcc_jax.spline.DowndatePlan` (its Kalman pass of the identity and
        interpolation matrix), computed once per code object and straggler count and kept
        while the code's arrays live, so Monte Carlo calls with the same code do not redo it.
        :meth:`decode_chunks` checks in its compiled code that the state was made from its
        own nodes, ``λ`` and query points (and recomputes the fit if not).

        Example:
            >>> import numpy as np, gcc_jax as gcc
            >>> code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=100)
            >>> masks = np.arange(100)[None, :] >= 10  # S = 10
            >>> state = code.decode_init(masks)
            >>> state.p.shape, int(state.dead), code.decode_init(masks) is state
            ((100, 100), 10, True)
            >>> code.decode_init(np.arange(100)[None, :] >= 40) is None  # S = 40: Kalman pass
            True
        """
        masks = np.asarray(masks)
        if masks.ndim != 2 or masks.shape[0] == 0:
            return None
        dead = int(np.sum(~masks[0]))
        path = decode_path(self.solver, self.num_workers, masks=None, stragglers=dead)
        if path is not DecodePath.DOWNDATE:
            return None
        leaves = (self.beta, self.lam_dec, self.alpha)
        return _PLANS(leaves, dead, lambda: downdate_plan(*leaves, jnp.int32(dead)))

    def _batch_native(self, y: Array, num_masks: int) -> bool:
        """Whether :func:`gcc_jax.spline.decode_path` sends ``num_masks`` masks over ``y`` to
        the batch-native decoders (the Kalman pass or the downdate)."""
        path = decode_path(
            self.solver, self.num_workers, columns=math.prod(y.shape[1:]), masks=num_masks
        )
        return path in (DecodePath.KALMAN, DecodePath.DOWNDATE)
