"""The end-to-end loss as one differentiable JAX graph: encoder → worker function → decoder."""

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import (
    as_choice,
    as_float_array,
    as_mask_rows,
    as_masks,
    check_inputs,
    check_instance,
)
from .._core.status import GCCValueError, Status, combine, raising_form
from .._core.types import Array, ArrayLike, Bool, Float, Int
from ..codes import AbstractCode
from ..evaluation import pattern_loss
from ._params import SplineParams

__all__ = ["expected_loss", "expected_loss_with_status", "as_code"]

REDUCTIONS = ("mean", "max")


def as_code(params: Any, name: str = "params") -> Any:
    """A code from :class:`SplineParams` (``to_code()``), or the code itself; anything else
    raises a ``TypeError`` naming ``name``."""
    if isinstance(params, SplineParams):
        return params.to_code()
    what = "gcc_jax code (an AbstractCode) or SplineParams (gcc_jax.tuning.params_from_code)"
    return check_instance(params, AbstractCode, name, what)


def worker_outputs(code: AbstractCode, f: Callable, xs: Array) -> Array:
    """What the workers return for every job: ``xs`` ``(b, K, ...)`` → ``(N, b, *out)``.

    Through :meth:`gcc_jax.AbstractCode.worker_outputs`, so ParM's parity worker runs its
    parity model.
    """
    return jnp.moveaxis(jax.vmap(lambda x: code.worker_outputs(f, x))(xs), 0, 1)


def targets(f: Callable, xs: Array) -> Array:
    """``f(x_k)`` of every job, arranged like the decoder's output: ``(K, b, *out)``."""
    return jnp.moveaxis(jax.vmap(jax.vmap(f))(xs), 0, 1)


def job_pattern_loss(code: AbstractCode, yt: Array, fx: Array, mask: Array) -> tuple[Array, Array]:
    """Loss ``(1/(bK)) Σ_{b,k} ‖f^(x_{bk}) − f(x_{bk})‖²`` of one pattern over ``b`` jobs.

    ``yt`` ``(N, b, *out)``, ``fx`` ``(K, b, *out)``: every job is decoded with the same pattern
    in one decode (the jobs are extra output columns; a spline code then forms its decoder
    matrix once). NaN where the status is not OK (see :func:`gcc_jax.mask_losses`).
    """
    loss, status = pattern_loss(code, yt, fx, mask)
    return loss / fx.shape[1], status


def mask_losses(
    code: AbstractCode, yt: Array, fx: Array, masks: Bool[Array, "p n"]
) -> tuple[Float[Array, " p"], Int[Array, " p"]]:
    """:func:`job_pattern_loss` for every row of ``masks``."""
    return jax.vmap(lambda mask: job_pattern_loss(code, yt, fx, mask))(masks)


def reduce_losses(losses: Array, status: Array, use_max) -> Float[Array, ""]:
    """Mean (or, where ``use_max``, max) of the per-pattern losses over the decodable patterns.

    Patterns with too few live workers (:attr:`Status.TOO_FEW_LIVE`, possible with iid
    stragglers) are left out, as a master would have to wait for them; any other failure (a
    non-finite worker output, a failed solve) makes the result NaN. NaN too when no pattern is
    decodable. ``use_max`` may be traced: both reductions share one compilation.
    """
    skip = status == int(Status.TOO_FEW_LIVE)
    ok = status == 0
    other = jnp.any(~ok & ~skip)
    count = jnp.sum(ok)
    mean = jnp.sum(jnp.where(ok, losses, 0.0)) / jnp.maximum(count, 1)
    worst = jnp.max(jnp.where(ok, losses, -jnp.inf))
    value = jnp.where(use_max, worst, mean)
    return jnp.where(other | (count == 0), jnp.nan, value)


def reduce_status(status: Int[Array, " p"]) -> Int[Array, ""]:
    """The status of :func:`reduce_losses`' value: the flags of the patterns that make it NaN
    (any failure but ``TOO_FEW_LIVE``), and ``TOO_FEW_LIVE`` when no pattern is decodable."""
    skip = status == int(Status.TOO_FEW_LIVE)
    ok = status == 0
    failed = jax.lax.reduce(
        jnp.where(~ok & ~skip, status, 0).astype(jnp.int32),
        jnp.int32(0),
        jax.lax.bitwise_or,
        (0,),
    )
    return failed | combine((~jnp.any(ok) & (failed == 0), Status.TOO_FEW_LIVE))


def _check_expected_loss(params, f, x, masks, *, reduce="mean") -> None:
    """The eager checks of :func:`expected_loss`: a message naming the argument."""
    del f, reduce
    code = as_code(params)
    check_inputs(x, code.num_inputs)
    masks = as_masks(masks, code.num_workers)
    live = np.asarray(masks).sum(axis=1)
    if not np.any(live >= code.min_live):
        raise GCCValueError(
            f"`masks`: no pattern leaves the {code.min_live} live workers {type(code).__name__} "
            f"needs to decode (most live in a pattern: {int(live.max(initial=0))} of "
            f"{code.num_workers}); the expected loss is undefined"
        )


_MESSAGES = {
    Status.NONFINITE_DATA: "`f` returned NaN or Inf on a coded input (a live worker's output)",
    Status.BAD_ARGUMENT: "`f(x)` on the inputs is not finite: the loss is undefined",
}


@raising_form(
    "expected_loss",
    lambda out: out,
    _check_expected_loss,
    returns=Float[Array, ""],
    messages=_MESSAGES,
)
def expected_loss(
    params: Any,
    f: Callable,
    x: Float[ArrayLike, "k ..."],
    masks: Bool[ArrayLike, "p n"],
    *,
    reduce: str = "mean",
) -> tuple[Float[Array, ""], Int[Array, ""]]:
    """Mean end-to-end loss ``(1/P) Σ_p (1/K) Σ_k ‖f^_p(x_k) − f(x_k)‖²`` over straggler masks.

    ``f^_p(x_k) = u_dec(alpha_k)`` is the code's estimate of ``f(x_k)`` when the workers of
    ``masks[p]`` answer: the inputs are encoded (``X~ = E(λ_enc, α, β) X``), ``f`` runs on every
    coded input, and the live outputs are decoded (``Y^ = D(mask, λ_dec, α, β) Y~``). The whole
    chain is one JAX graph, so the loss is differentiable with respect to ``log λ_enc``,
    ``log λ_dec`` and the node gap logits of :class:`SplineParams` (nodes strictly increasing in
    ``[−1, 1]`` for every value), through any JAX ``f`` — a closure over a Flax model included
    (e.g. :func:`gcc_jax.nn.models.worker_function`). The mean is the LeTCC loss (its eq. (1))
    averaged over the given patterns, the same numbers as :func:`gcc_jax.monte_carlo_loss`.

    Args:
        params: :class:`SplineParams` (see :func:`params_from_code`) or a code itself (then the
            gradient is with respect to the code's own leaves).
        f: worker function, one input of shape ``x.shape[1:]`` → one output.
        x: inputs of one job, shape ``(K, ...)``.
        masks: boolean ``(P, N)``; True = the worker answered in time.
        reduce: ``"mean"`` (default) or ``"max"`` (the worst pattern among ``masks``, for
            worst-case stragglers; differentiable almost everywhere).

    Returns:
        Scalar loss. Patterns with fewer than 2 live workers are left out of the mean (a master
        cannot decode them); any other value problem gives NaN, and so does a batch with no
        decodable pattern. :func:`expected_loss_with_status` returns ``(loss, status)``
        instead, under ``jit`` and ``grad`` too: the failed patterns' flags, ``TOO_FEW_LIVE``
        when no pattern decodes, ``BAD_ARGUMENT`` when ``f(x)`` itself is not finite.

    Raises:
        ValueError/TypeError: wrong shapes, a non-boolean mask, an unknown ``reduce``,
            ``params`` neither :class:`SplineParams` nor a code.
        GCCValueError: (eager calls) NaN/Inf in ``x``, no decodable pattern in ``masks``, or
            a value problem in the loss (a worker output or ``f(x)`` not finite).

    Example:
        >>> import jax, jax.numpy as jnp, gcc_jax as gcc
        >>> from gcc_jax.tuning import expected_loss, params_from_code
        >>> code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=12, lam_dec=1e-6)
        >>> x = jnp.linspace(-1.0, 1.0, 4)[:, None]
        >>> masks = gcc.sample_masks(jax.random.key(0), 12, num=8, stragglers=2)
        >>> params = params_from_code(code)
        >>> g = jax.grad(expected_loss)(params, jnp.sin, x, masks)
        >>> g.log_lam_dec.shape, g.beta_logits.shape
        ((), (11,))
    """
    reduce = as_choice(reduce, "reduce", REDUCTIONS)
    code = as_code(params)
    if not callable(f):
        raise TypeError(f"`f` must be a function (one input -> one output); got {type(f).__name__}")
    x = _static_inputs(as_float_array(x, "x"), code)
    masks = as_mask_rows(masks, code.num_workers)  # traced masks too (jit of this form)
    return _expected_loss(params, f, x, masks, jnp.asarray(reduce == "max"))


expected_loss_with_status = expected_loss.with_status
"""Like :func:`expected_loss` but returns ``(loss, status)`` and never raises on value problems
(the loss is then NaN): jittable and differentiable (``jax.grad(..., has_aux=True)``)."""


def _static_inputs(x: Array, code) -> Array:
    """``x`` checked for its shape only (its values are the status's business)."""
    if x.ndim < 1 or x.shape[0] != code.num_inputs:
        raise ValueError(
            f"`x` must have shape ({code.num_inputs}, ...), one row per input; got {x.shape}"
        )
    return x


@functools.partial(jax.jit, static_argnames="f")
def _expected_loss(params, f, x, masks, use_max):
    """Compiled once per ``f`` and shapes; inlined under an outer jit or grad."""
    code = as_code(params)
    xs = x[None]
    yt = worker_outputs(code, f, xs)
    fx = targets(f, xs)
    losses, status = mask_losses(code, yt, fx, masks)
    value = reduce_losses(losses, status, use_max)
    status = reduce_status(status) | combine((~jnp.all(jnp.isfinite(fx)), Status.BAD_ARGUMENT))
    status = status | combine((~jnp.isfinite(value) & (status == 0), Status.NONFINITE_RESULT))
    return jnp.where(status == 0, value, jnp.nan), status
