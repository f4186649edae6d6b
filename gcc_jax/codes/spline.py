"""GCC: the smoothing-spline code (encoder and decoder are cubic smoothing splines)."""

import dataclasses
import math
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .._core.cache import IdentityCache
from .._core.checks import as_lam, as_mask, as_mask_rows, check_outputs, float_dtype
from .._core.types import Array, ArrayLike, Bool, Float, Int, Real, Shaped
from ..spline._downdate import MAX_WORKERS, MIN_WORKERS, SIZES, decode_chunks, plan
from ..spline._fit import (
    as_solver,
    fit_smoothing_spline_with_status,
    resolve_solver,
    smoother_matrix_with_status,
)
from ._base import AbstractNodeCode, Decoded, jit_method, pytree_dataclass

# downdate plans by code arrays and straggler count (SplineCode.decode_plan)
_PLANS = IdentityCache(size=8)


@pytree_dataclass
class SplineCode(AbstractNodeCode):
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

    min_live: ClassVar[int] = 2  # a smoothing spline needs 2 live points

    alpha: Float[ArrayLike, " k"]  # a JAX or NumPy array
    beta: Float[ArrayLike, " n"]
    lam_enc: Real[ArrayLike, ""]  # any real scalar; stored as an array leaf (__post_init__)
    lam_dec: Real[ArrayLike, ""]
    solver: str = dataclasses.field(default="kalman", metadata=dict(static=True))

    def __post_init__(self):
        # Runs when a user builds the code, never when JAX rebuilds it (pytree_dataclass).
        object.__setattr__(self, "solver", as_solver(self.solver))  # "banded" -> "kalman"
        self.check_nodes()
        dtype = float_dtype(*(a for a in (self.alpha, self.beta) if hasattr(a, "dtype")))
        for name in ("lam_enc", "lam_dec"):
            # a real scalar, finite and >= 0 when concrete; a Python number becomes an array
            # leaf (dataclasses.replace(code, lam_dec=1e-4) included): a Python float leaf
            # would retrace jit on every new value
            value = getattr(self, name)
            lam = as_lam(value, name, dtype)
            if not isinstance(value, jax.Array | np.ndarray):
                object.__setattr__(self, name, lam)

    # -- constructors -----------------------------------------------------------------------

    @classmethod
    def chebyshev(
        cls,
        *,
        num_inputs: int,
        num_workers: int,
        lam_enc: float | ArrayLike = 0.0,
        lam_dec: float | ArrayLike = 0.0,
        solver: str = "kalman",
        dtype=None,
    ) -> "SplineCode":
        """The papers' placement: ``alpha`` Chebyshev-1 (K points), ``beta`` Chebyshev-2 (N).

        Args:
            num_inputs: ``K ≥ 2``.
            num_workers: ``N ≥ 2``.
            lam_enc: encoder smoothing (default 0: natural interpolation, the noiseless optimum).
            lam_dec: decoder smoothing (default 0; the noiseless theory's optimum).
            solver: see the class docstring.
            dtype: float dtype of the leaves (default: JAX's default float).
        """
        alpha, beta = cls.chebyshev_nodes(num_inputs, num_workers, dtype)
        dtype = alpha.dtype
        return cls(
            alpha=alpha,
            beta=beta,
            lam_enc=as_lam(lam_enc, "lam_enc", dtype),
            lam_dec=as_lam(lam_dec, "lam_dec", dtype),
            solver=solver,
        )

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

        ``u_dec(alpha_k)`` of the smoothing spline through the live ``(beta_n, y_n)``. With
        fewer columns than workers each column is fitted directly (O(n) per column); with more
        (many outputs or jobs) the ``(k, n)`` decoder matrix is formed once and applied — the
        same linear map, so the same value. Status flags: ``TOO_FEW_LIVE`` (fewer than 2 live
        workers), ``NONFINITE_DATA``, ``BAD_NODES``, ``NEGATIVE_LAM``, ``NONFINITE_RESULT``.
        Returns ``Decoded(value, status)``; use under ``jit``/``vmap`` over masks.
        """
        y, mask = check_outputs(y, mask, self.num_workers)
        if math.prod(y.shape[1:]) > self.num_workers:
            return self.decode_by_matrix_with_status(y, mask)
        if resolve_solver(self.solver, self.num_workers, math.prod(y.shape[1:])) != "kalman":
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

        One chunk of :meth:`decode_chunks`: for at least 32 masks that all have the same
        number S ≤ 24 of stragglers and 64 ≤ N ≤ 1024, each mask's fit is a rank-S downdate of
        one full fit (:mod:`gcc_jax.spline._downdate`: an S × S inverse per mask); otherwise the masks
        are the vectorised axis of one forward/backward smoother pass
        (:mod:`gcc_jax.spline._kalman`) that returns the spline only at ``alpha``. Values
        ``(p, k, *m)`` and statuses ``(p,)`` equal the per-mask decode's (same flags; NaN where
        not OK); ``solver="auto"`` takes this path too. Falls back to ``vmap(decode_with_status)``
        for the kernel and parallel solvers and for more columns than workers (the
        decoder-matrix path).

        Example:
            >>> import jax, jax.numpy as jnp, gcc_jax as gcc
            >>> code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=16)
            >>> y = code.worker_outputs(jnp.sin, jnp.linspace(-1.0, 1.0, 4)[:, None])
            >>> masks = gcc.sample_masks(jax.random.key(0), 16, num=8, stragglers=3)
            >>> out = code.decode_batch_with_status(y, masks)
            >>> loop = jnp.stack([code.decode_with_status(y, m).value for m in masks])
            >>> out.value.shape, bool(jnp.allclose(out.value, loop, atol=1e-6))
            ((8, 4, 1), True)
        """
        n = self.num_workers
        y = check_outputs(y, jnp.ones((n,), bool), n)[0]
        if self.solver in ("kernel", "parallel") or math.prod(y.shape[1:]) > n:
            return super().decode_batch_with_status(y, masks)
        chunks = as_mask_rows(masks, n)[None]
        return jax.tree.map(lambda a: a[0], self.decode_chunks(y, chunks, lambda d: d))

    def decode_chunks(
        self,
        y: Shaped[ArrayLike, "n ..."],
        chunks: Bool[ArrayLike, "g p n"],
        then: Callable[[Decoded], Any],
        plan: Any = None,
    ) -> Any:
        """``then(decode_batch_with_status(y, chunk))`` for every chunk, the shared work done once.

        See :meth:`gcc_jax.AbstractCode.decode_chunks`: when the chunks pass the static gates of
        :mod:`gcc_jax.spline._downdate`, the fit with every worker live, for the first chunk's first
        valid mask's number of stragglers, is computed once and every chunk is downdated from
        it; the chunks whose masks do not fit it are then smoothed by the Kalman pass (the same
        values to rounding). With a ``plan`` (:meth:`decode_plan`) for this code and that number
        of stragglers, the fit's part that does not depend on ``y`` is taken from it.
        """
        n = self.num_workers
        y = check_outputs(y, jnp.ones((n,), bool), n)[0]
        if self.solver in ("kernel", "parallel") or math.prod(y.shape[1:]) > n:
            return AbstractNodeCode.decode_chunks(self, y, chunks, then)
        chunks = as_mask_rows(chunks, n, "chunks", chunked=True)
        dtype = float_dtype(self.beta, y)

        def decoded(values, status):
            shape = (values.shape[0], self.num_inputs, *y.shape[1:])
            return then(Decoded(values.reshape(shape), status))

        return decode_chunks(
            self.beta.astype(dtype),
            self.lam_dec.astype(dtype),
            y.reshape(n, -1).astype(dtype),
            self.alpha.astype(dtype),
            chunks,
            decoded,
            plan,
        )

    def decode_plan(self, masks: Bool[np.ndarray, "p n"]) -> Any:
        """The downdate's full fit without the outputs (an ``Operator`` of
        :mod:`gcc_jax.spline._downdate`: its Kalman pass of the identity and interpolation matrix)
        for the first mask's number of stragglers, when the downdate applies to ``masks`` (as
        in :meth:`cpu_compiler_options`); else ``None``
        (:meth:`gcc_jax.AbstractCode.decode_plan`).

        Computed once per code object and straggler count and kept while the code's arrays
        live, so Monte Carlo calls with the same code do not redo it: 0.2–0.6 ms a call at
        N = 100 on a 2-core CPU, 10–15% of :func:`gcc_jax.monte_carlo_loss` at 4,096 masks
        (``bench/README.md``). :meth:`decode_chunks` checks in its compiled code that the plan
        was made from its own nodes, ``λ`` and query points (and recomputes the fit if not).

        Example:
            >>> import numpy as np, gcc_jax as gcc
            >>> code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=100)
            >>> masks = np.arange(100)[None, :] >= 10  # S = 10
            >>> plan = code.decode_plan(masks)
            >>> plan.p.shape, int(plan.dead), code.decode_plan(masks) is plan
            ((100, 100), 10, True)
        """
        if not self._downdate_applies(masks):
            return None
        dead = int(np.sum(~np.asarray(masks)[0]))
        leaves = (self.beta, self.lam_dec, self.alpha)
        return _PLANS(leaves, dead, lambda: plan(*leaves, jnp.int32(dead)))

    def cpu_compiler_options(self, masks: Bool[np.ndarray, "p n"]) -> dict[str, Any]:
        """XLA's classic CPU emitters when the downdate decoder applies to ``masks`` (Kalman
        solver, ``64 ≤ N ≤ 1024``, the first mask's stragglers ``S ≤ 24``), else none
        (:meth:`gcc_jax.AbstractCode.cpu_compiler_options`).

        Measured with jaxlib 0.10.2 on 2 cores (``monte_carlo_loss``, float64, one process per
        setting, default emitters → classic): on the downdate, N = 100, S = 10: 218,742 →
        237,183 masks/s; N = 256, S = 20: 55,028 → 67,426; N = 512, S = 10: 85,036 → 85,442;
        N = 64, S = 6: 262,464 → 259,798; N = 1024, S = 10: 32,679 → 30,971. On the Kalman pass
        (S beyond the downdate's) the default emitters are faster: N = 100, S = 30: 63,637
        against 56,567; N = 512, S = 50: 16,059 against 13,342; N = 1000, S = 100: 8,337
        against 7,028. Either way the classic ones compile in 1.4–2 s less and with about 400 MB
        less peak memory (N = 100, S = 10: 890 → 467 MB). ``XLA_FLAGS`` naming the option wins
        (:func:`gcc_jax.evaluation._xla_flags.compiler_options`).

        Example:
            >>> import numpy as np, gcc_jax as gcc
            >>> code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=100)
            >>> code.cpu_compiler_options(np.ones((4, 100), bool).cumsum(1) > 40)  # S = 40
            {}
        """
        from ..evaluation._xla_flags import FLAG, compiler_options  # (no evaluation at import)

        return compiler_options(FLAG) if self._downdate_applies(masks) else {}

    def cpu_chunk_size(self, masks: Bool[np.ndarray, "p n"]) -> int | None:
        """64 masks per chunk when the downdate decoder applies to ``masks`` (as in
        :meth:`cpu_compiler_options`), else the evaluator's default
        (:meth:`gcc_jax.AbstractCode.cpu_chunk_size`).

        Measured with jaxlib 0.10.2 on 2 cores (``monte_carlo_loss``, 4,096 masks, 64 against
        256 masks per chunk, masks/s): N = 100, S = 10, float64: 375,000 against 285,000 on one
        CPU device, 597,000 against 540,000 on two; float32: 426,000 against 390,000 and
        669,000 against 642,000; N = 100, S = 24: 94,000 against 81,000; N = 256, S = 20:
        85,200 against 74,500. Until the dead workers were found by bit scans, N = 1024 kept
        256 (64,700 against 75,500 at S = 10: the per-chunk scan over the workers dominated);
        since, two devices: N = 1024, S = 10, float64 252,000 against 247,000, float32 473,000
        against 461,000; S = 24 float64 119,000 against 84,000, float32 208,000 against 217,000;
        N = 512, S = 10, float64 575,000 against 524,000.

        Example:
            >>> import numpy as np, gcc_jax as gcc
            >>> code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=100)
            >>> code.cpu_chunk_size(np.arange(100)[None, :] >= 10)  # S = 10
            64
        """
        return 64 if self._downdate_applies(masks) else None

    def _downdate_applies(self, masks: Bool[np.ndarray, "p n"]) -> bool:
        """Whether the downdate decoder's static gates let it decode ``masks``: Kalman solver,
        ``64 ≤ N ≤ 1024``, the first mask's stragglers ``S ≤ 24`` (:mod:`gcc_jax.spline._downdate`)."""
        masks = np.asarray(masks)
        if self.solver != "kalman" or not MIN_WORKERS <= self.num_workers <= MAX_WORKERS:
            return False
        return bool(masks.ndim == 2 and masks.shape[0] > 0 and np.sum(~masks[0]) <= SIZES[-1])
