"""Byzantine-robust GCC: the paper's adversarial λ rule and robust smoothing-spline decoders.

Adversarial setting (Moradi, Akbarinodehi & Maddah-Ali, "General Coded Computing: Adversarial
Settings", arXiv 2502.08058): up to ``γ`` of the ``N`` workers are adversarial and may return
*anything* within ``[−M, M]^m``; honest workers return ``f(x~_n)``. The paper's decoder is the
ordinary GCC smoothing spline with ``λ_dec`` chosen for ``(N, γ, M)`` (:func:`adversarial_lam_dec`);
its worst-case error decays like ``N^{6/5 (a − 1)}`` when ``γ = O(N^a)``.

Beyond the paper, :class:`RobustSplineCode` decodes with an M-estimator: an iteratively
reweighted smoothing spline (Huber or Tukey weights, residual scale by the MAD) or a trimmed
spline (drop the largest residuals), built on weighted smoothing splines. See docs/adversarial.md
for the derivations.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core.checks import (
    as_float_array,
    as_int,
    as_mask,
    check_outputs,
    float_dtype,
)
from .._core.sanitise import sanitise
from .._core.status import Status, combine, is_concrete
from .._core.types import Array, ArrayLike, Bool, Float, Int, Real, Shaped
from ..spline import fit_smoothing_spline_with_status
from ._base import AbstractCode, Decoded, Encoded, NodeSizes, jit_method, pytree_dataclass
from .spline import SplineCode, SplineLeaves

__all__ = ["RobustSplineCode", "adversarial_lam_dec"]

_LOSSES = ("huber", "tukey", "trim")
_HUBER, _TUKEY, _TRIM = range(3)  # a code stores its loss as this index (an int32 array leaf)
_TUNING = {"huber": 1.345, "tukey": 4.685, "trim": 0.0}
_MAD = 1.482602218505602  # 1 / Φ⁻¹(3/4): the MAD of a standard normal sample is 1/_MAD


def adversarial_lam_dec(
    num_workers: int, num_adversaries: int, bound: float, *, constant: float = 1.0
) -> float:
    """The decoder smoothing parameter for ``γ`` adversaries bounded by ``M`` among ``N`` workers.

    ``λ_dec = c · (γ M / N)^{8/5}`` (``0`` when ``γ = 0``: the noiseless optimum).

    Derivation (a heuristic that reproduces the paper's rate, not the paper's proof). The decoder
    is linear, ``u_dec = H y``, so an attack ``δ`` (``γ`` non-zero rows, each within ``2M``)
    adds ``g = H δ``, the smoothing spline of ``δ``. Its fitting inequality
    ``‖g‖²_N + λ J(g) ≤ (1/N) Σ_i δ_i g(β_i) ≤ (2γM/N) ‖g‖_∞`` together with the kernel bound
    ``‖g‖²_∞ ≲ λ^{-1/4} (‖g‖²_N + λ J(g))`` (the reproducing kernel of that norm has diagonal
    ``~λ^{-1/4}``) gives ``‖g‖²_∞ ≲ (γM/N)² λ^{-1/2}``. The smoothing bias of a function with
    ``‖(f∘u_enc)''‖² = J`` is ``≲ λ^{3/4} J`` (the same two terms as LeTCC's Theorem 2, with the
    noise ``σ²/N`` replaced by ``(γM/N)²``). Balancing ``λ^{3/4} J = (γM/N)² λ^{-1/2}`` gives
    ``λ ∝ (γM/N)^{8/5} J^{-4/5}`` and an error ``∝ (γM/N)^{6/5}``: with ``γ = N^a`` that is the
    paper's ``N^{6/5 (a−1)}``. ``constant`` absorbs ``J^{-4/5}`` and the kernel constants (choose
    it on held-out data, never on the test job).

    Args:
        num_workers: ``N ≥ 1``.
        num_adversaries: ``γ ≥ 0``.
        bound: ``M > 0``, the adversaries' range ``[−M, M]`` per output coordinate.
        constant: ``c > 0``.

    Returns:
        ``λ_dec`` as a Python float (use it as ``SplineCode.chebyshev(..., lam_dec=...)``).

    Example:
        >>> import gcc_jax as gcc
        >>> lam = gcc.adversarial_lam_dec(640, 1, 1.0)
        >>> round(lam / (1 / 640) ** 1.6, 12)
        1.0
        >>> code = gcc.SplineCode.chebyshev(num_inputs=10, num_workers=640, lam_dec=lam)
    """
    n = as_int(num_workers, "num_workers", 1)
    g = as_int(num_adversaries, "num_adversaries", 0, n)
    m = float(bound)
    if not np.isfinite(m) or m <= 0:
        raise ValueError(f"`bound` must be finite and > 0; got {bound!r}")
    c = float(constant)
    if not np.isfinite(c) or c <= 0:
        raise ValueError(f"`constant` must be finite and > 0; got {constant!r}")
    return c * (g * m / n) ** 1.6


# ------------------------------------------------------------------------------------------------
# weights


def _masked_median(r: Array, mask: Array) -> Array:
    """Median of ``r`` over the live entries (``r`` finite where ``mask``)."""
    k = jnp.sum(mask)
    s = jnp.sort(jnp.where(mask, r, jnp.inf))
    lo = s[jnp.clip((k - 1) // 2, 0, r.shape[0] - 1)]
    hi = s[jnp.clip(k // 2, 0, r.shape[0] - 1)]
    return 0.5 * (lo + hi)


def robust_weights(
    residual: Float[Array, " n"],
    mask: Bool[Array, " n"],
    kind: Int[ArrayLike, ""],
    tuning: Real[ArrayLike, ""],
    trim: int,
    floor,
) -> Float[Array, " n"]:
    """IRLS weights ``w_i = ψ(u_i)/u_i`` of the live workers from residual norms ``r_i``.

    ``kind`` is the loss's index in ``("huber", "tukey", "trim")`` (data, not structure: the
    three decoders share one compiled program; every rule is computed and ``kind`` selects
    one, with harmless constants in the unselected ones so that their gradients stay finite).
    ``u_i = r_i / σ``, ``σ = max(1.4826 · median_live(r), floor)`` (MAD about 0: the residuals
    of a good fit are centred; ``floor`` = the code's ``min_scale`` or round-off). Huber:
    ``w = min(1, c/u)``; Tukey: ``w = (1 − (u/c)²)²`` for ``u < c`` else 0; trim: 1 for the
    ``max(n_live − trim, 2)`` smallest residuals, 0 for the rest.
    Dead workers get 0.
    """
    kind = jnp.asarray(kind)
    dtype = residual.dtype
    n_live = jnp.sum(mask)
    order = jnp.argsort(jnp.where(mask, residual, jnp.inf))
    rank = jnp.argsort(order)
    trimmed = (mask & (rank < jnp.maximum(n_live - trim, 2))).astype(dtype)
    sigma = jnp.maximum(_MAD * _masked_median(residual, mask), floor)
    u = residual / sigma
    c_huber = jnp.where(kind == _HUBER, tuning, _TUNING["huber"]).astype(dtype)
    big = u > c_huber  # double where: no infinite gradient of c/u at u = 0
    huber = jnp.where(big, c_huber / jnp.where(big, u, 1.0), 1.0)
    c_tukey = jnp.where(kind == _TUKEY, tuning, _TUNING["tukey"]).astype(dtype)
    z = jnp.minimum(u / c_tukey, 1.0)
    tukey = (1.0 - z * z) ** 2
    w = jnp.where(kind == _HUBER, huber, tukey)
    return jnp.where(kind == _TRIM, trimmed, jnp.where(mask, w, 0.0).astype(dtype))


def _weighted_fit(beta, y_flat, lam, w, alpha, solver):
    """Weighted smoothing spline through ``(beta, y)``: values at ``beta`` and at ``alpha``.

    :func:`gcc_jax.fit_smoothing_spline` with ``weights=w``: minimises
    ``(1/Σw) Σ w_i (y_i − s(β_i))² + λ ∫ s''²``.
    """
    spline = fit_smoothing_spline_with_status(beta, y_flat, lam, weights=w, solver=solver)
    return spline.values, spline(alpha)


@functools.partial(jax.jit, static_argnames=("iterations", "trim", "min_scale", "solver"))
def robust_fit(
    beta: Array,
    y_flat: Array,
    lam: Array,
    mask: Array,
    alpha: Array,
    *,
    kind: Int[ArrayLike, ""],
    iterations: int,
    tuning: Real[ArrayLike, ""],
    trim: int,
    min_scale: float = 0.0,
    solver: str = "kalman",
) -> tuple[Array, Array]:
    """Fixed-count IRLS: decoded values at ``alpha`` ``(q, r)`` and the final weights ``(n,)``.

    Start from the ordinary (mask-weighted) smoothing spline; each step computes residual norms
    ``r_i = ‖y_i − s(β_i)‖ / √m`` at the live workers, reweights (:func:`robust_weights`) and
    refits. ``kind`` is the loss's index in ``("huber", "tukey", "trim")``, an array (the three
    losses share one compiled program). Tukey runs its first ``iterations // 2`` steps with
    Huber weights (a redescending loss needs a robust start). Every step is a fixed-shape
    weighted fit, so the whole decoder is one ``lax.fori_loop``: jit/vmap-able and
    differentiable.
    """
    dtype = y_flat.dtype
    m = y_flat.shape[1]
    w0 = mask.astype(dtype)
    live_y = jnp.where(mask[:, None], y_flat, 0.0)
    scale = jnp.sqrt(jnp.sum(live_y * live_y) / jnp.maximum(jnp.sum(w0) * m, 1.0))
    floor = jnp.maximum(jnp.finfo(dtype).eps * 16 * (scale + jnp.finfo(dtype).tiny), min_scale)

    def residuals(w):
        at_nodes, _ = _weighted_fit(beta, y_flat, lam, w, alpha, solver)
        d = jnp.where(mask[:, None], y_flat - at_nodes, 0.0)
        ss = jnp.sum(d * d, axis=1) / m
        pos = ss > 0  # sqrt's gradient at 0 is infinite: keep zeros out of it
        return jnp.where(pos, jnp.sqrt(jnp.where(pos, ss, 1.0)), 0.0)

    kind = jnp.asarray(kind)
    tuning = jnp.asarray(tuning, dtype)

    def step(i, w):
        # Tukey's first half: Huber weights with Huber's constant
        start = (kind == _TUKEY) & (i < iterations // 2)
        step_kind = jnp.where(start, _HUBER, kind)
        step_tuning = jnp.where(start, jnp.asarray(_TUNING["huber"], dtype), tuning)
        return robust_weights(residuals(w), mask, step_kind, step_tuning, trim, floor)

    w = lax.fori_loop(0, iterations, step, w0)
    _, at_alpha = _weighted_fit(beta, y_flat, lam, w, alpha, solver)
    return at_alpha, w


# ------------------------------------------------------------------------------------------------
# the code


@pytree_dataclass
class RobustSplineCode(SplineLeaves, NodeSizes, AbstractCode):
    """GCC with a robust (M-estimator) smoothing-spline decoder against Byzantine workers.

    Encoder: GCC's (``X~ = E X``, the smoothing spline through ``(alpha_k, x_k)`` with
    ``lam_enc``; identical to :class:`gcc_jax.SplineCode`). Decoder: the weighted smoothing
    spline ``u_dec`` minimising ``(1/Σw) Σ_n w_n ‖y~_n − u(beta_n)‖² + lam_dec ∫ ‖u''‖²`` with
    weights found by ``iterations`` steps of iteratively reweighted least squares, starting
    from the live mask:

    * ``"huber"``: ``w_n = min(1, c/u_n)`` (``c = 1.345``), a convex loss, bounded influence;
    * ``"tukey"``: Tukey's biweight ``w_n = (1 − (u_n/c)²)²₊`` (``c = 4.685``), which rejects
      outliers completely (first half of the steps use Huber weights as a robust start);
    * ``"trim"``: ``w_n = 1`` for the ``n_live − trim`` live workers with the smallest residuals,
      0 for the rest (least trimmed squares by alternation); with fewer than ``trim + 2`` live
      workers it keeps the 2 best (a spline needs 2), so it decodes whatever a spline decodes
      (deadline decoding, and services that treat codes decoding from fewer than ``K`` results
      as approximate, rely on this).

    ``u_n = r_n/σ`` with ``r_n = ‖y~_n − u_dec(beta_n)‖/√m`` the worker's RMS residual over the
    output coordinates (an adversary corrupts a whole worker, so one weight per worker) and
    ``σ = 1.4826 · median_live(r)`` (MAD about 0, with a round-off floor). ``lam_dec`` must be
    positive for the residuals to say anything (at ``λ = 0`` the spline interpolates every
    worker, outliers included); :func:`adversarial_lam_dec` gives the paper's choice.

    The decoder is non-linear in ``y~`` (this is an :class:`~gcc_jax.AbstractCode`, not a linear
    code) but a fixed-count loop of fixed-shape fits: jit/vmap-able over masks, differentiable
    in ``y~`` and ``lam_dec`` (which is what the gradient attack of
    :func:`gcc_jax.attack` uses against it). ``alpha``, ``beta``, ``lam_enc``, ``lam_dec``,
    ``loss`` (stored as its index in ``("huber", "tukey", "trim")``, an int32 array; the name is
    :attr:`loss_name`) and ``tuning`` are array leaves, so the three losses share every compiled
    program (a decode, a gradient attack) at the same sizes; ``iterations``, ``trim``,
    ``min_scale`` and ``solver`` are static.

    Attributes:
        alpha: ascending input nodes ``(K,)``.
        beta: ascending worker nodes ``(N,)``.
        lam_enc: encoder smoothing ``≥ 0``.
        lam_dec: decoder smoothing ``≥ 0``.
        loss: ``"huber"``, ``"tukey"`` or ``"trim"`` (or its index 0, 1, 2); stored as the
            index, an int32 array leaf.
        iterations: IRLS steps (fixed; ``0`` = the plain :class:`SplineCode` decoder).
        tuning: the Huber/Tukey constant ``c`` (in units of σ; ``None``: 1.345 / 4.685; unused
            by ``"trim"``); an array leaf.
        trim: workers dropped by ``"trim"`` (typically ``γ``).
        min_scale: a floor on the residual scale ``σ``, in output units (default 0: only a
            round-off floor). With noiseless workers the honest residuals are pure smoothing
            bias, concentrated where the spline bends most; a MAD scale of such tiny, structured
            residuals lets Huber/Tukey down-weight honest workers. Set it to the residual level
            that does not matter for your outputs (e.g. ``1e-2`` for probabilities).
        solver: the spline solver of the encoder and of every weighted fit (see
            :class:`gcc_jax.SplineCode`).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.RobustSplineCode.chebyshev(
        ...     num_inputs=5, num_workers=40, loss="tukey",
        ...     lam_dec=gcc.adversarial_lam_dec(40, 2, 2.0, constant=1e-3))
        >>> x = jnp.linspace(-1.0, 1.0, 5)[:, None]
        >>> y = code.worker_outputs(jnp.sin, x).at[jnp.array([7, 20])].set(2.0)  # 2 liars
        >>> err = jnp.abs(code.decode(y, jnp.ones(40, bool)) - jnp.sin(x)).max()
        >>> bool(err < 1e-2)
        True
    """

    loss: str | Int[ArrayLike, ""] = "huber"  # stored as its index, an int32 array leaf
    iterations: int = dataclasses.field(default=10, metadata=dict(static=True))
    tuning: Real[ArrayLike, ""] | None = None  # stored as an array leaf
    trim: int = dataclasses.field(default=0, metadata=dict(static=True))
    min_scale: float = dataclasses.field(default=0.0, metadata=dict(static=True))
    solver: str = dataclasses.field(
        default=SplineCode.__dataclass_fields__["solver"].default, metadata=dict(static=True)
    )

    def __post_init__(self):
        dtype = self._check_leaves()
        loss, name = self.loss, None
        if isinstance(loss, str):
            if loss not in _LOSSES:
                raise ValueError(f"`loss` must be one of {_LOSSES}; got {loss!r}")
            name, loss = loss, jnp.asarray(_LOSSES.index(loss), jnp.int32)
        elif isinstance(loss, bool | np.bool_ | float):
            raise TypeError(f"`loss` must be one of {_LOSSES}; got {loss!r}")
        elif isinstance(loss, int | np.integer | np.ndarray | jax.Array):
            loss = jnp.asarray(loss)
            if loss.shape != () or not jnp.issubdtype(loss.dtype, jnp.integer):
                raise TypeError(f"`loss` must be one of {_LOSSES} or its index; got {loss!r}")
            loss = loss.astype(jnp.int32)
            if is_concrete(loss):
                if not 0 <= int(loss) < len(_LOSSES):
                    raise ValueError(f"`loss` must be one of {_LOSSES}; got index {int(loss)}")
                name = _LOSSES[int(loss)]
        else:
            raise TypeError(f"`loss` must be one of {_LOSSES}; got {type(loss).__name__}")
        object.__setattr__(self, "loss", loss)
        object.__setattr__(self, "iterations", as_int(self.iterations, "iterations", 0))
        object.__setattr__(self, "trim", as_int(self.trim, "trim", 0))
        tuning = self.tuning
        if tuning is None:
            if name is None:
                raise TypeError("`tuning` must be given when `loss` is a traced index")
            tuning = _TUNING[name]
        if isinstance(tuning, bool | np.bool_ | str | bytes):
            raise TypeError(f"`tuning` must be a positive number; got {self.tuning!r}")
        if isinstance(tuning, int | float | np.number):
            value = float(tuning)
            if name != "trim" and not (np.isfinite(value) and value > 0):
                raise ValueError(f"`tuning` must be finite and > 0; got {self.tuning!r}")
            tuning = jnp.asarray(value, dtype)
        object.__setattr__(self, "tuning", tuning)
        min_scale = float(self.min_scale)
        if not (np.isfinite(min_scale) and min_scale >= 0):
            raise ValueError(f"`min_scale` must be finite and >= 0; got {self.min_scale!r}")
        object.__setattr__(self, "min_scale", min_scale)
        if hasattr(self.beta, "shape") and self.trim > self.beta.shape[0] - 2:
            raise ValueError(
                f"`trim` must leave at least 2 workers (N={self.beta.shape[0]}); got {self.trim}"
            )

    # -- constructors -----------------------------------------------------------------------

    @classmethod
    def chebyshev(
        cls,
        *,
        num_inputs: int,
        num_workers: int,
        lam_enc: float | ArrayLike = 0.0,
        lam_dec: float | ArrayLike = 0.0,
        loss: str = "huber",
        iterations: int = 10,
        tuning: float | None = None,
        trim: int = 0,
        min_scale: float = 0.0,
        solver: str | None = None,
        dtype=None,
    ) -> "RobustSplineCode":
        """Chebyshev-1 ``alpha`` (K), Chebyshev-2 ``beta`` (N), as :meth:`SplineCode.chebyshev`."""
        base = SplineCode.chebyshev(
            num_inputs=num_inputs,
            num_workers=num_workers,
            lam_enc=lam_enc,
            lam_dec=lam_dec,
            dtype=dtype,
            **({} if solver is None else {"solver": solver}),
        )
        return cls.from_spline(
            base, loss=loss, iterations=iterations, tuning=tuning, trim=trim, min_scale=min_scale
        )

    @classmethod
    def from_spline(
        cls,
        code: SplineCode,
        *,
        loss: str = "huber",
        iterations: int = 10,
        tuning: float | None = None,
        trim: int = 0,
        min_scale: float = 0.0,
    ) -> "RobustSplineCode":
        """The robust decoder on top of an existing :class:`SplineCode` (same leaves)."""
        if not isinstance(code, SplineCode):
            raise TypeError(f"`code` must be a gcc_jax.SplineCode; got {type(code).__name__}")
        return cls(
            alpha=code.alpha,
            beta=code.beta,
            lam_enc=code.lam_enc,
            lam_dec=code.lam_dec,
            loss=loss,
            iterations=iterations,
            tuning=tuning,
            trim=trim,
            min_scale=min_scale,
            solver=code.solver,
        )

    @property
    def loss_name(self) -> str:
        """``"huber"``, ``"tukey"`` or ``"trim"`` (outside ``jit``: :attr:`loss` is an index)."""
        return _LOSSES[int(self.loss)]

    @property
    def spline(self) -> SplineCode:
        """The plain GCC code with the same nodes and λs (the paper's decoder)."""
        return SplineCode(self.alpha, self.beta, self.lam_enc, self.lam_dec, solver=self.solver)

    def available(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, " k"]:
        """Every estimate when at least :attr:`min_live` workers are live."""
        mask = as_mask(mask, self.num_workers)
        return jnp.broadcast_to(jnp.sum(mask) >= self.min_live, (self.num_inputs,))

    # -- encoder / decoder ------------------------------------------------------------------

    @jit_method
    def encode_with_status(self, x: Shaped[ArrayLike, "k *d"]) -> Encoded:
        """GCC's encoder (:meth:`gcc_jax.SplineCode.encode_with_status`)."""
        return self.spline.encode_with_status(x)

    @jit_method
    def decode_with_status(
        self, y: Shaped[ArrayLike, "n *m"], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """The IRLS decode at ``alpha`` with its status; never raises on value problems.

        Status flags: ``TOO_FEW_LIVE`` (fewer than 2 live workers), ``NONFINITE_DATA``
        (NaN/Inf from a live worker: an honest-but-broken worker is reported, not silently
        down-weighted), ``BAD_NODES``, ``NEGATIVE_LAM``, ``NONFINITE_RESULT``.
        """
        y, mask = check_outputs(y, mask, self.num_workers)
        y = as_float_array(y, "y")
        n = self.num_workers
        dtype = float_dtype(self.alpha, self.beta, y)
        y_flat = y.reshape(n, -1).astype(dtype)
        beta, alpha = self.beta.astype(dtype), self.alpha.astype(dtype)
        lam = jnp.asarray(self.lam_dec, dtype)
        # flags, and harmless inputs for a failed pattern (the value is NaN afterwards)
        s = sanitise(beta, lam, y_flat, mask, nodes=(alpha,), min_live=self.min_live)
        status = s.status
        value, _ = self._robust_fit(s.t, s.y, s.lam, s.masks, alpha)
        status = status | combine((~jnp.all(jnp.isfinite(value)), Status.NONFINITE_RESULT))
        value = jnp.where(status == 0, value, jnp.nan)
        return Decoded(value.reshape((self.num_inputs, *y.shape[1:])), status)

    def weights(self, y: Shaped[ArrayLike, "n *m"], mask: Bool[ArrayLike, " n"]) -> Array:
        """The final IRLS weights ``(n,)`` (0 = rejected; useful to flag suspect workers)."""
        y, mask = check_outputs(y, mask, self.num_workers)
        dtype = float_dtype(self.alpha, self.beta, y)
        y_flat = jnp.where(mask[:, None], y.reshape(self.num_workers, -1), 0.0).astype(dtype)
        lam = jnp.asarray(self.lam_dec, dtype)
        _, w = self._robust_fit(
            self.beta.astype(dtype), y_flat, lam, mask, self.alpha.astype(dtype)
        )
        return w

    def _robust_fit(self, beta, y_flat, lam, mask, alpha) -> tuple[Array, Array]:
        """:func:`robust_fit` with this code's loss, iterations, tuning, trim, scale floor and
        solver: the values at ``alpha`` and the final weights."""
        return robust_fit(
            beta,
            y_flat,
            lam,
            mask,
            alpha,
            kind=self.loss,
            iterations=self.iterations,
            tuning=self.tuning,
            trim=self.trim,
            min_scale=self.min_scale,
            solver=self.solver,
        )
